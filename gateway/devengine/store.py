"""Storage for the built-in dev engine (HTTP side: `gateway.devengine.app`).

Owns the SQLite schema: each session's unprocessed buffer, the episodes (one per user sender of
each cell, plus one merged episode per user), the agent cases, and the per-day entry counters the
engine's ids are numbered by. `memorize` runs the engine's add / flush cycle in one transaction
with the rules of `gateway.devengine.extract`. Synchronous and thread-safe: every public method
holds one lock, so the HTTP layer can run calls in worker threads.

Ids are the engine's: `<owner>_ep_<YYYYMMDD>_<NNNNNNNN>` for episodes and `<owner>_ac_…` for
agent cases (the day they were written, numbered per owner and day), `mc_<12 hex>` for the
cells they come from, `cl_<12 hex>` for a merged episode's cluster.

Merged episodes: the engine's reflection (a scheduled job, off by default) merges an owner's
similar episodes into one with `session_id` null and hides the originals. The dev engine keeps,
for each user whose episodes span two or more sessions of an app and project, one merged episode
restating all of them (`extract.merged_text`), rewritten at each extraction; the originals stay,
so reads scoped to a session keep working.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.devengine import extract
from gateway.devengine.ingest import CanonicalMessage

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE buffer (
    pk INTEGER PRIMARY KEY,
    app_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    sender_name TEXT,
    role TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    content_items TEXT NOT NULL,  -- JSON: the items as ingested, payloads and parse records
    text TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    UNIQUE (app_id, project_id, session_id, message_id)
);
CREATE TABLE episodes (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL,             -- unique within its app and project, as the engine's
    owner_id TEXT NOT NULL,
    app_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    session_id TEXT,              -- NULL for a merged episode
    timestamp_ms INTEGER NOT NULL,
    parent_type TEXT NOT NULL,    -- memcell | cluster
    parent_id TEXT NOT NULL,
    sender_ids TEXT NOT NULL,     -- JSON list
    subject TEXT NOT NULL,
    summary TEXT NOT NULL,
    episode TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    UNIQUE (app_id, project_id, id)
);
CREATE INDEX episodes_by_owner ON episodes (owner_id, app_id, project_id);
CREATE TABLE agent_cases (
    pk INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    app_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    parent_id TEXT NOT NULL,
    task_intent TEXT NOT NULL,
    approach TEXT NOT NULL,
    quality_score REAL NOT NULL,
    key_insight TEXT,
    updated_at_ms INTEGER NOT NULL,
    UNIQUE (app_id, project_id, id)
);
CREATE INDEX agent_cases_by_owner ON agent_cases (owner_id, app_id, project_id);
CREATE TABLE entry_counts (
    prefix TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    app_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    day TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (prefix, owner_id, app_id, project_id, day)
);
"""
# Earlier dev engine databases held other tables; the dev engine's data is disposable.
OLD_TABLES = ("buffer", "sessions", "episodes", "agent_cases", "entry_counts")


@dataclass(frozen=True)
class Scope:
    app_id: str
    project_id: str
    session_id: str


@dataclass(frozen=True)
class EpisodeRow:
    pk: int
    id: str
    owner_id: str
    app_id: str
    project_id: str
    session_id: str | None
    timestamp_ms: int
    parent_type: str
    parent_id: str
    sender_ids: list[str]
    subject: str
    summary: str
    episode: str
    updated_at_ms: int

    @property
    def merged(self) -> bool:
        return self.parent_type == "cluster"


@dataclass(frozen=True)
class CaseRow:
    pk: int
    id: str
    owner_id: str
    app_id: str
    project_id: str
    session_id: str
    timestamp_ms: int
    parent_id: str
    task_intent: str
    approach: str
    quality_score: float
    key_insight: str | None
    updated_at_ms: int
    parent_type: str = "memcell"
    sender_ids: list[str] = field(default_factory=list)  # the engine's table has no such column


class DevEngineStore:
    """One SQLite connection, serialised by a lock; `database` is a path or ":memory:"."""

    def __init__(self, database: str) -> None:
        self._lock = threading.Lock()
        if database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(database, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA busy_timeout = 5000")
        if database != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
        with self._write() as conn:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                for table in OLD_TABLES:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # --- the add / flush cycle -------------------------------------------------------------

    def memorize(self, scope: Scope, fresh: list[CanonicalMessage], *, final: bool,
                 defer: bool, now_ms: int) -> bool:
        """Merge an add's messages into the session's buffer and close the cells the rules
        close (none when `defer`); True when a cell was extracted."""
        with self._write() as conn:
            merged = extract.merge_buffer(_buffer(conn, scope), fresh)
            cells, tail = ([], merged) if defer and not final else \
                extract.cut(merged, final=final)
            _replace_buffer(conn, scope, tail)
            owners: set[str] = set()
            for cell in cells:
                owners.update(_write_cell(conn, scope, cell, now_ms))
            for owner in sorted(owners):
                _write_merged(conn, owner, scope.app_id, scope.project_id, now_ms)
            return bool(cells)

    def buffered(self, scope: Scope) -> list[CanonicalMessage]:
        with self._lock:
            return _buffer(self._conn, scope)

    # --- reads -----------------------------------------------------------------------------

    def episodes(self, owner_id: str, app_id: str, project_id: str) -> list[EpisodeRow]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM episodes WHERE owner_id = ? AND app_id = ? AND project_id = ?"
                " ORDER BY pk", (owner_id, app_id, project_id)).fetchall()
        return [_episode(row) for row in rows]

    def agent_cases(self, owner_id: str, app_id: str, project_id: str) -> list[CaseRow]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM agent_cases WHERE owner_id = ? AND app_id = ? AND project_id = ?"
                " ORDER BY pk", (owner_id, app_id, project_id)).fetchall()
        return [CaseRow(**{key: row[key] for key in row.keys()}) for row in rows]

    def holds_agent_cases(self) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM agent_cases LIMIT 1").fetchone() is not None


# --- rows ------------------------------------------------------------------------------------


def _buffer(conn: sqlite3.Connection, scope: Scope) -> list[CanonicalMessage]:
    rows = conn.execute(
        "SELECT * FROM buffer WHERE app_id = ? AND project_id = ? AND session_id = ?"
        " ORDER BY timestamp_ms, message_id",
        (scope.app_id, scope.project_id, scope.session_id)).fetchall()
    return [
        CanonicalMessage(
            message_id=row["message_id"], sender_id=row["sender_id"],
            sender_name=row["sender_name"], role=row["role"], timestamp_ms=row["timestamp_ms"],
            content_items=json.loads(row["content_items"]), text=row["text"],
            tool_calls=None if row["tool_calls"] is None else json.loads(row["tool_calls"]),
            tool_call_id=row["tool_call_id"],
        )
        for row in rows
    ]


def _replace_buffer(conn: sqlite3.Connection, scope: Scope,
                    messages: list[CanonicalMessage]) -> None:
    key = (scope.app_id, scope.project_id, scope.session_id)
    conn.execute("DELETE FROM buffer WHERE app_id = ? AND project_id = ? AND session_id = ?", key)
    conn.executemany(
        "INSERT INTO buffer (app_id, project_id, session_id, message_id, sender_id, sender_name,"
        " role, timestamp_ms, content_items, text, tool_calls, tool_call_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (*key, m.message_id, m.sender_id, m.sender_name, m.role, m.timestamp_ms,
             json.dumps(m.content_items), m.text,
             None if m.tool_calls is None else json.dumps(m.tool_calls), m.tool_call_id)
            for m in messages
        ],
    )


def _next_id(conn: sqlite3.Connection, prefix: str, owner_id: str, app_id: str,
             project_id: str, now_ms: int) -> str:
    """The engine's entry id: the owner's daily log, numbered from 1 each day."""
    day = datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y%m%d")
    key = (prefix, owner_id, app_id, project_id, day)
    conn.execute(
        "INSERT INTO entry_counts (prefix, owner_id, app_id, project_id, day, count)"
        " VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT DO UPDATE SET count = count + 1", key)
    (count,) = conn.execute(
        "SELECT count FROM entry_counts WHERE prefix = ? AND owner_id = ? AND app_id = ?"
        " AND project_id = ? AND day = ?", key).fetchone()
    return f"{owner_id}_{prefix}_{day}_{count:08d}"


def _write_cell(conn: sqlite3.Connection, scope: Scope, cell: extract.Cell,
                now_ms: int) -> list[str]:
    """The cell's episodes and agent cases; the users who got an episode."""
    memcell_id = f"mc_{uuid.uuid4().hex[:12]}"
    text = extract.episode_text(cell)
    for owner in cell.user_ids:
        conn.execute(
            "INSERT INTO episodes (id, owner_id, app_id, project_id, session_id, timestamp_ms,"
            " parent_type, parent_id, sender_ids, subject, summary, episode, updated_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, 'memcell', ?, ?, '', ?, ?, ?)",
            (_next_id(conn, "ep", owner, scope.app_id, scope.project_id, now_ms), owner,
             scope.app_id, scope.project_id, scope.session_id, cell.timestamp_ms, memcell_id,
             json.dumps(cell.sender_ids), extract.summary_of(text), text, now_ms),
        )
    case = extract.agent_case(cell)
    for agent in cell.agent_ids if case else []:
        assert case is not None
        conn.execute(
            "INSERT INTO agent_cases (id, owner_id, app_id, project_id, session_id,"
            " timestamp_ms, parent_id, task_intent, approach, quality_score, key_insight,"
            " updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_next_id(conn, "ac", agent, scope.app_id, scope.project_id, now_ms), agent,
             scope.app_id, scope.project_id, scope.session_id, cell.timestamp_ms, memcell_id,
             case.task_intent, case.approach, case.quality_score, case.key_insight, now_ms),
        )
    return cell.user_ids


def _write_merged(conn: sqlite3.Connection, owner: str, app_id: str, project_id: str,
                  now_ms: int) -> None:
    members = [
        _episode(row) for row in conn.execute(
            "SELECT * FROM episodes WHERE owner_id = ? AND app_id = ? AND project_id = ?"
            " AND parent_type = 'memcell' ORDER BY timestamp_ms, pk",
            (owner, app_id, project_id)).fetchall()
    ]
    if len({m.session_id for m in members}) < 2:
        return
    text = extract.merged_text(m.episode for m in members)
    timestamp = max(m.timestamp_ms for m in members)
    existing = conn.execute(
        "SELECT pk FROM episodes WHERE owner_id = ? AND app_id = ? AND project_id = ?"
        " AND parent_type = 'cluster'", (owner, app_id, project_id)).fetchone()
    if existing is not None:
        conn.execute("UPDATE episodes SET episode = ?, timestamp_ms = ?, updated_at_ms = ?"
                     " WHERE pk = ?", (text, timestamp, now_ms, existing["pk"]))
        return
    conn.execute(
        "INSERT INTO episodes (id, owner_id, app_id, project_id, session_id, timestamp_ms,"
        " parent_type, parent_id, sender_ids, subject, summary, episode, updated_at_ms)"
        " VALUES (?, ?, ?, ?, NULL, ?, 'cluster', ?, '[]', '', '', ?, ?)",
        (_next_id(conn, "ep", owner, app_id, project_id, now_ms), owner, app_id, project_id,
         timestamp, f"cl_{uuid.uuid4().hex[:12]}", text, now_ms),
    )


def _episode(row: sqlite3.Row) -> EpisodeRow:
    values: dict[str, Any] = {key: row[key] for key in row.keys()}
    values["sender_ids"] = json.loads(values["sender_ids"])
    return EpisodeRow(**values)
