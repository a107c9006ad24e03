"""One feature's CPU cost in process: two gateways in this process, the feature off and on, each
driven through its ASGI interface with the small JSON POST of bench/passthrough.py, forwarding
with the production client to the same fast upstream. Batches alternate off/on; the figure is
the CPU time of this thread per request, which load from other processes cannot blur.

Used by bench/limiter_cost.py and bench/tracing_cost.py, which say how each side is built.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from passthrough import BODY, PATH

from gateway.app import Gateway


def request_scope(key: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {
        "type": "http", "method": "POST", "path": PATH, "raw_path": PATH.encode(),
        "query_string": b"", "scheme": "http", "http_version": "1.1",
        "asgi": {"version": "3.0"}, "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "headers": [(b"host", b"gateway"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(BODY)).encode()),
                    (b"authorization", f"Bearer {key}".encode()), *headers],
    }


async def batch(app: Gateway, template: dict[str, Any], n: int, concurrency: int = 16, *,
                clock: Callable[[], float] = time.thread_time,
                latencies: list[float] | None = None,
                settle: Callable[[], object] | None = None) -> float:
    """CPU seconds per request by `clock` (default: this thread's), `n` requests `concurrency`
    at a time; each request's seconds appended to `latencies` when given; `settle` run before
    the clock stops (work the batch left to another thread)."""
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def worker(count: int) -> None:
        for _ in range(count):
            began = time.perf_counter()
            await app(dict(template), receive, send)  # type: ignore[arg-type]
            if latencies is not None:
                latencies.append(time.perf_counter() - began)

    started = clock()
    await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    if settle is not None:
        settle()
    spent = clock() - started
    if set(statuses) != {200}:
        raise RuntimeError(f"unexpected statuses {sorted(set(statuses))}")
    return spent / len(statuses)


async def alternate(feature: str, off: tuple[Gateway, dict[str, Any]],
                    on: tuple[Gateway, dict[str, Any]], pairs: int, size: int) -> float:
    """The median on ÷ off ratio of `pairs` alternated batches of `size` requests (each side an
    app and its request scope), after one warm-up batch each; both apps are shut down after."""
    try:
        for app, template in (off, on):
            await batch(app, template, size)  # warm-up
        off_runs, on_runs, ratios = [], [], []
        for _ in range(pairs):
            off_runs.append(await batch(*off, size))
            on_runs.append(await batch(*on, size))
            ratios.append(on_runs[-1] / off_runs[-1])
    finally:
        for app, _ in (off, on):
            await app.shutdown()
    print(f"CPU per request: {feature} off {statistics.median(off_runs) * 1e6:.1f} us, on "
          f"{statistics.median(on_runs) * 1e6:.1f} us (medians of {pairs} batches of {size})")
    return statistics.median(ratios)


def verdict(what: str, ratio: float, target: float = 1.05) -> int:
    """Prints the on ÷ off ratio against the ≤ 5 % target; the exit status (0: it meets it)."""
    meets = ratio <= target
    print(f"{what}, CPU per request: median ratio {ratio:.3f} (cost {100 * (ratio - 1):+.1f} %, "
          f"{'meets' if meets else 'MISSES'} the ≤ 5 % target)")
    return 0 if meets else 1
