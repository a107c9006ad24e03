"""Pass-through benchmark (SPEC §14): requests/s through the gateway ÷ straight to the upstream.

Small JSON POST, 16 connections, direct and gateway runs alternated in pairs in one run; prints
each pair and the median ratio. Target: ≥ 0.25 on the 2-core machine.

`--limits`: instead, requests/s of a gateway with every rate limit and the engine-call cap on
(set high enough never to refuse) ÷ the same gateway with them off, alternated in pairs;
target ≥ 0.95 (the limiter costs ≤ 5 %, SPEC §14).

    .venv/bin/python bench/passthrough.py [--rounds 5] [--seconds 5] [--client native|httpx]
                                          [--limits]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import fast_upstream, gateway, load, paired_ratios  # noqa: E402

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
    args = parser.parse_args()
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


def limiter_cost(args: argparse.Namespace) -> int:
    client = {"MEMORY_GATEWAY_UPSTREAM_CLIENT": args.client}
    with fast_upstream() as upstream, gateway(upstream, client) as (off_url, off_key), \
            gateway(upstream, {**client, **LIMITS_ON}) as (on_url, on_key):
        def run(url: str, key: str, seconds: float) -> float:
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            return load(url + PATH, BODY, headers, args.connections, seconds)

        run(off_url, off_key, 1.0)  # warm-up
        run(on_url, on_key, 1.0)
        result = paired_ratios(args.rounds, lambda: run(off_url, off_key, args.seconds),
                               lambda: run(on_url, on_key, args.seconds),
                               ("limits off", "limits on"))
    verdict = "meets" if result >= LIMITS_TARGET else "MISSES"
    print(f"client={args.client} connections={args.connections} limits on ÷ off: median ratio "
          f"{result:.3f} ({verdict} the {LIMITS_TARGET} target)")
    return 0 if result >= LIMITS_TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
