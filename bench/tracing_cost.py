"""Tracing's cost (issue 54: ≤ 5 % when on, nothing when off), as the gateway's process pays it.

One gateway in this process, driven through its ASGI interface with the small JSON POST of
bench/passthrough.py, forwarding with the production client to a fast upstream process (its CPU
is not counted); tracing is switched off and on between batches, so nothing else differs. On:
`tracing.enabled`, `parent_based = true`, `sample_ratio` as given (default: the shipped one).
The spans go through the batching processor the OTLP exporter uses to an exporter that encodes
them as OTLP/HTTP does (protobuf) and drops the bytes: every CPU cost but the socket's, counted
in the batch that made them (the processor is flushed before each batch's clock stops).

Four kinds of request, alternated batch by batch in one run:
  off        tracing off (the client's traceparent passes unchanged);
  unsampled  tracing on, the client's traceparent says not sampled (followed: no span);
  sampled    tracing on, the client's traceparent says sampled: every span, as sample_ratio 1;
  ratio      tracing on, no traceparent: `sample_ratio` decides.
Measured: the process's CPU (all threads: the event loop, the database's and the exporter's)
per request, and each request's latency. Prints medians over the rounds and each kind's ratio
to `off` in the same round (median and quartiles: on a shared machine a batch's CPU varies by
several per cent). `--hooks`: then the tracing hooks of one request alone (begin, four steps,
the engine's headers, the spans made, batched and encoded), the figure that load cannot blur.

    .venv/bin/python bench/tracing_cost.py [--rounds 12] [--batch 256] [--ratio R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import off_on  # noqa: E402
from harness import fast_upstream  # noqa: E402
from off_on import request_scope  # noqa: E402
from passthrough import PATH  # noqa: E402

from gateway import tracing  # noqa: E402
from gateway.app import Gateway, create_app  # noqa: E402
from gateway.cli import freeze_startup_objects  # noqa: E402
from gateway.config import Settings, TracingSettings  # noqa: E402
from gateway.tracing import Tracing  # noqa: E402
from tests.conftest import create_key  # noqa: E402

TARGET = 1.05
CLIENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"
TRACEPARENT = {"off": CLIENT + b"01", "unsampled": CLIENT + b"00", "sampled": CLIENT + b"01",
               "ratio": None}
KINDS = tuple(TRACEPARENT)


class EncodeExporter:
    """Encodes each batch as the gateway's OTLP/HTTP exporter does (gateway/tracing/otlp.py)
    and keeps nothing."""

    def __init__(self) -> None:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        from gateway.tracing.otlp import encode

        self.encode, self.sdk_encode = encode, encode_spans
        self.spans = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self.encode(spans) is None:
            self.sdk_encode(spans).SerializePartialToString()
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def balanced_order(kinds: tuple[str, ...], round_: int) -> list[str]:
    """Round `round_`'s order of the kinds, a row of a Williams square: over len(kinds) rounds
    each kind comes first once and follows every other kind once (a recorded batch leaves
    garbage and a warm exporter behind: no kind may always pay for it)."""
    n, steps = len(kinds), [0]
    for j in range(1, n):
        steps.append((j + 1) // 2 if j % 2 else n - j // 2)
    return [kinds[(round_ + step) % n] for step in steps]


def traced_scope(key: str, traceparent: bytes | None) -> dict[str, Any]:
    """The bench's request (bench/off_on.py), with the client's `traceparent` when given."""
    return request_scope(key, *([(b"traceparent", traceparent)] if traceparent else []))


async def batch(app: Gateway, key: str, traceparent: bytes | None, n: int
                ) -> tuple[float, list[float]]:
    """CPU seconds of this process per request (every thread's: the exporter's too, its
    batch's spans encoded before the clock stops), and each request's seconds."""
    latencies: list[float] = []
    settle = app.tracing.processor.force_flush if app.tracing is not None else None
    spent = await off_on.batch(app, traced_scope(key, traceparent), n, clock=time.process_time,
                               latencies=latencies, settle=settle)
    return spent, latencies


async def measure(upstream: str, args: argparse.Namespace) -> dict[str, float]:
    exporter = EncodeExporter()
    with tempfile.TemporaryDirectory(prefix="mgw-tracing-") as tmp:
        settings = Settings().with_values(
            upstream={"base_url": upstream},
            storage={"root": tmp, "database": f"{tmp}/gateway.db"},
            tracing={"enabled": True, "sample_ratio": args.ratio})
        key = create_key(settings, "bench")
        app = create_app(settings)
        # One gateway, tracing switched per batch: nothing else differs between the kinds.
        on = app.tracing = Tracing(settings.tracing, exporter, batched=True)
        await app.startup()
        freeze_startup_objects()  # as `memory-gateway serve` does once serving
        cpu: dict[str, list[float]] = {kind: [] for kind in args.kinds}
        latency: dict[str, list[float]] = {kind: [] for kind in args.kinds}
        kinds = args.kinds
        ratios: dict[str, list[float]] = {kind: [] for kind in kinds[1:]}
        try:
            for round_ in range(args.rounds + 1):  # the first round warms up
                order = balanced_order(kinds, round_)
                spent: dict[str, float] = {}
                for kind in order:
                    app.tracing = None if kind == "off" else on
                    spent[kind], seconds = await batch(app, key, TRACEPARENT[kind], args.batch)
                    if round_:
                        cpu[kind].append(spent[kind])
                        latency[kind].extend(seconds)
                for kind in kinds[1:]:
                    if round_:
                        ratios[kind].append(spent[kind] / spent["off"])
        finally:
            app.tracing = on
            await app.shutdown()
    print(f"{args.rounds} rounds of {args.batch} requests of each kind, 16 at a time; "
          f"sample_ratio {args.ratio}, parent_based true; spans encoded: {exporter.spans}")
    print(f"{'kind':<10} {'CPU/request':>12} {'p50 latency':>12} {'p99 latency':>12} "
          f"{'CPU ÷ off, median (quartiles) of the rounds':>44}")
    out = {}
    for kind in args.kinds:
        lat = sorted(latency[kind])
        spread = ""
        if kind == "off":
            ratio = 1.0
        else:
            low, ratio, high = statistics.quantiles(ratios[kind], n=4)
            spread = f" ({low:.3f}–{high:.3f})"
        out[kind] = ratio
        print(f"{kind:<10} {statistics.median(cpu[kind]) * 1e6:>9.1f} us "
              f"{lat[len(lat) // 2] * 1e6:>9.0f} us {lat[int(len(lat) * 0.99)] * 1e6:>9.0f} us "
              f"{ratio:>10.3f}{spread}")
    return out


def hooks(ratio: float) -> None:
    """The tracing hooks of one pass-through request (4 steps), timed alone, in µs."""
    exporter = EncodeExporter()
    on = Tracing(TracingSettings(enabled=True, sample_ratio=ratio), exporter, batched=True)
    headers = [("content-type", "application/json"), ("x-request-id", "r")]

    def one(scope: dict[str, Any]) -> None:
        trace = on.begin(scope)
        token = tracing.CURRENT.set(trace)
        for name in ("auth", "route model", "owner checks"):
            with tracing.span(name):
                pass
        with tracing.span("engine call"):
            tracing.engine_headers(headers)
        tracing.CURRENT.reset(token)
        if isinstance(trace, tracing.Trace):
            on.finish(trace, scope, 200, PATH)

    for label, traceparent in (("unsampled", TRACEPARENT["unsampled"]),
                               ("sampled", TRACEPARENT["sampled"]),
                               (f"ratio {ratio}", None)):
        scope = traced_scope("k", traceparent)
        scope["request_id"] = "r" * 24
        runs = []
        for _ in range(5):
            started = time.process_time()
            for _ in range(20):
                for _ in range(100):
                    one(scope)
                on.processor.force_flush()  # within the processor's queue: nothing dropped
            runs.append((time.process_time() - started) / 2000)
        best = min(runs)
        print(f"hooks alone, {label:<12} {best * 1e6:6.1f} us per request "
              "(spans made, batched and encoded)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--ratio", type=float, default=TracingSettings().sample_ratio,
                        help="tracing.sample_ratio (default: the shipped default)")
    parser.add_argument("--hooks", action="store_true", help="also time the hooks alone")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="which kinds, comma-separated (off always first)")
    args = parser.parse_args()
    args.kinds = ("off", *(k for k in args.kinds.split(",") if k in KINDS and k != "off"))
    os.environ.setdefault("MEMORY_GATEWAY_SERVER_LOG_LEVEL", "warning")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with fast_upstream() as upstream:
        ratios = asyncio.run(measure(upstream, args))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.hooks:
        hooks(args.ratio)
    ratios = {kind: ratios.get(kind, float("nan")) for kind in KINDS}
    verdict = "meets" if ratios["ratio"] <= TARGET else "MISSES"
    print(f"at sample_ratio {args.ratio} (no client traceparent): cost "
          f"{100 * (ratios['ratio'] - 1):+.1f} % CPU per request, {verdict} the ≤ 5 % target; "
          f"unsampled {100 * (ratios['unsampled'] - 1):+.1f} %, "
          f"sampled {100 * (ratios['sampled'] - 1):+.1f} %")
    return 0 if verdict == "meets" else 1


if __name__ == "__main__":
    raise SystemExit(main())
