"""End to end: real uvicorn processes for the gateway and the dev engine on loopback ports."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import BACKENDS
from tests.processes import free_port, gateway

pytestmark = pytest.mark.e2e
BOTH_DATABASES = pytest.mark.parametrize("database_backend", BACKENDS, indirect=True)


@BOTH_DATABASES
def test_add_then_flush_then_search_through_the_gateway(
    tmp_path: Path, on_database: dict[str, str], database_backend: str, module_dev_engine: str
) -> None:
    # A user and a session of its own on the module's engine.
    alice, trip = f"alice-{database_backend}", f"trip-{database_backend}"
    with gateway(tmp_path, module_dev_engine, **on_database) as gw:
        headers = {"Authorization": f"Bearer {gw.key(alice)}"}
        with httpx.Client(base_url=gw.url, headers=headers, timeout=10) as client:
            added = client.post("/api/v2/memory/add", json={
                "session_id": trip, "messages": [
                    {"role": "user", "sender_id": alice, "timestamp": 1764547200000,
                     "content": "We hiked Mount Tamalpais"}]})
            assert added.status_code == 200, added.text
            flushed = client.post("/api/v2/memory/flush", json={"session_id": trip})
            assert flushed.status_code == 200, flushed.text
            found = client.post("/api/v2/memory/search",
                                json={"query": "Tamalpais", "user_id": alice})
            assert found.status_code == 200, found.text
            assert "x-request-id" in found.headers
            assert found.text.count("Tamalpais") >= 1
            forbidden = client.post("/api/v2/memory/search",
                                    json={"query": "Tamalpais", "user_id": "bob"})
            assert forbidden.status_code == 403
        assert httpx.get(gw.url + "/api/v2/memory/search").status_code == 401
        assert httpx.get(gw.url + "/readyz").json()["status"] == "ready"


def test_serve_without_upstream_runs_the_dev_engine(tmp_path: Path) -> None:
    engine_port = free_port()
    with gateway(tmp_path, "", MEMORY_GATEWAY_DEV_ENGINE_PORT=str(engine_port)) as gw:
        headers = {"Authorization": f"Bearer {gw.key('alice')}"}
        health = httpx.get(gw.url + "/health", headers=headers, timeout=10)
        assert health.status_code == 200
        assert httpx.get(f"http://127.0.0.1:{engine_port}/health").status_code == 200
        assert httpx.get(gw.url + "/readyz").status_code == 200


def test_unreachable_upstream_gives_502_and_not_ready(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with gateway(tmp_path, dead) as gw:
        headers = {"Authorization": f"Bearer {gw.key('alice')}"}
        response = httpx.post(gw.url + "/api/v2/memory/get",
                              json={"user_id": "alice", "memory_type": "episode"},
                              headers=headers)
        assert response.status_code == 502
        assert response.json()["error"]["code"] == "upstream_unavailable"
        assert httpx.get(gw.url + "/readyz").status_code == 503
