"""Tracing's cost (issue 54: ≤ 5 % when on), measured where load from other processes cannot
blur it: the CPU time of this thread per request.

Two gateways in this process, tracing off and on (`tracing.enabled`: a server span continuing
the client's traceparent, the step spans, the continued traceparent sent upstream; spans batched
in the background as the OTLP exporter's are, to an exporter that drops them), each driven
through its ASGI interface with the small JSON POST of bench/passthrough.py, a `traceparent`
sent, forwarding with the production client to the same fast upstream process. Batches
alternate off/on; prints the median CPU per request of each and the median ratio of the pairs.

    .venv/bin/python bench/tracing_cost.py [--pairs 20] [--batch 320]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fast_upstream  # noqa: E402
from off_on import alternate, request_scope, verdict  # noqa: E402

from gateway.app import create_app  # noqa: E402
from gateway.config import Settings  # noqa: E402
from gateway.tracing import Tracing  # noqa: E402
from tests.conftest import create_key  # noqa: E402

TARGET = 1.05
TRACEPARENTS = {"sampled": b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "unsampled": b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}
TRACEPARENT = TRACEPARENTS["sampled"]


class DropExporter:
    """Takes every batch and keeps nothing: the cost measured is the gateway's, not a wire's."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


async def measure(upstream: str, args: argparse.Namespace,
                  database: Callable[[str], str]) -> float:
    sides = []
    with tempfile.TemporaryDirectory(prefix="mgw-tracing-") as tmp:
        for name in ("off", "on"):
            settings = Settings().with_values(
                upstream={"base_url": upstream},
                storage={"root": f"{tmp}/{name}", "database": database(f"{tmp}/{name}.db")})
            key = create_key(settings, "bench")
            app = create_app(settings)
            if name == "on":
                app.tracing = Tracing(settings.tracing, DropExporter(), batched=True)
            await app.startup()
            sides.append((app, request_scope(key, (b"traceparent", TRACEPARENT))))
        return await alternate("tracing", sides[0], sides[1], args.pairs, args.batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--unsampled", action="store_true",
                        help="the client's traceparent says not sampled: spans are not recorded, "
                        "the traceparent is still continued to the engine")
    parser.add_argument("--batch", type=int, default=320)
    args = parser.parse_args()
    os.environ.setdefault("MEMORY_GATEWAY_SERVER_LOG_LEVEL", "warning")
    global TRACEPARENT
    TRACEPARENT = TRACEPARENTS["unsampled" if args.unsampled else "sampled"]
    with fast_upstream() as upstream:
        ratio = asyncio.run(measure(upstream, args, str))
    which = "unsampled" if args.unsampled else "sampled"
    return verdict(f"tracing on ({which}) ÷ off", ratio, TARGET)


if __name__ == "__main__":
    raise SystemExit(main())
