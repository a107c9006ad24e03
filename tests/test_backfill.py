"""Backfill (SPEC §8): every live resource gets its mapping, idempotently (start-up and CLI)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import pytest
import respx

from gateway.app import create_app
from gateway.config import Settings
from tests import databases
from tests.attachment_helpers import PNG, engine_ok, rows
from tests.conftest import client_for

pytestmark = pytest.mark.both_databases


def live_mappings(settings: Settings) -> list[Any]:
    return rows(settings, "SELECT * FROM memory_attachments WHERE deleted_at IS NULL")


@pytest.mark.processes
async def test_backfill_restores_missing_mappings_idempotently(
    settings: Settings, engine: respx.MockRouter, make_key
) -> None:
    engine_ok(engine)
    gateway = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running(), client_for(gateway, make_key("alice")) as client:
        kept = (await client.post("/resources", files={"file": ("a.png", PNG)})).json()
        gone = (await client.post("/resources", files={"file": ("b.png", PNG + b"1")})).json()
        assert (await client.delete(f"/resources/{gone['id']}")).status_code == 204
    databases.execute(settings.storage.database, "DELETE FROM memory_attachments")
    assert live_mappings(settings) == []

    env = {"MEMORY_GATEWAY_STORAGE_DATABASE": settings.storage.database,
           "MEMORY_GATEWAY_STORAGE_ROOT": settings.storage.root, "PATH": "/usr/bin:/bin"}
    for _ in range(2):
        result = subprocess.run([sys.executable, "-m", "gateway", "backfill"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        [mapping] = live_mappings(settings)
        assert mapping["resource_id"] == kept["id"]
        assert mapping["session_id"] == kept["session_id"]
        assert mapping["source"] == "resource_upload"
    assert "made 0" in result.stdout

    databases.execute(settings.storage.database, "DELETE FROM memory_attachments")
    restarted = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with restarted.running():
        pass
    assert [m["resource_id"] for m in live_mappings(settings)] == [kept["id"]]
