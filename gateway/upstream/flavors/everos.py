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
from gateway.upstream.flavors.base import AddScope, Dialect, Flavor
from gateway.upstream.models import RouteModel
from gateway.upstream.routes import EngineRoute, route


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

HEALTH = route("GET /health", RouteModel(source="everos/entrypoints/api/routes/health.py"),
               "liveness; names no one")


def everos_v2_routes(version: str) -> tuple[EngineRoute, ...]:
    """EverOS 1.5.1's memory API past add and search, under `/api/v2` and its `/api/v1` alias.

    The engine serves no delete and no edit. Its knowledge base, `/ome/trigger`,
    `/cascade/quiesce` and `/metrics` are engine-wide (no owner): closed.
    """
    base = f"/api/{version}"
    return (
        route(f"POST {base}/memory/flush", models.FLUSH,
              "one session's extraction; the session must be the caller's"),
        route(f"POST {base}/memory/get", models.GET,
              "pages of one owner's memories (user_id or agent_id)", reads=True),
        route(f"GET {base}/tasks", models.TASKS,
              "accepted async adds of one session of the caller's"),
        route(f"GET {base}/tasks/{{task_id}}", models.TASK,
              "one async add's status by its random request id; no content"),
    )


FLAVOR = Flavor(
    name="everos",
    dialect=EVEROS_V2,
    native=(
        EVEROS_V2.add_route("/api/v2/memory/add", models.ADD),
        EVEROS_V2.add_route("/api/v1/memory/add", models.ADD),
        EVEROS_V2.search_route("/api/v2/memory/search", models.SEARCH),
        EVEROS_V2.search_route("/api/v1/memory/search", models.SEARCH),
    ),
    table=(*everos_v2_routes("v2"), *everos_v2_routes("v1"), HEALTH),
    reads_local_files=True,
    signs_files=True,
)
