"""`/mcp` end to end (SPEC §19) with the official SDK's client against real `serve` processes:
the dev engine and the real EverOS; two workers; two gateway processes on PostgreSQL and S3
answering one client's calls alternately (nothing of an MCP session lives in one process)."""

from __future__ import annotations

import itertools
import secrets
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from tests.e2e.real_engine_helpers import new_session, png
from tests.everos_engine import SEARCH_TIMEOUT_S, EverosEngine
from tests.mcp_helpers import RPC_HEADERS, b64, blob, links, mcp_client, rpc, structured
from tests.processes import ROOT, free_port, gateway
from tests.s3_server import S3Server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

LIGHTHOUSE = png(4, 1, shade=90)
MAP = png(2, 2, shade=200)


async def _search_until_linked(client: Client, arguments: dict[str, object],
                               seconds: float = SEARCH_TIMEOUT_S) -> types.CallToolResult:
    """A search that links a file: a real engine may index a moment after its flush (and its
    keyword search lag a minute more, tests/everos_engine.py), and on PostgreSQL another process
    sees new mappings once their notification arrived (docs/scale-out.md, "Search matchers")."""
    deadline = time.monotonic() + seconds
    while True:
        found = await client.call_tool("search_memory", arguments)
        assert not found.is_error, found
        if links(found) or time.monotonic() > deadline:
            return found
        await anyio.sleep(0.25)


async def _add_search_read(url: str, token: str, session: str) -> None:
    """The happy path: add with an image, search, read the linked file's bytes; upload, list
    and read resources."""
    async with mcp_client(url, token) as client:
        added = await client.call_tool("add_memory", {
            "session_id": session, "text": "the tidepool at noon, tidepool.png",
            "files": [{"name": "tidepool.png", "base64": b64(LIGHTHOUSE)}]})
        assert not added.is_error, added
        assert not (await client.call_tool("flush_session", {"session_id": session})).is_error
        found = await _search_until_linked(client, {"query": "tidepool noon",
                                                    "session_id": session})
        [link] = {link.uri: link for link in links(found)}.values()
        assert link.name == "tidepool.png" and link.uri.startswith("attachment://")
        assert blob(await client.read_resource(link.uri)) == (LIGHTHOUSE, "image/png")

        up = structured(await client.call_tool("upload_file", {"name": "trail-map.png",
                                                               "base64": b64(MAP)}))
        listed = await client.list_resources()
        assert up["uri"] in [r.uri for r in listed.resources]
        assert blob(await client.read_resource(up["uri"])) == (MAP, "image/png")


async def test_a_serve_process_with_the_dev_engine(tmp_path: Path,
                                                  module_dev_engine: str) -> None:
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    with gateway(tmp_path, module_dev_engine, port=port,
                 MEMORY_GATEWAY_SERVER_PUBLIC_URL=public) as gw:
        alice, bob = gw.key("alice"), gw.key("bob")
        await _add_search_read(gw.url + "/mcp", alice, "holiday")

        async with mcp_client(gw.url + "/mcp", bob) as other:
            found = await other.call_tool("search_memory", {"query": "tidepool"})
            assert structured(found)["results"] == []
            assert (await other.list_resources()).resources == []

        with httpx.Client(base_url=gw.url, headers=RPC_HEADERS, timeout=20) as raw:
            answer = raw.post("/mcp", json=rpc("tools/list"))
            assert answer.status_code == 401
            assert answer.headers["www-authenticate"] == (
                f'Bearer resource_metadata="{public}/.well-known/oauth-protected-resource/mcp"')
            meta = raw.get("/.well-known/oauth-protected-resource/mcp").json()
            assert meta["resource"] == public + "/mcp"
            reader = raw.post("/mcp", json=rpc("tools/call", {
                "name": "add_memory", "arguments": {"text": "x"}}),
                headers={"Authorization": f"Bearer {gw.key('alice')}"})
            assert reader.status_code == 200  # a read-write key writes
            readonly = _read_key(gw.env, "carol")
            refused = raw.post("/mcp", json=rpc("tools/call", {
                "name": "add_memory", "arguments": {"text": "x"}}),
                headers={"Authorization": f"Bearer {readonly}"})
            assert refused.status_code == 403
            assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


def _read_key(env: dict[str, str], user: str) -> str:
    out = subprocess.run([sys.executable, "-m", "gateway", "keys", "create", "--user", user,
                          "--scopes", "read"], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


async def test_two_workers_answer_the_calls(tmp_path: Path, module_dev_engine: str) -> None:
    with gateway(tmp_path, module_dev_engine, MEMORY_GATEWAY_SERVER_WORKERS="2") as gw:
        await _add_search_read(gw.url + "/mcp", gw.key("erin"), "workers")  # a user of its own


class Alternating(httpx2.AsyncBaseTransport):
    """Each request to the next of several gateway ports in turn."""

    def __init__(self, ports: list[int]) -> None:
        self._ports = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.served: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._ports)
        self.served.append(port)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.parametrize("database_backend", ["postgresql"], indirect=True)
async def test_two_gateway_processes_on_postgresql_and_s3_serve_one_client(
        tmp_path: Path, s3_server: S3Server, on_database: dict[str, str],
        module_dev_engine: str) -> None:
    shared = {**s3_server.env(), **on_database,
              "MEMORY_GATEWAY_STORAGE_FILES": f"s3://{s3_server.bucket}/mcp-{secrets.token_hex(4)}",
              "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": s3_server.endpoint_url}
    with gateway(tmp_path / "one", module_dev_engine, **shared) as first, \
            gateway(tmp_path / "two", module_dev_engine, **shared) as second:
        ports = [int(first.url.rsplit(":", 1)[1]), int(second.url.rsplit(":", 1)[1])]
        transport = Alternating(ports)
        token = first.key("frank")  # a user of its own on the module's engine
        async with mcp_client(first.url + "/mcp", token, transport=transport) as client:
            added = await client.call_tool("add_memory", {
                "session_id": "shared", "text": "the lighthouse at dusk, lighthouse.png",
                "files": [{"name": "lighthouse.png", "base64": b64(LIGHTHOUSE)}]})
            assert not added.is_error, added
            await client.call_tool("flush_session", {"session_id": "shared"})
            for _ in range(3):  # each read once on either process
                found = await _search_until_linked(client, {"query": "lighthouse"}, 10)
                [link] = links(found)
                assert blob(await client.read_resource(link.uri))[0] == LIGHTHOUSE
            up = structured(await client.call_tool("upload_file", {"name": "trail-map.png",
                                                                   "base64": b64(MAP)}))
            for _ in range(2):
                assert blob(await client.read_resource(up["uri"]))[0] == MAP
        assert set(transport.served) == set(ports)


async def test_the_real_everos_engine(everos: EverosEngine, tmp_path: Path) -> None:
    # The suite's shared engine, as a user of its own: other tests search alice's memories.
    with gateway(tmp_path, everos.url, log=tmp_path / "gateway.log") as gw:
        await _add_search_read(gw.url + "/mcp", gw.key("mcp-agent"), new_session("mcp"))
