"""Token buckets: one per credential and route class, refilled at `requests_per_s` up to the
burst. `LocalBuckets` keep them in this process (SQLite); `SharedBuckets` in one PostgreSQL row
each, taken by one atomic statement, so every process draws from the same bucket.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import cached_property

from gateway.store import rate_buckets
from gateway.store.database import Database

Headers = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True)
class Policy:
    rate: float  # tokens per second
    capacity: int  # the most tokens a bucket holds: requests at once after idling

    @cached_property
    def limit_header(self) -> tuple[bytes, bytes]:
        return (b"ratelimit-limit", b"%d" % self.capacity)

    @cached_property
    def full_headers(self) -> Headers:
        """The headers after a request drew from a full bucket: the same every time, and the
        common case (a credential below its rate finds its bucket full again)."""
        return _standing(self, self.capacity - 1.0)


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
        out = list(standing(self.policy, self.tokens))
        if not self.allowed:
            out.append((b"retry-after", b"%d" % self.retry_after_s))
        return out


def standing(policy: Policy, tokens: float) -> Headers:
    """The RateLimit headers of a bucket holding `tokens` (>= 0) after a request."""
    if tokens == policy.capacity - 1.0:
        return policy.full_headers
    return _standing(policy, tokens)


def _standing(policy: Policy, tokens: float) -> Headers:
    return (policy.limit_header,
            (b"ratelimit-remaining", b"%d" % int(tokens)),  # tokens >= 0: int() floors
            (b"ratelimit-reset", b"%d" % -((tokens - policy.capacity) // policy.rate)))


# A process holds at most this many buckets in memory; past it, those idle long enough to be
# full again are forgotten (a forgotten bucket starts full: the same thing).
MAX_BUCKETS = 100_000


class LocalBuckets:
    """This process's buckets; exact for one process, per process with several."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        # key -> [tokens, stamp], updated in place
        self._buckets: dict[Hashable, list[float]] = {}

    def tokens_after(self, key: Hashable, policy: Policy) -> float:
        """The tokens left once this request took one; below 0 (by one) when there was none to
        take, and then the bucket is left as it was. The limiter's hot path: no object made."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_full(now, policy)
            bucket = self._buckets[key] = [float(policy.capacity), now]
        # refilled at the rate since the last request, up to the capacity (a clock that stepped
        # back refills nothing)
        tokens = bucket[0] + (now - bucket[1]) * policy.rate if now > bucket[1] else bucket[0]
        if tokens > policy.capacity:
            tokens = float(policy.capacity)
        bucket[1] = now
        if tokens < 1.0:
            bucket[0] = tokens
            return tokens - 1.0
        bucket[0] = tokens - 1.0
        return tokens - 1.0

    def _forget_full(self, now: float, policy: Policy) -> None:
        full_after = policy.capacity / policy.rate
        self._buckets = {key: bucket for key, bucket in self._buckets.items()
                         if now - bucket[1] < full_after}


# How long a process may hold tokens it drew from a shared bucket before spending them; what
# it has not spent by then is dropped (never handed to anyone: a lease can only under-grant).
LEASE_S = 0.25


def lease_size(policy: Policy) -> int:
    """Tokens one draw takes from a shared bucket: a quarter-second of the rate, at most half
    the bucket, at least one. One per draw (exact) for every rate up to 4 per second."""
    return max(1, min(math.ceil(policy.rate * LEASE_S), policy.capacity // 2))


class SharedBuckets:
    """Buckets in the database, drawn from by one statement on the database's own clock.

    A draw takes `lease_size` tokens at once and this process spends them over the next
    LEASE_S, so a credential busy enough to need it costs one statement per lease, not per
    request. Every token spent was taken from the shared row: across processes a credential
    never gets more than its bucket allows; a process may hold (and drop) up to a lease that
    another process was refused. `RateLimit-Remaining` is as of this process's last draw."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.monotonic) -> None:
        self._db = db
        self._clock = clock
        # key -> (tokens in hand, held until, shared tokens left at the draw)
        self._leases: dict[str, tuple[int, float, float]] = {}
        # key -> the draw in flight: requests arriving meanwhile wait for its lease rather
        # than each taking a lease of their own (which would empty the bucket at once)
        self._drawing: dict[str, asyncio.Future[None]] = {}

    def in_hand(self, key: str) -> float | None:
        """A token from this process's lease, without waiting: the tokens the bucket is known
        to hold after it; None when there is no lease in hand (`take` draws one)."""
        lease = self._leases.get(key)
        if lease is None or lease[0] <= 0 or self._clock() >= lease[1]:
            return None
        in_hand = lease[0] - 1
        self._leases[key] = (in_hand, lease[1], lease[2])
        return in_hand + lease[2]

    async def take(self, key: str, policy: Policy) -> Grant:
        while True:
            if (left := self.in_hand(key)) is not None:
                return Grant(True, policy, left)
            drawing = self._drawing.get(key)
            if drawing is None:
                return await self._draw(key, policy, self._clock())
            await drawing

    async def _draw(self, key: str, policy: Policy, now: float) -> Grant:
        drawn = self._drawing[key] = asyncio.get_running_loop().create_future()
        try:
            left, taken = await rate_buckets.take(self._db, key, policy.rate, policy.capacity,
                                                  lease_size(policy))
        finally:
            del self._drawing[key]
            drawn.set_result(None)
        if taken == 0:
            self._leases.pop(key, None)
            return Grant(False, policy, left)
        if len(self._leases) >= MAX_BUCKETS:
            self._leases = {k: v for k, v in self._leases.items() if now < v[1]}
        self._leases[key] = (taken - 1, now + LEASE_S, left)
        return Grant(True, policy, taken - 1 + left)
