"""Optional OpenTelemetry tracing: `tracing.enabled = true` with the `[tracing]` extra
(opentelemetry-sdk and its OTLP exporter). Off, nothing of OpenTelemetry is imported and each
hook below is one context-variable read.

On, each request is a server span continuing the W3C `traceparent` the client sent, with child
spans for the steps operators ask about: `auth`, `route model` (the engine's request model read
from the body), `owner checks` (every named id, session and agent), `engine call` and
`matching` (search attachments). The engine is sent the continued `traceparent` (and
`tracestate`), so an engine that traces (EverOS's middleware) joins the same trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from starlette.types import Scope

if TYPE_CHECKING:
    from gateway.config import TracingSettings

TRACE_HEADERS = ("traceparent", "tracestate")
_CURRENT: ContextVar[Tracing | None] = ContextVar("gateway_tracing", default=None)
_OFF: AbstractContextManager[None] = nullcontext()


class Tracing:
    """One app's tracer provider; `exporter` (tests: the SDK's InMemorySpanExporter) replaces
    the OTLP exporter, and spans are then exported as they end unless `batched` (as the OTLP
    exporter's are, in the background)."""

    def __init__(self, settings: TracingSettings, exporter: Any = None,
                 batched: bool | None = None) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.service_name}),
            sampler=ParentBased(TraceIdRatioBased(min(settings.sample_ratio, 1.0))))
        if batched is None:
            batched = exporter is None
        from opentelemetry.trace import get_current_span

        self.current_span = get_current_span
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint or None)
        provider.add_span_processor(BatchSpanProcessor(exporter) if batched
                                    else SimpleSpanProcessor(exporter))
        self.provider = provider
        self.tracer = provider.get_tracer("memory-gateway")
        self.propagator = TraceContextTextMapPropagator()

    @contextmanager
    def request(self, scope: Scope) -> Iterator[None]:
        """The request's server span, child of the client's `traceparent` when it sent one."""
        from opentelemetry.trace import SpanKind

        carrier = {key.decode("latin-1"): value.decode("latin-1")
                   for key, value in scope["headers"] if key in (b"traceparent", b"tracestate")}
        parent = self.propagator.extract(carrier) if carrier else None
        token = _CURRENT.set(self)
        try:
            with self.tracer.start_as_current_span(
                    f"{scope['method']} {scope['path']}", context=parent, kind=SpanKind.SERVER,
                    attributes={"http.request.method": scope["method"],
                                "url.path": scope["path"],
                                "gateway.request_id": scope.get("request_id", "")}):
                yield
        finally:
            _CURRENT.reset(token)

    def shutdown(self) -> None:
        self.provider.shutdown()


def span(name: str) -> AbstractContextManager[Any]:
    """A child span of the current request's when tracing is on; else nothing."""
    tracing = _CURRENT.get()
    if tracing is None or not tracing.current_span().is_recording():  # off, or not sampled
        return _OFF
    return tracing.tracer.start_as_current_span(name)


def engine_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers for the engine with the current span's `traceparent` in place of the client's
    (tracing on); unchanged when tracing is off."""
    tracing = _CURRENT.get()
    if tracing is None:
        return headers
    carrier: dict[str, str] = {}
    tracing.propagator.inject(carrier)
    kept = [(k, v) for k, v in headers if k.lower() not in TRACE_HEADERS]
    return kept + list(carrier.items())
