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
from gateway.upstream.routes import USER, EngineRoute, fields


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

HEALTH = EngineRoute("GET", "/health", note="liveness; names no one")


def everos_v2_routes(version: str) -> tuple[EngineRoute, ...]:
    """The v2 memory API past add and search (and its `/api/v1/memory/...` aliases)."""
    base = f"/api/{version}/memory"
    return (
        EngineRoute("POST", f"{base}/flush", note="one session's extraction"),
        EngineRoute("POST", f"{base}/get", scoped=True, note="pages of one user's memories"),
        EngineRoute("POST", f"{base}/delete", scoped=True, note="soft-delete by scope"),
        EngineRoute("POST", f"{base}/edit", scoped=True, note="a user's profile edits"),
    )


# EverMemOS v0 (the `evermemos` SDK): one message per add, `sender` is the owner and
# `group_id` the conversation (a session); reads take their ids in the query (or a GET body).
EVERMEMOS_V0: tuple[EngineRoute, ...] = (
    EngineRoute("POST", "/api/v0/memories", fields(USER, "body.sender"), claims=True,
                note="add one message; sender = caller, group_id claimed"),
    EngineRoute("GET", "/api/v0/memories", fields(USER, "query.user_id", "body.user_id"),
                scoped=True, note="fetch by memory type"),
    EngineRoute("GET", "/api/v0/memories/search", fields(USER, "query.user_id"), scoped=True,
                note="search"),
    EngineRoute("DELETE", "/api/v0/memories", scoped=True, note="delete by filter"),
    EngineRoute("GET", "/api/v0/status/request", note="an add's processing status by request id"),
)

FLAVOR = Flavor(
    name="everos",
    dialect=EVEROS_V2,
    native=(
        NativeRoute("/api/v2/memory/add", ADD, EVEROS_V2, follows_config=True),
        NativeRoute("/api/v1/memory/add", ADD, EVEROS_V2, follows_config=True),
        NativeRoute("/api/v2/memory/search", SEARCH, EVEROS_V2, follows_config=True),
        NativeRoute("/api/v1/memory/search", SEARCH, EVEROS_V2, follows_config=True),
    ),
    table=(*everos_v2_routes("v2"), *everos_v2_routes("v1"), *EVERMEMOS_V0, HEALTH),
    reads_local_files=True,
)
