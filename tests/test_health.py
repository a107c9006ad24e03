"""Readiness names no engine address and no error text, with a key or without (SPEC §13)."""

import logging
import socket
from collections.abc import Callable

import pytest

from gateway.app import create_app
from gateway.config import Settings
from tests.conftest import client_for


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("client", ["native", "httpx"])
async def test_readyz_says_unreachable_without_address_or_reason(
    settings: Settings, client: str, make_key: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = closed_port()
    gateway = create_app(settings.with_values(
        upstream={"base_url": f"http://127.0.0.1:{port}", "client": client}))
    caplog.set_level(logging.WARNING)
    async with gateway.running(), client_for(gateway) as anonymous:
        response = await anonymous.get("/readyz")
        assert response.status_code == 503
        assert response.json() == {"status": "not_ready",
                                   "checks": {"database": "ok", "upstream": "unreachable"}}
        async with client_for(gateway, make_key("alice")) as alice:
            proxied = await alice.post("/api/v2/memory/get", json={
                "user_id": "alice", "memory_type": "episode"})
    assert proxied.status_code == 502
    assert proxied.json()["error"]["code"] == "upstream_unavailable"
    for text in (response.text, proxied.text):
        assert str(port) not in text and "127.0.0.1" not in text and "Errno" not in text
    # The operator still learns where and why: in the log.
    assert any(str(port) in record.getMessage() for record in caplog.records)


async def test_readyz_says_database_unreachable_without_its_error(
    settings: Settings, caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = create_app(settings.with_values(
        upstream={"base_url": f"http://127.0.0.1:{closed_port()}"}))
    async with gateway.running(), client_for(gateway) as anonymous:
        async def broken() -> None:
            raise OSError("disk /secret/path/gw.db is gone")

        gateway.services.db.ping = broken  # type: ignore[method-assign]
        response = await anonymous.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "unreachable"
    assert "/secret/path" not in response.text
    assert any("/secret/path" in record.getMessage() for record in caplog.records)
