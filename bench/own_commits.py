"""A process's own commits and the lookups it keeps, on PostgreSQL (docs/decisions.md, "A
process's own commit on PostgreSQL, fenced").

One adapter on a throw-away cluster (started as the test suite starts it); alice owns ten
sessions with an attachment each. Each step: bob claims a new session through the same
adapter (an add by another user of the same gateway process: two write transactions), then
alice's page of her ten sessions is looked up (`AttachmentIndex.lookup`, as a search does).
Printed per round: how many of the lookups were read again from the database (target: only
the first, since bob's claims never touch alice's sessions), the time of a claim plus a lookup,
and of a claim alone (what the fence, waited for at each commit that changes sessions, adds to
a write).

`--baseline CHECKOUT` runs the same steps with the PostgreSQL adapter of another checkout
(another commit) in the same run, rounds alternated.

    .venv/bin/python bench/own_commits.py [--rounds 5] [--steps 100] [--baseline CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, median  # noqa: E402

sys.path.insert(0, str(ROOT))
import gateway.store.postgresql as this_adapter  # noqa: E402
from gateway.search.index import AttachmentIndex  # noqa: E402
from tests import postgres_server  # noqa: E402
from tests.attachment_helpers import add_mappings as claim  # noqa: E402

SESSIONS = 10


def adapter_of(checkout: str) -> ModuleType:
    """Another checkout's PostgreSQL adapter, loaded beside this one."""
    path = Path(checkout).resolve() / "gateway" / "store" / "postgresql.py"
    spec = importlib.util.spec_from_file_location("baseline_postgresql", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def one_round(adapter: ModuleType, url: str, tag: str, steps: int, lookups: bool
                    ) -> tuple[int, float]:
    """(lookups read again, µs a step)."""
    db = adapter.PostgresDatabase(url)
    await db.open()
    try:
        index = AttachmentIndex(db)
        page = [f"{tag}-alice-{s}" for s in range(SESSIONS)]
        for session in page:
            await claim(db, "alice", session, f"{session}.png")
        await asyncio.sleep(0.05)  # the claims' own notifications in
        read_again = 0
        started = time.perf_counter()
        for step in range(steps):
            await claim(db, "bob", f"{tag}-bob-{step}")
            if lookups:
                kept = index._lookups.get(("alice", tuple(page), True))
                read_again += await index.lookup("alice", page) is not kept
        return read_again, (time.perf_counter() - started) / steps * 1e6
    finally:
        await db.close()


async def run(url: str, adapters: dict[str, ModuleType], rounds: int, steps: int) -> None:
    figures: dict[tuple[str, bool], list[tuple[int, float]]] = {}
    for round_no in range(rounds):
        order = list(adapters.items())
        for name, adapter in order if round_no % 2 == 0 else reversed(order):
            for lookups in (True, False):
                tag = f"r{round_no}-{name.replace(' ', '_')}-{int(lookups)}"
                figures.setdefault((name, lookups), []).append(
                    await one_round(adapter, url, tag, steps, lookups))
    for name in adapters:
        with_lookups = figures[(name, True)]
        claims = figures[(name, False)]
        print(f"{name}: lookups read again {[n for n, _ in with_lookups]} of {steps}; "
              f"claim + lookup {median([t for _, t in with_lookups]) / 1000:.2f} ms, "
              f"claim alone {median([t for _, t in claims]) / 1000:.2f} ms (medians of "
              f"{rounds} rounds)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--baseline", metavar="CHECKOUT")
    args = parser.parse_args()
    adapters = {"this checkout": this_adapter}
    if args.baseline:
        adapters[f"baseline {args.baseline}"] = adapter_of(args.baseline)
    server = postgres_server.start()
    try:
        asyncio.run(run(server.create_database(), adapters, args.rounds, args.steps))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
