"""Recovery (SPEC §13, §15): settle the add/upload intents a crash left behind, at start-up and
every few seconds while serving, but only those whose owner is gone (gateway/attachments/
leases.py): another live process's calls in flight are never touched.

An intent is recorded before the engine is called, and the files it names are written before
the call too (an upload streams its file first; an add writes its decoded files between
recording the intent and forwarding). So a leftover intent whose files are all stored may have
reached the engine: it is committed, keeping the data. One with a file missing died before the
call: the engine never saw it, so its folders are removed and it is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.attachments.files import FileStore
from gateway.attachments.leases import Lease
from gateway.store import Database
from gateway.store import attachments as attachment_store
from gateway.store.attachments import Intent
from gateway.store.ids import now_ms

log = logging.getLogger("gateway")
# How often a serving process looks for intents whose owner is gone (a read of a small table).
RECOVERY_INTERVAL_S = 2.0

# Sources whose file the gateway itself wrote; other URIs are the client's and never checked.
WRITTEN_SOURCES = frozenset({"memory_add_base64", attachment_store.RESOURCE_SOURCE})


@dataclass
class Recovery:
    committed: list[Intent] = field(default_factory=list)
    dropped: list[Intent] = field(default_factory=list)


async def files_written(files: FileStore, intent: Intent) -> bool:
    """Whether every file the request wrote is stored (then its upstream call may have run)."""
    for mapping in intent.mappings:
        if mapping.source in WRITTEN_SOURCES and not await files.exists(mapping.internal_uri):
            return False
    return True


async def settle_leftover_intents(
    db: Database, files: FileStore, lease: Lease | None = None
) -> Recovery:
    """Commit the intents that may have reached the engine; drop (and clean) the others.

    With `lease` (a serving process's own), only intents whose owner is gone are touched: its
    lease expired, or it is known dead (gateway/attachments/leases.py). Each is settled in a
    transaction that first takes it off the pending list, so two processes never both do."""
    done = Recovery()
    now = now_ms()
    for intent in await attachment_store.leftover_intents(db):
        if lease is not None and not lease.lost_by(intent.owner, intent.lease_until, now):
            continue
        keep = await files_written(files, intent)
        if not await attachment_store.settle_if_pending(db, intent, keep):
            continue  # settled meanwhile by its owner or another process
        if keep:
            done.committed.append(intent)
        else:
            for folder in intent.folders:
                await files.remove_folder(folder)
            done.dropped.append(intent)
    return done


async def keep_leases(db: Database, files: FileStore, lease: Lease,
                      on_settled: Callable[[Recovery], None]) -> None:
    """While the process serves: renew its own intents' leases, and settle those whose owner
    is gone (another process killed, or this one's killed predecessor), every few seconds."""
    renewed_at = time.monotonic()
    while True:
        await asyncio.sleep(RECOVERY_INTERVAL_S)
        try:
            if time.monotonic() - renewed_at >= lease.renew_every_s():
                await attachment_store.renew_leases(db, lease.owner, lease.until())
                renewed_at = time.monotonic()
            settled = await settle_leftover_intents(db, files, lease)
        except Exception:  # a database hiccup: try again at the next tick
            log.exception("intent lease upkeep failed")
            continue
        if settled.committed or settled.dropped:
            on_settled(settled)


async def abandon(db: Database, files: FileStore, intent: Intent) -> None:
    """An add or upload failed: drop its intent, then its files, unless another process's
    recovery already committed the intent (then its mappings point at those files)."""
    if await attachment_store.abandon_intent(db, intent):
        for folder in intent.folders:
            await files.remove_folder(folder)
