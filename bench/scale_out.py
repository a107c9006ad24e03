"""Scale-out benchmark (SPEC §14, §15), ratios from one run:

- pass-through on PostgreSQL + S3 ÷ on SQLite + local disk (same upstream, small JSON POST);
- search (a page of 50 results over 10 sessions × 200 attachments stored by the gateway,
  bench/search_cost.py's) on PostgreSQL + S3 ÷ on SQLite + local disk;
- `server.workers = 2` ÷ 1 worker, pass-through, on PostgreSQL.

Gateway, upstream, load generator, PostgreSQL (a throw-away cluster) and SeaweedFS (S3), both
started here as the test suite starts them, share the machine's cores. Target: the
PostgreSQL + S3 ratios ≥ 0.8.

On a machine shared with other work, requests/s swing with the neighbours' load, so each run
also reports CPU per request: the CPU seconds the gateway's processes and PostgreSQL's spent
during the run ÷ requests served, which the neighbours do not change much. Its ratio is given
the same way round (SQLite's cost ÷ PostgreSQL's: ≥ 0.8 means at most 25 % more).

    .venv/bin/python bench/scale_out.py [--rounds 3] [--seconds 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, fast_upstream, gateway_process, load, median  # noqa: E402
from passthrough import BODY, PATH  # noqa: E402
from search_cost import page_bytes, seed  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests import postgres_server  # noqa: E402
from tests.s3_server import seaweedfs  # noqa: E402

TARGET = 0.8
SEARCH = b'{"query": "trip", "user_id": "bench"}'
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and all its descendants (user + system)."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICKS
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += cpu_seconds(int(child))
    except (OSError, IndexError):
        pass
    return total


def measured(run: Callable[[], float], seconds: float, pids: list[int]) -> tuple[float, float]:
    """(requests/s, CPU ms per request of `pids` and their descendants)."""
    before = sum(cpu_seconds(pid) for pid in pids)
    rate = run()
    spent = sum(cpu_seconds(pid) for pid in pids) - before
    return rate, 1000 * spent / max(1.0, rate * seconds)


def compare(rounds: int, base: Callable[[], tuple[float, float]],
            other: Callable[[], tuple[float, float]], labels: tuple[str, str]
            ) -> tuple[float, float]:
    """Alternated pairs; (median ratio of requests/s, median ratio of CPU per request)."""
    rates, costs = [], []
    for number in range(1, rounds + 1):
        (rate_a, cpu_a), (rate_b, cpu_b) = base(), other()
        rates.append(rate_b / rate_a)
        costs.append(cpu_a / cpu_b)
        print(f"round {number}: {labels[0]} {rate_a:7.0f} req/s {cpu_a:.3f} ms CPU/req  "
              f"{labels[1]} {rate_b:7.0f} req/s {cpu_b:.3f} ms CPU/req  "
              f"ratios {rate_b / rate_a:.3f} / {cpu_a / cpu_b:.3f}")
    return median(rates), median(costs)


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
        with tempfile.TemporaryDirectory() as tmp, seaweedfs("bench") as s3:
            print(f"S3 (SeaweedFS) at {s3.endpoint_url}")
            page_file = Path(tmp) / "page.json"
            page_file.write_bytes(page_bytes())

            def on_pg(prefix: str, **more: str) -> dict[str, str]:
                return {"MEMORY_GATEWAY_STORAGE_DATABASE": server.create_database(),
                        "MEMORY_GATEWAY_STORAGE_FILES": f"s3://{s3.bucket}/{prefix}",
                        "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": s3.endpoint_url,
                        "MEMORY_GATEWAY_STORAGE_S3_REGION": s3.region, **s3.env(), **more}
            with fast_upstream(page_file) as upstream, \
                    gateway_process(upstream) as (lite_url, lite_key, lite), \
                    gateway_process(upstream, on_pg("one")) as (pg_url, pg_key, pg), \
                    gateway_process(upstream, on_pg("two", MEMORY_GATEWAY_SERVER_WORKERS="2")
                                    ) as (two_url, two_key, two):
                seed(lite_url, lite_key, stored=True, urls=False)
                seed(pg_url, pg_key, stored=True, urls=False)

                def run(url: str, key: str, path: str, body: bytes, pids: list[int]
                        ) -> tuple[float, float]:
                    headers = {**json_type, "Authorization": f"Bearer {key}"}
                    return measured(lambda: load(url + path, body, headers, args.connections,
                                                 args.seconds), args.seconds, pids)

                for url, key in ((lite_url, lite_key), (pg_url, pg_key), (two_url, two_key)):
                    headers = {**json_type, "Authorization": f"Bearer {key}"}
                    load(url + PATH, BODY, headers, args.connections, 1.0)  # warm-up
                    load(url + "/memories/search", SEARCH, headers, args.connections, 1.0)
                costs = [server.pid, s3.pid]
                print("pass-through, SQLite + disk vs PostgreSQL + S3:")
                passthrough = compare(
                    args.rounds, lambda: run(lite_url, lite_key, PATH, BODY, [lite.pid, *costs]),
                    lambda: run(pg_url, pg_key, PATH, BODY, [pg.pid, *costs]),
                    ("sqlite+disk", "postgresql+s3"))
                print("search, SQLite + disk vs PostgreSQL + S3:")
                search = compare(
                    args.rounds,
                    lambda: run(lite_url, lite_key, "/memories/search", SEARCH,
                                [lite.pid, *costs]),
                    lambda: run(pg_url, pg_key, "/memories/search", SEARCH, [pg.pid, *costs]),
                    ("sqlite+disk", "postgresql+s3"))
                print("pass-through, server.workers 1 vs 2 (PostgreSQL):")
                workers = compare(
                    args.rounds, lambda: run(pg_url, pg_key, PATH, BODY, [pg.pid, *costs]),
                    lambda: run(two_url, two_key, PATH, BODY, [two.pid, *costs]),
                    ("1 worker", "2 workers"))
    finally:
        server.stop()
    print(f"PostgreSQL + S3 / SQLite + disk: pass-through {passthrough[0]:.3f} req/s, "
          f"{passthrough[1]:.3f} CPU/req; search {search[0]:.3f} req/s, {search[1]:.3f} CPU/req "
          f"(target ≥ {TARGET})")
    print(f"server.workers 2/1: {workers[0]:.3f} req/s, {workers[1]:.3f} CPU/req "
          f"(≥ 1.5 only where the cores exist: {os.cpu_count()} here, shared with the load "
          f"generator and the upstream)")
    return 0 if min(passthrough[0], search[0]) >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
