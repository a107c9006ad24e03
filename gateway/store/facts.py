"""User memory facts and the observations behind them, with SPEC §11's write rule.

A fact is one `(scope, factType, key)` of a user. Each `observe` call is one observation:
- `manual` and `imported` observations set the fact, active at once;
- an `inferred` observation of the current value counts one more; the fact becomes active at
  3 observations, or at once when an observation is explicit (flag, or text like "from now on");
- an `inferred` observation of a different value starts the count again at 1, unless the fact was
  set manually (or imported) and the observation is not explicit: then it is only recorded;
- an observation from a source message already counted for this fact is not counted again;
- an expired fact is never active; observing it again starts it afresh.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from gateway.errors import NotFound, ValidationFailed
from gateway.store.cursors import Cursor, read_page
from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record

OBSERVATIONS_TO_ACTIVATE = 3
DEFAULT_CONFIDENCE = {"inferred": 50, "manual": 100, "imported": 100}
_UNSET: Any = object()

# Words that make a statement a standing rule rather than a passing remark.
_EXPLICIT_EN = re.compile(
    r"\b(from now on|always|never|every time|each time|going forward|by default|"
    r"in (the )?future|from here on)\b",
    re.IGNORECASE,
)
_EXPLICIT_ZH = ("以后都", "以后一律", "以后每次", "从现在开始", "从现在起", "从今以后", "今后",
                "每次都", "总是", "一律", "永远", "默认")


def says_explicitly(text: str | None) -> bool:
    """Whether the user's words state a standing rule ("from now on always …", "以后都…")."""
    if not text:
        return False
    return bool(_EXPLICIT_EN.search(text)) or any(marker in text for marker in _EXPLICIT_ZH)


def is_active(
    source_type: str, explicit: bool, observations: int, expires_at_ms: int | None, now: int
) -> bool:
    if expires_at_ms is not None and expires_at_ms <= now:
        return False
    return source_type != "inferred" or explicit or observations >= OBSERVATIONS_TO_ACTIVATE


# The same rule in SQL, for filtering lists; takes `now` once.
_ACTIVE_SQL = (
    "((expires_at_ms IS NULL OR expires_at_ms > ?)"
    " AND (source_type != 'inferred' OR explicit = 1"
    f" OR observations >= {OBSERVATIONS_TO_ACTIVATE}))"
)


class Fact(Record):
    id: str
    scope: str
    fact_type: str
    key: str
    value: Any
    confidence: int
    source_type: str
    source_conversation_id: str | None
    source_message_id: str | None
    pinned: bool
    explicit: bool
    observations: int
    active: bool
    # The API names these two instants without the unit (SPEC §11); they are epoch ms too.
    expires_at_ms: int | None = Field(serialization_alias="expiresAt")
    last_confirmed_at_ms: int | None = Field(serialization_alias="lastConfirmedAt")
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True)
class Observation:
    scope: str
    fact_type: str
    key: str
    value: Any
    source_type: str = "inferred"
    confidence: int | None = None
    explicit: bool = False
    text: str | None = None
    source_conversation_id: str | None = None
    source_message_id: str | None = None
    pinned: bool | None = None
    expires_at_ms: int | None = None


def _fact(row: Row, now: int) -> Fact:
    return Fact.from_row(
        row,
        key=row["fact_key"],
        value=json.loads(row["value"]),
        active=is_active(
            row["source_type"], bool(row["explicit"]), row["observations"],
            row["expires_at_ms"], now,
        ),
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


_LIVE = "user_id = ? AND deleted_at_ms IS NULL"


async def get(db: Database | Transaction, user_id: str, fact_id: str) -> Fact:
    row = await db.read_one(f"SELECT * FROM memory_facts WHERE id = ? AND {_LIVE}",
                            (fact_id, user_id))
    if row is None:
        raise NotFound("no such memory fact")
    return _fact(row, now_ms())


async def _check_sources(tx: Transaction, user_id: str, observation: Observation) -> None:
    conversation_id = observation.source_conversation_id
    if conversation_id is not None:
        row = await tx.read_one(
            "SELECT 1 FROM conversations WHERE id = ? AND user_id = ? AND deleted_at_ms IS NULL",
            (conversation_id, user_id),
        )
        if row is None:
            raise ValidationFailed("sourceConversationId: no conversation of yours has this id",
                                   field="sourceConversationId")
    if observation.source_message_id is not None:
        sql = (
            "SELECT 1 FROM conversation_messages m JOIN conversations c"
            " ON c.id = m.conversation_id AND c.user_id = m.user_id"
            " WHERE m.id = ? AND m.user_id = ? AND c.deleted_at_ms IS NULL"
        )
        params: list[Any] = [observation.source_message_id, user_id]
        if conversation_id is not None:
            sql += " AND c.id = ?"
            params.append(conversation_id)
        if await tx.read_one(sql, params) is None:
            raise ValidationFailed(
                "sourceMessageId: no message of yours (in that conversation) has this id",
                field="sourceMessageId",
            )


async def observe(db: Database, user_id: str, observation: Observation) -> tuple[Fact, bool]:
    """Apply one observation; returns the fact and whether it was created."""
    now = now_ms()
    explicit = observation.explicit or says_explicitly(observation.text)
    value = _canonical(observation.value)
    confidence = observation.confidence
    if confidence is None:
        confidence = DEFAULT_CONFIDENCE[observation.source_type]
    async with db.write() as tx:
        await _check_sources(tx, user_id, observation)
        row = await tx.read_one(
            f"SELECT * FROM memory_facts WHERE {_LIVE}"
            " AND scope = ? AND fact_type = ? AND fact_key = ?",
            (user_id, observation.scope, observation.fact_type, observation.key),
        )
        created = row is None
        if row is None:
            fact_id = new_id("fct")
            await tx.execute(
                "INSERT INTO memory_facts (id, user_id, scope, fact_type, fact_key, value,"
                " confidence, source_type, source_conversation_id, source_message_id, pinned,"
                " explicit, observations, expires_at_ms, last_confirmed_at_ms, created_at_ms,"
                " updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                (fact_id, user_id, observation.scope, observation.fact_type, observation.key,
                 value, confidence, observation.source_type, observation.source_conversation_id,
                 observation.source_message_id, int(bool(observation.pinned)), int(explicit),
                 observation.expires_at_ms, now, now, now),
            )
            counted = True
        else:
            fact_id = row["id"]
            counted = await _observe_existing(tx, row, observation, value, explicit, confidence,
                                              now)
        await tx.execute(
            "INSERT INTO memory_fact_observations (id, user_id, fact_id, value, source_type,"
            " explicit, text, source_conversation_id, source_message_id, counted, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (new_id("obs"), user_id, fact_id, value, observation.source_type, int(explicit),
             observation.text, observation.source_conversation_id, observation.source_message_id,
             int(counted), now),
        )
        return await get(tx, user_id, fact_id), created


async def _observe_existing(
    tx: Transaction,
    row: Row,
    observation: Observation,
    value: str,
    explicit: bool,
    confidence: int,
    now: int,
) -> bool:
    """Update a live fact for one more observation; False when the observation is not counted."""
    if observation.source_message_id is not None:
        seen = await tx.read_one(
            "SELECT 1 FROM memory_fact_observations WHERE user_id = ? AND fact_id = ?"
            " AND source_message_id = ? AND counted = 1",
            (row["user_id"], row["id"], observation.source_message_id),
        )
        if seen is not None:
            return False
    expired = row["expires_at_ms"] is not None and row["expires_at_ms"] <= now
    same = row["value"] == value and not expired
    inferred = observation.source_type == "inferred"
    if inferred and not same and row["source_type"] != "inferred" and not explicit and not expired:
        return False  # a passing inference does not overwrite what the user set
    changes: dict[str, Any] = {
        "value": value,
        "last_confirmed_at_ms": now,
        "updated_at_ms": now,
    }
    if same:
        changes["observations"] = row["observations"] + 1
        changes["explicit"] = int(explicit or bool(row["explicit"]))
        changes["confidence"] = max(row["confidence"], confidence)
        if not inferred or row["source_type"] == "inferred":
            changes["source_type"] = observation.source_type
    else:
        changes.update(observations=1, explicit=int(explicit), confidence=confidence,
                       source_type=observation.source_type, expires_at_ms=None)
    if observation.source_conversation_id is not None or observation.source_message_id:
        changes["source_conversation_id"] = observation.source_conversation_id
        changes["source_message_id"] = observation.source_message_id
    if observation.pinned is not None:
        changes["pinned"] = int(observation.pinned)
    if observation.expires_at_ms is not None:
        changes["expires_at_ms"] = observation.expires_at_ms
    await tx.update("memory_facts", changes, "id = ? AND user_id = ?", (row["id"], row["user_id"]))
    return True


async def list_page(
    db: Database,
    user_id: str,
    *,
    active: bool | None,
    scope: str | None,
    fact_type: str | None,
    limit: int,
    after: Cursor | None,
) -> tuple[list[Fact], str | None]:
    """Newest first; `active` filters by the write rule (None: all live facts)."""
    now = now_ms()
    sql = f"SELECT * FROM memory_facts WHERE {_LIVE}"
    params: list[Any] = [user_id]
    if active is not None:
        sql += f" AND {'' if active else 'NOT '}{_ACTIVE_SQL}"
        params.append(now)
    if scope is not None:
        sql += " AND scope = ?"
        params.append(scope)
    if fact_type is not None:
        sql += " AND fact_type = ?"
        params.append(fact_type)
    return await read_page(db, sql, params, ("created_at_ms", "id"), after, limit,
                           lambda row: _fact(row, now), lambda fact: (fact.created_at_ms, fact.id))


async def for_prompt(db: Database, user_id: str, limit: int) -> list[Fact]:
    """Active facts for a prompt: pinned first, then the most confident, most recently confirmed."""
    now = now_ms()
    rows = await db.read(
        f"SELECT * FROM memory_facts WHERE {_LIVE} AND {_ACTIVE_SQL}"
        " ORDER BY pinned DESC, confidence DESC, last_confirmed_at_ms DESC NULLS LAST, id DESC"
        " LIMIT ?",
        (user_id, now, limit),
    )
    return [_fact(row, now) for row in rows]


async def update(
    db: Database,
    user_id: str,
    fact_id: str,
    *,
    value: Any = _UNSET,
    confidence: int = _UNSET,
    pinned: bool = _UNSET,
    expires_at_ms: int | None = _UNSET,
) -> Fact:
    """A user's edit. Setting the value makes the fact manual (the user said so) and confirmed."""
    now = now_ms()
    changes: dict[str, Any] = {"updated_at_ms": now}
    if value is not _UNSET:
        changes.update(value=_canonical(value), source_type="manual", observations=1,
                       last_confirmed_at_ms=now)
    if confidence is not _UNSET:
        changes["confidence"] = confidence
    if pinned is not _UNSET:
        changes["pinned"] = int(pinned)
    if expires_at_ms is not _UNSET:
        changes["expires_at_ms"] = expires_at_ms
    async with db.write() as tx:
        await get(tx, user_id, fact_id)
        await tx.update("memory_facts", changes, f"id = ? AND {_LIVE}", (fact_id, user_id))
        return await get(tx, user_id, fact_id)


async def delete(db: Database, user_id: str, fact_id: str) -> None:
    async with db.write() as tx:
        changed = await tx.update(
            "memory_facts", {"deleted_at_ms": now_ms()}, f"id = ? AND {_LIVE}", (fact_id, user_id)
        )
    if changed != 1:
        raise NotFound("no such memory fact")
