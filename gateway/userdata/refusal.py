"""Whether a credential naming a user id may act (SPEC §17 `auth.erased_users`).

An id whose erasure runs is refused whatever the setting (nothing may be written behind the
erasure's back); a finished one is refused under "refuse" and starts afresh under "fresh".
Answers are kept until the database's "erased" generation moves (an erasure started or finished
by any process: migrations/0012).
"""

from __future__ import annotations

from gateway.store import Database, user_rows

REFUSE = "refuse"
FRESH = "fresh"
_CACHE_LIMIT = 10_000


class ErasedUsers:
    def __init__(self, db: Database, mode: str) -> None:
        self._db = db
        self._mode = mode
        self._generation: int | None = None
        self._refused: dict[str, bool] = {}

    async def is_refused(self, user_id: str) -> bool:
        generation = self._db.generation("erased")  # before the read: a change meanwhile counts
        if generation != self._generation:
            self._refused.clear()
            self._generation = generation
        found = self._refused.get(user_id)
        if found is not None:
            return found
        status = await user_rows.erasure_status(self._db, user_id)
        refused = status == user_rows.ERASING or (status == user_rows.ERASED
                                                  and self._mode == REFUSE)
        if len(self._refused) >= _CACHE_LIMIT:
            self._refused.clear()
        self._refused[user_id] = refused
        return refused
