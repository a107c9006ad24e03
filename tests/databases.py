"""Reading and changing the gateway's database from tests, on either backend, with one plain
connection (`?` placeholders on both: PostgreSQL gets the adapter's own translation)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from gateway.store.database import is_postgresql, run_sync
from gateway.store.postgresql import translate


class _Row(dict[str, Any]):
    """A row by column name, by position, and as a tuple of its values."""

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        return iter(self.values())


async def _postgres(url: str, sql: str, params: Sequence[Any], fetch: bool) -> Any:
    conn = await asyncpg.connect(url)
    try:
        if fetch:
            return [_Row(row.items()) for row in await conn.fetch(translate(sql), *params)]
        status = await conn.execute(translate(sql), *params)
        last = status.rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0
    finally:
        await conn.close()


def _sqlite(path: str, sql: str, params: Sequence[Any], fetch: bool) -> Any:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        cursor = conn.execute(sql, params)
        if fetch:
            return [_Row(zip(row.keys(), tuple(row), strict=True)) for row in cursor.fetchall()]
        return cursor.rowcount
    finally:
        conn.close()


def rows(database: str, sql: str, *params: Any) -> list[Any]:
    if is_postgresql(database):
        return list(run_sync(_postgres(database, sql, params, fetch=True)))
    return list(_sqlite(database, sql, params, fetch=True))


def execute(database: str, sql: str, *params: Any) -> int:
    """One statement, committed; the rows changed."""
    if is_postgresql(database):
        return int(run_sync(_postgres(database, sql, params, fetch=False)))
    return int(_sqlite(database, sql, params, fetch=False))


# How long a change notification may take at most on a loaded machine (PostgreSQL delivers
# another process's commits to the cache listeners asynchronously; SQLite needs no wait).
DELIVERY_S = 10.0


async def eventually(check: Callable[[], Awaitable[bool]]) -> bool:
    """Whether `check` comes true within DELIVERY_S (at once on SQLite)."""
    deadline = asyncio.get_running_loop().time() + DELIVERY_S
    while True:
        if await check():
            return True
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
