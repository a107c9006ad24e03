"""Storage and retrieval for the built-in dev engine (HTTP side: `gateway.devengine.app`).

Owns the SQLite schema — a per-session buffer of raw messages and one episode row per
session — the rendering of messages into episode text, keyword scoring and the subset of
the EverOS filter DSL the engine understands. Synchronous and thread-safe: every public
method holds one lock, so the HTTP layer can run calls in worker threads.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    pk INTEGER PRIMARY KEY,
    app_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    episode TEXT NOT NULL DEFAULT '',
    sender_ids TEXT NOT NULL DEFAULT '[]',  -- JSON: senders of flushed messages
    user_ids TEXT NOT NULL DEFAULT '[]',    -- JSON: senders of flushed user messages
    first_message_ms INTEGER,
    extracted_at_ms INTEGER,                -- first flush; NULL = no episode yet
    updated_at_ms INTEGER,                  -- last flush
    UNIQUE (app_id, project_id, session_id)
);
CREATE TABLE IF NOT EXISTS buffer (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_pk INTEGER NOT NULL REFERENCES sessions (pk),
    message_id TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    sender_name TEXT,
    role TEXT NOT NULL,
    timestamp_ms INTEGER NOT NULL,
    content TEXT NOT NULL,                  -- JSON: the original string or items, base64 included
    tool_calls TEXT,
    tool_call_id TEXT
);
CREATE INDEX IF NOT EXISTS buffer_by_session ON buffer (session_pk, seq);
"""

TEXT_ITEM_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True)
class Scope:
    app_id: str
    project_id: str
    session_id: str


@dataclass(frozen=True)
class BufferedMessage:
    message_id: str
    sender_id: str
    sender_name: str | None
    role: str
    timestamp_ms: int
    content: str | list[dict[str, Any]]
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Episode:
    pk: int
    app_id: str
    project_id: str
    session_id: str
    text: str
    sender_ids: list[str]
    user_ids: list[str]
    first_message_ms: int
    extracted_at_ms: int
    updated_at_ms: int


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
        self._conn.executescript(SCHEMA)

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

    def add(self, scope: Scope, messages: list[BufferedMessage]) -> None:
        with self._write() as conn:
            key = (scope.app_id, scope.project_id, scope.session_id)
            conn.execute(
                "INSERT INTO sessions (app_id, project_id, session_id) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                key,
            )
            (pk,) = conn.execute(
                "SELECT pk FROM sessions WHERE app_id = ? AND project_id = ? AND session_id = ?",
                key,
            ).fetchone()
            conn.executemany(
                "INSERT INTO buffer (session_pk, message_id, sender_id, sender_name, role,"
                " timestamp_ms, content, tool_calls, tool_call_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        pk, m.message_id, m.sender_id, m.sender_name, m.role, m.timestamp_ms,
                        json.dumps(m.content),
                        None if m.tool_calls is None else json.dumps(m.tool_calls),
                        m.tool_call_id,
                    )
                    for m in messages
                ],
            )

    def flush(self, scope: Scope, now_ms: int) -> int:
        """Turn the session's buffer into episode text; return how many messages it held."""
        with self._write() as conn:
            session = conn.execute(
                "SELECT * FROM sessions WHERE app_id = ? AND project_id = ? AND session_id = ?",
                (scope.app_id, scope.project_id, scope.session_id),
            ).fetchone()
            if session is None:
                return 0
            rows = conn.execute(
                "SELECT * FROM buffer WHERE session_pk = ? ORDER BY seq", (session["pk"],)
            ).fetchall()
            if not rows:
                return 0
            messages = [_message(row) for row in rows]
            users = (m.sender_id for m in messages if m.role == "user")
            lines = [line for m in messages if (line := render_message(m))]
            episode = "\n".join(part for part in (session["episode"], *lines) if part)
            first_ms = min(m.timestamp_ms for m in messages)
            if session["first_message_ms"] is not None:
                first_ms = min(first_ms, session["first_message_ms"])
            conn.execute(
                "UPDATE sessions SET episode = ?, sender_ids = ?, user_ids = ?,"
                " first_message_ms = ?, extracted_at_ms = COALESCE(extracted_at_ms, ?),"
                " updated_at_ms = ? WHERE pk = ?",
                (
                    episode,
                    _merge(session["sender_ids"], (m.sender_id for m in messages)),
                    _merge(session["user_ids"], users),
                    first_ms, now_ms, now_ms, session["pk"],
                ),
            )
            # Like the real engine, raw payloads (base64 included) do not outlive extraction.
            conn.execute(
                "DELETE FROM buffer WHERE session_pk = ? AND seq <= ?",
                (session["pk"], rows[-1]["seq"]),
            )
            return len(messages)

    def buffered(self, scope: Scope) -> list[BufferedMessage]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT b.* FROM buffer b JOIN sessions s ON s.pk = b.session_pk"
                " WHERE s.app_id = ? AND s.project_id = ? AND s.session_id = ? ORDER BY b.seq",
                (scope.app_id, scope.project_id, scope.session_id),
            ).fetchall()
        return [_message(row) for row in rows]

    def episodes(
        self, app_id: str, project_id: str, session_id: str | None = None
    ) -> list[Episode]:
        """Episodes of one scope (optionally one session), most recently updated first."""
        sql = (
            "SELECT * FROM sessions WHERE app_id = ? AND project_id = ?"
            " AND extracted_at_ms IS NOT NULL"
        )
        params: list[str] = [app_id, project_id]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        with self._lock:
            sql += " ORDER BY updated_at_ms DESC, pk DESC"
            rows = self._conn.execute(sql, params).fetchall()
        return [
            Episode(
                pk=row["pk"], app_id=row["app_id"], project_id=row["project_id"],
                session_id=row["session_id"], text=row["episode"],
                sender_ids=json.loads(row["sender_ids"]), user_ids=json.loads(row["user_ids"]),
                first_message_ms=row["first_message_ms"], extracted_at_ms=row["extracted_at_ms"],
                updated_at_ms=row["updated_at_ms"],
            )
            for row in rows
        ]


def _message(row: sqlite3.Row) -> BufferedMessage:
    return BufferedMessage(
        message_id=row["message_id"], sender_id=row["sender_id"], sender_name=row["sender_name"],
        role=row["role"], timestamp_ms=row["timestamp_ms"], content=json.loads(row["content"]),
        tool_calls=None if row["tool_calls"] is None else json.loads(row["tool_calls"]),
        tool_call_id=row["tool_call_id"],
    )


def _merge(existing_json: str, new: Iterable[str]) -> str:
    merged: dict[str, None] = dict.fromkeys(json.loads(existing_json))
    merged.update(dict.fromkeys(new))
    return json.dumps(list(merged))


# --- episode text -------------------------------------------------------------------------


def render_message(message: BufferedMessage) -> str:
    """The message as episode lines: text as is, each file as "[type] name", never payloads."""
    parts = describe_content(message.content)
    for call in message.tool_calls or []:
        function = call.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        parts.append(f"[tool call] {name or 'unnamed'}")
    speaker = message.sender_name or message.sender_id
    return "\n".join(f"{speaker}: {part}" for part in parts)


def describe_content(content: str | list[dict[str, Any]]) -> list[str]:
    if isinstance(content, str):
        return [content] if content.strip() else []
    return [line for item in content if (line := describe_item(item))]


def describe_item(item: dict[str, Any]) -> str | None:
    kind = str(item.get("type"))
    if kind in TEXT_ITEM_TYPES:
        text = item.get("text")
        return text if isinstance(text, str) and text.strip() else None
    name = _clean(item.get("name"))
    if kind == "image_url":  # OpenAI part: {"image_url": {"url": ...}}, a data: URL is inline
        ref = item.get("image_url")
        url = ref.get("url") if isinstance(ref, dict) else ref
        return f"[image] {name or _name_from_uri(url) or 'inline image'}"
    if kind == "file":  # OpenAI part: {"file": {"file_data" | "file_id", "filename"}}
        ref = item.get("file")
        filename = _clean(ref.get("filename")) if isinstance(ref, dict) else None
        return f"[file] {name or filename or 'inline file'}"
    if kind == "input_audio":
        return f"[audio] {name or 'inline audio'}"
    ext = _clean(item.get("ext"))
    name = name or _name_from_uri(item.get("uri")) or (f"attachment.{ext}" if ext else "attachment")
    return f"[{kind}] {name}"


def _clean(value: Any) -> str | None:
    return (" ".join(value.split()) or None) if isinstance(value, str) else None


def _name_from_uri(uri: Any) -> str | None:
    if not isinstance(uri, str) or uri.startswith("data:"):
        return None
    return _clean(unquote(urlsplit(uri).path.rsplit("/", 1)[-1]))


# --- keyword scoring ------------------------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]+")


# Function words would make every episode a weak match; a query of only these keeps them.
STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have how i in is it me my "
    "of on or our so that the their them they this to was we were what when where which "
    "who why will with you your".split()
)


class KeywordQuery:
    """Lowercased word tokens match whole tokens; CJK runs (no spaces to split on) match
    as substrings, by character bigrams. Score = share of query terms found, in [0, 1]."""

    def __init__(self, query: str) -> None:
        self.words: set[str] = set()
        self.grams: set[str] = set()
        for token in _TOKEN.findall(query.lower()):
            if _CJK_RUN.fullmatch(token):
                self.grams.update(token[i : i + 2] for i in range(max(len(token) - 1, 1)))
            else:
                self.words.add(token)
        if self.grams or self.words - STOPWORDS:
            self.words -= STOPWORDS

    @property
    def empty(self) -> bool:
        return not (self.words or self.grams)

    def score(self, text: str) -> float:
        if self.empty:
            return 0.0
        lowered = text.lower()
        doc_words = {t for t in _TOKEN.findall(lowered) if not _CJK_RUN.fullmatch(t)}
        hits = len(self.words & doc_words) + sum(1 for gram in self.grams if gram in lowered)
        return round(hits / (len(self.words) + len(self.grams)), 4)


# --- filter DSL subset ----------------------------------------------------------------------

Predicate = Callable[[Episode], bool]
RESERVED_FILTER_FIELDS = frozenset({"owner_id", "owner_type", "app_id", "project_id"})
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
}


class FilterError(ValueError):
    """A filter the engine cannot compile (the reference answers these with 422)."""


def compile_filter(node: Any) -> Predicate:
    try:
        return _compile(node)
    except RecursionError:
        raise FilterError("filters are nested too deeply") from None


def _compile(node: Any) -> Predicate:
    if not isinstance(node, dict):
        raise FilterError("a filter node must be an object")
    checks: list[Predicate] = []
    for key, value in node.items():
        if key in ("AND", "OR"):
            if value is None:  # generated SDKs (everos-cloud 1.0's FilterNode) send them as null
                continue
            if not isinstance(value, list):
                raise FilterError(f"{key} must be an array of filter nodes")
            checks.append(_combine(key, [_compile(child) for child in value]))
        elif key in RESERVED_FILTER_FIELDS:
            raise FilterError(f"{key} is reserved: set it at the top of the request")
        elif key in ("session_id", "sender_id", "timestamp"):
            ops = value if isinstance(value, dict) else {"eq": value}
            checks.extend(_predicate(key, op, operand) for op, operand in ops.items())
        else:
            raise FilterError(f"filter field not supported: {key}")
    return lambda ep: all(check(ep) for check in checks)


def _combine(combinator: str, children: list[Predicate]) -> Predicate:
    if combinator == "AND":
        return lambda ep: all(child(ep) for child in children)
    return lambda ep: any(child(ep) for child in children)


def _predicate(field: str, op: str, operand: Any) -> Predicate:
    if field == "timestamp":
        if op not in _COMPARE:
            raise FilterError(f"operator {op} does not apply to timestamp")
        bound, compare = timestamp_ms(operand), _COMPARE[op]
        return lambda ep: compare(ep.first_message_ms, bound)
    values = operand if op == "in" else [operand]
    if op not in ("eq", "in", "ne") or (op == "ne" and field == "sender_id"):
        raise FilterError(f"operator {op} does not apply to {field}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise FilterError(f"{field} {op} needs {'a list of strings' if op == 'in' else 'a string'}")
    if field == "sender_id":
        return lambda ep: any(v in ep.sender_ids for v in values)
    if op == "ne":
        return lambda ep: ep.session_id != operand
    return lambda ep: ep.session_id in values


def timestamp_ms(value: Any) -> int:
    """Epoch ms (seconds auto-detected below 10**12, as the reference does) or ISO-8601."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 10**12 else value * 1000
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise FilterError(f"not an ISO-8601 timestamp: {value}") from None
        return int(parsed.replace(tzinfo=parsed.tzinfo or UTC).timestamp() * 1000)
    raise FilterError("a timestamp filter needs epoch milliseconds or an ISO-8601 string")
