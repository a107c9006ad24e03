"""The store's one SQL text, as the PostgreSQL adapter rewrites it (gateway/store/postgresql.py):
placeholders numbered, the two JSON functions cast, string literals untouched."""

from __future__ import annotations

import pytest

from gateway.store.postgresql import translate


@pytest.mark.parametrize(("sqlite", "postgresql"), [
    ("SELECT * FROM t WHERE a = ? AND b = ?", "SELECT * FROM t WHERE a = $1 AND b = $2"),
    ("SELECT value FROM json_each(?)", "SELECT value FROM json_array_elements_text(($1)::json)"),
    ("SELECT json_array_length(names) FROM t",
     "SELECT json_array_length((names)::json) FROM t"),
    ("WHERE id IN (SELECT value FROM json_each(?)) AND n = json_array_length(coalesce(x, '[]'))",
     "WHERE id IN (SELECT value FROM json_array_elements_text(($1)::json)) AND n = "
     "json_array_length((coalesce(x, '[]'))::json)"),
    ("SELECT 'what? json_each(' || ? FROM t", "SELECT 'what? json_each(' || $1 FROM t"),
    ("SELECT 'it''s ?' , ?", "SELECT 'it''s ?' , $1"),
    ("SELECT JSON_EACH(?)", "SELECT json_array_elements_text(($1)::json)"),
])
def test_a_statement_reads_the_same_on_both_databases(sqlite: str, postgresql: str) -> None:
    assert translate(sqlite) == postgresql
