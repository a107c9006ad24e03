"""Optional OpenTelemetry tracing (tracing.enabled), read through the SDK's InMemorySpanExporter:
the request's server span continues the client's traceparent, its children name the steps, the
engine is sent the continued traceparent; off, nothing of OpenTelemetry is loaded."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway import tracing
from gateway.app import Gateway, create_app
from gateway.config import Settings, TracingSettings
from gateway.identity.principal import PRINCIPAL_KEY
from gateway.tracing import Trace, Tracing, parse_traceparent
from tests.attachment_helpers import answer_search, engine_ok, episodes
from tests.conftest import client_for
from tests.processes import ROOT

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
GET_BODY = {"user_id": "alice", "memory_type": "episode"}


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


def _traced(settings: Settings, engine: respx.MockRouter, exporter: InMemorySpanExporter,
            **values: object) -> Gateway:
    """Tracing on, every new trace recorded unless `values` say otherwise."""
    return create_app(settings.with_values(tracing={"enabled": True, "sample_ratio": 1.0,
                                                    **values}),
                      upstream_transport=httpx.MockTransport(engine.async_handler),
                      span_exporter=exporter)


async def _gets(settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
                headers: Any, times: int = 1, **values: object
                ) -> tuple[list[httpx.Headers], tuple[ReadableSpan, ...]]:
    """`times` gets by alice sending `headers`, tracing on as `_traced` and `values` set it:
    the headers the engine was sent, and the spans recorded."""
    got = engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={}))
    exporter = InMemorySpanExporter()
    app = _traced(settings, engine, exporter, **values)
    async with app.running(), client_for(app, make_key("alice")) as alice:
        for _ in range(times):
            response = await alice.post("/api/v2/memory/get", json=GET_BODY, headers=headers)
            assert response.status_code == 200, response.text
    return [call.request.headers for call in got.calls], exporter.get_finished_spans()


async def test_a_pass_through_request_is_a_server_span_with_its_steps_as_children(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    got = engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={}))
    exporter = InMemorySpanExporter()
    app = _traced(settings, engine, exporter)
    async with app.running(), client_for(app, make_key("alice")) as alice:
        response = await alice.post(
            "/api/v2/memory/get", json={"user_id": "alice", "memory_type": "episode"},
            headers={"traceparent": CLIENT_PARENT, "tracestate": "vendor=abc"})
        assert response.status_code == 200, response.text
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"POST /api/v2/memory/get", "auth", "route model", "owner checks",
                          "engine call"}, set(spans)
    server = spans.pop("POST /api/v2/memory/get")
    assert server.kind is SpanKind.SERVER and server.context.trace_id == int(CLIENT_TRACE, 16)
    assert server.parent is not None and server.parent.is_remote
    assert server.parent.span_id == 0x00f067aa0ba902b7
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["http.request.method"] == "POST"
    assert server.attributes["gateway.request_id"] == response.headers["x-request-id"]
    assert server.start_time is not None and server.end_time is not None
    ids = {server.context.span_id}
    for name, step in spans.items():
        assert step.context.trace_id == server.context.trace_id, name
        assert step.parent is not None and step.parent.span_id == server.context.span_id, name
        assert step.kind is SpanKind.INTERNAL and step.context.trace_flags.sampled, name
        assert step.start_time is not None and step.end_time is not None, name
        assert server.start_time <= step.start_time <= step.end_time <= server.end_time, name
        ids.add(step.context.span_id)
    assert len(ids) == 5  # every span its own id
    order = sorted(spans.values(), key=lambda step: step.start_time or 0)
    assert [step.name for step in order] == ["auth", "route model", "owner checks",
                                             "engine call"]
    # the engine continues the trace under the engine call, the client's tracestate kept
    sent = got.calls[0].request.headers
    assert sent["traceparent"] == \
        f"00-{CLIENT_TRACE}-{spans['engine call'].context.span_id:016x}-01"
    assert sent["tracestate"] == "vendor=abc"


async def test_unsampled_no_span_is_made_and_the_clients_trace_headers_go_as_sent(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    unsampled = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-00"
    [sent], spans = await _gets(settings, engine, make_key,
                                {"traceparent": unsampled, "tracestate": "v=1"})
    assert spans == ()  # the client's decision is followed
    assert (sent["traceparent"], sent["tracestate"]) == (unsampled, "v=1")


@pytest.mark.parametrize("traceparent", [
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
    f"00-{CLIENT_TRACE}-0000000000000000-01",  # zero parent id
    f"ff-{CLIENT_TRACE}-00f067aa0ba902b7-01",  # version ff
    f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01-more",  # version 00 has four fields
    f"00-{CLIENT_TRACE}-00f067aa0ba902b7",
])
async def test_an_invalid_traceparent_starts_a_new_trace_and_its_tracestate_is_dropped(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    traceparent: str
) -> None:
    [sent], spans = await _gets(settings, engine, make_key,
                                {"traceparent": traceparent, "tracestate": "v=1"})
    [server] = [s for s in spans if s.kind is SpanKind.SERVER]
    assert server.parent is None and server.context.trace_id != int(CLIENT_TRACE, 16)
    assert sent["traceparent"].startswith(f"00-{server.context.trace_id:032x}-")
    assert "tracestate" not in sent


def test_a_later_version_of_traceparent_is_read_by_its_first_four_fields() -> None:
    later = f"01-{CLIENT_TRACE}-00f067aa0ba902b7-03-whatever".encode()
    assert parse_traceparent(later) == (int(CLIENT_TRACE, 16), 0x00f067aa0ba902b7, True)
    assert parse_traceparent(f"00-{CLIENT_TRACE}-00f067aa0ba902b7-02".encode()) == \
        (int(CLIENT_TRACE, 16), 0x00f067aa0ba902b7, False)


async def test_a_failed_step_and_an_engine_failure_mark_their_spans_as_errors(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    engine.post("/api/v2/memory/get").mock(side_effect=httpx.ConnectError("down"))
    exporter = InMemorySpanExporter()
    app = _traced(settings, engine, exporter)
    async with app.running(), client_for(app, make_key("alice")) as alice:
        refused = await alice.post("/api/v2/memory/get", json={**GET_BODY, "user_id": "bob"})
        assert refused.status_code == 403, refused.text
        failed = await alice.post("/api/v2/memory/get", json=GET_BODY)
        assert failed.status_code == 502, failed.text
    spans = exporter.get_finished_spans()
    by_trace: dict[int, dict[str, ReadableSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, {})[span.name] = span
    first, second = sorted(by_trace.values(), key=lambda t: t["auth"].start_time or 0)
    assert first["owner checks"].status.status_code is StatusCode.ERROR
    assert "engine call" not in first  # nothing was sent
    assert first["POST /api/v2/memory/get"].attributes["http.response.status_code"] == 403
    assert first["POST /api/v2/memory/get"].status.status_code is StatusCode.UNSET
    assert second["engine call"].status.status_code is StatusCode.ERROR
    assert second["POST /api/v2/memory/get"].status.status_code is StatusCode.ERROR


def test_the_ratio_decides_by_the_trace_ids_low_64_bits_as_the_sdks_sampler_does() -> None:
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

    tracing = Tracing(TracingSettings(sample_ratio=0.25, parent_based=False),
                      InMemorySpanExporter())
    sdk = TraceIdRatioBased(0.25)
    for low in (0, 0x3FFF_FFFF_FFFF_FFFF, 0x4000_0000_0000_0000, 0xFFFF_FFFF_FFFF_FFFF):
        trace_id = (0x1234 << 64) | low
        header = f"00-{trace_id:032x}-00f067aa0ba902b7-01".encode()
        trace = tracing.begin({"headers": [(b"traceparent", header)]})
        expected = sdk.should_sample(None, trace_id, "x").decision.is_sampled()
        assert isinstance(trace, Trace) is expected is (low < 0x4000_0000_0000_0000), hex(low)
    assert TracingSettings().sample_ratio == 0.01 and TracingSettings().parent_based


async def test_a_call_made_in_process_is_a_child_of_the_request_that_made_it(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    """The MCP tools and the console reach the REST routes through `call_as`: one trace."""
    got = engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={}))
    exporter = InMemorySpanExporter()
    app = _traced(settings, engine, exporter)

    async def nested(request: Request) -> JSONResponse:
        with tracing.span("tool"):
            answer = await app.call_as(request.scope[PRINCIPAL_KEY], "POST",
                                       "/api/v2/memory/get", json=GET_BODY,
                                       origin=request.scope)
        return JSONResponse({"status": answer.status})

    app.add_route(Route("/agents/_nested", nested, methods=["GET"]))
    async with app.running(), client_for(app, make_key("alice")) as alice:
        response = await alice.get("/agents/_nested", headers={"traceparent": CLIENT_PARENT})
        assert response.json() == {"status": 200}
    spans = exporter.get_finished_spans()
    assert {span.context.trace_id for span in spans} == {int(CLIENT_TRACE, 16)}
    by_name = {span.name: span for span in spans}
    outer, tool, inner = (by_name[name] for name in ("GET /agents/_nested", "tool",
                                                      "POST /api/v2/memory/get"))
    assert tool.parent is not None and tool.parent.span_id == outer.context.span_id
    assert inner.parent is not None and inner.parent.span_id == tool.context.span_id
    assert not inner.parent.is_remote
    assert by_name["engine call"].parent.span_id == inner.context.span_id  # type: ignore[union-attr]
    assert got.calls[0].request.headers["traceparent"] == \
        f"00-{CLIENT_TRACE}-{by_name['engine call'].context.span_id:016x}-01"


def _sent_traceparent(value: str) -> tuple[str, str, bool]:
    """A traceparent the gateway sent the engine, checked valid: (trace id, parent, sampled)."""
    parsed = parse_traceparent(value.encode())
    assert parsed is not None and value.startswith("00-") and len(value) == 55, value
    trace_id, parent_id, sampled = parsed
    return f"{trace_id:032x}", f"{parent_id:016x}", sampled


@pytest.mark.parametrize(("headers", "expected_state"), [
    ({}, None),  # nothing of the client's: ours added
    ({"tracestate": "v=1"}, None),  # a tracestate without a traceparent is dropped (W3C)
    ({"traceparent": f"ff-{CLIENT_TRACE}-00f067aa0ba902b7-01", "tracestate": "v=1"}, None),
    # not parent based: the ratio decides a client's sampled trace too, its ids and state kept
    ({"traceparent": f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"}, "v=1"),
])
async def test_an_unrecorded_request_sends_the_engine_one_valid_unsampled_traceparent(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    headers: dict[str, str], expected_state: str | None
) -> None:
    if expected_state is not None:
        headers = {**headers, "tracestate": expected_state}
    sent, spans = await _gets(settings, engine, make_key, headers, times=2, sample_ratio=0.0,
                              parent_based=False)
    assert spans == ()
    ids = [_sent_traceparent(one["traceparent"]) for one in sent]
    assert [sampled for _, _, sampled in ids] == [False, False]
    assert [one.get_list("traceparent") for one in sent] == [[one["traceparent"]] for one in sent]
    assert [one.get("tracestate") for one in sent] == [expected_state] * 2
    if "traceparent" in headers and expected_state is not None:  # the client's trace, continued
        assert ids[0] == ids[1] == (CLIENT_TRACE, "00f067aa0ba902b7", False)
    else:  # a new trace each request
        assert ids[0][0] != ids[1][0] and CLIENT_TRACE not in (ids[0][0], ids[1][0])


async def test_two_traceparents_are_neither_trusted(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    unsampled = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-00"
    [sent], _ = await _gets(settings, engine, make_key, [
        ("traceparent", unsampled), ("traceparent", unsampled), ("tracestate", "v=1")],
        sample_ratio=0.0)
    trace_id, _, sampled = _sent_traceparent(sent["traceparent"])
    assert trace_id != CLIENT_TRACE and not sampled
    assert sent.get_list("traceparent") == [sent["traceparent"]] and "tracestate" not in sent


@pytest.mark.parametrize("client", [f"00-{CLIENT_TRACE}-00f067aa0ba902b7-00", None])
async def test_an_unrecorded_requests_in_process_call_continues_its_trace_unrecorded(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    client: str | None
) -> None:
    got = engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={}))
    exporter = InMemorySpanExporter()
    app = _traced(settings, engine, exporter, sample_ratio=0.0)

    async def nested(request: Request) -> JSONResponse:
        first = await app.call_as(request.scope[PRINCIPAL_KEY], "POST", "/api/v2/memory/get",
                                  json=GET_BODY, origin=request.scope)
        second = await app.call_as(request.scope[PRINCIPAL_KEY], "POST", "/api/v2/memory/get",
                                   json=GET_BODY, origin=request.scope)
        return JSONResponse({"status": [first.status, second.status]})

    app.add_route(Route("/agents/_nested", nested, methods=["GET"]))
    async with app.running(), client_for(app, make_key("alice")) as alice:
        response = await alice.get("/agents/_nested",
                                   headers={"traceparent": client} if client else {})
        assert response.json() == {"status": [200, 200]}
    assert exporter.get_finished_spans() == ()
    first, second = (call.request.headers["traceparent"] for call in got.calls)
    assert first == second and not _sent_traceparent(first)[2]  # one trace, the outer's
    if client is not None:
        assert first == client


def _reference_parse(value: bytes) -> tuple[int, int, bool] | None:
    """W3C Trace Context's traceparent, read by its grammar alone (the regex, every time)."""
    import re

    found = re.fullmatch(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?",
                         value.strip(b" \t"), re.S)
    if found is None:
        return None
    version, trace, parent, flags, rest = found.groups()
    if version == b"ff" or (version == b"00" and rest):
        return None
    if not int(trace, 16) or not int(parent, 16):
        return None
    return int(trace, 16), int(parent, 16), bool(int(flags, 16) & 1)


_PIECES = st.sampled_from([b"0", b"1", b"9", b"a", b"f", b"F", b"g", b"-", b" ", b"_", b"x"])


@given(st.lists(_PIECES, min_size=0, max_size=60).map(b"".join)
       | st.tuples(st.sampled_from([b"00", b"01", b"ff", b"0f"]),
                   st.sampled_from([CLIENT_TRACE.encode(), b"0" * 32, b"A" * 32, b"1" * 31]),
                   st.sampled_from([b"00f067aa0ba902b7", b"0" * 16, b"00F067AA0BA902B7"]),
                   st.sampled_from([b"00", b"01", b"02", b"03", b"ff", b"0g", b"1"]),
                   st.sampled_from([b"", b"-", b"-x", b" ", b"\t"]))
       .map(lambda parts: b"-".join(parts[:4]) + parts[4]))
@hypothesis_settings(max_examples=500, deadline=None)
def test_traceparent_is_read_as_the_w3c_grammar_reads_it(value: bytes) -> None:
    assert parse_traceparent(value) == _reference_parse(value)
