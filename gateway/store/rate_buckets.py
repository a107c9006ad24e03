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
VALUES (?, ?::float8 - 1, extract(epoch FROM clock_timestamp()), true)
ON CONFLICT (bucket) DO UPDATE SET
    tokens = {_LEVEL} - CASE WHEN {_LEVEL} >= 1 THEN 1 ELSE 0 END,
    granted = {_LEVEL} >= 1,
    stamp = EXCLUDED.stamp
RETURNING tokens, granted
"""


async def take(db: Database, bucket: str, rate: float, capacity: int) -> tuple[float, bool]:
    """(tokens left, granted) after one request's draw from `bucket` (created full)."""
    level = (float(capacity), rate)
    row = await db.write_one(_TAKE, (bucket, float(capacity), *level, *level, *level))
    assert row is not None
    return float(row["tokens"]), bool(row["granted"])
