"""Both production upstream clients against a real loopback upstream, through the app."""

from __future__ import annotations

import asyncio
import gzip

import pytest

from gateway.app import create_app
from gateway.config import Settings
from tests.conftest import client_for
from tests.test_native import Server, read_request

COMPRESSED = gzip.compress(b'{"ok": true}' * 20)


async def engine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            head, body = await read_request(reader)
        except asyncio.IncompleteReadError:
            return
        if b"x-memory-user-id: alice" not in head.lower() or b"authorization" in head.lower():
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (len(COMPRESSED), COMPRESSED))
        await writer.drain()


@pytest.mark.parametrize("client", ["native", "httpx"])
async def test_client_forwards_and_relays_bytes_unchanged(
    settings: Settings, make_key, client: str
) -> None:
    async with Server(engine) as url:
        gateway = create_app(settings.with_values(upstream={"base_url": url, "client": client}))
        async with gateway.running(), client_for(gateway, make_key("alice")) as api:
            for _ in range(3):  # connections are reused between requests
                body = {"user_id": "alice", "memory_type": "episode"}
                async with api.stream("POST", "/api/v2/memory/get", json=body) as response:
                    raw = b"".join([chunk async for chunk in response.aiter_raw()])
                assert response.status_code == 200
                assert raw == COMPRESSED


@pytest.mark.parametrize("client", ["native", "httpx"])
async def test_client_maps_refused_connections_to_502(settings: Settings, make_key,
                                                      client: str) -> None:
    async with Server(engine) as url:
        pass  # closed again: nothing listens there now
    gateway = create_app(settings.with_values(upstream={"base_url": url, "client": client}))
    async with gateway.running(), client_for(gateway, make_key("alice")) as api:
        response = await api.post("/api/v2/memory/get", 
            json={"user_id": "alice", "memory_type": "episode"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"
