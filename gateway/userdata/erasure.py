"""Erasing a user (SPEC §17): recorded first, then the engine, the files, the rows; resumable.

Order, and why: the erasure row and the revocation of every key commit together, before
anything is removed, so from then on no credential naming the user gets in (ErasedUsers refuses
an id while its erasure runs, whatever `auth.erased_users` says) and a crash at any later point
leaves a row saying what to finish. The engine goes first of the removals because it needs what
the rows know (agents, scopes); a failed engine call stops the erasure with everything else in
place, to be finished by the next call. Files go before rows, rows in batches (each batch and its
count in one transaction), the keys last; only then is the id forgotten in clear.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.attachments.files import FileStore
from gateway.identity.auth import validate_user_id
from gateway.store import Database, audit, user_rows
from gateway.store.user_rows import ERASED, USER_TABLES, Erasure
from gateway.upstream.client import UpstreamClient
from gateway.upstream.flavors.base import Flavor
from gateway.userdata.engine import data_owner, erase_upstream

log = logging.getLogger("gateway.userdata")
BATCH_ROWS = 1000
FILE_BATCH = 100


@dataclass(frozen=True)
class Progress:
    """Where an erasure stands: the step it is on and what it removed so far, per kind."""

    step: str  # "engine" | "files" | a table name | "done"
    counts: dict[str, int]


ProgressCallback = Callable[[Progress], None]


def answer(user_id: str, erasure: Erasure) -> dict[str, Any]:
    """SPEC §17's answer: `{userId, status, counts, engine: {erased, remaining}}`."""
    return {
        "userId": user_id,
        "status": erasure.status,
        "counts": dict(sorted(erasure.counts.items())),
        "engine": {"erased": bool(erasure.engine.get("erased")),
                   "remaining": list(erasure.engine.get("remaining", []))},
    }


class Eraser:
    def __init__(self, db: Database, files: FileStore, upstream: UpstreamClient,
                 flavor: Flavor) -> None:
        self.db = db
        self.files = files
        self.upstream = upstream
        self.flavor = flavor

    async def erase(self, user_id: str, admin_key_id: str,
                    progress: ProgressCallback | None = None) -> Erasure:
        """Erase the user, or finish an erasure a crash interrupted; a finished one is returned
        as it is (nothing is done twice)."""
        validate_user_id(user_id)
        erasure, started = await user_rows.begin_erasure(self.db, user_id, admin_key_id)
        if erasure.status == ERASED:
            return erasure
        if started:
            await audit.record(self.db, admin_key_id, "users.erase", user_id)
        return await self._run(user_id, erasure, progress or (lambda _: None))

    async def resume_all(self) -> list[str]:
        """Finish every erasure a crash left open (start-up); the user ids finished."""
        done = []
        for user_id in await user_rows.unfinished(self.db):
            found = await user_rows.erasure(self.db, user_id)
            if found is None or found.status == ERASED:
                continue
            await self._run(user_id, found, lambda _: None)
            done.append(user_id)
        return done

    async def _run(self, user_id: str, erasure: Erasure, progress: ProgressCallback) -> Erasure:
        counts = dict(erasure.counts)

        def moved(step: str, kind: str = "", removed: int = 0) -> None:
            if kind:
                counts[kind] = counts.get(kind, 0) + removed
            progress(Progress(step, dict(counts)))

        if not erasure.engine.get("done"):
            moved("engine")
            owner = await data_owner(self.db, user_id)
            erased = await erase_upstream(self.upstream, self.flavor, owner)
            # An earlier erasure's `remaining` (a `fresh` id erased again) is kept: the engine
            # still holds those sessions whatever this pass could delete.
            remaining = {*erasure.engine.get("remaining", []),
                         *([] if erased else erasure.sessions)}
            await user_rows.settle_engine(self.db, user_id, {
                "done": True, "erased": erased, "remaining": sorted(remaining)})
        # Again until a pass finds nothing: a request of the user's already past the refusal
        # when the erasure began may still have written a row or a file behind the first pass.
        while await self._remove_everything(user_id, moved):
            pass
        finished = await user_rows.finish_erasure(self.db, user_id)
        progress(Progress("done", dict(finished.counts)))
        log.info("erased user %s: %s", user_id, finished.counts)
        return finished

    async def _remove_everything(self, user_id: str,
                                 moved: Callable[[str, str, int], None]) -> int:
        """One pass over the user's files and then their rows; what it removed."""
        removed_now = 0
        moved("files", "", 0)
        batch: list[str] = []
        async for stored in self.files.user_files(user_id):
            batch.append(stored.folder)
            if len(batch) >= FILE_BATCH:
                await self._remove_files(user_id, batch)
                moved("files", "files", len(batch))
                removed_now += len(batch)
                batch = []
        if batch:
            await self._remove_files(user_id, batch)
            moved("files", "files", len(batch))
            removed_now += len(batch)
        await self.files.remove_user_folder(user_id)
        for table in USER_TABLES:
            moved(table.name, "", 0)
            while removed := await user_rows.delete_batch(self.db, table, user_id, BATCH_ROWS):
                moved(table.name, table.name, removed)
                removed_now += removed
        return removed_now

    async def _remove_files(self, user_id: str, folders: list[str]) -> None:
        for folder in dict.fromkeys(folders):
            await self.files.remove_folder(folder)
        await user_rows.count_files(self.db, user_id, len(folders))
