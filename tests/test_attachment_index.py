"""The attachment index: owners and matchers per page, kept until the database changes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gateway.search.index import AttachmentIndex
from gateway.store.database import Database, database_for
from gateway.store.sqlite import SqliteDatabase
from tests import databases
from tests.attachment_helpers import add_mappings as add
from tests.databases import eventually

pytestmark = pytest.mark.both_databases


@pytest.fixture
async def db(database_url: str):  # type: ignore[no-untyped-def]
    database = database_for(database_url)
    await database.open()
    yield database
    await database.close()


@pytest.fixture
async def sqlite_db(tmp_path: Path):  # type: ignore[no-untyped-def]
    database = SqliteDatabase(str(tmp_path / "gw.db"))
    await database.open()
    yield database
    await database.close()


def names_in(lookup: tuple, session: str) -> list[str]:  # type: ignore[type-arg]
    _, matchers = lookup
    return sorted(matchers[session].by_name)


async def test_a_repeated_lookup_reuses_the_sessions_matcher(db: Database) -> None:
    await add(db, "alice", "s1", "a.png")
    index = AttachmentIndex(db)
    first = await index.lookup("alice", ["s1"])
    second = await index.lookup("alice", ["s1"])
    assert second[1]["s1"] is first[1]["s1"]
    assert names_in(second, "s1") == ["a.png"]


async def test_sqlite_answers_a_repeated_lookup_without_reading_again(
    sqlite_db: SqliteDatabase,
) -> None:
    await add(sqlite_db, "alice", "s1", "a.png")
    index = AttachmentIndex(sqlite_db)
    first = await index.lookup("alice", ["s1"])
    assert await index.lookup("alice", ["s1"]) is first


async def test_a_kept_lookup_is_answered_without_a_wait_until_its_session_changes(
    db: Database,
) -> None:
    """`kept` is what the search asks first: the lookup `lookup` kept, its sessions' C
    matchers beside it, and nothing once one of its sessions changed."""
    await add(db, "alice", "s1", "a.png")
    index = AttachmentIndex(db)
    assert index.kept("alice", ["s1"], python=False) is None  # not looked up yet
    first = await index.lookup("alice", ["s1"], python=False)
    assert index.kept("alice", ["s1"], python=False) is first
    assert index.kept("bob", ["s1"], python=False) is None  # kept per user
    assert set(first.natives) == ({"s1"} if first[1]["s1"].native is not None else set())
    await add(db, "alice", "s1", "b.png")

    async def dropped() -> bool:
        return index.kept("alice", ["s1"], python=False) is None

    assert await eventually(dropped)
    after = await index.lookup("alice", ["s1"], python=False)
    assert names_in(after, "s1") == ["a.png", "b.png"]


async def test_a_commit_through_the_gateway_is_seen_by_the_next_lookup(db: Database) -> None:
    await add(db, "alice", "s1", "a.png")
    index = AttachmentIndex(db)
    before = await index.lookup("alice", ["s1"])
    await add(db, "alice", "s1", "b.png")
    after = await index.lookup("alice", ["s1"])
    assert after is not before
    assert names_in(after, "s1") == ["a.png", "b.png"]


async def test_a_commit_by_another_process_is_seen_by_the_next_lookup(db: Database) -> None:
    """On SQLite the very next lookup; on PostgreSQL the next once the change's notification
    has arrived (tests/test_cache_generations.py)."""
    await add(db, "alice", "s1", "a.png", "b.png")
    index = AttachmentIndex(db)
    assert names_in(await index.lookup("alice", ["s1"]), "s1") == ["a.png", "b.png"]
    # e.g. `memory-gateway gc`, or another gateway process, on the same database
    databases.execute(db.path, "UPDATE memory_attachments SET deleted_at = 1 WHERE name = 'a.png'")
    if db.dialect == "sqlite":
        assert names_in(await index.lookup("alice", ["s1"]), "s1") == ["b.png"]
        return

    async def seen() -> bool:
        return names_in(await index.lookup("alice", ["s1"]), "s1") == ["b.png"]
    assert await eventually(seen)


async def test_sqlite_drops_every_lookup_when_the_change_log_was_pruned_past_it(
    sqlite_db: SqliteDatabase,
) -> None:
    """The log keeps its last 4096 rows (migrations/0014): a process that last looked before
    them cannot say which sessions changed, and reads again."""
    await add(sqlite_db, "alice", "s1", "a.png")
    index = AttachmentIndex(sqlite_db)
    first = await index.lookup("alice", ["s1"])
    before = sqlite_db.generation("sessions")
    databases.execute(sqlite_db.path, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1"
                      " FROM n WHERE i < 4200) INSERT INTO memory_sessions (app_id, project_id,"
                      " session_id, user_id, created_at) SELECT 'default', 'default',"
                      " 'bulk-' || i, 'writer', 0 FROM n")
    assert sqlite_db.generation("sessions") == before + 4200
    assert sqlite_db.changed_sessions(before, before + 4200) is None
    again = await index.lookup("alice", ["s1"])
    assert again is not first and names_in(again, "s1") == ["a.png"]
    log_rows = databases.rows(sqlite_db.path, "SELECT COUNT(*) FROM session_changes")
    assert log_rows[0][0] == 4096


async def test_lookups_are_per_user_and_name_other_owners(db: Database) -> None:
    await add(db, "alice", "s1", "a.png")
    await add(db, "bob", "s2", "b.png")
    index = AttachmentIndex(db)
    foreign, matchers = await index.lookup("alice", ["s1", "s2"])
    assert foreign == frozenset({("default", "default", "s2")})
    assert set(matchers) == {"s1"}
    foreign, matchers = await index.lookup("bob", ["s1", "s2"])
    assert foreign == frozenset({("default", "default", "s1")})
    assert set(matchers) == {"s2"}


class LockedConnection:
    """Stands in for the event loop's connection while another process holds a lock."""

    def execute(self, *args: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    def close(self) -> None:
        pass


async def test_read_now_goes_to_a_reader_thread_when_the_database_is_locked(
    sqlite_db: SqliteDatabase,
) -> None:
    await add(sqlite_db, "alice", "s1", "a.png")
    inline = sqlite_db._inline
    sqlite_db._inline = LockedConnection()  # type: ignore[assignment]
    try:
        rows = await sqlite_db.read_now("SELECT user_id, session_id FROM memory_sessions")
    finally:
        sqlite_db._inline = inline
    assert rows == [("alice", "s1")]


async def test_a_locked_database_answers_a_generation_nothing_kept_carries(
    sqlite_db: SqliteDatabase,
) -> None:
    """Counters that changed but cannot be read are unknown: a number no kept answer carries,
    a new one each time, until they can be read again."""
    index = AttachmentIndex(sqlite_db)
    await add(sqlite_db, "alice", "s1", "a.png")
    await index.lookup("alice", ["s1"])
    before = sqlite_db.generation("sessions")
    inline = sqlite_db._inline
    sqlite_db._inline = LockedConnection()  # type: ignore[assignment]
    try:
        # Nothing committed meanwhile: the wal-index says so without reading the counters.
        assert sqlite_db.generation("sessions") == before
        await add(sqlite_db, "alice", "s2", "b.png")  # a commit: the counters must be read
        while_locked = {sqlite_db.generation("sessions") for _ in range(3)}
    finally:
        sqlite_db._inline = inline
    assert before not in while_locked and len(while_locked) == 3
    after = sqlite_db.generation("sessions")
    assert after not in while_locked and after != before  # read again once unlocked
    kept = await index.lookup("alice", ["s1"])
    assert await index.lookup("alice", ["s1"]) is kept  # and kept while nothing changes


async def test_a_kept_lookup_is_not_used_while_the_changes_cannot_be_read(
    sqlite_db: SqliteDatabase,
) -> None:
    """Another user's claim of one of the page's sessions, committed while the counters and
    the log cannot be read: until they can, no kept lookup is used (it may be the stale one)."""
    index = AttachmentIndex(sqlite_db)
    await add(sqlite_db, "alice", "s1", "a.png")
    first = await index.lookup("alice", ["s1", "open"])
    assert first[0] == frozenset()
    databases.execute(sqlite_db.path, "INSERT INTO memory_sessions (app_id, project_id,"
                      " session_id, user_id, created_at) VALUES ('default', 'default', 'open',"
                      " 'bob', 0)")
    inline = sqlite_db._inline
    sqlite_db._inline = LockedConnection()  # type: ignore[assignment]
    try:
        while_locked = await index.lookup("alice", ["s1", "open"])
    finally:
        sqlite_db._inline = inline
    assert while_locked is not first
    assert while_locked[0] == frozenset({("default", "default", "open")})
    assert (await index.lookup("alice", ["s1", "open"]))[0] == while_locked[0]


async def test_a_locked_database_without_a_wal_index_answers_unknown_generations(
    sqlite_db: SqliteDatabase,
) -> None:
    """Where the wal-index cannot be mapped, `PRAGMA data_version` is asked each time: a
    locked database answers a number no kept answer carries."""
    assert sqlite_db._wal_index is not None
    sqlite_db._wal_index.close()
    sqlite_db._wal_index = None
    before = sqlite_db.generation("sessions")
    assert sqlite_db.generation("sessions") == before
    inline = sqlite_db._inline
    sqlite_db._inline = LockedConnection()  # type: ignore[assignment]
    try:
        while_locked = {sqlite_db.generation("sessions") for _ in range(3)}
    finally:
        sqlite_db._inline = inline
    assert before not in while_locked and len(while_locked) == 3


async def test_read_now_raises_real_errors(sqlite_db: SqliteDatabase) -> None:
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        await sqlite_db.read_now("SELECT * FROM no_such_table")
