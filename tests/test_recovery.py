"""Start-up recovery (SPEC §13): leftover intents are kept when they may have reached the engine,
dropped (files and all) when a file they should have written is missing."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import respx

from gateway.app import create_app
from gateway.attachments.files import FileStore, create_file_store
from gateway.attachments.leases import gone_here, this_process
from gateway.config import Settings
from gateway.store import attachments as attachment_store
from gateway.store.attachments import Intent, new_mapping
from gateway.store.database import Database, database_for
from gateway.store.ids import now_ms
from tests.attachment_helpers import PNG, rows, stored_bytes, stored_files
from tests.conftest import on_both_stores

pytestmark = [pytest.mark.both_databases, on_both_stores]


@contextlib.asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[tuple[Database, FileStore]]:
    """The database and file store of a gateway of `settings`, open, as a crash left them."""
    db = database_for(settings.storage.database)
    await db.open()
    files = create_file_store(settings.storage)
    await files.open_store()
    try:
        yield db, files
    finally:
        await files.close()
        await db.close()


async def record(db: Database, files: FileStore, intent_id: str, session: str,
                 write: bool, owner: str = "", lease_until: int = 0) -> Intent:
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
    await attachment_store.begin_intent(db, intent, ("default", "default", session), owner,
                                        lease_until)
    if write:
        await files.write_bytes(folder, "a.png", PNG)
    return intent


async def test_intents_left_by_a_crash_are_kept_or_dropped_by_their_files(
    settings: Settings, engine: respx.MockRouter
) -> None:
    async with opened(settings) as (db, files):
        await record(db, files, "int_reached", "s-reached", write=True)
        dropped = await record(db, files, "int_early", "s-early", write=False)
        # A folder the early intent wrote nothing into yet (a crash mid-write leaves one).
        await files.write_bytes(dropped.folders[0], ".part-0", b"half")

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

    async with opened(settings) as (db, files):
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


def dead_owner_here() -> str:
    """The owner token of a process of this host that has exited."""
    proc = subprocess.run([sys.executable, "-c", "print(__import__('os').getpid())"],
                          capture_output=True, text=True, check=True)
    token = this_process().split("/")
    return "/".join([token[0], proc.stdout.strip(), "1", "deadbeef"])


@pytest.mark.processes
async def test_recovery_settles_only_intents_whose_owner_is_gone(
    settings: Settings, engine: respx.MockRouter
) -> None:
    far = now_ms() + 600_000
    async with opened(settings) as (db, files):
        # Another host's live process: its lease runs; a process of this host that exited;
        # another host's process whose lease ran out.
        await record(db, files, "int_live", "s-live", write=True,
                     owner="otherboot.1/42/7/cafe", lease_until=far)
        await record(db, files, "int_dead", "s-dead", write=True, owner=dead_owner_here(),
                     lease_until=far)
        await record(db, files, "int_lapsed", "s-lapsed", write=True,
                     owner="otherboot.1/43/7/cafe", lease_until=now_ms() - 1)

    gateway = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running():
        pass
    assert [r["id"] for r in rows(settings, "SELECT id FROM pending_intents")] == ["int_live"]
    settled = rows(settings, "SELECT DISTINCT session_id FROM memory_attachments "
                             "ORDER BY session_id")
    assert [r["session_id"] for r in settled] == ["s-dead", "s-lapsed"]


async def test_a_serving_gateway_renews_its_leases_and_settles_lapsed_ones(
    settings: Settings, engine: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.attachments import recovery

    monkeypatch.setattr(recovery, "RECOVERY_INTERVAL_S", 0.05)
    gateway = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running():
        db, files, lease = gateway.services.db, gateway.services.files, gateway.services.lease
        lease.seconds = 0.4  # renewed every 0.1 s
        first_until = now_ms() + 100
        mine = await record(db, files, "int_mine", "s-mine", write=True, owner=lease.owner,
                            lease_until=first_until)
        await record(db, files, "int_other", "s-other", write=True,
                     owner="otherboot.1/42/7/cafe", lease_until=now_ms() + 300)
        for _ in range(400):  # the other's lease lapses; ours is renewed meanwhile
            pending = rows(settings, "SELECT id, lease_until FROM pending_intents")
            if [r["id"] for r in pending] == [mine.id] and pending[0]["lease_until"] > first_until:
                break
            await asyncio.sleep(0.05)
        pending = rows(settings, "SELECT id, lease_until FROM pending_intents")
        assert [r["id"] for r in pending] == [mine.id]  # ours is never settled while we live
        assert pending[0]["lease_until"] > first_until  # and it was renewed
    assert [r["session_id"] for r in rows(
        settings, "SELECT DISTINCT session_id FROM memory_attachments")] == ["s-other"]


@pytest.mark.processes
def test_an_owner_is_gone_here_only_when_its_process_is() -> None:
    assert gone_here(dead_owner_here())
    assert not gone_here(this_process())
    assert not gone_here("otherboot.1/1/1/cafe")  # another kernel: only its lease tells
    assert not gone_here("")
