"""Two gateway processes on one database, end to end (SPEC §15).

Caches invalidated across processes: each keeps a verified key for an hour
(`auth.key_cache_ttl_s = 3600`); a key revoked with the CLI is refused by both on their next
requests. On SQLite the processes share the file; on PostgreSQL the change reaches them as a
notification, so the test allows it a few seconds. And idempotent message posting holds across
them. The two processes and their engine start once per database for the module."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx
import pytest

from gateway.store.database import migrate
from tests.conftest import BACKENDS
from tests.processes import ROOT, GatewayProcess, dev_engine, gateway

pytestmark = pytest.mark.e2e

DELIVERY_S = 10.0


def status(gw: GatewayProcess, token: str) -> int:
    return httpx.get(f"{gw.url}/agents", headers={"Authorization": f"Bearer {token}"},
                     timeout=30).status_code


@pytest.fixture(scope="module", params=BACKENDS)
def gateways(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[GatewayProcess]]:
    """Two gateway processes on one database (SQLite, then PostgreSQL) and one dev engine,
    shared by the module's tests: each test acts for users of its own. Each process keeps a
    verified key for an hour (`auth.key_cache_ttl_s = 3600`)."""
    tmp = tmp_path_factory.mktemp(f"two-{request.param}")
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres").create_database()
    else:
        url = str(tmp / "gw.db")
    migrate(url)
    shared = {"MEMORY_GATEWAY_STORAGE_DATABASE": url,
              "MEMORY_GATEWAY_STORAGE_ROOT": str(tmp / "storage"),
              "MEMORY_GATEWAY_AUTH_KEY_CACHE_TTL_S": "3600"}
    with ExitStack() as stack:
        engine_url = stack.enter_context(dev_engine(tmp / "engine"))
        yield [stack.enter_context(gateway(tmp / name, engine_url, **shared))
               for name in ("a", "b")]


def test_a_key_revoked_with_the_cli_is_refused_by_every_process_at_once(
    gateways: list[GatewayProcess],
) -> None:
    revoked, kept = gateways[0].key("alice"), gateways[0].key("bob")
    for gw in gateways:  # each process verifies both keys and keeps them
        assert [status(gw, revoked), status(gw, kept)] == [200, 200]

    key_id = revoked.split("_")[1]
    subprocess.run([sys.executable, "-m", "gateway", "keys", "revoke", key_id],
                   env=gateways[0].env, cwd=ROOT, check=True, capture_output=True)
    deadline = time.monotonic() + DELIVERY_S
    for gw in gateways:
        while status(gw, revoked) != 401:
            assert time.monotonic() < deadline, f"{gw.url} still accepts a revoked key"
            time.sleep(0.02)
        assert status(gw, kept) == 200  # the other key is untouched


def test_retries_of_one_message_through_two_processes_append_it_once(
    gateways: list[GatewayProcess],
) -> None:
    """SPEC §10's idempotency across processes: 20 concurrent posts of one `clientMessageId`,
    half through each gateway, store one message; a different body under the key is a 409."""
    token = gateways[0].key("carol")  # a user of its own
    headers = {"Authorization": f"Bearer {token}"}
    agent = httpx.post(f"{gateways[0].url}/agents", json={"name": "helper"},
                       headers=headers, timeout=30).json()["id"]
    conversation = httpx.get(f"{gateways[1].url}/agents/{agent}/conversation",
                             headers=headers, timeout=30).json()["conversationId"]
    body = {"clientMessageId": "retry-1", "role": "user",
            "content": "once only"}
    start = threading.Barrier(20)

    def post(n: int) -> httpx.Response:
        with httpx.Client(base_url=gateways[n % 2].url, headers=headers,
                          timeout=30) as client:
            start.wait()
            return client.post(f"/conversations/{conversation}/messages", json=body)

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(post, range(20)))
    assert all(a.status_code in (200, 201) for a in answers), [a.text for a in answers]
    assert len({a.json()["message"]["id"] for a in answers}) == 1
    assert sorted(a.status_code for a in answers).count(201) <= 1

    page = httpx.get(f"{gateways[1].url}/conversations/{conversation}/messages",
                     headers=headers, timeout=30).json()
    assert [m["clientMessageId"] for m in page["messages"]
            if m.get("clientMessageId")] == ["retry-1"]
    changed = httpx.post(f"{gateways[1].url}/conversations/{conversation}/messages",
                         json={**body, "content": "other"},
                         headers=headers, timeout=30)
    assert changed.status_code == 409
    assert changed.json()["error"]["code"] == "idempotency_conflict"
