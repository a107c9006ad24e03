"""End-to-end fixtures for a test parametrized over `database_backend` (tests.conftest.BACKENDS,
`indirect=True`): `shared_database` is a migrated database several gateway processes can share,
`on_database` the environment that points a gateway process at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.store.database import migrate


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
