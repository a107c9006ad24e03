"""API keys: CLI creation, hash-only storage, revocation, user-id validation (SPEC §3)."""

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.errors import ValidationFailed
from gateway.identity.auth import USER_ID, validate_user_id
from tests import databases
from tests.conftest import client_for

pytestmark = pytest.mark.both_databases


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"MEMORY_GATEWAY_STORAGE_DATABASE": settings.storage.database,
           "MEMORY_GATEWAY_STORAGE_ROOT": settings.storage.root, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.processes
def test_keys_create_prints_key_last_and_stores_only_a_hash(settings: Settings) -> None:
    result = run_cli(settings, "keys", "create", "--user", "alice")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("mgw_") and " " not in token
    dump = repr([tuple(row) for row in databases.rows(settings.storage.database,
                                                       "SELECT * FROM api_keys")])
    assert token not in dump
    assert token.split("_", 2)[2] not in dump
    listed = run_cli(settings, "keys", "list")
    assert "alice" in listed.stdout and token.split("_", 2)[2] not in listed.stdout


@pytest.mark.processes
def test_keys_create_refuses_an_invalid_user_id(settings: Settings) -> None:
    result = run_cli(settings, "keys", "create", "--user", "../etc")
    assert result.returncode != 0
    assert "user id" in result.stderr


@asynccontextmanager
async def uncached(settings: Settings, engine: respx.MockRouter
                   ) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient, str]]:
    """A gateway that keeps no verified key (`auth.key_cache_ttl_s = 0`), and carol's client
    with a key made by the CLI."""
    token = run_cli(settings, "keys", "create", "--user", "carol").stdout.splitlines()[-1]
    engine.get("/health").mock(return_value=httpx.Response(200))
    gateway = create_app(settings.with_values(auth={"key_cache_ttl_s": 0}),
                         upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running(), client_for(gateway, token) as client:
        yield gateway, client, token


@pytest.mark.processes
async def test_created_key_authenticates_and_revoked_key_is_401(
    settings: Settings, engine: respx.MockRouter
) -> None:
    async with uncached(settings, engine) as (_, client, token):
        first = await client.get("/health")
        assert first.status_code == 200
        assert engine.routes[0].calls.last.request.headers["x-memory-user-id"] == "carol"
        key_id = token.split("_")[1]
        revoked = run_cli(settings, "keys", "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        second = await client.get("/health")
    assert second.status_code == 401


async def test_wrong_secret_for_a_real_key_id_is_401(
    app, engine: respx.MockRouter, make_key
) -> None:
    token = make_key("alice")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    async with client_for(app, forged) as client:
        assert (await client.get("/health")).status_code == 401


@pytest.mark.processes
def test_revoking_an_unknown_key_fails(settings: Settings) -> None:
    assert run_cli(settings, "keys", "revoke", "0000000000000000").returncode == 1


@pytest.mark.parametrize("bad", ["", "_system", "../x", "a/b", "a b", "x" * 129, "é", ".hidden"])
def test_invalid_user_ids_are_rejected(bad: str) -> None:
    with pytest.raises(ValidationFailed):
        validate_user_id(bad)


@given(st.text(min_size=1, max_size=140))
def test_accepted_user_ids_are_safe_path_components(candidate: str) -> None:
    try:
        validate_user_id(candidate)
    except ValidationFailed:
        assert USER_ID.fullmatch(candidate) is None
        return
    assert "/" not in candidate and "\\" not in candidate and "\x00" not in candidate
    assert candidate not in (".", "..") and not candidate.startswith(("_", "."))
    assert Path(candidate).name == candidate


@pytest.mark.processes
async def test_a_key_read_again_after_its_cache_time_takes_no_reader_thread(
    settings: Settings, engine: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with uncached(settings, engine) as (gateway, client, _):
        db = gateway.services.db

        async def no_hand_off(*args: object) -> None:
            raise AssertionError("a request's key check handed its query to a reader thread")

        monkeypatch.setattr(db, "read_one", no_hand_off)
        for _ in range(2):  # nothing kept: each request reads the key's row
            answer = await client.get("/health")
            assert answer.status_code == 200
            assert engine.routes[0].calls.last.request.headers["x-memory-user-id"] == "carol"
