"""The intent sequence around an upstream call (SPEC §8, §13): record → work → commit or abandon.

An add or upload records its intent (claiming the session; held under this process's lease),
then writes its files and calls the engine inside `recorded`; it commits only when the engine
accepted. Leaving the block any other
way — an error, a cancellation, an engine refusal — abandons the intent and removes its folders
(gateway/attachments/recovery.py settles the intents a crash leaves behind).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.attachments.files import FileStore
from gateway.attachments.leases import Lease
from gateway.attachments.recovery import abandon
from gateway.store import attachments as attachment_store
from gateway.store.attachments import Intent
from gateway.store.database import Database


class PendingIntent:
    """The recorded intent inside `recorded`; `commit()` once the engine has accepted."""

    def __init__(self, db: Database, intent: Intent) -> None:
        self._db = db
        self.intent = intent
        self.settled = False

    async def commit(self) -> None:
        # Settled before the write: should the commit itself fail, the intent stays pending
        # with its files on disk, and recovery commits it (the engine has it already).
        self.settled = True
        await attachment_store.commit_intent(self._db, self.intent)


@asynccontextmanager
async def recorded(
    db: Database, files: FileStore, intent: Intent, session: tuple[str, str, str], lease: Lease
) -> AsyncIterator[PendingIntent]:
    """Record `intent` for `session` (403 if another user owns it), held under `lease` (this
    process's owner token, renewed by recovery.keep_leases); abandon it unless committed.

    When recording fails nothing else knows the intent's folders, so they are removed.
    """
    try:
        await attachment_store.begin_intent(db, intent, session, *lease.hold())
    except BaseException:
        for folder in intent.folders:
            await files.remove_folder(folder)
        raise
    pending = PendingIntent(db, intent)
    try:
        yield pending
    finally:
        if not pending.settled:
            await abandon(db, files, intent)
