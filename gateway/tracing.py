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
using it agrees). An unsampled request makes no span: a client's traceparent (and tracestate)
goes to the engine unchanged, or, with none, one of the gateway's own saying "not sampled".
A sampled request times its steps with `perf_counter_ns` into a small record; the SDK's spans
(explicit start and end times, ids, a few attributes) are made from it in one place once the
response is sent (`Tracing.finish`) and handed to the span processor (batched, as the OTLP
exporter's are, in the background). No SDK context, tracer or per-step context manager runs.
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
_CURRENT: ContextVar[Trace | None] = ContextVar("gateway_trace", default=None)
# W3C Trace Context: version-trace id-parent id-flags, a later version may append fields.
_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?",
                          re.S)
_LOW_64 = (1 << 64) - 1
_HEX = b"0123456789abcdef"


def parse_traceparent(value: bytes) -> tuple[int, int, bool] | None:
    """(trace id, parent span id, sampled) of a valid W3C `traceparent`; None when invalid."""
    if (len(value) == 55 and value[2] == value[35] == value[52] == 45  # "-": the usual one,
            and value.translate(None, _HEX) == b"---"):  # read without the regex engine
        version, trace, parent, flags, rest = (value[:2], value[3:35], value[36:52],
                                               value[53:], None)
    else:
        found = _TRACEPARENT.fullmatch(value.strip(b" \t"))
        if found is None:
            return None
        version, trace, parent, flags, rest = found.groups()
    if version == b"ff" or (version == b"00" and rest):
        return None
    trace_id, parent_id = int(trace, 16), int(parent, 16)
    if not trace_id or not parent_id:
        return None
    return trace_id, parent_id, bool(int(flags, 16) & 1)


def _new_id(bits: int) -> int:
    return getrandbits(bits) or 1


class Trace:
    """One request's part of a trace. Unsampled: what the engine is sent. Sampled: the server
    span's ids and the steps timed so far (name, span id, parent id, start, end, error)."""

    __slots__ = ("trace_id", "parent_id", "remote", "span_id", "sampled", "current", "header",
                 "passed", "keep_state", "started", "wall", "stages")

    def __init__(self, trace_id: int, parent_id: int, remote: bool, sampled: bool,
                 header: str = "", passed: bool = False, keep_state: bool = False) -> None:
        self.trace_id = trace_id
        self.parent_id = parent_id  # 0: a root span
        self.remote = remote  # the parent is the client's
        self.sampled = sampled
        self.header = header  # unsampled: the traceparent the engine gets
        self.passed = passed  # ... which is the request's own: its headers go as they are
        self.keep_state = keep_state  # the client's tracestate goes with our traceparent
        self.span_id = self.current = _new_id(64) if sampled else 0
        if sampled:
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
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint or None)
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

    def begin(self, scope: Scope) -> Trace:
        """The request's sampling decision and ids: the client's `traceparent` continued when
        valid, else the trace of the request this one runs inside (an in-process call), else
        a new trace."""
        value: bytes | None = None
        for key, found in scope["headers"]:
            if key == b"traceparent":
                if value is not None:  # two of them: neither is trusted (W3C)
                    value = b""
                    break
                value = found
        parsed = parse_traceparent(value) if value else None
        if parsed is not None:
            trace_id, parent_id, followed = parsed
            sampled = followed if self.parent_based else (trace_id & _LOW_64) < self.bound
            if sampled:
                return Trace(trace_id, parent_id, True, True, keep_state=True)
            if not followed:  # the client's own decision: its headers reach the engine as sent
                return Trace(trace_id, parent_id, True, False,
                             bytes(value or b"").decode("latin-1"), True, True)
            return Trace(trace_id, parent_id, True, False,
                         f"00-{trace_id:032x}-{parent_id:016x}-00", False, True)
        outer = _CURRENT.get()
        if outer is not None and value is None:  # a call made in process by a request
            return Trace(outer.trace_id, outer.current or outer.parent_id, False, outer.sampled,
                         outer.header)
        trace_id = _new_id(128)
        if (trace_id & _LOW_64) < self.bound:
            return Trace(trace_id, 0, False, True)
        return Trace(trace_id, 0, False, False, f"00-{trace_id:032x}-{_new_id(64):016x}-00")

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


def enter(trace: Trace) -> Any:
    """Make `trace` the running request's (a token for `leave`)."""
    return _CURRENT.set(trace)


def leave(token: Any) -> None:
    _CURRENT.reset(token)


def span(name: str) -> _Stage | _Off:
    """A timed step of the current request when it is sampled; else nothing."""
    trace = _CURRENT.get()
    if trace is None or not trace.sampled:  # off, or not sampled
        return _OFF
    return _Stage(trace, name)


def engine_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers for the engine with the trace's `traceparent`: the step calling the engine as
    parent when sampled; unsampled, the client's unchanged or the gateway's own; tracing off,
    the headers as they are."""
    trace = _CURRENT.get()
    if trace is None:
        return headers
    if trace.sampled:
        value = f"00-{trace.trace_id:032x}-{trace.current:016x}-01"
    elif trace.passed:  # the client's traceparent and tracestate, passed on
        return headers
    else:
        value = trace.header
    drop = ("traceparent",) if trace.keep_state else TRACE_HEADERS
    kept = [(k, v) for k, v in headers if k.lower() not in drop]
    kept.append(("traceparent", value))
    return kept
