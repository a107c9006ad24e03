"""End-to-end fixtures: `on_database` is the environment of a gateway process on the test's
database backend (parametrize `database_backend` over tests.conftest.BACKENDS to run a test on
both): nothing for SQLite (the process's own file), a fresh PostgreSQL database otherwise."""

from __future__ import annotations

import pytest


@pytest.fixture
def on_database(database_backend: str, request: pytest.FixtureRequest) -> dict[str, str]:
    if database_backend == "postgresql":
        url = request.getfixturevalue("postgres").create_database()
        return {"MEMORY_GATEWAY_STORAGE_DATABASE": url}
    return {}
