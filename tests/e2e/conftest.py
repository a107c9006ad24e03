"""End-to-end fixtures for a test parametrized over `database_backend` (tests.conftest.BACKENDS,
`indirect=True`): `shared_database` is a migrated database several gateway processes can share,
`on_database` the environment that points a gateway process at it. `everos` is the real EverOS
engine with its stand-in model server, started once for the session (tests/everos_engine.py).
`module_dev_engine` is the dev engine, started once for the module that asks for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store.database import migrate
from tests.everos_engine import EverosEngine, everos_engine
from tests.processes import dev_engine


@pytest.fixture
def shared_database(database_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A SQLite file in the test's folder, or a fresh PostgreSQL database; migrated, so keys can
    be written before any gateway starts."""
    if database_backend == "postgresql":
        url: str = request.getfixturevalue("postgres").create_database()
    else:
        url = str(tmp_path / "gw.db")
    migrate(url)
    return url


@pytest.fixture
def on_database(shared_database: str) -> dict[str, str]:
    return {"MEMORY_GATEWAY_STORAGE_DATABASE": shared_database}


@pytest.fixture(scope="session")
def everos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EverosEngine]:
    """The real EverOS engine and its stand-in model, shared by the session; stopped at the end,
    its log kept in the session's temp folder."""
    with everos_engine(tmp_path_factory.mktemp("everos")) as engine:
        yield engine


@pytest.fixture(scope="module")
def module_dev_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dev engine's URL, one process for the module's tests. Each test on it acts for users
    of its own: the engine merges a user's similar episodes across sessions, so two tests
    adding for the same user would see each other's memories."""
    with dev_engine(tmp_path_factory.mktemp("dev-engine")) as url:
        yield url
