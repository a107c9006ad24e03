"""Token buckets: one per credential and route class, refilled at `requests_per_s` up to the
burst. `LocalBuckets` keep them in this process (SQLite); `SharedBuckets` in one PostgreSQL row
each, taken by one atomic statement, so every process draws from the same bucket.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.store import rate_buckets
from gateway.store.database import Database


@dataclass(frozen=True)
class Policy:
    rate: float  # tokens per second
    capacity: int  # the most tokens a bucket holds: requests at once after idling


class Grant:
    """One request's draw from its bucket, and what the RateLimit headers say about it
    (a plain class: one is made per request)."""

    __slots__ = ("allowed", "policy", "tokens")

    def __init__(self, allowed: bool, policy: Policy, tokens: float) -> None:
        self.allowed = allowed
        self.policy = policy
        self.tokens = tokens  # left after this request

    @property
    def remaining(self) -> int:
        return max(0, math.floor(self.tokens))

    @property
    def reset_s(self) -> int:
        """Seconds until the bucket is full again."""
        return max(0, math.ceil((self.policy.capacity - self.tokens) / self.policy.rate))

    @property
    def retry_after_s(self) -> int:
        """Seconds until the next request will be allowed (at least 1)."""
        return max(1, math.ceil((1.0 - self.tokens) / self.policy.rate))

    def headers(self) -> list[tuple[bytes, bytes]]:
        out = [
            (b"ratelimit-limit", b"%d" % self.policy.capacity),
            (b"ratelimit-remaining", b"%d" % self.remaining),
            (b"ratelimit-reset", b"%d" % self.reset_s),
        ]
        if not self.allowed:
            out.append((b"retry-after", b"%d" % self.retry_after_s))
        return out


def draw(tokens: float, elapsed_s: float, policy: Policy) -> tuple[float, bool]:
    """(tokens left, allowed) for one request on a bucket holding `tokens` `elapsed_s` ago."""
    tokens = min(float(policy.capacity), tokens + max(0.0, elapsed_s) * policy.rate)
    if tokens >= 1.0:
        return tokens - 1.0, True
    return tokens, False


class LocalBuckets:
    """This process's buckets; exact for one process, per process with several."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, stamp)

    async def take(self, key: str, policy: Policy) -> Grant:
        return self.take_now(key, policy)

    def take_now(self, key: str, policy: Policy) -> Grant:
        """`take` without a coroutine: nothing here waits (the limiter's hot path)."""
        now = self._clock()
        tokens, stamp = self._buckets.get(key, (float(policy.capacity), now))
        tokens, allowed = draw(tokens, now - stamp, policy)
        self._buckets[key] = (tokens, now)
        return Grant(allowed, policy, tokens)


class SharedBuckets:
    """Buckets in the database, drawn from by one statement on the database's own clock."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def take(self, key: str, policy: Policy) -> Grant:
        tokens, allowed = await rate_buckets.take(self._db, key, policy.rate, policy.capacity)
        return Grant(allowed, policy, tokens)
