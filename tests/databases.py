"""Reading and changing the gateway's database from tests, on either backend, through the same
adapters the gateway uses (so `?` placeholders work on PostgreSQL too)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.store.database import Row, database_for, run_sync


async def _rows(database: str, sql: str, params: Sequence[Any]) -> list[Row]:
    db = database_for(database)
    await db.open()
    try:
        return [_Row(row) for row in await db.read(sql, params)]
    finally:
        await db.close()


async def _execute(database: str, sql: str, params: Sequence[Any]) -> int:
    db = database_for(database)
    await db.open()
    try:
        async with db.write() as tx:
            return await tx.execute(sql, params)
    finally:
        await db.close()


class _Row(dict[str, Any]):
    """A row usable after its connection closed: by column name, by position, and as a tuple."""

    def __init__(self, row: Row) -> None:
        super().__init__((key, row[key]) for key in row.keys())

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        return iter(self.values())


def rows(database: str, sql: str, *params: Any) -> list[Any]:
    return list(run_sync(_rows(database, sql, params)))


def execute(database: str, sql: str, *params: Any) -> int:
    """One statement in its own write transaction; the rows changed."""
    return int(run_sync(_execute(database, sql, params)))
