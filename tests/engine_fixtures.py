"""Recorded engine answers (tests/fixtures/<engine>_*.json), shaped after each engine's public
request/response models, and helpers to read what the gateway sent the fake engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import respx

FIXTURES = Path(__file__).resolve().parent / "fixtures"
USER_HEADER = "x-memory-user-id"


def recorded(name: str) -> Any:
    """A fresh copy of a recorded answer, e.g. recorded("mem0_search")."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def answer(engine: respx.MockRouter, path: str, name: str, status: int = 200) -> respx.Route:
    return engine.post(path).mock(
        side_effect=lambda request: httpx.Response(status, json=recorded(name)))


def sent(route: respx.Route, index: int = -1) -> tuple[httpx.Request, Any]:
    """The request the engine got (last by default) and its JSON body."""
    request = route.calls[index].request
    return request, json.loads(request.content)
