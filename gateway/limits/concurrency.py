"""The cap on one user's engine calls in flight (`rate_limits.engine_concurrency_per_user`).

A request takes its user's slot at its first engine call and keeps it until the request ends,
so a request that calls the engine twice (an owner probe then the call, an add then its flush)
is refused at its first call or not at all. Counted per process: asyncio is single-threaded, so
counting needs no lock. The pass-through takes and gives back its slot itself, around its engine
calls (gateway/upstream/proxy.py); an owned route's ticket travels in a ContextVar, like
ENGINE_CALLS: the upstream client (gateway/upstream/client.py) calls `ENGINE_TICKET.get()`
before each call, wherever in the route it is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from gateway.errors import RateLimited
from gateway.identity.principal import PRINCIPAL_KEY

RETRY_AFTER_S = 1  # a slot frees as soon as one of the user's calls ends


class EngineSlots:
    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self.in_flight: dict[str, int] = {}

    def ticket(self, scope: Mapping[str, Any]) -> EngineTicket:
        return EngineTicket(self, scope)

    def enter(self, user_id: str) -> None:
        """Take one of the user's slots, or 429 when all are in use."""
        count = self.in_flight.get(user_id, 0)
        if count >= self.per_user:
            raise RateLimited(f"at most {self.per_user} engine calls at once per user")
        self.in_flight[user_id] = count + 1

    def leave(self, user_id: str) -> None:
        """Give back a slot `enter` took."""
        left = self.in_flight[user_id] - 1
        if left:
            self.in_flight[user_id] = left
        else:
            del self.in_flight[user_id]


class EngineTicket:
    """One request's claim on its user's slots: taken at the first engine call, freed once."""

    def __init__(self, slots: EngineSlots, scope: Mapping[str, Any]) -> None:
        self._slots = slots
        self._scope = scope
        self.user_id = ""
        self.held = False
        self.closed = False

    def acting_user(self) -> str:
        """The user the request acts as by its first engine call (a service key's user is
        fixed by its route, after authentication)."""
        principal = self._scope.get(PRINCIPAL_KEY)
        return str(self._scope.get("user_id") or getattr(principal, "user_id", "") or "")

    def enter(self) -> None:
        """Before an engine call: take the user's slot, or 429 when all are in use."""
        if self.held or self.closed:
            return
        user_id = self._scope.get("user_id")  # `acting_user`, without a call when it is set
        self.user_id = user_id if isinstance(user_id, str) and user_id else self.acting_user()
        if not self.user_id:
            return
        self._slots.enter(self.user_id)
        self.held = True

    def close(self) -> None:
        """At the end of the request; later calls from tasks it started are not capped."""
        self.closed = True
        if not self.held:
            return
        self.held = False
        self._slots.leave(self.user_id)


ENGINE_TICKET: ContextVar[EngineTicket | None] = ContextVar("engine_ticket", default=None)
