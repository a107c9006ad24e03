"""The PostgreSQL adapter's cache generations (gateway/store/postgresql.py): its own commits
count by the time they return (sessions by name, once their fence is heard back), and a lost
listening connection means nothing kept is trusted until it is back.
The cross-process behaviour both adapters share is in tests/test_cache_generations.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.search.index import AttachmentIndex
from gateway.store import keys, postgresql
from gateway.store.postgresql import PostgresDatabase, written_topics
from tests.attachment_helpers import add_mappings as claim
from tests.databases import DELIVERY_S, eventually
from tests.postgres_server import PostgresServer
from tests.test_cache_generations import new_key, settled


@pytest.fixture
def url(postgres: PostgresServer, postgres_database: str) -> str:
    postgres.empty_tables(postgres_database)
    return postgres_database


@pytest.fixture
async def there(url: str) -> AsyncIterator[PostgresDatabase]:
    db = PostgresDatabase(url)
    await db.open()
    yield db
    await db.close()


async def test_its_own_commit_counts_by_the_time_the_write_returns_heard_or_not(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit's own notifications never arriving (nor its fence): the write still returns,
    after FENCE_S, with every topic it changed moved."""
    def deaf(self: PostgresDatabase, *args: object) -> None:
        return None  # notifications never arrive in this process
    monkeypatch.setattr(PostgresDatabase, "_notified", deaf)
    monkeypatch.setattr(PostgresDatabase, "_session_notified", deaf)
    monkeypatch.setattr(PostgresDatabase, "_fence_heard", deaf)
    monkeypatch.setattr(postgresql, "FENCE_S", 0.05)
    db = PostgresDatabase(url)
    await db.open()
    try:
        sessions, keys_before = db.generation("sessions"), db.generation("keys")
        await claim(db, "alice", "s1", "a.png")
        assert db.generation("sessions") != sessions
        assert db.generation("keys") == keys_before  # a claim changes no key
        key_id, _ = await new_key(db, "alice")
        keys_before = db.generation("keys")
        assert await keys.revoke(db, key_id)
        assert db.generation("keys") != keys_before
    finally:
        await db.close()


async def listeners_terminated(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN %'"))
    finally:
        await conn.close()


async def test_a_lost_listener_trusts_nothing_until_back_and_misses_nothing(
    url: str, there: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = PostgresDatabase(url)
    await here.open()
    reconnect = asyncio.Event()  # `here` stays without a listener until this is set
    listen = here._listen

    async def held_back() -> None:
        await reconnect.wait()
        await listen()
    monkeypatch.setattr(here, "_listen", held_back)
    try:
        key_id, _ = await new_key(there, "alice")
        await settled(here, there, "keys")
        start = here.generation("keys")
        assert await listeners_terminated(url) >= 1  # `there`'s too: it must come back as well

        async def deaf() -> bool:
            return here.generation("keys") != here.generation("keys")
        assert await eventually(deaf)  # a new number on every call while nobody listens

        assert await keys.revoke(there, key_id)  # its notification reaches no listener of `here`
        reconnect.set()

        async def back() -> bool:
            return here.generation("keys") == here.generation("keys")
        assert await eventually(back)
        assert here.generation("keys") != start  # the revocation is not lost
        await settled(here, there, "sessions")  # and notifications flow again
    finally:
        await here.close()


def listener_backend(db: PostgresDatabase) -> int | None:
    """The server process of `db`'s listening connection."""
    conn = db._listener
    return None if conn is None or conn.is_closed() else conn.get_server_pid()


@pytest.mark.parametrize(("sql", "topics"), [
    ("UPDATE api_keys SET revoked_at_ms = ? WHERE id = ?", {"keys"}),
    ("INSERT INTO memory_attachments (id) VALUES (?)", {"sessions"}),
    ("INSERT INTO memory_sessions (session_id) VALUES (?) ON CONFLICT DO NOTHING", {"sessions"}),
    ("INSERT INTO api_keys (id) VALUES (?)", {"keys"}),  # counted though it changes nothing kept
    ("INSERT INTO agents (id) VALUES (?)", set()),
    ("UPDATE memory_sessions_archive SET x = 1", set()),
])
def test_a_statement_counts_for_the_topics_whose_tables_it_names(
    sql: str, topics: set[str]
) -> None:
    assert written_topics(sql) == topics


async def test_a_listener_that_stops_answering_is_replaced_and_misses_nothing(
    url: str, there: PostgresDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection dropped silently looks open forever: the adapter asks it `SELECT 1`, and
    one that does not answer (its server process stopped here) is replaced."""
    monkeypatch.setattr(postgresql, "LISTEN_CHECK_S", 0.2)
    here = PostgresDatabase(url)
    await here.open()
    backend = listener_backend(here)
    try:
        key_id, _ = await new_key(there, "alice")
        await settled(here, there, "keys")
        start = here.generation("keys")
        os.kill(backend, signal.SIGSTOP)  # the listener's server process hears nothing now
        assert await keys.revoke(there, key_id)  # so its notification is never delivered

        async def moved() -> bool:
            return here.generation("keys") != start
        assert await eventually(moved)
        os.kill(backend, signal.SIGCONT)

        async def replaced() -> bool:
            return listener_backend(here) not in (None, backend)
        assert await eventually(replaced)
        await settled(here, there, "sessions")  # and notifications flow again
    finally:
        with contextlib.suppress(ProcessLookupError):  # gone once it saw its client leave
            os.kill(backend, signal.SIGCONT)
        await here.close()


async def test_processes_of_earlier_versions_still_hear_a_sessions_move(
    url: str, there: PostgresDatabase
) -> None:
    """They act on the topic alone on `mgw_cache` (0008); 0014 adds `mgw_sessions` beside it,
    so a rolling upgrade leaves none of them keeping a session's stale owners."""
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    conn = await asyncpg.connect(url)
    try:
        for channel in ("mgw_cache", "mgw_sessions"):
            await conn.add_listener(channel, lambda c, pid, ch, payload: heard.put_nowait(
                (ch, payload)))
        await claim(there, "bob", "s-upgrade")
        got = set()
        while {("mgw_cache", "sessions"), ("mgw_sessions", "s-upgrade")} - got:
            got.add(await asyncio.wait_for(heard.get(), 10))
    finally:
        await conn.close()


async def test_a_session_id_too_long_to_name_moves_everything(
    url: str, there: PostgresDatabase
) -> None:
    db = PostgresDatabase(url)
    await db.open()
    try:
        await settled(db, there)
        before = db.generation("sessions")
        long_id = "s" * 5000
        await claim(there, "bob", long_id)

        async def moved() -> bool:
            return db.generation("sessions") != before
        assert await eventually(moved)
        now = db.generation("sessions")
        assert db.changed_sessions(before, now) is None  # not known which: nothing is kept
    finally:
        await db.close()


def fences_unheard(monkeypatch: pytest.MonkeyPatch, fence_s: float) -> None:
    """This process's fences never come back (the sessions' own notifications still do), and
    each is given up after `fence_s`."""
    def deaf(self: PostgresDatabase, *args: object) -> None:
        return None
    monkeypatch.setattr(PostgresDatabase, "_fence_heard", deaf)
    monkeypatch.setattr(postgresql, "FENCE_S", fence_s)


async def test_its_own_claim_of_another_session_keeps_the_lookup_and_of_a_pages_is_seen_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit of this process that changed sessions says which (its fence): a lookup of other
    sessions stays kept, and one naming the claimed session is read again by the next
    lookup, with no wait for the notification (the write returned after it was heard)."""
    # as long as a notification may take on a loaded machine: a fence given up drops all
    monkeypatch.setattr(postgresql, "FENCE_S", DELIVERY_S)
    db = PostgresDatabase(url)
    await db.open()
    try:
        await claim(db, "alice", "mine", "a.png")
        index = AttachmentIndex(db)
        first = await index.lookup("alice", ["mine", "open"])
        assert first[0] == frozenset()
        await claim(db, "bob", "elsewhere", "b.png")
        assert await index.lookup("alice", ["mine", "open"]) is first  # not read again
        await claim(db, "bob", "open")
        found = await index.lookup("alice", ["mine", "open"])  # at once: no eventually()
        assert found[0] == frozenset({("default", "default", "open")})
        assert db._fences == {}  # every fence heard and forgotten
    finally:
        await db.close()


async def test_a_fence_not_heard_back_drops_every_kept_lookup(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sessions' notifications heard but the fence not (it stands for anything lost on
    the way): past FENCE_S the topic moves without naming them, and nothing kept is used."""
    fences_unheard(monkeypatch, 0.05)
    db = PostgresDatabase(url)
    await db.open()
    try:
        await claim(db, "alice", "mine", "a.png")
        index = AttachmentIndex(db)
        first = await index.lookup("alice", ["mine"])
        await claim(db, "bob", "elsewhere")
        assert await index.lookup("alice", ["mine"]) is not first
        assert db._fences == {}
    finally:
        await db.close()


async def test_a_write_cancelled_while_its_fence_is_out_still_moves_the_topic(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit stands when the wait for its fence is cancelled: nothing kept from before it
    is used afterwards."""
    fences_unheard(monkeypatch, 0.3)
    db = PostgresDatabase(url)
    await db.open()
    try:
        await claim(db, "alice", "mine", "a.png")  # its fences given up after FENCE_S
        index = AttachmentIndex(db)
        first = await index.lookup("alice", ["mine", "open"])
        task = asyncio.get_running_loop().create_task(claim(db, "bob", "open"))

        async def fence_out() -> bool:  # committed, and waiting for its fence
            return bool(db._fences) and bool(await db.read(
                "SELECT 1 FROM memory_sessions WHERE session_id = 'open'"))
        assert await eventually(fence_out)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert db._fences == {}
        found = await index.lookup("alice", ["mine", "open"])
        assert found is not first and found[0] == frozenset({("default", "default", "open")})
    finally:
        await db.close()


async def test_a_transaction_that_failed_inside_leaves_the_writer_usable(url: str) -> None:
    """A statement's error caught inside `write()`: the transaction cannot commit, the write
    says so, and the next write runs on a connection outside any transaction."""
    db = PostgresDatabase(url)
    await db.open()
    try:
        with pytest.raises(asyncpg.PostgresError):
            async with db.write() as tx:
                await tx.execute("INSERT INTO memory_sessions (app_id, project_id, session_id,"
                                 " user_id, created_at) VALUES ('default', 'default', 'lost',"
                                 " 'alice', 0)")
                with contextlib.suppress(asyncpg.PostgresError):
                    await tx.execute("SELECT no_such_column FROM memory_sessions")
        await claim(db, "alice", "kept", "a.png")
        rows = await db.read("SELECT session_id FROM memory_sessions WHERE user_id = 'alice'")
        assert [row["session_id"] for row in rows] == ["kept"]
    finally:
        await db.close()
