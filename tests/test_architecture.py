"""The floors of docs/architecture.md: each room imports only the rooms below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gateway"
GROUND = {"errors", "config", "logs"}
# room -> the rooms it may import besides itself and the ground floor
ALLOWED = {
    "store": set(),
    "llm": {"store"},
    "identity": {"store"},
    "serving": {"identity"},  # only the principal an in-process call runs as
    "search": {"store", "serving"},
    "attachments": {"store", "identity", "serving"},
    "resolution": {"llm"},
    "devengine": {"upstream"},  # only the EverOS request models it validates with
}
# At most this many modules at the top of gateway/ (__init__ and __main__ counted): the rest
# live in the room of their domain.
MAX_TOP_LEVEL_MODULES = 12


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


def test_the_top_of_the_package_stays_small() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def _module_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gateway"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("gateway"))
    return found


def test_no_two_rooms_import_each_other_in_a_circle() -> None:
    """No loop of module imports leaves its room (a folder, or a top-level module) and comes
    back, lazy and type-checking imports included: the floors stay floors."""
    modules = {".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
               .removesuffix(".__init__"): path for path in PACKAGE.rglob("*.py")}
    graph = {name: {target for target in _module_imports(path) if target in modules} - {name}
             for name, path in modules.items()}

    def room(name: str) -> str:
        return _room(name) or name

    crossing = []
    for start in graph:  # a module reached from itself through another room is in a circle
        seen, stack, left = set(), [(start, False)], False
        while stack:
            name, away = stack.pop()
            for target in graph[name]:
                out = away or room(target) != room(start)
                if target == start and out:
                    left = True
                if (target, out) not in seen:
                    seen.add((target, out))
                    stack.append((target, out))
        if left:
            crossing.append(start)
    assert crossing == []
