"""The PostgreSQL adapter (asyncpg): a pool of reader connections and one writer connection per
process whose transactions take a database-wide advisory lock.

`data_version()` answers a new number on every call: a notification from another process
(LISTEN/NOTIFY) can arrive after a request that it should have been seen by, so nothing is kept
on its word; what is kept across requests is validated by version rows the same query reads
(memory_sessions.mappings_version for the search matchers).

The advisory lock gives PostgreSQL the single-writer rule the store was written for on SQLite
(`BEGIN IMMEDIATE`): a read-then-write inside `write()` (claim a session, append a message once
per idempotency key) cannot interleave with another process's. Reads never wait for it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import asyncpg

from gateway.errors import ValidationFailed
from gateway.store import migrations
from gateway.store.database import Database, Row, Transaction, run_sync

READER_CONNECTIONS = 4
# Advisory lock keys (any two 64-bit numbers no other application on the database uses).
WRITE_LOCK = 0x6D67775F77726974  # "mgw_writ"
MIGRATION_LOCK = 0x6D67775F6D696772  # "mgw_migr"
DIALECT_FOLDER = "postgresql"


# --- one SQL text for both dialects -----------------------------------------------------------

_TOKENS = re.compile(r"'(?:[^']|'')*'|\?|json_each\(|json_array_length\(", re.IGNORECASE)


@lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """The store's SQLite-flavoured SQL for PostgreSQL: `?` → `$n`; `json_each(x)` (over a JSON
    array of strings) → `json_array_elements_text((x)::json)` whose column is `value` too;
    `json_array_length(x)` on a TEXT column → on `(x)::json`. String literals are left alone."""
    out: list[str] = []
    number = 0
    position = 0
    casts: list[int] = []  # depth of parentheses at which a `::json` cast closes
    depth = 0
    for match in _TOKENS.finditer(sql):
        chunk = sql[position:match.start()]
        for char in chunk:
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if casts and casts[-1] == depth:
                    casts.pop()
                    out.append(")::json")
            out.append(char)
        token = match.group(0)
        position = match.end()
        if token == "?":
            number += 1
            out.append(f"${number}")
        elif token.lower() == "json_each(":
            out.append("json_array_elements_text((")
            depth += 1
            casts.append(depth - 1)
        elif token.lower() == "json_array_length(":
            out.append("json_array_length((")
            depth += 1
            casts.append(depth - 1)
        else:
            out.append(token)
    for char in sql[position:]:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if casts and casts[-1] == depth:
                casts.pop()
                out.append(")::json")
        out.append(char)
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
        self._version = 0

    async def open(self) -> None:
        conn = await asyncpg.connect(self.path)
        try:
            await apply_pending(conn)
        finally:
            await conn.close()
        self._pool = await asyncpg.create_pool(
            self.path, min_size=1, max_size=READER_CONNECTIONS
        )
        self._writer = await asyncpg.connect(self.path)

    async def close(self) -> None:
        if self._writer is not None and not self._writer.is_closed():
            await self._writer.close()
        self._writer = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

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

    def data_version(self) -> int:
        """A new number on every call: another process's commit cannot be seen without a
        round trip, which costs what the answers kept on this number would save."""
        self._version += 1
        return self._version

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
                yield PostgresTransaction(conn)
            except BaseException:
                if not conn.is_closed():
                    await conn.execute("ROLLBACK")
                raise
            else:
                await conn.execute("COMMIT")


class PostgresTransaction(Transaction):
    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with _client_text():
            return _changed_rows(await self._conn.execute(translate(sql), *params))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(row) for row in rows]
        if batch:
            with _client_text():
                await self._conn.executemany(translate(sql), batch)

    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with _client_text():
            return list(await self._conn.fetch(translate(sql), *params))

    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        with _client_text():
            return await self._conn.fetchrow(translate(sql), *params)
