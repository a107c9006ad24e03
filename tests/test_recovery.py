"""Start-up recovery (SPEC §13): leftover intents are kept when they may have reached the engine,
dropped (files and all) when a file they should have written is missing."""

from __future__ import annotations

from pathlib import Path

import httpx
import respx

from gateway.app import create_app
from gateway.attachments.files import FileStore, create_file_store
from gateway.config import Settings
from gateway.store import Database
from gateway.store import attachments as attachment_store
from gateway.store.attachments import Intent, new_mapping
from tests.attachment_helpers import PNG, rows, stored_bytes, stored_files
from tests.conftest import on_both_stores

pytestmark = on_both_stores


async def record(db: Database, files: FileStore, intent_id: str, session: str,
                 write: bool) -> Intent:
    """An add's intent with one inline file (written or not) and one URI item."""
    folder = files.folder("alice", "memory_attachments", f"att_{intent_id}")
    common = dict(user_id="alice", app_id="default", project_id="default", session_id=session)
    intent = Intent(id=intent_id, user_id="alice", kind="memory_add", folders=[folder],
                    mappings=[
                        new_mapping(**common, name="a.png", content_type="image/png",
                                    internal_uri=files.uri(folder, "a.png"),
                                    source="memory_add_base64"),
                        new_mapping(**common, name="b.jpg", content_type="image/jpeg",
                                    internal_uri="https://cdn.example/b.jpg",
                                    source="memory_add_uri")])
    await attachment_store.begin_intent(db, intent, ("default", "default", session))
    if write:
        await files.write_bytes(folder, "a.png", PNG)
    return intent


async def test_intents_left_by_a_crash_are_kept_or_dropped_by_their_files(
    settings: Settings, engine: respx.MockRouter
) -> None:
    db = Database(settings.storage.database)
    await db.open()
    files = create_file_store(settings.storage)
    await files.open_store()
    try:
        await record(db, files, "int_reached", "s-reached", write=True)
        dropped = await record(db, files, "int_early", "s-early", write=False)
        # A folder the early intent wrote nothing into yet (a crash mid-write leaves one).
        await files.write_bytes(dropped.folders[0], ".part-0", b"half")
    finally:
        await files.close()
        await db.close()

    gateway = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running():
        pass
    assert rows(settings, "SELECT id FROM pending_intents") == []
    kept = rows(settings, "SELECT session_id, name FROM memory_attachments ORDER BY name")
    assert [(r["session_id"], r["name"]) for r in kept] == [("s-reached", "a.png"),
                                                             ("s-reached", "b.jpg")]
    [stored] = stored_files(settings)
    assert stored == "alice/memory_attachments/att_int_reached/a.png"
    assert stored_bytes(settings, stored) == PNG


async def test_a_failed_call_keeps_files_another_process_already_committed(
    settings: Settings, tmp_path: Path
) -> None:
    from gateway.attachments import recovery

    db = Database(settings.storage.database)
    await db.open()
    try:
        files = create_file_store(settings.storage)
        await files.open_store()
        for settled_elsewhere in (True, False):
            folder = files.folder("alice", "memory_attachments", f"att_{int(settled_elsewhere)}")
            stored = await files.write_bytes(folder, "x.png", PNG)
            intent = Intent(id=f"int_{int(settled_elsewhere)}", user_id="alice",
                            kind="memory_add", folders=[folder], mappings=[new_mapping(
                                user_id="alice", app_id="default", project_id="default",
                                session_id="s", name="x.png", content_type="image/png",
                                internal_uri=stored.uri, source="memory_add_base64")])
            await attachment_store.begin_intent(db, intent, ("default", "default", "s"))
            if settled_elsewhere:  # e.g. a second gateway's start-up recovery
                await attachment_store.commit_intent(db, intent)
            await recovery.abandon(db, files, intent)
            assert await files.exists(stored.uri) is settled_elsewhere
        assert rows(settings, "SELECT * FROM pending_intents") == []
        assert len(rows(settings, "SELECT * FROM memory_attachments")) == 1
    finally:
        await files.close()
        await db.close()
