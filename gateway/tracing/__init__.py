"""Optional OpenTelemetry tracing: `tracing.enabled = true` with the `[tracing]` extra
(opentelemetry-sdk and its OTLP exporter). Off, nothing of OpenTelemetry is imported and each
hook below is one context-variable read.

On, each request is a server span continuing the W3C `traceparent` the client sent, with child
spans for the steps operators ask about: `auth`, `route model` (the engine's request model read
from the body), `owner checks` (every named id, session and agent), `engine call` and
`matching` (search attachments). The engine is sent a `traceparent` naming the span that called
it, so an engine that traces (EverOS's middleware) joins the same trace.

What it costs is kept off the request's path. Sampling is decided once, as the request starts:
a client's traceparent is followed when `parent_based` (its sampled flag decides), otherwise
`sample_ratio` decides by the trace id (the SDK's TraceIdRatioBased rule, so every service
using it agrees). An unsampled request makes no span and no object: a client's unsampled
traceparent (and tracestate) goes to the engine unchanged, else one of the gateway's own saying
"not sampled" (the client's ids, or a new trace).
A sampled request times its steps with `perf_counter_ns` into a small record; the SDK's spans
(explicit start and end times, ids, a few attributes) are made from it in one place once the
response is sent (`Tracing.finish`) and handed to the span processor (batched, as the OTLP
exporter's are, in the background), whose OTLP bytes tracing/otlp.py writes. No SDK context,
tracer or per-step context manager runs.
"""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from random import getrandbits
from types import TracebackType
from typing import TYPE_CHECKING, Any

from starlette.types import Scope

if TYPE_CHECKING:
    from gateway.config import TracingSettings

TRACE_HEADERS = ("traceparent", "tracestate")
# An unsampled request is a pair, made in C: the traceparent the engine gets and how it joins
# the engine's headers. PASS: the client's own (unsampled) headers go as they are; APPEND: the
# client sent neither trace header, ours is added; REPLACE: ours instead of the client's
# traceparent, its tracestate kept; FRESH: a new trace, the client's trace headers dropped.
PASS, APPEND, REPLACE, FRESH = 0, 1, 2, 3
Unsampled = tuple[str, int]
CURRENT: ContextVar[Trace | Unsampled | None] = ContextVar("gateway_trace", default=None)
# W3C Trace Context: version-trace id-parent id-flags, a later version may append fields.
_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?",
                          re.S)
_LOW_64 = (1 << 64) - 1
# A hex digit read as "0", a dash as itself, anything else as "x": a usual traceparent
# (version 00, four fields) then reads as _USUAL, checked in one pass.
_SHAPE = bytes(48 if chr(c) in "0123456789abcdef" else c if c == 45 else 120
               for c in range(256))
_USUAL = b"00-" + b"0" * 32 + b"-" + b"0" * 16 + b"-00"
_SAMPLED_DIGITS = b"13579bdf"  # the flags' last hex digit when bit 0 (sampled) is set
_ZERO_TRACE, _ZERO_SPAN = b"0" * 32, b"0" * 16


def _valid(value: bytes) -> bytes | None:
    """A valid W3C `traceparent` as its first four fields (55 bytes: the trace id at [3:35],
    the parent at [36:52], the flags at [53:55]); None when invalid."""
    if value.translate(_SHAPE) != _USUAL:  # the usual one is read without the regex engine
        found = _TRACEPARENT.fullmatch(value.strip(b" \t"))
        if found is None:
            return None
        version, trace, parent, flags, rest = found.groups()
        if version == b"00" and rest:
            return None
        value = b"-".join((version, trace, parent, flags))
    if value[:2] == b"ff" or value[3:35] == _ZERO_TRACE or value[36:52] == _ZERO_SPAN:
        return None
    return value


def parse_traceparent(value: bytes) -> tuple[int, int, bool] | None:
    """(trace id, parent span id, sampled) of a valid W3C `traceparent`; None when invalid."""
    head = _valid(value)
    if head is None:
        return None
    return int(head[3:35], 16), int(head[36:52], 16), head[54] in _SAMPLED_DIGITS


def _new_id(bits: int) -> int:
    return getrandbits(bits) or 1


class Trace:
    """One sampled request's part of a trace: the server span's ids and the steps timed so far
    (name, span id, parent id, start, end, error)."""

    __slots__ = ("trace_id", "parent_id", "remote", "span_id", "current", "started", "wall",
                 "stages")

    def __init__(self, trace_id: int, parent_id: int, remote: bool) -> None:
        self.trace_id = trace_id
        self.parent_id = parent_id  # 0: a root span
        self.remote = remote  # the parent is the client's: its tracestate goes on with ours
        self.span_id = self.current = _new_id(64)
        self.started = time.perf_counter_ns()
        self.wall = time.time_ns() - self.started  # + a perf_counter_ns reading: epoch ns
        self.stages: list[tuple[str, int, int, int, int, type[BaseException] | None]] = []


class _Stage:
    """One step of a sampled request, timed: `with tracing.span(name):`."""

    __slots__ = ("trace", "name", "span_id", "parent", "start")

    def __init__(self, trace: Trace, name: str) -> None:
        self.trace = trace
        self.name = name

    def __enter__(self) -> None:
        trace = self.trace
        self.parent = trace.current
        self.span_id = trace.current = _new_id(64)
        self.start = time.perf_counter_ns()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        trace = self.trace
        trace.stages.append((self.name, self.span_id, self.parent, self.start,
                             time.perf_counter_ns(), kind))
        trace.current = self.parent


class _Off:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


_OFF = _Off()


class Tracing:
    """One app's span pipeline; `exporter` (tests: the SDK's InMemorySpanExporter) replaces
    the OTLP exporter, and spans are then exported as they end unless `batched` (as the OTLP
    exporter's are, in the background)."""

    def __init__(self, settings: TracingSettings, exporter: Any = None,
                 batched: bool | None = None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        if batched is None:
            batched = exporter is None
        if exporter is None:
            from gateway.tracing.otlp import Exporter

            exporter = Exporter(endpoint=settings.otlp_endpoint or None)
        self.processor = (BatchSpanProcessor(exporter) if batched
                          else SimpleSpanProcessor(exporter))
        self.parent_based = settings.parent_based
        # TraceIdRatioBased: sampled when the trace id's low 64 bits are below this bound.
        self.bound = round(min(max(settings.sample_ratio, 0.0), 1.0) * (_LOW_64 + 1))
        created = Resource.create({"service.name": settings.service_name})
        known = hash(created)

        class _Resource(Resource):  # the one of every span: its hash (a JSON dump) made once
            def __hash__(self) -> int:
                return known

        self._resource = _Resource(created.attributes, created.schema_url)
        self._scope = InstrumentationScope("memory-gateway")
        self._span = ReadableSpan
        self._context = SpanContext
        self._sampled = TraceFlags(TraceFlags.SAMPLED)
        self._server, self._internal = SpanKind.SERVER, SpanKind.INTERNAL
        self._ok = Status(StatusCode.UNSET)
        self._error = StatusCode.ERROR
        self._status = Status

    def begin(self, scope: Scope) -> Trace | Unsampled:
        """The request's sampling decision and ids: the client's `traceparent` continued when
        valid, else the trace of the request this one runs inside (an in-process call), else
        a new trace. Sampled: a `Trace`; else the engine's traceparent and how it is sent."""
        value: bytes | None = None
        state = False
        for key, found in scope["headers"]:
            if key == b"traceparent":
                value = found if value is None else b""  # two of them: neither is trusted
            elif key == b"tracestate":
                state = True
        head = _valid(value) if value else None
        if head is not None:
            followed = head[54] in _SAMPLED_DIGITS
            if followed if self.parent_based else int(head[19:35], 16) < self.bound:
                return Trace(int(head[3:35], 16), int(head[36:52], 16), True)
            if not followed:  # the client's own decision: its headers reach the engine as sent
                return head.decode("latin-1"), PASS
            return f"00-{head[3:52].decode('latin-1')}-00", REPLACE  # same ids, not sampled
        if value is None:
            outer = CURRENT.get()
            if outer is not None:  # a call made in process by a request
                if outer.__class__ is Trace:
                    return Trace(outer.trace_id, outer.current, False)
                return outer[0], FRESH if state else APPEND  # type: ignore[index]
        bits = getrandbits(192)  # a trace id (the high 128) and a parent id (the low 64)
        while not bits >> 64 or not bits & _LOW_64:  # all-zero ids are invalid
            bits = getrandbits(192)
        if (bits >> 64) & _LOW_64 < self.bound:
            return Trace(bits >> 64, 0, False)
        text = f"{bits:048x}"
        return f"00-{text[:32]}-{text[32:]}-00", FRESH if state or value is not None else APPEND

    def finish(self, trace: Trace, scope: Scope, status: int, route: str | None) -> None:
        """The sampled request's spans, made from its record and handed to the processor."""
        span, context, flags, resource = self._span, self._context, self._sampled, self._resource
        trace_id, wall, stages = trace.trace_id, trace.wall, trace.stages
        server = context(trace_id, trace.span_id, False, flags)
        end = time.perf_counter_ns()
        on_end = self.processor.on_end
        for name, span_id, parent_id, start, stop, error in stages:
            on_end(span(
                name, context(trace_id, span_id, False, flags),
                server if parent_id == trace.span_id else context(trace_id, parent_id, False,
                                                                  flags),
                resource, None, kind=self._internal, instrumentation_scope=self._scope,
                status=self._ok if error is None else self._status(self._error, error.__name__),
                start_time=start + wall, end_time=stop + wall))
        method, path = scope["method"], scope["path"]
        attributes: dict[str, Any] = {"http.request.method": method, "url.path": path,
                                      "http.response.status_code": status,
                                      "gateway.request_id": scope.get("request_id", "")}
        if route is not None:
            attributes["http.route"] = route
        on_end(span(
            f"{method} {path}", server,
            context(trace_id, trace.parent_id, trace.remote, flags) if trace.parent_id else None,
            resource, attributes, kind=self._server, instrumentation_scope=self._scope,
            status=self._status(self._error) if status >= 500 else self._ok,
            start_time=trace.started + wall, end_time=end + wall))

    def shutdown(self) -> None:
        self.processor.shutdown()


def span(name: str) -> _Stage | _Off:
    """A timed step of the current request when it is sampled; else nothing."""
    trace = CURRENT.get()
    if trace.__class__ is Trace:
        return _Stage(trace, name)
    return _OFF  # off, or not sampled


def engine_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers for the engine with the trace's `traceparent`: the step calling the engine as
    parent when sampled; unsampled, the client's unchanged or the gateway's own; tracing off,
    the headers as they are."""
    trace = CURRENT.get()
    if trace is None:
        return headers
    if trace.__class__ is Trace:
        sampled: Trace = trace
        value = f"00-{sampled.trace_id:032x}-{sampled.current:016x}-01"
        drop = ("traceparent",) if sampled.remote else TRACE_HEADERS
    else:
        value, how = trace  # type: ignore[misc]
        if how == PASS:  # the client's traceparent and tracestate, passed on
            return headers
        if how == APPEND:
            return [*headers, ("traceparent", value)]
        drop = ("traceparent",) if how == REPLACE else TRACE_HEADERS
    kept = [(k, v) for k, v in headers if k.lower() not in drop]
    kept.append(("traceparent", value))
    return kept
