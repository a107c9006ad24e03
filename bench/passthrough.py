"""Pass-through benchmark (SPEC §14): requests/s through the gateway ÷ straight to the upstream.

Small JSON POST (a valid EverOS `memory/get`) to a Starlette upstream (bench/starlette_upstream.py),
16 connections, direct and gateway runs alternated in pairs in one run; prints each pair and the
median ratio. Target: ≥ 0.5 on the 2-core machine (SPEC §14). bench/passthrough_alt.py runs
variants of the gateway side by side, with CPU time per request.

    .venv/bin/python bench/passthrough.py [--rounds 5] [--seconds 5] [--client native|httpx]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import gateway, load, paired_ratios, starlette_upstream  # noqa: E402

BODY = b'{"user_id": "bench", "memory_type": "episode", "page_size": 5}'
PATH = "/api/v2/memory/get"
TARGET = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--client", default="native", choices=["native", "httpx"])
    args = parser.parse_args()
    json_type = {"Content-Type": "application/json"}
    with starlette_upstream() as upstream, gateway(
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


if __name__ == "__main__":
    raise SystemExit(main())
