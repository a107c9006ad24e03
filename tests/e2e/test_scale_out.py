"""Scale-out (SPEC §15) with real processes: gateways on one PostgreSQL database, and
`server.workers` sharing one port. The engine is the built-in dev engine."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from gateway.identity.auth import generate_key, hash_secret
from gateway.ids import now_ms
from tests import databases
from tests.postgres_server import PostgresServer
from tests.processes import GatewayProcess, dev_engine, gateway

pytestmark = pytest.mark.e2e


def on_database(url: str, root: Path) -> dict[str, str]:
    return {"MEMORY_GATEWAY_STORAGE_DATABASE": url, "MEMORY_GATEWAY_STORAGE_ROOT": str(root)}


def new_key(database: str, user: str) -> str:
    """A key as `memory-gateway keys create` makes it, without a process per key."""
    new = generate_key(user)
    databases.execute(
        database,
        "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms) VALUES (?, ?, ?, ?)",
        new.key_id, new.user_id, hash_secret(new.secret), now_ms(),
    )
    return new.token


def add_body(user: str, session: str, text: str) -> dict[str, object]:
    return {"session_id": session, "messages": [
        {"role": "user", "sender_id": user, "content": [{"type": "text", "text": text}]}]}


def test_two_gateways_give_a_contested_new_session_exactly_one_owner(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    url = postgres.create_database()
    shared = on_database(url, tmp_path / "storage")
    with ExitStack() as stack:
        engine_url = stack.enter_context(dev_engine(tmp_path / "engine"))
        gateways: list[GatewayProcess] = [
            stack.enter_context(gateway(tmp_path / name, engine_url, **shared))
            for name in ("a", "b")
        ]
        users = [f"user{n}" for n in range(20)]
        keys = {user: new_key(url, user) for user in users}
        start = threading.Barrier(len(users))

        def add(index: int) -> tuple[str, int]:
            user = users[index]
            target = gateways[index % 2]  # half through each process
            with httpx.Client(base_url=target.url, timeout=30,
                              headers={"Authorization": f"Bearer {keys[user]}"}) as client:
                start.wait()
                response = client.post("/memories/add",
                                       json=add_body(user, "contested", f"hello from {user}"))
            return user, response.status_code

        with ThreadPoolExecutor(len(users)) as pool:
            answers = list(pool.map(add, range(len(users))))

    owners = databases.rows(url, "SELECT user_id FROM memory_sessions WHERE session_id = ?",
                            "contested")
    assert len(owners) == 1
    owner = owners[0]["user_id"]
    assert sorted(status for _, status in answers) == [200] + [403] * (len(users) - 1)
    assert [user for user, status in answers if status == 200] == [owner]
