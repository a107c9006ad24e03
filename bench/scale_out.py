"""Scale-out benchmark (SPEC §14, §15), ratios from one run:

- pass-through on PostgreSQL ÷ on SQLite (same upstream, small JSON POST);
- search (a page of 50 results over 10 sessions × 200 attachments, bench/search_cost.py's)
  on PostgreSQL ÷ on SQLite;
- `server.workers = 2` ÷ 1 worker, pass-through, on PostgreSQL.

Gateway, upstream, load generator and PostgreSQL (a throw-away cluster, started here as the
test suite starts it) share the machine's cores. Target: the PostgreSQL ratios ≥ 0.8.

    .venv/bin/python bench/scale_out.py [--rounds 3] [--seconds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, fast_upstream, gateway, load, paired_ratios  # noqa: E402
from passthrough import BODY, PATH  # noqa: E402
from search_cost import search_page, seed  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests import postgres_server  # noqa: E402

TARGET = 0.8
SEARCH = b'{"query": "trip", "user_id": "bench"}'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    json_type = {"Content-Type": "application/json"}
    server = postgres_server.start()
    print(f"cores: {os.cpu_count()}; PostgreSQL on port {server.port}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            page_file = Path(tmp) / "page.json"
            page_file.write_text(json.dumps(search_page()))
            on_pg = {"MEMORY_GATEWAY_STORAGE_DATABASE": server.create_database()}
            on_pg_2 = {"MEMORY_GATEWAY_STORAGE_DATABASE": server.create_database(),
                       "MEMORY_GATEWAY_SERVER_WORKERS": "2"}
            with fast_upstream(page_file) as upstream, \
                    gateway(upstream) as (lite_url, lite_key), \
                    gateway(upstream, on_pg) as (pg_url, pg_key), \
                    gateway(upstream, on_pg_2) as (two_url, two_key):
                seed(lite_url, lite_key)
                seed(pg_url, pg_key)

                def run(url: str, key: str, path: str, body: bytes, seconds: float) -> float:
                    headers = {**json_type, "Authorization": f"Bearer {key}"}
                    return load(url + path, body, headers, args.connections, seconds)

                for url, key in ((lite_url, lite_key), (pg_url, pg_key), (two_url, two_key)):
                    run(url, key, PATH, BODY, 1.0)  # warm-up
                    run(url, key, "/memories/search", SEARCH, 1.0)
                print("pass-through, PostgreSQL vs SQLite:")
                passthrough = paired_ratios(
                    args.rounds, lambda: run(lite_url, lite_key, PATH, BODY, args.seconds),
                    lambda: run(pg_url, pg_key, PATH, BODY, args.seconds),
                    ("sqlite", "postgresql"))
                print("search, PostgreSQL vs SQLite:")
                search = paired_ratios(
                    args.rounds,
                    lambda: run(lite_url, lite_key, "/memories/search", SEARCH, args.seconds),
                    lambda: run(pg_url, pg_key, "/memories/search", SEARCH, args.seconds),
                    ("sqlite", "postgresql"))
                print("pass-through, server.workers = 2 vs 1 (PostgreSQL):")
                workers = paired_ratios(
                    args.rounds, lambda: run(pg_url, pg_key, PATH, BODY, args.seconds),
                    lambda: run(two_url, two_key, PATH, BODY, args.seconds),
                    ("1 worker", "2 workers"))
    finally:
        server.stop()
    print(f"pass-through PostgreSQL/SQLite {passthrough:.3f}, search PostgreSQL/SQLite "
          f"{search:.3f} (target ≥ {TARGET}); workers 2/1 {workers:.3f} "
          f"(≥ 1.5 only where the cores exist: {os.cpu_count()} here, shared with the load)")
    return 0 if min(passthrough, search) >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
