"""End to end: `serve` writes JSON log lines, one access line per request, uvicorn's included."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.processes import dev_engine, gateway

pytestmark = pytest.mark.e2e


def test_serve_writes_one_json_access_line_per_request(tmp_path: Path) -> None:
    with dev_engine(tmp_path) as engine_url, gateway(
        tmp_path, engine_url, MEMORY_GATEWAY_SERVER_LOG_LEVEL="info"
    ) as gw:
        headers = {"Authorization": f"Bearer {gw.key('alice')}"}
        found = httpx.post(gw.url + "/api/v2/memory/search", headers=headers,
                           json={"query": "x", "user_id": "alice"}, timeout=10)
        assert found.status_code == 200
        gw.proc.terminate()
        gw.proc.wait(timeout=10)
        assert gw.proc.stderr is not None
        output = gw.proc.stderr.read().decode()
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]  # all JSON
    access = [line for line in lines if line["logger"] == "gateway.access"]
    search = [line for line in access if line["path"] == "/api/v2/memory/search"]
    assert len(search) == 1
    assert search[0]["request_id"] == found.headers["x-request-id"]
    assert (search[0]["user_id"], search[0]["status"], search[0]["upstream_status"]) == (
        "alice", 200, 200
    )
    assert search[0]["route"] == "/api/v2/memory/search" and search[0]["level"] == "info"
    assert any(line["logger"].startswith("uvicorn") for line in lines)
