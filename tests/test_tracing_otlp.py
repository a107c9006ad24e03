"""The gateway's own OTLP encoding of its spans (gateway/tracing/otlp.py): byte for byte what
the SDK's encoder makes, for every span the gateway records and for spans of any attributes;
whatever it cannot encode goes to the SDK's encoder; and the bytes reach an OTLP/HTTP
collector through the SDK exporter's own client."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from gateway.app import create_app
from gateway.config import Settings
from gateway.tracing import otlp
from gateway.tracing.otlp import encode
from tests.attachment_helpers import answer_search, engine_ok, episodes
from tests.conftest import client_for

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
GET_BODY = {"user_id": "alice", "memory_type": "episode"}
SCOPE = InstrumentationScope("memory-gateway")
RESOURCE = Resource.create({"service.name": "memory-gateway"})


def _sdk(spans: Any) -> bytes:
    return bytes(encode_spans(spans).SerializePartialToString())


async def test_every_span_the_gateway_records_is_encoded_as_the_sdk_encodes_it(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    engine_ok(engine)
    answer_search(engine, episodes({"session_id": "s1", "episode": "x"}))
    engine.post("/api/v2/memory/get").mock(side_effect=[
        httpx.Response(200, json={}), httpx.ConnectError("down")])
    exporter = InMemorySpanExporter()
    app = create_app(settings.with_values(tracing={"enabled": True, "sample_ratio": 1.0}),
                     upstream_transport=httpx.MockTransport(engine.async_handler),
                     span_exporter=exporter)
    async with app.running(), client_for(app, make_key("alice")) as alice:
        await alice.post("/memories/search", json={"query": "x", "user_id": "alice"},
                         headers={"traceparent": f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"})
        await alice.post("/api/v2/memory/search", json={"query": "x", "user_id": "alice"})
        await alice.post("/api/v2/memory/get", json=GET_BODY)  # answered
        await alice.post("/api/v2/memory/get", json=GET_BODY)  # the engine down: 502
        await alice.post("/api/v2/memory/get", json={**GET_BODY, "user_id": "bob"})  # 403
        await alice.get("/no/such/route")
    spans = exporter.get_finished_spans()
    kinds = {(span.kind, span.status.status_code, span.parent is not None and
              span.parent.is_remote) for span in spans}
    assert {(SpanKind.SERVER, StatusCode.ERROR, False), (SpanKind.SERVER, StatusCode.UNSET, True),
            (SpanKind.INTERNAL, StatusCode.ERROR, False)} <= kinds, kinds
    assert encode(spans) == _sdk(spans)
    for span in spans:  # and each alone
        assert encode([span]) == _sdk([span]), span.name


_TEXT = st.text(max_size=40)
_VALUES = st.one_of(_TEXT, st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False))


@st.composite
def _spans(draw: st.DrawFn) -> list[ReadableSpan]:
    spans = []
    trace_id = draw(st.integers(1, 2**128 - 1))
    for _ in range(draw(st.integers(1, 6))):
        parent = draw(st.one_of(st.none(), st.builds(
            SpanContext, st.just(trace_id), st.integers(1, 2**64 - 1), st.booleans())))
        start = draw(st.integers(0, 2**63))
        code = draw(st.sampled_from(list(StatusCode)))
        spans.append(ReadableSpan(
            draw(_TEXT),
            SpanContext(trace_id, draw(st.integers(1, 2**64 - 1)), False,
                        TraceFlags(TraceFlags.SAMPLED)),
            parent, RESOURCE, draw(st.dictionaries(st.text(min_size=1, max_size=20), _VALUES,
                                                   max_size=6)),
            kind=draw(st.sampled_from(list(SpanKind))), instrumentation_scope=SCOPE,
            status=Status(code, draw(_TEXT) if code is StatusCode.ERROR else None),
            start_time=start, end_time=start + draw(st.integers(0, 2**32))))
    return spans


@given(_spans())
@hypothesis_settings(max_examples=300, deadline=None)
def test_any_spans_of_the_gateways_shape_are_encoded_as_the_sdk_encodes_them(
    spans: list[ReadableSpan]
) -> None:
    assert encode(spans) == _sdk(spans)


def _one(**changes: Any) -> ReadableSpan:
    values: dict[str, Any] = {
        "name": "x", "context": SpanContext(1, 2, False, TraceFlags(TraceFlags.SAMPLED)),
        "resource": RESOURCE, "instrumentation_scope": SCOPE, "start_time": 1, "end_time": 2,
        **changes}
    return ReadableSpan(**values)


@pytest.mark.parametrize("span", [
    _one(events=(Event("e", {}, 5),)),
    _one(attributes={"list": (1, 2)}),
    _one(attributes={"bytes": b"x"}),
    _one(attributes={"huge": 1 << 63}),  # no int64: the SDK logs and leaves it out
    _one(context=SpanContext(1, 2, False, TraceFlags(1), TraceState([("v", "1")]))),
    _one(resource=Resource.create({"service.name": "other"})),
    _one(instrumentation_scope=InstrumentationScope("other", "1.0")),
])
def test_what_it_does_not_encode_is_left_to_the_sdk(span: ReadableSpan) -> None:
    batch = [_one(), span]
    assert encode(batch) is None
    assert encode([_one()]) == _sdk([_one()])


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.received.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                              body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    """An OTLP/HTTP collector on loopback: what it was sent, decoded of its gzip."""
    received: list[tuple[str, dict[str, str], bytes]] = []
    handler = type("Handler", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("own", [True, False], ids=["own encoding", "sdk encoding"])
async def test_the_spans_reach_an_otlp_collector(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    collector: tuple[str, list[tuple[str, dict[str, str], bytes]]],
    monkeypatch: pytest.MonkeyPatch, own: bool
) -> None:
    endpoint, received = collector
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-tenant=acme")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    encoded: list[int] = []

    def counted(spans: Any) -> bytes | None:
        if not own:
            return None  # as for a batch this encoder leaves to the SDK
        encoded.append(len(spans))
        return encode(spans)

    monkeypatch.setattr(otlp, "encode", counted)
    engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={}))
    app = create_app(settings.with_values(tracing={
        "enabled": True, "sample_ratio": 1.0, "otlp_endpoint": endpoint,
        "service_name": "gw-test"}),
        upstream_transport=httpx.MockTransport(engine.async_handler))
    async with app.running(), client_for(app, make_key("alice")) as alice:
        for _ in range(3):
            assert (await alice.post("/api/v2/memory/get", json=GET_BODY)).status_code == 200
    # shut down: the batch processor sent what it held
    assert received, "nothing reached the collector"
    spans = []
    for path, headers, body in received:
        assert path == "/v1/traces"
        assert headers["content-type"] == "application/x-protobuf"
        assert headers["x-tenant"] == "acme"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {kv.key: kv.value.string_value
                       for kv in resource_spans.resource.attributes}["service.name"]
            assert service == "gw-test"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "memory-gateway"
                spans.extend(scope_spans.spans)
    servers = [span for span in spans if span.name == "POST /api/v2/memory/get"]
    assert len(servers) == 3 and len({span.trace_id for span in servers}) == 3
    assert {span.name for span in spans} >= {"auth", "route model", "owner checks",
                                              "engine call"}
    assert sum(encoded) == (len(spans) if own else 0)


def test_a_clients_long_path_is_encoded_but_not_kept() -> None:
    """A server span's name carries the request's path: the name cache keeps short ones only."""
    long_name = "GET /" + "x" * 4000
    span = _one(name=long_name)
    assert encode([span]) == _sdk([span]) and encode([_one()]) == _sdk([_one()])
    assert long_name not in otlp._NAMES and "x" in otlp._NAMES
