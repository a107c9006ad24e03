"""Which sessions the recent moves of the "sessions" cache generation were about.

A search keeps its lookup of a page's sessions (owners, matchers) until one of *those* sessions
changes (gateway/search/index.py), not until any session does: under many users, some other
user claims a session between almost any two searches. Each adapter notes here what it learns
of each move: SQLite from the `session_changes` log its triggers write (migrations/0014),
PostgreSQL from the session named in each notification. A move it cannot attribute (a lost
notification, a log read too late) makes everything before it unknown.
"""

from __future__ import annotations

from collections import deque

# Moves remembered; a lookup kept from before the oldest of them is dropped (the SQLite log
# keeps as many rows, migrations/0014).
LOG_ROWS = 4096


class SessionChanges:
    def __init__(self, keep: int = LOG_ROWS) -> None:
        self._moves: deque[tuple[int, str]] = deque(maxlen=keep)
        # every move after this generation, up to `_latest`, is in `_moves`; None until the
        # first generation is known
        self._known_after: int | None = None
        self._latest = 0

    def start(self, generation: int) -> None:
        """Nothing is known up to `generation` (the first one read, or one after a gap)."""
        self._moves.clear()
        self._known_after = self._latest = generation

    def moved(self, generation: int, session_id: str) -> None:
        """The generation moved to `generation` (increasing) because `session_id` changed."""
        if self._known_after is None:
            self.start(generation)
            return
        if generation <= self._latest:  # numbered again from below: a different history
            self.start(generation)
            return
        if len(self._moves) == self._moves.maxlen:
            self._known_after = self._moves[0][0]  # the oldest is about to be forgotten
        self._moves.append((generation, session_id))
        self._latest = generation

    def since(self, generation: int, until: int) -> frozenset[str] | None:
        """The sessions changed after `generation` up to `until`, or None when that is not
        known: `until` must be the latest move noted (a generation answered while the changes
        could not be read, say, is not), and `generation` no older than the moves kept."""
        known_after = self._known_after
        if known_after is None or until != self._latest or not known_after <= generation <= until:
            return None
        changed = set()
        for moved, session_id in reversed(self._moves):  # the newest first: few are asked for
            if moved <= generation:
                break
            changed.add(session_id)
        return frozenset(changed)
