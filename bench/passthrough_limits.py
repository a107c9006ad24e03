"""The limiter's cost on the pass-through (SPEC §14: at most 5 %).

Requests/s of a gateway with every rate limit and the engine-call cap on (set high enough never
to refuse: every request still draws from its bucket and takes an engine slot) ÷ the same
gateway with them off, both in front of one fast upstream, in pairs whose order alternates;
also the gateway's CPU time per request, on ÷ off. Target: requests/s ratio ≥ 0.95. The
pass-through itself is bench/passthrough.py; the limiter alone, in process,
bench/limiter_cost.py. `--calibrate` runs the same pairs with the limits off on both gateways:
what two identical gateways give on this machine, the noise a 5 % figure must stand out of.

    .venv/bin/python bench/passthrough_limits.py [--rounds 5] [--seconds 5]
        [--client native|httpx] [--postgresql] [--calibrate]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cpu_seconds, fast_upstream, gateway_process, load, median, paired_ratios  # noqa: E402,E501
from passthrough import BODY, PATH  # noqa: E402

LIMITS_TARGET = 0.95
# Limits that never refuse the benchmark's load: every request still draws from its bucket and
# takes an engine slot.
LIMITS_ON = {"MEMORY_GATEWAY_RATE_LIMITS_REQUESTS_PER_S": "1000000",
             "MEMORY_GATEWAY_RATE_LIMITS_BURST": "1000000",
             "MEMORY_GATEWAY_RATE_LIMITS_ENGINE_CONCURRENCY_PER_USER": "1000"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--client", default="native", choices=["native", "httpx"])
    parser.add_argument("--limits", action="store_true",
                        help="accepted for older command lines: this is all it measures")
    parser.add_argument("--postgresql", action="store_true",
                        help="both gateways on a throw-away PostgreSQL, where every request's "
                        "bucket is one statement")
    parser.add_argument("--calibrate", action="store_true",
                        help="limits off on both gateways: the figures of two identical ones")
    args = parser.parse_args()
    if args.postgresql:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests import postgres_server

        server = postgres_server.start()
        try:
            return limiter_cost(args, lambda: {
                "MEMORY_GATEWAY_STORAGE_DATABASE": server.create_database()})
        finally:
            server.stop()
    return limiter_cost(args)


def limiter_cost(args: argparse.Namespace,
                 database: Callable[[], dict[str, str]] = dict) -> int:
    """Limits on ÷ off, as requests/s and as the gateway's CPU time per request: the second
    holds steady on a machine other work shares (it counts only the gateway's own cycles)."""
    client = {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client}
    limits = {} if args.calibrate else LIMITS_ON
    off_env, on_env = {**client, **database()}, {**client, **limits, **database()}
    # each side's CPU time per request, one entry per round: the i-th of each form a pair
    cpu_per_request: dict[str, list[float]] = {"off": [], "on": []}
    with fast_upstream() as upstream, \
            gateway_process(upstream, off_env) as (off_url, off_key, off_proc), \
            gateway_process(upstream, on_env) as (on_url, on_key, on_proc):

        def run(name: str, url: str, key: str, pid: int, seconds: float) -> float:
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            before = cpu_seconds(pid)
            rate = load(url + PATH, BODY, headers, args.connections, seconds)
            cpu_per_request[name].append((cpu_seconds(pid) - before) / (rate * seconds))
            print(f"  CPU per request: {name} {cpu_per_request[name][-1] * 1e6:.0f} us")
            return rate

        run("off", off_url, off_key, off_proc.pid, 1.0)  # warm-up
        run("on", on_url, on_key, on_proc.pid, 1.0)
        for runs in cpu_per_request.values():
            runs.clear()
        labels = ("limits off", "limits off too" if args.calibrate else "limits on")
        result = paired_ratios(
            args.rounds,
            lambda: run("off", off_url, off_key, off_proc.pid, args.seconds),
            lambda: run("on", on_url, on_key, on_proc.pid, args.seconds),
            labels)
    cpu = median([on / off for on, off in zip(cpu_per_request["on"], cpu_per_request["off"],
                                               strict=True)])
    figures = (f"median requests/s ratio {result:.3f}; median CPU per request ratio {cpu:.3f} "
               f"({100 * (cpu - 1):+.1f} %)")
    if args.calibrate:
        print(f"client={args.client} connections={args.connections} two gateways, limits off "
              f"on both (the noise of this sitting): {figures}")
        return 0
    verdict = "meets" if result >= LIMITS_TARGET else "MISSES"
    print(f"client={args.client} connections={args.connections} limits on ÷ off: {figures}; "
          f"{verdict} the {LIMITS_TARGET} requests/s target")
    return 0 if result >= LIMITS_TARGET else 1

if __name__ == "__main__":
    raise SystemExit(main())
