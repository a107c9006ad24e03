"""Helpers for attachment tests: a fake engine that records adds and answers searches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import respx

from gateway.config import Settings
from tests import databases

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def engine_ok(engine: respx.MockRouter) -> dict[str, respx.Route]:
    """Add and flush succeed; returns the routes so tests can read the requests sent."""
    return {
        "add": engine.post("/api/v2/memory/add").mock(
            return_value=httpx.Response(200, json={"request_id": "r", "data": {"status": "ok"}})
        ),
        "flush": engine.post("/api/v2/memory/flush").mock(
            return_value=httpx.Response(200, json={"request_id": "r", "data": {}})
        ),
    }


def answer_search(engine: respx.MockRouter, payload: Any) -> respx.Route:
    return engine.post("/api/v2/memory/search").mock(
        return_value=httpx.Response(200, json=payload)
    )


def episodes(*items: dict[str, Any], unprocessed: list[dict[str, Any]] | None = None) -> dict:
    return {"request_id": "r", "data": {
        "episodes": list(items), "profiles": [], "agent_cases": [], "agent_skills": [],
        "unprocessed_messages": unprocessed or []}}


def rows(settings: Settings, sql: str, *params: Any) -> list[Any]:
    return databases.rows(settings.storage.database, sql, *params)


def files_under(root: str | Path) -> list[Path]:
    base = Path(root)
    return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []


def sent_json(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)
