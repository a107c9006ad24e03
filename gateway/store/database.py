"""The database interface the store modules talk to, and the adapter chosen by
`storage.database`: a file path is SQLite (gateway/store/sqlite.py), a `postgresql://` URL is
PostgreSQL (gateway/store/postgresql.py).

Store modules write one SQL text for both: `?` placeholders, `ON CONFLICT … DO NOTHING/UPDATE`,
`json_each(?)` over a JSON array of strings, `json_array_length(column)`. The PostgreSQL adapter
rewrites the placeholders and the two JSON functions; nothing else differs. A write transaction
is serialised against every other writer of the database, in every process (SQLite: `BEGIN
IMMEDIATE`; PostgreSQL: a transaction-scoped advisory lock), so read-then-write inside `write()`
is as safe on both.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from gateway.store import migrations

# A result row: indexable by column name and position, iterable over its values
# (sqlite3.Row or asyncpg.Record; both answer `row["col"]`, `row[0]`, `dict(row)`).
Row = Any

POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")
# What processes keep in memory, by the rows it was read from (migrations/0008):
#   keys: verified API keys (identity/auth.py); sessions: session owners and attachment
#   matchers (search/index.py); erased: erasures of users (userdata/refusal.py).
TOPICS = ("keys", "sessions", "erased")
T = TypeVar("T")


def is_postgresql(database: str) -> bool:
    return database.startswith(POSTGRESQL_SCHEMES)


def shown_database(database: str) -> str:
    """`storage.database` as it may be printed or logged: a URL's password masked."""
    parts = urlsplit(database) if is_postgresql(database) else None
    if parts is None or parts.password is None:
        return database
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(
        f":{parts.password}@", ":***@", 1)))


class Transaction(ABC):
    """The connection inside `Database.write()`; reads here see the transaction's writes."""

    @abstractmethod
    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows changed."""

    @abstractmethod
    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    @abstractmethod
    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    async def update(
        self, table: str, changes: Mapping[str, Any], where: str, params: Sequence[Any]
    ) -> int:
        """`UPDATE table SET <changes> WHERE <where>`; returns the rows changed.

        `table`, the column names and `where` are the store's own literals, never client input.
        """
        assignments = ", ".join(f"{column} = ?" for column in changes)
        return await self.execute(
            f"UPDATE {table} SET {assignments} WHERE {where}", (*changes.values(), *params)
        )


class Database(ABC):
    """Connections owned by the adapter; callers get rows and transactions, never connections."""

    dialect: str  # "sqlite" | "postgresql"

    @abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    @abstractmethod
    async def read_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    @abstractmethod
    async def read_now(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """`read` for small indexed lookups made on every request, by the cheapest route the
        adapter has (SQLite: on the event loop thread)."""

    @abstractmethod
    def generation(self, topic: str) -> int:
        """A number that changes whenever a commit, by any process on the database, changes a
        row of `topic` (one of TOPICS), so callers can keep answers until then. Never the same
        number for two different states of the topic."""

    def changed_sessions(self, since: int, until: int) -> frozenset[str] | None:
        """The session ids whose `memory_sessions` rows changed after generation `since` of
        the "sessions" topic, up to generation `until` (one `generation("sessions")` answered);
        None when the adapter cannot say (then anything kept from `since` is to be dropped)."""
        return None

    @abstractmethod
    def write(self) -> AbstractAsyncContextManager[Transaction]:
        """One write transaction, serialised against all writers; committed on exit, rolled
        back on error."""

    async def write_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """One statement that is a whole write (an atomic upsert … RETURNING), committed on
        its own; PostgreSQL runs it outside the serialised writers, so it never queues behind
        them (rate buckets, gateway/store/rate_buckets.py)."""
        async with self.write() as transaction:
            return await transaction.read_one(sql, params)

    async def ping(self) -> None:
        await self.read_one("SELECT 1")


def database_for(database: str) -> Database:
    """The adapter for a `storage.database` value (not opened yet)."""
    if is_postgresql(database):
        from gateway.store.postgresql import PostgresDatabase

        return PostgresDatabase(database)
    from gateway.store.sqlite import SqliteDatabase

    return SqliteDatabase(database)


def run_sync(work: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, even inside a running event loop
    (the CLI, test helpers): on a thread of its own, with its own loop."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, work).result()


def migrate(database: str) -> list[migrations.Migration]:
    """Apply pending migrations outside the server (CLI, tests); returns those applied."""
    if is_postgresql(database):
        from gateway.store import postgresql

        return postgresql.migrate(database)
    from gateway.store import sqlite

    return sqlite.migrate(database)

