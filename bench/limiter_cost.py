"""The limiter's own cost (SPEC §14: limits cost ≤ 5 %), measured where load from other
processes cannot blur it: the CPU time of this thread per request.

Two gateways in this process, limits off and on (set high enough never to refuse: every request
still draws from its bucket and takes an engine slot), each driven through its ASGI interface
with the small JSON POST of bench/passthrough.py and forwarding with the production client to
the same fast upstream process. Batches alternate off/on; prints the median CPU per request of
each and the median ratio of the pairs. bench/passthrough.py --limits measures the same over
HTTP, as requests/s, which a shared machine makes noisy.

    .venv/bin/python bench/limiter_cost.py [--pairs 40] [--batch 300] [--postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import fast_upstream  # noqa: E402
from off_on import alternate, request_scope, verdict  # noqa: E402

from gateway.app import create_app  # noqa: E402
from gateway.cli import freeze_startup_objects  # noqa: E402
from gateway.config import Settings  # noqa: E402
from gateway.store.database import migrate  # noqa: E402
from tests.conftest import create_key  # noqa: E402

TARGET = 1.05
LIMITS_ON = {"requests_per_s": 1e6, "burst": 1_000_000, "engine_concurrency_per_user": 1000}


async def measure(upstream: str, args: argparse.Namespace,
                  database: Callable[[str], str]) -> float:
    sides = []
    with tempfile.TemporaryDirectory(prefix="mgw-limiter-") as tmp:
        for name, limits in (("off", {}), ("on", LIMITS_ON)):
            settings = Settings().with_values(
                upstream={"base_url": upstream},
                storage={"root": f"{tmp}/{name}", "database": database(f"{tmp}/{name}.db")},
                rate_limits=limits)
            key = create_key(settings, "bench")
            app = create_app(settings)
            await app.startup()
            freeze_startup_objects()  # as `memory-gateway serve` does once serving
            sides.append((app, request_scope(key)))
        return await alternate("limits", sides[0], sides[1], args.pairs, args.batch)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--batch", type=int, default=320)
    parser.add_argument("--postgresql", action="store_true",
                        help="both gateways on a throw-away PostgreSQL (shared buckets)")
    args = parser.parse_args()
    os.environ.setdefault("MEMORY_GATEWAY_SERVER_LOG_LEVEL", "warning")
    server = None
    database: Callable[[str], str] = str
    if args.postgresql:
        from tests import postgres_server

        server = postgres_server.start()

        def database(_path: str) -> str:
            url = server.create_database()
            migrate(url)  # so the benchmark's key can be written before the gateway starts
            return url
    try:
        with fast_upstream() as upstream:
            ratio = asyncio.run(measure(upstream, args, database))
    finally:
        if server is not None:
            server.stop()
    backend = "postgresql" if args.postgresql else "sqlite"
    return verdict(f"{backend}: limits on ÷ off", ratio, TARGET)


if __name__ == "__main__":
    raise SystemExit(main())
