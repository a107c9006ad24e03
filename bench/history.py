"""History benchmark (SPEC §14): a 50-message page of a 100,000-message conversation, in process,
on SQLite and on PostgreSQL.

Builds a temporary database with the migrations applied (a SQLite file, or a database on a
throw-away PostgreSQL cluster started here as the test suite starts it), appends 100,000
messages to one conversation through the store's bulk write (four per millisecond, so the id
tie-break is exercised), then times 200 page reads at random cursors twice: through the store
calls the `GET /conversations/{id}/messages` handler makes, and through the whole ASGI app
(auth, routing, JSON) with an in-process client. Prints p50/p95/p99 and the page query's plan.
Target: p50 < 5 ms on both.

    .venv/bin/python bench/history.py [--database sqlite|postgresql|both] [--messages N]
                                      [--requests N] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import create_app  # noqa: E402
from gateway.config import Settings  # noqa: E402
from gateway.identity.auth import generate_key, hash_secret  # noqa: E402
from gateway.store import agents, conversations, keys, messages  # noqa: E402
from gateway.store.cursors import Cursor, encode_cursor  # noqa: E402
from gateway.store.database import Database, database_for, is_postgresql, run_sync  # noqa: E402
from gateway.store.postgresql import translate  # noqa: E402
from gateway.store.sqlite import connect_sync  # noqa: E402
from tests import postgres_server  # noqa: E402

USER = "bench-user"
BATCH = 10_000
START_MS = 1_700_000_000_000


async def build(db: Database, count: int) -> str:
    agent = await agents.create(db, USER, "bench agent", {}, None)
    conversation = await conversations.default_for(db, USER, agent.id)
    for offset in range(0, count, BATCH):
        batch = [
            (START_MS + n // 4, "user" if n % 2 else "assistant", f"message {n}")
            for n in range(offset, min(offset + BATCH, count))
        ]
        await messages.bulk_append(db, USER, conversation.id, batch)
    return conversation.id


async def timed(work: Callable[[Cursor], Awaitable[None]], cursors: list[Cursor],
                requests: int) -> tuple[float, float, float]:
    rng = random.Random(7)
    for _ in range(20):  # warm the page cache and the connections
        await work(rng.choice(cursors))
    timings = []
    for _ in range(requests):
        before = rng.choice(cursors)
        t0 = time.perf_counter()
        await work(before)
        timings.append((time.perf_counter() - t0) * 1000)
    cuts = statistics.quantiles(timings, n=100)
    return cuts[49], cuts[94], cuts[98]


async def _insert_key(path: str) -> str:
    db = database_for(path)
    await db.open()
    try:
        new = generate_key(USER)
        await keys.insert(db, new.key_id, new.user_id, hash_secret(new.secret))
        return new.token
    finally:
        await db.close()


def api_key(path: str) -> str:
    return run_sync(_insert_key(path))


def report(where: str, requests: int, limit: int, cuts: tuple[float, float, float]) -> None:
    p50, p95, p99 = cuts
    print(f"{where}: {requests} pages of {limit}: p50 {p50:.3f} ms, p95 {p95:.3f} ms, "
          f"p99 {p99:.3f} ms")


async def run(database: str, count: int, requests: int, limit: int) -> None:
    """The benchmark on `database`: a SQLite file path or a postgresql:// URL."""
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings().with_values(
            upstream={"base_url": "http://engine.invalid"},
            storage={"root": folder, "database": database},
        )
        gateway = create_app(settings)
        async with gateway.running():
            db = gateway.services.db
            began = time.perf_counter()
            conversation_id = await build(db, count)
            print(f"built {count} messages in {time.perf_counter() - began:.1f} s")
            rows = await db.read(
                "SELECT created_at_ms, id FROM conversation_messages WHERE user_id = ?", (USER,)
            )
            cursors = [Cursor(row["created_at_ms"], row["id"]) for row in rows]

            async def store_page(before: Cursor) -> None:
                # What the handler does: check the conversation, read one page.
                conversation = await conversations.get(db, USER, conversation_id)
                found, _ = await messages.page(db, USER, conversation.id, limit, before)
                assert len(found) <= limit

            report("store   ", requests, limit, await timed(store_page, cursors, requests))

            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(gateway), base_url="http://gateway.bench",
                headers={"Authorization": f"Bearer {api_key(settings.storage.database)}"},
            )
            url = f"/conversations/{conversation_id}/messages"

            async def http_page(before: Cursor) -> None:
                response = await client.get(
                    url, params={"limit": limit, "before": encode_cursor(*before)}
                )
                assert response.status_code == 200, response.text

            async with client:
                report("ASGI app", requests, limit, await timed(http_page, cursors, requests))
            print("(target p50 < 5 ms)")
            cursor = rows[len(rows) // 2]
        plans = (
            ("newest page", False, (conversation_id, USER, limit + 1)),
            ("page before a cursor", True,
             (conversation_id, USER, cursor["created_at_ms"], cursor["id"], limit + 1)),
        )
        if is_postgresql(database):
            await explain_postgresql(database, plans)
        else:
            explain_sqlite(database, plans)


Plans = tuple[tuple[str, bool, tuple[object, ...]], ...]


def explain_sqlite(path: str, plans: Plans) -> None:
    conn = connect_sync(path)
    try:
        for title, with_cursor, params in plans:
            plan = conn.execute(
                "EXPLAIN QUERY PLAN " + messages.page_sql(with_cursor), params
            ).fetchall()
            print(f"EXPLAIN QUERY PLAN ({title}):")
            for row in plan:
                print(f"  {row['detail']}")
    finally:
        conn.close()


async def explain_postgresql(url: str, plans: Plans) -> None:
    """The plan PostgreSQL runs for each page query, with real parameters (a custom plan) and
    as a prepared statement's generic plan, with the time the execution took."""
    conn = await asyncpg.connect(url)
    try:
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            for title, with_cursor, params in plans:
                sql = "EXPLAIN (ANALYZE, COSTS OFF) " + translate(messages.page_sql(with_cursor))
                print(f"EXPLAIN ANALYZE ({title}, {mode.split('_')[1]} plan):")
                for row in await conn.fetch(sql, *params):
                    print(f"  {row[0]}")
    finally:
        await conn.close()


async def on_sqlite(count: int, requests: int, limit: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        await run(str(Path(folder) / "bench.db"), count, requests, limit)


async def on_postgresql(count: int, requests: int, limit: int) -> None:
    server = postgres_server.start()  # a throw-away cluster, stopped by PID below
    try:
        await run(server.create_database(), count, requests, limit)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="history page benchmark (SPEC §14)")
    parser.add_argument("--database", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--limit", type=int, default=50)
    args = parser.parse_args()
    for name, bench in (("sqlite", on_sqlite), ("postgresql", on_postgresql)):
        if args.database in (name, "both"):
            print(f"== {name}")
            asyncio.run(bench(args.messages, args.requests, args.limit))


if __name__ == "__main__":
    main()
