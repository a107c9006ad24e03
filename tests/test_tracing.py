"""Optional OpenTelemetry tracing (tracing.enabled), read through the SDK's InMemorySpanExporter:
the request's server span continues the client's traceparent, its children name the steps, the
engine is sent the continued traceparent; off, nothing of OpenTelemetry is loaded."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable

import httpx
import pytest
import respx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.app import create_app
from gateway.config import Settings
from tests.attachment_helpers import answer_search, engine_ok, episodes
from tests.conftest import client_for
from tests.processes import ROOT

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"


async def test_a_search_is_one_trace_continuing_the_clients_with_the_steps_as_spans(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    engine_ok(engine)
    search = answer_search(engine, episodes({"session_id": "s1", "episode": "x"}))
    exporter = InMemorySpanExporter()
    app = create_app(settings.with_values(tracing={"enabled": True}),
                     upstream_transport=httpx.MockTransport(engine.async_handler),
                     span_exporter=exporter)
    async with app.running(), client_for(app, make_key("alice")) as alice:
        response = await alice.post("/memories/search", json={"query": "x", "user_id": "alice"},
                                    headers={"traceparent": CLIENT_PARENT})
        assert response.status_code == 200, response.text
        passed = await alice.post("/api/v2/memory/search",
                                  json={"query": "x", "user_id": "alice"})
        assert passed.status_code == 200
    spans = exporter.get_finished_spans()
    first = [s for s in spans if s.context.trace_id == int(CLIENT_TRACE, 16)]
    names = {s.name for s in first}
    assert {"POST /memories/search", "auth", "route model", "owner checks", "engine call",
            "matching"} <= names, names
    [server] = [s for s in first if s.name == "POST /memories/search"]
    assert server.parent is not None and server.parent.span_id == 0x00f067aa0ba902b7
    assert server.attributes["gateway.request_id"] == response.headers["x-request-id"]
    [engine_call] = [s for s in first if s.name == "engine call"]
    assert engine_call.parent is not None and engine_call.parent.span_id == \
        server.context.span_id
    sent = search.calls[0].request.headers["traceparent"]
    assert sent == f"00-{CLIENT_TRACE}-{engine_call.context.span_id:016x}-01"
    # without a traceparent: a trace of its own, sent on to the engine too
    second = search.calls[1].request.headers["traceparent"]
    assert CLIENT_TRACE not in second and second.startswith("00-")


async def test_off_the_clients_traceparent_passes_unchanged_and_no_span_is_made(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    search = answer_search(engine, episodes())
    app = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    assert app.tracing is None
    async with app.running(), client_for(app, make_key("alice")) as alice:
        await alice.post("/memories/search", json={"query": "x", "user_id": "alice"},
                         headers={"traceparent": CLIENT_PARENT})
    assert search.calls[0].request.headers["traceparent"] == CLIENT_PARENT


def _imported_after_a_request(values: str) -> list[str]:
    code = (
        "import asyncio, sys, httpx\n"
        "from gateway.app import create_app\n"
        "from gateway.config import Settings\n"
        f"app = create_app(Settings().with_values(storage={{'database': ':memory:'}}, {values}))\n"
        "async def main():\n"
        "    async with httpx.AsyncClient(transport=httpx.ASGITransport(app),\n"
        "                                 base_url='http://g') as c:\n"
        "        assert (await c.get('/healthz')).status_code == 200\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    imported: list[str] = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    return imported


@pytest.mark.processes
def test_off_nothing_of_opentelemetry_is_imported() -> None:
    assert _imported_after_a_request("mcp={'enabled': False}") == []
    # The MCP SDK brings OpenTelemetry's API (its no-op tracer), never the SDK or an exporter.
    with_mcp = _imported_after_a_request("mcp={'enabled': True}")
    assert not [m for m in with_mcp if m.startswith(("opentelemetry.sdk",
                                                      "opentelemetry.exporter"))]


async def test_an_unsampled_request_records_nothing_but_still_continues_the_trace(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    search = answer_search(engine, episodes())
    exporter = InMemorySpanExporter()
    app = create_app(settings.with_values(tracing={"enabled": True, "sample_ratio": 0.0}),
                     upstream_transport=httpx.MockTransport(engine.async_handler),
                     span_exporter=exporter)
    async with app.running(), client_for(app, make_key("alice")) as alice:
        await alice.post("/memories/search", json={"query": "x", "user_id": "alice"})
        await alice.post("/memories/search", json={"query": "x", "user_id": "alice"},
                         headers={"traceparent": CLIENT_PARENT})  # sampled: followed
    first, second = (call.request.headers["traceparent"] for call in search.calls)
    assert first.startswith("00-") and int(first[-2:], 16) & 1 == 0  # not sampled
    assert second.startswith(f"00-{CLIENT_TRACE}-") and int(second[-2:], 16) & 1 == 1
    traces = {span.context.trace_id for span in exporter.get_finished_spans()}
    assert traces == {int(CLIENT_TRACE, 16)}
