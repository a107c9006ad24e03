"""SPEC §14: a history page is served from an index, on both databases, also before the
planner has statistics (a fresh import, or a conversation grown since the last ANALYZE): the
plan of the page query walks `conversation_messages_history` and sorts nothing."""

from __future__ import annotations

import pytest

from gateway.store.database import migrate
from gateway.store.messages import page_sql
from tests import databases

pytestmark = pytest.mark.both_databases

INDEX = "conversation_messages_history"


def plan(database: str, sql: str, params: tuple[object, ...]) -> str:
    if database.startswith("postgres"):
        rows = databases.rows(database, f"EXPLAIN {sql}", *params)
        return "\n".join(str(row[0]) for row in rows)
    rows = databases.rows(database, f"EXPLAIN QUERY PLAN {sql}", *params)
    return "\n".join(str(row["detail"]) for row in rows)


@pytest.mark.parametrize("with_cursor", [False, True])
def test_a_history_page_walks_its_index_and_sorts_nothing(
    database_url: str, with_cursor: bool
) -> None:
    migrate(database_url)
    params = ("cnv_1", "alice", *((1_700_000_000_000, "msg_1") if with_cursor else ()), 50)
    found = plan(database_url, page_sql(with_cursor), params)
    assert INDEX in found, found
    assert "sort" not in found.lower() and "temp b-tree" not in found.lower(), found
