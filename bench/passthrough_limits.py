"""Pass-through with and without the rate limits (split from bench/passthrough.py).

Pass-through benchmark (SPEC §14): requests/s through the gateway ÷ straight to the upstream.

Small JSON POST, 16 connections, direct and gateway runs alternated in pairs in one run; prints
each pair and the median ratio. Target: ≥ 0.25 on the 2-core machine.

`--limits`: instead, requests/s of a gateway with every rate limit and the engine-call cap on
(set high enough never to refuse) ÷ the same gateway with them off, alternated in pairs;
target ≥ 0.95 (the limiter costs ≤ 5 %, SPEC §14).

    .venv/bin/python bench/passthrough_limits.py [--rounds 5] [--seconds 5] [--client native|httpx]
                                          [--limits [--postgresql]]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    fast_upstream,
    gateway,
    gateway_process,
    load,
    median,
    paired_ratios,
)

BODY = b'{"user_id": "bench", "memory_type": "episode", "page_size": 5}'
PATH = "/api/v2/memory/get"
TARGET = 0.25
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
                        help="measure limits on ÷ off instead of gateway ÷ direct")
    parser.add_argument("--postgresql", action="store_true",
                        help="with --limits: both gateways on a throw-away PostgreSQL, where "
                        "every request's bucket is one statement")
    args = parser.parse_args()
    if args.limits and args.postgresql:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests import postgres_server

        server = postgres_server.start()
        try:
            return limiter_cost(args, lambda: {
                "MEMORY_GATEWAY_STORAGE_DATABASE": server.create_database()})
        finally:
            server.stop()
    if args.limits:
        return limiter_cost(args)
    json_type = {"Content-Type": "application/json"}
    with fast_upstream() as upstream, gateway(
        upstream, {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client}
    ) as (gateway_url, key):
        auth = {**json_type, "Authorization": f"Bearer {key}"}
        load(gateway_url + PATH, BODY, auth, args.connections, 1.0)  # warm-up
        load(upstream + PATH, BODY, json_type, args.connections, 1.0)
        result = paired_ratios(
            args.rounds,
            lambda: load(upstream + PATH, BODY, json_type, args.connections, args.seconds),
            lambda: load(gateway_url + PATH, BODY, auth, args.connections, args.seconds),
            ("direct", "gateway"),
        )
    verdict = "meets" if result >= TARGET else "MISSES"
    print(f"client={args.client} connections={args.connections} median ratio {result:.3f} "
          f"({verdict} the {TARGET} target)")
    return 0 if result >= TARGET else 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def limiter_cost(args: argparse.Namespace,
                 database: Callable[[], dict[str, str]] = dict) -> int:
    """Limits on ÷ off, as requests/s and as the gateway's CPU time per request: the second
    holds steady on a machine other work shares (it counts only the gateway's own cycles)."""
    client = {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client}
    off_env, on_env = {**client, **database()}, {**client, **LIMITS_ON, **database()}
    cpu_ratios: list[float] = []
    with fast_upstream() as upstream, \
            gateway_process(upstream, off_env) as (off_url, off_key, off_proc), \
            gateway_process(upstream, on_env) as (on_url, on_key, on_proc):
        cpu_per_request: dict[str, float] = {}

        def run(name: str, url: str, key: str, pid: int, seconds: float) -> float:
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            before = cpu_seconds(pid)
            rate = load(url + PATH, BODY, headers, args.connections, seconds)
            cpu_per_request[name] = (cpu_seconds(pid) - before) / (rate * seconds)
            return rate

        def off() -> float:
            return run("off", off_url, off_key, off_proc.pid, args.seconds)

        def on() -> float:
            rate = run("on", on_url, on_key, on_proc.pid, args.seconds)
            cpu_ratios.append(cpu_per_request["on"] / cpu_per_request["off"])
            print(f"  CPU per request: off {cpu_per_request['off'] * 1e6:.0f} us, on "
                  f"{cpu_per_request['on'] * 1e6:.0f} us, ratio {cpu_ratios[-1]:.3f}")
            return rate

        run("off", off_url, off_key, off_proc.pid, 1.0)  # warm-up
        run("on", on_url, on_key, on_proc.pid, 1.0)
        result = paired_ratios(args.rounds, off, on, ("limits off", "limits on"))
    cpu = median(cpu_ratios)
    verdict = "meets" if result >= LIMITS_TARGET else "MISSES"
    print(f"client={args.client} connections={args.connections} limits on ÷ off: median "
          f"requests/s ratio {result:.3f} ({verdict} the {LIMITS_TARGET} target); median CPU "
          f"per request ratio {cpu:.3f} (cost {100 * (cpu - 1):+.1f} %)")
    return 0 if result >= LIMITS_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
