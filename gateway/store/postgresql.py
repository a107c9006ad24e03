"""The PostgreSQL adapter (asyncpg): a pool of reader connections and one writer connection per
process whose transactions take a database-wide advisory lock.

Cache generations (`generation(topic)`) come from LISTEN/NOTIFY: triggers notify channel
`mgw_cache` with the topic of every changed row (migrations/postgresql/0008; a session's row
also notifies `mgw_sessions` with its id, 0014, so `changed_sessions` can say which sessions
moved), and each process keeps one listening connection that moves its own generation of that
topic. So what a process keeps is dropped once the notification arrives: within its delivery
(a millisecond on a LAN) for another process's commits, and before `write()` returns for its
own. A commit that changed sessions ends with a fence (a notification on `mgw_fence` with a
token of this process) and `write()` waits until the listener has heard it, so the sessions'
own notifications, sent before it in the same transaction, have been heard too; a fence not
heard within FENCE_S moves the topic without saying which sessions (everything kept is
dropped). Other topics move at once when this process commits. While the listening connection
is down, every call answers a new number (nothing kept is trusted) and it is reconnected in
the background; reconnected, every topic moves, since notifications sent meanwhile were lost.
The listening connection is checked every LISTEN_CHECK_S; one that does not answer is dropped
and replaced the same way.

The advisory lock gives PostgreSQL the single-writer rule the store was written for on SQLite
(`BEGIN IMMEDIATE`): a read-then-write inside `write()` (claim a session, append a message once
per idempotency key) cannot interleave with another process's. Reads never wait for it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import lru_cache
from pathlib import Path
from typing import Any

import asyncpg

from gateway.errors import ValidationFailed
from gateway.store import migrations
from gateway.store.database import TOPICS, Database, Row, Transaction, run_sync
from gateway.store.session_changes import SessionChanges

READER_CONNECTIONS = 4
# Advisory lock keys (any two 64-bit numbers no other application on the database uses).
WRITE_LOCK = 0x6D67775F77726974  # "mgw_writ"
MIGRATION_LOCK = 0x6D67775F6D696772  # "mgw_migr"
DIALECT_FOLDER = "postgresql"
CACHE_CHANNEL = "mgw_cache"
SESSIONS_CHANNEL = "mgw_sessions"  # the id of each changed session (migrations 0014)
FENCE_CHANNEL = "mgw_fence"  # the end of one process's commit that changed sessions
# How long a commit that changed sessions waits for its fence to come back before it moves the
# topic without naming them (notifications take a millisecond or so; this is for a stuck one).
FENCE_S = 0.5
LISTEN_RETRY_S = 1.0
# The listening connection is asked `SELECT 1` this often, and given as long to answer: a
# connection dropped silently (a NAT or firewall forgetting it) would otherwise deliver nothing
# forever without ever looking closed.
LISTEN_CHECK_S = 5.0

log = logging.getLogger("gateway.store")


# --- one SQL text for both dialects -----------------------------------------------------------

_TOKENS = re.compile(r"'(?:[^']|'')*'|\?|json_each\(|json_array_length\(", re.IGNORECASE)


@lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """The store's SQLite-flavoured SQL for PostgreSQL: `?` → `$n`; `json_each(x)` (over a JSON
    array of strings) → `json_array_elements_text((x)::json)` whose column is `value` too;
    `json_array_length(x)` on a TEXT column → on `(x)::json`. String literals are left alone."""
    out: list[str] = []
    number = 0
    casts: list[int] = []  # depth of parentheses at which a `::json` cast closes
    depth = 0

    def copy(chunk: str) -> None:
        """Text between tokens, closing each cast where its parenthesis closes."""
        nonlocal depth
        for char in chunk:
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if casts and casts[-1] == depth:
                    casts.pop()
                    out.append(")::json")
            out.append(char)

    position = 0
    for match in _TOKENS.finditer(sql):
        copy(sql[position:match.start()])
        token = match.group(0)
        position = match.end()
        if token == "?":
            number += 1
            out.append(f"${number}")
        elif token.lower() in ("json_each(", "json_array_length("):
            out.append("json_array_elements_text((" if token.lower() == "json_each("
                       else "json_array_length((")
            casts.append(depth)
            depth += 1
        else:
            out.append(token)
    copy(sql[position:])
    return "".join(out)


@contextmanager
def _client_text() -> Iterator[None]:
    """PostgreSQL text cannot hold NUL; SQLite can. A client's NUL is bad input, not a 500."""
    try:
        yield
    except asyncpg.CharacterNotInRepertoireError as exc:
        raise ValidationFailed("text must not contain NUL (\\u0000) characters") from exc


def _changed_rows(status: str) -> int:
    """Rows changed, from a command status such as `INSERT 0 1` or `UPDATE 3`."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


# --- migrations -------------------------------------------------------------------------------


def dialect_migrations(directory: Path = migrations.MIGRATIONS_DIR) -> list[migrations.Migration]:
    """The numbered migrations as PostgreSQL runs them: `migrations/postgresql/NNNN_name.sql`
    where that file exists (the dialects truly differ: triggers, implicit row ids), else the
    shared file with SQLite's INTEGER columns as BIGINT (milliseconds do not fit 32 bits)."""
    dialect_dir = directory / DIALECT_FOLDER
    found = []
    for migration in migrations.available(directory):
        own = dialect_dir / migration.path.name
        found.append(migrations.Migration(migration.version, migration.name,
                                          own if own.exists() else migration.path))
    return found


def migration_sql(migration: migrations.Migration) -> str:
    sql = migration.sql()
    if migration.path.parent.name == DIALECT_FOLDER:
        return sql
    return re.sub(r"\bINTEGER\b", "BIGINT", sql)


async def applied(conn: asyncpg.Connection) -> set[int]:
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return set()
    return {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}


async def pending(conn: asyncpg.Connection) -> list[migrations.Migration]:
    """Migrations not yet applied; reads only."""
    done = await applied(conn)
    return [m for m in dialect_migrations() if m.version not in done]


async def apply_pending(conn: asyncpg.Connection) -> list[migrations.Migration]:
    """Each pending migration in its own transaction, its version recorded; an advisory lock
    keeps two processes starting at once from applying the same one."""
    done = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)"
        )
    for migration in dialect_migrations():
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            if migration.version in await applied(conn):
                continue
            await conn.execute(migration_sql(migration))
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)",
                migration.version, migration.name, int(time.time() * 1000),
            )
        done.append(migration)
    return done


async def _migrate(url: str) -> list[migrations.Migration]:
    conn = await asyncpg.connect(url)
    try:
        return await apply_pending(conn)
    finally:
        await conn.close()


def migrate(url: str) -> list[migrations.Migration]:
    return run_sync(_migrate(url))


# --- the adapter ------------------------------------------------------------------------------


class PostgresDatabase(Database):
    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        self.path = url  # what the SQLite adapter calls its file: where the data lives
        self._pool: asyncpg.Pool | None = None
        self._writer: asyncpg.Connection | None = None
        self._write_lock = asyncio.Lock()
        # Generations: every number is drawn from one counter, so none is ever reused.
        self._numbers = itertools.count(1)
        self._generations = {topic: next(self._numbers) for topic in TOPICS}
        self._changes = SessionChanges()  # which session each notified move was about
        self._changes.start(self._generations["sessions"])
        self._listener: asyncpg.Connection | None = None
        self._relisten: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._closing = False
        # this process's fences not heard yet, by token (unique to this adapter)
        self._fences: dict[str, asyncio.Future[None]] = {}
        self._fence_numbers = itertools.count(1)
        self._fence_prefix = f"{os.getpid()}.{id(self):x}."

    async def open(self) -> None:
        conn = await asyncpg.connect(self.path)
        try:
            await apply_pending(conn)
        finally:
            await conn.close()
        self._closing = False
        self._pool = await asyncpg.create_pool(
            self.path, min_size=1, max_size=READER_CONNECTIONS
        )
        self._writer = await asyncpg.connect(self.path)
        await self._listen()
        self._watch = asyncio.get_running_loop().create_task(self._watch_listener())

    async def close(self) -> None:
        self._closing = True
        for task in (self._relisten, self._watch):
            if task is not None:
                task.cancel()
        self._relisten = self._watch = None
        if self._listener is not None and not self._listener.is_closed():
            await self._listener.close()
        self._listener = None
        if self._writer is not None and not self._writer.is_closed():
            await self._writer.close()
        self._writer = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    # --- cache generations (LISTEN/NOTIFY) ----------------------------------------------------

    def generation(self, topic: str) -> int:
        if self._listener is None or self._listener.is_closed():
            self._listen_later()
            return next(self._numbers)  # not listening: nothing kept may be trusted
        return self._generations[topic]

    def changed_sessions(self, since: int, until: int) -> frozenset[str] | None:
        return self._changes.since(since, until)

    def _moved(self, *topics: str) -> None:
        """These topics moved, by changes not known one by one."""
        for topic in topics:
            self._generations[topic] = next(self._numbers)
        if "sessions" in topics:
            self._changes.start(self._generations["sessions"])

    def _notified(self, conn: object, pid: int, channel: str, topic: str) -> None:
        # "sessions" moves by the notifications that name the session (below); the topic alone
        # is still sent for processes of earlier versions
        if topic in self._generations and topic != "sessions":
            self._moved(topic)

    def _session_notified(self, conn: object, pid: int, channel: str, session_id: str) -> None:
        """A session's row changed (migrations/postgresql/0014); '' when its id was too long."""
        if not session_id:
            self._moved("sessions")
            return
        self._generations["sessions"] = generation = next(self._numbers)
        self._changes.moved(generation, session_id)

    def _fence_heard(self, conn: object, pid: int, channel: str, token: str) -> None:
        """A commit's fence came back: everything that commit notified was heard before it.
        Other processes' fences are not this one's to wait for."""
        waiter = self._fences.pop(token, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _release_fences(self) -> None:
        """No fence will come back (the listener is gone): nothing kept is trusted now anyway
        (`generation` answers new numbers until it is back, and then every topic moves)."""
        fences, self._fences = self._fences, {}
        for waiter in fences.values():
            if not waiter.done():
                waiter.set_result(None)

    def _fence(self, topics: set[str]) -> str | None:
        """A token to end this commit with, when it changed sessions and they can be heard."""
        if "sessions" not in topics or self._listener is None or self._listener.is_closed():
            return None
        token = f"{self._fence_prefix}{next(self._fence_numbers)}"
        self._fences[token] = asyncio.get_running_loop().create_future()
        return token

    async def _fenced(self, token: str) -> None:
        """Until the fence is heard; past FENCE_S, or when the wait is cancelled (the commit
        stands), the topic moves unattributed."""
        waiter = self._fences.get(token)
        if waiter is None:
            return  # heard already, or released
        heard = False
        try:
            await asyncio.wait_for(asyncio.shield(waiter), FENCE_S)
            heard = True
        except TimeoutError:
            log.warning("cache notifications: this process's commit was not heard back within "
                        "%.1f s; dropping every kept session lookup", FENCE_S)
        finally:
            if not heard:
                self._fences.pop(token, None)
                self._moved("sessions")

    def _lost(self, conn: object) -> None:
        if conn is not self._listener:
            return  # an earlier listener, already replaced
        self._listener = None
        self._release_fences()
        self._listen_later()

    async def _listen(self) -> None:
        conn = await asyncpg.connect(self.path)
        try:
            await conn.add_listener(CACHE_CHANNEL, self._notified)
            await conn.add_listener(SESSIONS_CHANNEL, self._session_notified)
            await conn.add_listener(FENCE_CHANNEL, self._fence_heard)
        except BaseException:
            conn.terminate()
            raise
        conn.add_termination_listener(self._lost)
        self._listener = conn
        self._moved(*TOPICS)  # notifications sent while nobody listened are lost
        self._release_fences()

    def _listen_later(self) -> None:
        if self._closing or self._pool is None:
            return
        if self._relisten is None or self._relisten.done():
            self._relisten = asyncio.get_running_loop().create_task(self._listen_again())

    async def _watch_listener(self) -> None:
        while not self._closing:
            await asyncio.sleep(LISTEN_CHECK_S)
            conn = self._listener
            if conn is None or conn.is_closed():
                continue  # being replaced
            # Not cancelled on time-out (asyncpg would then send a cancel request): the
            # connection is dropped, which ends the query too.
            probe = asyncio.ensure_future(conn.fetchval("SELECT 1"))
            done, _ = await asyncio.wait({probe}, timeout=LISTEN_CHECK_S)
            if probe in done and probe.exception() is None:
                continue
            log.warning("cache notifications: the listening connection does not answer; "
                        "replacing it")
            conn.terminate()  # its termination listener starts the replacement
            await asyncio.gather(probe, return_exceptions=True)

    async def _listen_again(self) -> None:
        while not self._closing:
            try:
                await self._listen()
                return
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("cache notifications: reconnecting failed (%s); retrying", exc)
                await asyncio.sleep(LISTEN_RETRY_S)

    def _readers(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("database is not open")
        return self._pool

    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        async with self._readers().acquire() as conn:
            with _client_text():
                return list(await conn.fetch(translate(sql), *params))

    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        async with self._readers().acquire() as conn:
            with _client_text():
                return await conn.fetchrow(translate(sql), *params)

    async def read_now(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return await self.read(sql, params)

    async def write_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        # Autocommitted on a pooled connection: the statement is atomic by itself and takes
        # no writer lock (its tables are no cached topic).
        return await self.read_one(sql, params)

    async def _writer_connection(self) -> asyncpg.Connection:
        if self._pool is None:
            raise RuntimeError("database is not open")
        if self._writer is None or self._writer.is_closed():
            self._writer = await asyncpg.connect(self.path)
        return self._writer

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Transaction]:
        async with self._write_lock:
            conn = await self._writer_connection()
            await conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            try:
                transaction = PostgresTransaction(conn)
                yield transaction
            except BaseException:
                if not conn.is_closed():
                    await conn.execute("ROLLBACK")
                raise
            topics = transaction.topics
            fence = self._fence(topics)
            try:
                if fence is None:
                    await conn.execute("COMMIT")
                else:  # the fence goes out last, in the same round trip as the commit
                    await conn.execute(f"SELECT pg_notify('{FENCE_CHANNEL}', '{fence}'); COMMIT")
            except BaseException:
                # whether it committed may not be known (cancelled on the way): what it may
                # have changed is not trusted, and the writer is left outside any transaction
                if fence is not None:
                    self._fences.pop(fence, None)
                self._moved(*topics)
                if not conn.is_closed():
                    with suppress(Exception):
                        await conn.execute("ROLLBACK")
                raise
            # This process's next request must not use what the commit changed: the topics
            # move now, but sessions by their own notifications, awaited below (which ones
            # changed is then known, and only lookups naming them are dropped).
            self._moved(*(topics - {"sessions"} if fence is not None else topics))
        if fence is not None:
            await self._fenced(fence)


# The tables whose rows processes keep, by topic (with what their triggers change: a mapping
# change moves its session's mappings_version).
_TOPIC_TABLES = {"api_keys": "keys", "memory_sessions": "sessions",
                 "memory_attachments": "sessions"}
_TABLE_NAMES = re.compile(r"\b(" + "|".join(_TOPIC_TABLES) + r")\b", re.IGNORECASE)


# Statements that change only columns no process keeps (a key's last use: migration 0010's
# trigger ignores it too).
_UNKEPT_WRITES = re.compile(r"\s*UPDATE api_keys SET last_used_at_ms = \? WHERE id = \?")


@lru_cache(maxsize=2048)
def written_topics(sql: str) -> frozenset[str]:
    """The topics a statement may change: those whose tables it names."""
    if _UNKEPT_WRITES.match(sql):
        return frozenset()
    return frozenset(_TOPIC_TABLES[name.lower()] for name in _TABLE_NAMES.findall(sql))


class PostgresTransaction(Transaction):
    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn
        self.topics: set[str] = set()  # what this transaction's statements may have changed

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self.topics |= written_topics(sql)
        with _client_text():
            return _changed_rows(await self._conn.execute(translate(sql), *params))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(row) for row in rows]
        if batch:  # no rows, no statement run: nothing changed
            self.topics |= written_topics(sql)
            with _client_text():
                await self._conn.executemany(translate(sql), batch)

    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with _client_text():
            return list(await self._conn.fetch(translate(sql), *params))

    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        with _client_text():
            return await self._conn.fetchrow(translate(sql), *params)
