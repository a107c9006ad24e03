"""Fair-share benchmark (SPEC §13): one user flooding at 10× its rate limit, 19 others at half
theirs; the others' p99 latency with the flood ÷ without it, and every 5xx counted.

One gateway (limits on: `rate_limits.requests_per_s`, `burst`, `engine_concurrency_per_user`)
in front of an upstream answering after `--engine-ms`. Each round runs the 20 users twice,
once with the flooder at the same pace as everyone (no flood) and once at 10× its limit
(flood), alternated so both see the same machine; prints both p99s of the 19 others, the ratio,
and the 5xx count, then the median ratio. Target: ratio ≤ 2 and no 5xx.

    .venv/bin/python bench/flood.py [--rounds 3] [--seconds 8] [--rate 10] [--engine-ms 5]
                                    [--no-limits]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import PYTHON, ROOT, fast_upstream, free_port, process, wait_for_port  # noqa: E402

PATH = "/api/v2/memory/get"  # an engine read
USERS = [f"user{n:02d}" for n in range(20)]
FLOODER = USERS[0]
TARGET = 2.0


@contextmanager
def gateway_with_keys(upstream: str, env_extra: dict[str, str]
                      ) -> Iterator[tuple[str, dict[str, str]]]:
    """A gateway process and one key per user of USERS."""
    with tempfile.TemporaryDirectory(prefix="mgw-flood-") as tmp:
        port = free_port()
        env = {**os.environ,
               "MEMORY_GATEWAY_UPSTREAM_BASE_URL": upstream,
               "MEMORY_GATEWAY_STORAGE_ROOT": f"{tmp}/storage",
               "MEMORY_GATEWAY_STORAGE_DATABASE": f"{tmp}/gw.db",
               "MEMORY_GATEWAY_SERVER_PORT": str(port),
               "MEMORY_GATEWAY_SERVER_LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "info"),
               **env_extra}
        keys = {}
        for user in USERS:
            out = subprocess.run([PYTHON, "-m", "gateway", "keys", "create", "--user", user],
                                 env=env, cwd=ROOT, capture_output=True, text=True, check=True)
            keys[user] = out.stdout.strip().splitlines()[-1]
        with process([PYTHON, "-m", "gateway", "serve"], env=env):
            wait_for_port(port)
            yield f"127.0.0.1:{port}", keys


class Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []  # the 19 others' successful requests, seconds
        self.statuses: dict[int, int] = {}


async def user_load(host_port: str, user: str, key: str, per_s: float, connections: int,
                    seconds: float, tally: Tally, record: bool) -> None:
    """Open-loop: requests leave on a fixed schedule of `per_s`, spread over `connections`."""
    host, _, port = host_port.partition(":")
    body = json.dumps({"user_id": user, "memory_type": "episode", "page_size": 5}).encode()
    request = (f"POST {PATH} HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\n"
               f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    interval = connections / per_s
    started = time.monotonic()

    async def connection(offset: float) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        due = started + offset
        while due < started + seconds:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            sent = time.monotonic()
            writer.write(request)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            tally.statuses[status] = tally.statuses.get(status, 0) + 1
            if record and status == 200:
                tally.latencies.append(time.monotonic() - sent)
            due += interval
        writer.close()

    await asyncio.gather(*(connection(n * interval / connections) for n in range(connections)))


async def run(host_port: str, keys: dict[str, str], rate: float, flood: bool,
              seconds: float) -> Tally:
    tally = Tally()
    loads = [user_load(host_port, user, keys[user], rate / 2, 1, seconds, tally,
                       record=user != FLOODER) for user in USERS if user != FLOODER]
    flooder_pace = rate * 10 if flood else rate / 2
    loads.append(user_load(host_port, FLOODER, keys[FLOODER], flooder_pace,
                           8 if flood else 1, seconds, tally, record=False))
    await asyncio.gather(*loads)
    return tally


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate", type=float, default=10.0, help="requests_per_s per credential")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="engine_concurrency_per_user")
    parser.add_argument("--engine-ms", type=float, default=5.0, help="upstream answer delay")
    parser.add_argument("--no-limits", action="store_true",
                        help="the same load with every limit off, for comparison")
    args = parser.parse_args()
    limits = {} if args.no_limits else {"MEMORY_GATEWAY_RATE_LIMITS_REQUESTS_PER_S": str(args.rate),
              "MEMORY_GATEWAY_RATE_LIMITS_BURST": str(int(args.rate)),
              "MEMORY_GATEWAY_RATE_LIMITS_ENGINE_CONCURRENCY_PER_USER": str(args.concurrency)}
    limits["MEMORY_GATEWAY_UPSTREAM_MAX_CONNECTIONS"] = "16"
    os.environ["BENCH_UPSTREAM_DELAY_MS"] = str(args.engine_ms)
    ratios, server_errors = [], 0
    with fast_upstream() as upstream, gateway_with_keys(upstream, limits) as (host_port, keys):
        asyncio.run(run(host_port, keys, args.rate, False, 1.0))  # warm-up
        for round_no in range(1, args.rounds + 1):
            calm = asyncio.run(run(host_port, keys, args.rate, False, args.seconds))
            time.sleep(1.0)  # the flooder's bucket refills between the two
            flooded = asyncio.run(run(host_port, keys, args.rate, True, args.seconds))
            time.sleep(1.0)
            errors = sum(n for s, n in (*calm.statuses.items(), *flooded.statuses.items())
                         if s >= 500)
            server_errors += errors
            ratio = p99(flooded.latencies) / p99(calm.latencies)
            ratios.append(ratio)
            print(f"round {round_no}: others' p99 without flood {p99(calm.latencies) * 1000:6.1f}"
                  f" ms  with flood {p99(flooded.latencies) * 1000:6.1f} ms  ratio {ratio:.2f}"
                  f"  flood statuses {dict(sorted(flooded.statuses.items()))}  5xx {errors}")
    result = statistics.median(ratios)
    verdict = "meets" if result <= TARGET and server_errors == 0 else "MISSES"
    print(f"median p99 ratio {result:.2f}, 5xx {server_errors} ({verdict} the ≤ {TARGET} and "
          f"zero 5xx target)")
    return 0 if verdict == "meets" else 1


if __name__ == "__main__":
    raise SystemExit(main())
