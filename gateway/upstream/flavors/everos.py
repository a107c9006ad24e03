"""EverOS v2, the local engine of SPEC §6: bodies forwarded byte for byte, answers read as is.

Its clients call `/api/v2/memory/add|search` (and the `/api/v1/memory/...` aliases); all go to
`upstream.add_path` / `upstream.search_path` with the client's bytes unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.attachments.add_body import AttachmentItem
from gateway.search.items import FoundItem, find_items
from gateway.upstream.flavors.base import ADD, SEARCH, AddScope, Dialect, Flavor, NativeRoute


class EverosV2(Dialect):
    name = "everos-v2"
    page_scan = True

    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        return None  # SPEC §6: the client's bytes, unchanged

    def search_payload(self, body: Mapping[str, Any], caller: str) -> dict[str, Any] | None:
        return None

    def flush_payload(self, scope: AddScope, caller: str) -> dict[str, Any] | None:
        return {"app_id": scope.app_id, "project_id": scope.project_id,
                "session_id": scope.session_id}

    def find_items(self, answer: Any) -> list[FoundItem]:
        return find_items(answer)


EVEROS_V2 = EverosV2()

FLAVOR = Flavor(
    name="everos",
    dialect=EVEROS_V2,
    native=(
        NativeRoute("/api/v2/memory/add", ADD, EVEROS_V2, follows_config=True),
        NativeRoute("/api/v1/memory/add", ADD, EVEROS_V2, follows_config=True),
        NativeRoute("/api/v2/memory/search", SEARCH, EVEROS_V2, follows_config=True),
        NativeRoute("/api/v1/memory/search", SEARCH, EVEROS_V2, follows_config=True),
    ),
    reads_local_files=True,
)
