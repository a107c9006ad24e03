"""The request's admission: its credential's bucket for its route class, its user's engine
ticket, and the headers that say where it stands (RateLimit-*, Retry-After)."""

from __future__ import annotations

from collections.abc import Awaitable, MutableMapping
from typing import Any

from gateway.config import RouteClassLimits, Settings
from gateway.errors import RateLimited
from gateway.identity.principal import PRINCIPAL_KEY, Principal
from gateway.limits.buckets import Grant, LocalBuckets, Policy, SharedBuckets, standing
from gateway.limits.classes import ENGINE_READ, ENGINE_WRITE, ROUTE_CLASSES
from gateway.limits.concurrency import RETRY_AFTER_S, EngineSlots
from gateway.store.database import Database
from gateway.upstream.routes import EngineRoute

# Scope key: the headers every response of this request carries (added in gateway/app.py).
LIMIT_HEADERS_KEY = "gateway.limit_headers"


def class_policy(settings: Settings, route_class: str) -> Policy | None:
    """A class's policy: its own `[rate_limits.<class>]` values, else `[rate_limits]`'s; None
    when its rate is 0 (no limit)."""
    own: RouteClassLimits = getattr(settings, f"rate_limits_{route_class}")
    rate = own.requests_per_s or settings.rate_limits.requests_per_s
    burst = own.burst or settings.rate_limits.burst
    if rate <= 0:
        return None
    return Policy(rate=rate, capacity=max(1, burst))


class Limiter:
    def __init__(self, settings: Settings, db: Database) -> None:
        self.policies: dict[str, Policy | None] = {
            name: class_policy(settings, name) for name in ROUTE_CLASSES}
        self.enabled = any(self.policies.values())
        self.local = LocalBuckets() if db.dialect != "postgresql" else None
        self.shared = SharedBuckets(db)  # drawn from when there are no local buckets
        per_user = settings.rate_limits.engine_concurrency_per_user
        self.slots = EngineSlots(per_user) if per_user > 0 else None

    def admit_engine(self, scope: MutableMapping[str, Any], route: EngineRoute
                     ) -> Awaitable[None] | None:
        """The proxy's admission of an engine route: a read when the engine only reads by it,
        else a write (gateway/limits/classes.py `engine_class`). As `admit_now`."""
        return self.admit_now(scope, ENGINE_READ if route.read_only else ENGINE_WRITE)

    async def admit(self, scope: MutableMapping[str, Any], route_class: str) -> None:
        """Draw one token for the request's credential, or 429 with Retry-After."""
        waiting = self.admit_now(scope, route_class)
        if waiting is not None:
            await waiting

    def admit_now(self, scope: MutableMapping[str, Any], route_class: str
                  ) -> Awaitable[None] | None:
        """`admit` without a coroutine where nothing waits: this process's buckets (SQLite), or
        a shared bucket's lease in hand. Otherwise the draw to await (a statement on
        PostgreSQL). It runs on every request, so it makes nothing but the headers."""
        policy = self.policies[route_class]
        principal: Principal | None = scope.get(PRINCIPAL_KEY)
        if policy is None or principal is None:
            return None
        if self.local is not None:
            tokens = self.local.tokens_after((principal.credential_id, route_class), policy)
        else:
            key = f"{principal.credential_id} {route_class}"
            left = self.shared.in_hand(key)
            if left is None:
                return self._draw(scope, route_class, policy, key)
            tokens = left
        if tokens >= 0.0:
            scope[LIMIT_HEADERS_KEY] = standing(policy, tokens)
            return None
        scope[LIMIT_HEADERS_KEY] = Grant(False, policy, tokens + 1.0).headers()
        raise _refused(policy, route_class)

    async def _draw(self, scope: MutableMapping[str, Any], route_class: str, policy: Policy,
                    key: str) -> None:
        grant = await self.shared.take(key, policy)
        scope[LIMIT_HEADERS_KEY] = grant.headers()
        if not grant.allowed:
            raise _refused(policy, route_class)


def _refused(policy: Policy, route_class: str) -> RateLimited:
    return RateLimited(f"more than {policy.rate:g} {route_class} requests per second "
                       f"(burst {policy.capacity}) for this credential")


def with_retry_after(scope: MutableMapping[str, Any]) -> None:
    """A 429 always says when to retry: a concurrency refusal (raised by the upstream client,
    which has no scope) gets RETRY_AFTER_S beside whatever the bucket said."""
    headers = list(scope.get(LIMIT_HEADERS_KEY, ()))
    if not any(name == b"retry-after" for name, _ in headers):
        headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
    scope[LIMIT_HEADERS_KEY] = headers
