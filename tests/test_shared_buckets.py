"""Buckets shared on PostgreSQL (gateway/limits/buckets.py, gateway/store/rate_buckets.py):
exact across processes at low rates, one statement per lease at high ones, and a lease never
outlives LEASE_S. Two SharedBuckets on one database stand for two gateway processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.limits.buckets import LEASE_S, Policy, SharedBuckets, lease_size
from gateway.store.database import Database, database_for
from tests.postgres_server import PostgresServer


@pytest.fixture
async def db(postgres: PostgresServer, postgres_database: str) -> AsyncIterator[Database]:
    postgres.empty_tables(postgres_database)
    database = database_for(postgres_database)
    await database.open()
    try:
        yield database
    finally:
        await database.close()


class Counting:
    """The database, counting the statements the buckets send."""

    def __init__(self, db: Database) -> None:
        self.db, self.statements = db, 0
        self.dialect = db.dialect

    async def write_one(self, sql: str, params: Any = ()) -> Any:
        self.statements += 1
        return await self.db.write_one(sql, params)


@pytest.mark.parametrize(("rate", "capacity", "size"), [
    (0.2, 3, 1), (4.0, 40, 1), (4.1, 40, 2), (20.0, 40, 5), (1000.0, 10, 5), (1e6, 10**6, 250000)])
def test_a_lease_is_a_quarter_second_of_the_rate_at_most_half_the_bucket(
    rate: float, capacity: int, size: int
) -> None:
    assert lease_size(Policy(rate, capacity)) == size


async def test_two_processes_draw_from_one_bucket_exactly(db: Database) -> None:
    policy = Policy(rate=0.05, capacity=5)  # a lease of one: every draw is a statement
    first, second = SharedBuckets(db), SharedBuckets(db)
    grants = [await (first if n % 2 else second).take("k engine_read", policy)
              for n in range(12)]
    assert [g.allowed for g in grants] == [True] * 5 + [False] * 7
    assert [g.remaining for g in grants[:5]] == [4, 3, 2, 1, 0]
    assert grants[-1].retry_after_s >= 19  # 0.05 tokens/s: a token is 20 s away
    other = await first.take("other engine_read", policy)
    assert other.allowed and other.remaining == 4


async def test_a_busy_credential_costs_one_statement_per_lease(db: Database) -> None:
    counting = Counting(db)
    now = [0.0]
    buckets = SharedBuckets(counting, clock=lambda: now[0])  # type: ignore[arg-type]
    policy = Policy(rate=1000.0, capacity=2000)  # a lease of 250
    grants = [await buckets.take("k owned", policy) for _ in range(600)]
    assert all(g.allowed for g in grants)
    assert counting.statements == 3  # 250 + 250 + 100 of the third lease
    now[0] += LEASE_S  # the unspent rest of the lease is dropped
    await buckets.take("k owned", policy)
    assert counting.statements == 4


async def test_leases_never_hand_out_more_than_the_bucket_holds(db: Database) -> None:
    policy = Policy(rate=40.0, capacity=20)  # leases of 10; refills 40/s meanwhile
    processes = [SharedBuckets(db) for _ in range(3)]
    rows_before = await db.read_one("SELECT extract(epoch FROM clock_timestamp()) AS t")
    granted = 0
    for n in range(90):
        granted += (await processes[n % 3].take("k engine_read", policy)).allowed
    rows_after = await db.read_one("SELECT extract(epoch FROM clock_timestamp()) AS t")
    elapsed = float(rows_after["t"]) - float(rows_before["t"])
    # The bucket's own allowance over the run: its capacity plus what it refilled.
    assert granted <= policy.capacity + policy.rate * elapsed + 1
    assert granted >= 10  # the first lease at least


async def test_requests_arriving_together_share_one_draw(db: Database) -> None:
    counting = Counting(db)
    buckets = SharedBuckets(counting)  # type: ignore[arg-type]
    policy = Policy(rate=100.0, capacity=100)  # leases of 25: four would empty the bucket
    grants = await asyncio.gather(*(buckets.take("k engine_read", policy) for _ in range(16)))
    assert all(g.allowed for g in grants)
    assert counting.statements == 1


async def test_the_limiter_spends_a_lease_in_hand_without_waiting(db: Database) -> None:
    """A lease's tokens are spent by `admit_now` itself: only a draw is a statement to await;
    the headers say what the bucket holds, the lease's tokens counted."""
    from gateway.config import Settings
    from gateway.identity.principal import PRINCIPAL_KEY, Principal
    from gateway.limits.limiter import LIMIT_HEADERS_KEY, Limiter

    counting = Counting(db)
    settings = Settings().with_values(rate_limits={"requests_per_s": 40, "burst": 40})
    limiter = Limiter(settings, db)
    limiter.shared = SharedBuckets(counting)  # type: ignore[arg-type]
    scope: dict[str, Any] = {PRINCIPAL_KEY: Principal("user", "key_1", "alice")}
    waited, remaining = 0, []
    for _ in range(lease_size(Policy(40, 40)) + 1):
        waiting = limiter.admit_now(scope, "engine_read")
        if waiting is not None:
            waited += 1
            await waiting
        remaining.append(dict(scope[LIMIT_HEADERS_KEY])[b"ratelimit-remaining"])
    assert waited == counting.statements == 2  # a lease of 10, then the next one
    assert remaining[:10] == [b"%d" % n for n in range(39, 29, -1)]
    assert 29 <= int(remaining[10]) <= 39  # the next lease's, after what refilled meanwhile
