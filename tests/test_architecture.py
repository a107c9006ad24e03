"""The floors of docs/architecture.md: each room imports only the rooms below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gateway"
GROUND = {"errors", "ids", "jsonio", "labels", "asgi", "llm", "config"}
# room -> the rooms it may import besides itself and the ground floor
ALLOWED = {
    "store": set(),
    "identity": {"store"},
    "search": {"store"},
    "attachments": {"store", "identity"},
    "resolution": set(),
    "devengine": {"upstream"},  # only the EverOS request models it validates with
}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imported_rooms(room: str) -> set[str]:
    found: set[str] = set()
    for path in (PACKAGE / room).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == "gateway" or node.module.startswith("gateway.")):
                if node.module == "gateway":
                    found.update(alias.name for alias in node.names)
                else:
                    found.add(_room(node.module))
            elif isinstance(node, ast.Import):
                found.update(_room(a.name) for a in node.names if a.name.startswith("gateway."))
    found.discard(room)
    return found


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_a_room_imports_only_the_floors_below_it(room: str) -> None:
    allowed = ALLOWED[room]
    imported = _imported_rooms(room)
    if allowed is None:
        assert imported == set()
    else:
        assert imported - GROUND - allowed == set()


def test_nothing_below_the_routes_imports_them() -> None:
    for room in [*ALLOWED, "upstream", "ops"]:
        assert "routes" not in _imported_rooms(room), room


def test_the_dev_engine_takes_only_the_engines_request_models_from_the_gateway() -> None:
    modules = {
        node.module
        for path in (PACKAGE / "devengine").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
        and node.module.startswith("gateway.") and not node.module.startswith("gateway.devengine")
    }
    assert modules == {"gateway.upstream.flavors.everos_models"}
