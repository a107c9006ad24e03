"""Start-up recovery (SPEC §13): settle the add/upload intents a crash left behind.

An intent is recorded before the engine is called, and the files it names are written before
the call too (an upload streams its file first; an add writes its decoded files between
recording the intent and forwarding). So a leftover intent whose files are all on disk may have
reached the engine: it is committed, keeping the data. One with a file missing died before the
call: the engine never saw it, so its folders are removed and it is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.attachments.files import FileStore
from gateway.store import Database
from gateway.store import attachments as attachment_store
from gateway.store.attachments import Intent

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


async def settle_leftover_intents(db: Database, files: FileStore) -> Recovery:
    """Commit the intents that may have reached the engine; drop (and clean) the others."""
    done = Recovery()
    for intent in await attachment_store.leftover_intents(db):
        if await files_written(files, intent):
            await attachment_store.commit_intent(db, intent)
            done.committed.append(intent)
        else:
            for folder in intent.folders:
                await files.remove_folder(folder)
            await attachment_store.abandon_intent(db, intent)
            done.dropped.append(intent)
    return done


async def abandon(db: Database, files: FileStore, intent: Intent) -> None:
    """An add or upload failed: drop its intent, then its files, unless another process's
    recovery already committed the intent (then its mappings point at those files)."""
    if await attachment_store.abandon_intent(db, intent):
        for folder in intent.folders:
            await files.remove_folder(folder)
