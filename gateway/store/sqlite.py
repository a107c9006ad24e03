"""The SQLite adapter: one writer behind a lock (`BEGIN IMMEDIATE`), separate reader connections.

Handlers never see connections; the store modules call `read`/`read_one` for queries and
`write()` for a transaction (gateway/store/database.py is the interface).
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from gateway.store import migrations
from gateway.store.database import Database, Transaction
from gateway.store.session_changes import SessionChanges
from gateway.store.wal_index import WalIndexWatch

BUSY_TIMEOUT_MS = 30_000
READER_CONNECTIONS = 2
# `read_now` runs on the event loop: it waits at most this long for a lock (WAL readers almost
# never wait), then the query goes to a reader thread instead.
READ_NOW_BUSY_TIMEOUT_MS = 20


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")


def connect_sync(path: str) -> sqlite3.Connection:
    """A configured autocommit connection, for the CLI and start-up work."""
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    _configure(conn)
    return conn


def migrate(path: str) -> list[migrations.Migration]:
    conn = connect_sync(path)
    try:
        return migrations.apply_pending(conn)
    finally:
        conn.close()


class SqliteDatabase(Database):
    dialect = "sqlite"

    def __init__(self, path: str) -> None:
        self.path = path
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._next_reader = itertools.cycle(range(READER_CONNECTIONS))
        self._write_lock = asyncio.Lock()
        self._inline: sqlite3.Connection | None = None
        self._generations: dict[str, int] = {}
        self._generations_at: object = -1  # the wal-index stamp or data_version read before
        self._wal_index: WalIndexWatch | None = None
        self._unknown = itertools.count(-1, -1)  # generations while the file is locked
        self._changes = SessionChanges()  # what each move of "sessions" was about
        self._changes_seen: int | None = None  # the last session_changes row read

    async def open(self) -> None:
        migrate(self.path)
        self._writer = await self._connect()
        self._readers = [await self._connect() for _ in range(READER_CONNECTIONS)]
        self._inline = sqlite3.connect(self.path, isolation_level=None)
        self._inline.execute(f"PRAGMA busy_timeout = {READ_NOW_BUSY_TIMEOUT_MS}")
        if self.path != ":memory:":
            self._wal_index = WalIndexWatch.open(self._inline, self.path)

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await conn.execute("PRAGMA foreign_keys = ON")
        await conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    async def close(self) -> None:
        if self._wal_index is not None:
            self._wal_index.close()
            self._wal_index = None
        if self._inline is not None:
            self._inline.close()
            self._inline = None
        for conn in [self._writer, *self._readers]:
            if conn is not None:
                await conn.close()
        self._writer = None
        self._readers = []

    def _reader(self) -> aiosqlite.Connection:
        if not self._readers:
            raise RuntimeError("database is not open")
        return self._readers[next(self._next_reader)]

    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self._reader().execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    async def read_now(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """`read` run on the event loop thread, for small indexed lookups on every request; the
        rows are plain tuples.

        Handing a query to a reader thread and back costs more than such a query itself (a
        search's session lookup ran 2× faster this way, bench/search_cost.py). When the lock is
        not free within READ_NOW_BUSY_TIMEOUT_MS, the query goes to a reader thread.
        """
        if self._inline is None:
            raise RuntimeError("database is not open")
        try:
            return self._inline.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return [tuple(row) for row in await self.read(sql, params)]

    def generation(self, topic: str) -> int:
        """The topic's counter in `cache_generations` (bumped by triggers, migrations/0008).

        Read again only when the wal-index header has changed (gateway/store/wal_index.py):
        it changes whenever any connection of any process commits, and is read from memory.
        Without a wal-index to map, `PRAGMA data_version` on the event loop thread's connection
        (which never writes, so every commit counts) says the same with three system calls.
        """
        if self._inline is None:
            raise RuntimeError("database is not open")
        try:
            watch = self._wal_index
            version = (watch.stamp() if watch is not None
                       else self._inline.execute("PRAGMA data_version").fetchone()[0])
            if version != self._generations_at:
                self._read_generations()
                self._generations_at = version
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return next(self._unknown)  # unknown: a number no kept answer carries
        return self._generations[topic]

    def _read_generations(self) -> None:
        """The counters, and in the same statement the session changes logged since the last
        read (migrations/0014): the "sessions" generation is the last change's number."""
        assert self._inline is not None
        seen = self._changes_seen
        if seen is None:
            self._generations = dict(self._inline.execute(
                "SELECT topic, value FROM cache_generations").fetchall())
            self._changes_seen = self._generations["sessions"]
            self._changes.start(self._changes_seen)
            return
        rows = self._inline.execute(
            "SELECT topic, value, NULL FROM cache_generations UNION ALL "
            "SELECT NULL, seq, session_id FROM session_changes WHERE seq > ?", (seen,)).fetchall()
        self._generations = {topic: value for topic, value, _ in rows if topic is not None}
        changes = sorted((seq, session_id) for topic, seq, session_id in rows if topic is None)
        if changes and changes[0][0] != seen + 1:  # the rows in between are gone: unknown
            self._changes.start(changes[0][0] - 1)
        for seq, session_id in changes:
            self._changes.moved(seq, session_id)
        self._changes_seen = self._generations["sessions"]

    def changed_sessions(self, since: int, until: int) -> frozenset[str] | None:
        return self._changes.since(since, until)

    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        async with self._reader().execute(sql, params) as cursor:
            return await cursor.fetchone()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Transaction]:
        """One write transaction at a time; committed on exit, rolled back on error."""
        if self._writer is None:
            raise RuntimeError("database is not open")
        async with self._write_lock:
            conn = self._writer
            await conn.execute("BEGIN IMMEDIATE")
            try:
                yield SqliteTransaction(conn)
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
            else:
                await conn.execute("COMMIT")



class SqliteTransaction(Transaction):
    """The writer connection inside `SqliteDatabase.write()`."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows changed."""
        async with self._conn.execute(sql, params) as cursor:
            return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self._conn.execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        async with self._conn.execute(sql, params) as cursor:
            return await cursor.fetchone()
