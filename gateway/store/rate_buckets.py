"""Rate-limit buckets shared by every process on PostgreSQL (migrations/0013): one row per
credential and route class, drawn from by a single upsert on the server's clock, so two
processes can never both spend the last token."""

from __future__ import annotations

from gateway.store.database import Database

# The refilled level, capped at the capacity: what the row holds `now - stamp` after its last
# draw (a clock that stepped back refills nothing).
_LEVEL = "LEAST(?::float8, b.tokens + GREATEST(0, EXCLUDED.stamp - b.stamp) * ?::float8)"
_TAKE = f"""
INSERT INTO rate_buckets AS b (bucket, tokens, stamp, granted)
VALUES (?, ?::float8 - LEAST(?::int, ?::int), extract(epoch FROM clock_timestamp()),
        LEAST(?::int, ?::int))
ON CONFLICT (bucket) DO UPDATE SET
    granted = LEAST(?::int, FLOOR({_LEVEL})::int),
    tokens = {_LEVEL} - LEAST(?::int, FLOOR({_LEVEL})::int),
    stamp = EXCLUDED.stamp
RETURNING tokens, granted
"""


async def take(db: Database, bucket: str, rate: float, capacity: int, wanted: int
               ) -> tuple[float, int]:
    """(tokens left, tokens taken) after drawing up to `wanted` whole tokens from `bucket`
    (created full); 0 taken when it holds less than one."""
    level = (float(capacity), rate)
    row = await db.write_one(_TAKE, (
        bucket, float(capacity), wanted, capacity, wanted, capacity,
        wanted, *level, *level, wanted, *level))
    assert row is not None
    return float(row["tokens"]), int(row["granted"])
