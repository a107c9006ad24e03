"""The intent sequence (gateway/attachments/intents.py): record → work → commit, else abandon;
the intent is held under the recording process's lease while it is pending."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from gateway.attachments import intents
from gateway.attachments.files import FileStore, create_file_store
from gateway.attachments.leases import Lease
from gateway.config import Settings
from gateway.errors import SessionOwnedByAnotherUser
from gateway.store import Database
from gateway.store.attachments import Intent, new_mapping
from gateway.store.database import database_for
from tests.attachment_helpers import PNG, rows, stored_bytes, stored_files
from tests.conftest import on_both_stores

pytestmark = [pytest.mark.both_databases, on_both_stores]

SESSION = ("default", "default", "s1")
LEASE = Lease(60.0)


def _intent(files: FileStore, user: str, name: str) -> Intent:
    folder = files.folder(user, "memory_attachments", f"att_{name}")
    return Intent(id=f"int_{name}", user_id=user, kind="memory_add", folders=[folder],
                  mappings=[new_mapping(
                      user_id=user, app_id="default", project_id="default", session_id="s1",
                      name="a.png", content_type="image/png",
                      internal_uri=files.uri(folder, "a.png"), source="memory_add_base64")])


async def _write(files: FileStore, intent: Intent) -> str:
    """Writes the intent's file; its place as `user/kind/id/name` (tests/attachment_helpers)."""
    await files.write_bytes(intent.folders[0], "a.png", PNG)
    return f"{intent.user_id}/memory_attachments/att_{intent.id.removeprefix('int_')}/a.png"


def folder_gone(settings: Settings, folder: str) -> bool:
    """Nothing stored is left, and on disk the folder itself is removed too."""
    return stored_files(settings) == [] and (bool(settings.storage.files)
                                             or not os.path.exists(folder))


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[tuple[Database, FileStore]]:
    db = database_for(settings.storage.database)
    files = create_file_store(settings.storage)
    await db.open()
    await files.open_store()
    yield db, files
    await files.close()
    await db.close()


async def test_a_committed_intent_keeps_its_mappings_and_files(
    settings: Settings, store: tuple[Database, FileStore]
) -> None:
    db, files = store
    intent = _intent(files, "alice", "ok")
    async with intents.recorded(db, files, intent, SESSION, LEASE) as pending:
        written = await _write(files, intent)
        await pending.commit()
    assert stored_files(settings) == [written] and stored_bytes(settings, written) == PNG
    assert [r["name"] for r in rows(settings, "SELECT name FROM memory_attachments")] == ["a.png"]
    assert rows(settings, "SELECT id FROM pending_intents") == []


async def test_leaving_without_a_commit_abandons_the_intent_and_its_files(
    settings: Settings, store: tuple[Database, FileStore]
) -> None:
    db, files = store
    intent = _intent(files, "alice", "refused")
    async with intents.recorded(db, files, intent, SESSION, LEASE):
        await _write(files, intent)  # the engine refused: no commit
    assert folder_gone(settings, intent.folders[0])
    assert rows(settings, "SELECT id FROM memory_attachments") == []
    assert rows(settings, "SELECT id FROM pending_intents") == []


async def test_an_error_inside_abandons_the_intent_and_is_raised(
    settings: Settings, store: tuple[Database, FileStore]
) -> None:
    db, files = store
    intent = _intent(files, "alice", "broken")
    with pytest.raises(RuntimeError, match="engine down"):
        async with intents.recorded(db, files, intent, SESSION, LEASE):
            await _write(files, intent)
            raise RuntimeError("engine down")
    assert folder_gone(settings, intent.folders[0])
    assert rows(settings, "SELECT id FROM pending_intents") == []


async def test_a_session_of_another_user_records_nothing_and_removes_the_folders(
    settings: Settings, store: tuple[Database, FileStore]
) -> None:
    db, files = store
    first = _intent(files, "alice", "first")
    async with intents.recorded(db, files, first, SESSION, LEASE) as pending:
        await pending.commit()
    theirs = _intent(files, "bob", "second")
    await _write(files, theirs)  # an upload writes its file before recording
    with pytest.raises(SessionOwnedByAnotherUser):
        async with intents.recorded(db, files, theirs, SESSION, LEASE):
            pytest.fail("the body must not run")
    assert folder_gone(settings, theirs.folders[0])
    assert rows(settings, "SELECT id FROM pending_intents") == []


async def test_a_pending_intent_is_held_by_this_process_until_its_lease_ends(
    settings: Settings, store: tuple[Database, FileStore]
) -> None:
    db, files = store
    intent = _intent(files, "alice", "held")
    async with intents.recorded(db, files, intent, SESSION, LEASE) as pending:
        [held] = rows(settings, "SELECT owner, lease_until FROM pending_intents")
        assert held["owner"] == LEASE.owner and held["lease_until"] > 0
        await pending.commit()
    assert rows(settings, "SELECT id FROM pending_intents") == []
