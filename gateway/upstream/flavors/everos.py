"""EverOS v2, the local engine of SPEC §6: bodies forwarded byte for byte, answers read as is.

Its clients call `/api/v2/memory/add|search` (and the `/api/v1/memory/...` aliases); all go to
`upstream.add_path` / `upstream.search_path` with the client's bytes unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.attachments.add_body import AttachmentItem
from gateway.search.items import FoundItem, find_items
from gateway.upstream.flavors import everos_models as models
from gateway.upstream.flavors.base import ADD, SEARCH, AddScope, Dialect, Flavor, NativeRoute
from gateway.upstream.models import RouteModel
from gateway.upstream.routes import EngineRoute


class EverosV2(Dialect):
    name = "everos-v2"
    page_scan = True
    searches_as_sent = True
    adds_as_sent = True

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

HEALTH = EngineRoute("GET", "/health", note="liveness; names no one",
                     model=RouteModel(source="everos/entrypoints/api/routes/health.py"))


def everos_v2_routes(version: str) -> tuple[EngineRoute, ...]:
    """EverOS 1.5.1's memory API past add and search, under `/api/v2` and its `/api/v1` alias.

    The engine serves no delete and no edit. Its knowledge base, `/ome/trigger`,
    `/cascade/quiesce` and `/metrics` are engine-wide (no owner): closed.
    """
    base = f"/api/{version}"
    return (
        EngineRoute("POST", f"{base}/memory/flush", model=models.FLUSH,
                    note="one session's extraction; the session must be the caller's"),
        EngineRoute("POST", f"{base}/memory/get", model=models.GET, reads=True,
                    note="pages of one owner's memories (user_id or agent_id)"),
        EngineRoute("GET", f"{base}/tasks", model=models.TASKS,
                    note="accepted async adds of one session of the caller's"),
        EngineRoute("GET", f"{base}/tasks/{{task_id}}", model=models.TASK,
                    note="one async add's status by its random request id; no content"),
    )


FLAVOR = Flavor(
    name="everos",
    dialect=EVEROS_V2,
    native=(
        NativeRoute("/api/v2/memory/add", ADD, EVEROS_V2, follows_config=True,
                    model=models.ADD),
        NativeRoute("/api/v1/memory/add", ADD, EVEROS_V2, follows_config=True,
                    model=models.ADD),
        NativeRoute("/api/v2/memory/search", SEARCH, EVEROS_V2, follows_config=True,
                    model=models.SEARCH),
        NativeRoute("/api/v1/memory/search", SEARCH, EVEROS_V2, follows_config=True,
                    model=models.SEARCH),
    ),
    table=(*everos_v2_routes("v2"), *everos_v2_routes("v1"), HEALTH),
    reads_local_files=True,
    signs_files=True,
)
