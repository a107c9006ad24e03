"""Media assets and their relations (SPEC §12): registration, the version chain, lineage.

Every query filters by `user_id`; another user's asset reads as missing. JSON columns are text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import Field

from gateway.store.database import Database, Row, Transaction
from gateway.store.ids import new_id, now_ms
from gateway.store.records import Record

SourceType = Literal[
    "upload", "generated", "canvas", "storyboard_tile", "storyboard_video", "model3d_preview"
]
RelationType = Literal[
    "edited_from",
    "generated_from",
    "reference_of",
    "selected_in_turn",
    "latest_result_of",
    "located_on_canvas",
    "derived_preview",
    "upscaled_from",
]
SOURCE_TYPES: tuple[str, ...] = get_args(SourceType)
RELATION_TYPES: tuple[str, ...] = get_args(RelationType)
DEFAULT_PARENT_RELATION = "edited_from"


@dataclass(frozen=True)
class NewAsset:
    """What a client registers; the store adds the id, the chain fields and the timestamps."""

    media_type: str
    source_type: str
    original_url: str
    chat_id: str | None = None
    project_id: str | None = None
    preview_url: str | None = None
    mime_type: str | None = None
    width: int | None = None
    height: int | None = None
    display_name: str | None = None
    prompt: str | None = None
    model_id: str | None = None
    source_message_id: str | None = None
    source_node_id: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


class MediaAsset(Record):
    # NewAsset's fields as stored, with what the store adds; written out to keep the API's key
    # order (a subclass of NewAsset would list its fields first).
    id: str
    user_id: str = Field(exclude=True)  # every read is scoped to it; not shown
    chat_id: str | None
    project_id: str | None
    media_type: str
    source_type: str
    status: str
    original_url: str
    preview_url: str | None
    mime_type: str | None
    width: int | None
    height: int | None
    display_name: str | None
    prompt: str | None
    model_id: str | None
    source_message_id: str | None
    source_node_id: str | None
    root_asset_id: str
    primary_parent_asset_id: str | None
    summary: dict[str, Any]
    metadata: dict[str, Any]
    created_at_ms: int
    updated_at_ms: int


class Relation(Record):
    id: str
    from_asset_id: str
    to_asset_id: str
    relation_type: str
    confidence: int
    # 0 for the primary parent, 1.. for further parents; null for relations added later
    parent_position: int | None
    created_at_ms: int


@dataclass(frozen=True)
class Lineage:
    chain: list[MediaAsset]  # root first, the asset itself last
    descendants: list[MediaAsset]  # every asset derived from it, in registration order
    relations: list[Relation]  # every relation row touching the asset


class UnknownAssets(Exception):
    """Some asset ids are not the caller's (or do not exist); `missing` lists them in order."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(", ".join(missing))


def _asset(row: Row) -> MediaAsset:
    return MediaAsset.from_row(
        row, summary=json.loads(row["summary"]), metadata=json.loads(row["metadata"])
    )


def _relation(row: Row) -> Relation:
    return Relation.from_row(row)


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(ids))


async def owned_asset_ids(
    db: Database | Transaction, user_id: str, asset_ids: Iterable[str]
) -> set[str]:
    """The subset of `asset_ids` that are the user's assets."""
    wanted = _unique(asset_ids)
    if not wanted:
        return set()
    rows = await db.read(
        f"SELECT id FROM media_assets WHERE user_id = ? AND id IN ({_placeholders(len(wanted))})",
        (user_id, *wanted),
    )
    return {row["id"] for row in rows}


async def require_owned(
    db: Database | Transaction, user_id: str, asset_ids: Iterable[str]
) -> None:
    """Raise UnknownAssets naming the ids that are not the user's."""
    wanted = _unique(asset_ids)
    owned = await owned_asset_ids(db, user_id, wanted)
    missing = [asset_id for asset_id in wanted if asset_id not in owned]
    if missing:
        raise UnknownAssets(missing)


async def register(
    db: Database,
    user_id: str,
    new: NewAsset,
    parent_ids: Sequence[str] = (),
    relation_type: str = DEFAULT_PARENT_RELATION,
) -> MediaAsset:
    """Insert an asset and one relation row per parent; the first parent is the primary one.

    The root is the primary parent's root (the asset itself without parents). Raises
    UnknownAssets when a parent is not the user's; nothing is written then.
    """
    async with db.write() as tx:
        return await insert(tx, user_id, new, parent_ids, relation_type)


async def insert(
    tx: Transaction,
    user_id: str,
    new: NewAsset,
    parent_ids: Sequence[str] = (),
    relation_type: str = DEFAULT_PARENT_RELATION,
    asset_id: str | None = None,
) -> MediaAsset:
    """`register` inside the caller's transaction (`asset_id` when the caller chose it)."""
    parents = _unique(parent_ids)
    asset_id = asset_id or new_id("ast")
    now = now_ms()
    await require_owned(tx, user_id, parents)
    root_id = asset_id
    if parents:
        row = await tx.read_one(
            "SELECT root_asset_id FROM media_assets WHERE user_id = ? AND id = ?",
            (user_id, parents[0]),
        )
        assert row is not None  # checked just above, inside the same transaction
        root_id = row["root_asset_id"]
    await tx.execute(
        "INSERT INTO media_assets (id, user_id, chat_id, project_id, media_type, source_type,"
        " original_url, preview_url, mime_type, width, height, display_name, prompt, model_id,"
        " source_message_id, source_node_id, root_asset_id, primary_parent_asset_id, summary,"
        " metadata, created_at_ms, updated_at_ms, original_url_sha256)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            asset_id, user_id, new.chat_id, new.project_id, new.media_type, new.source_type,
            new.original_url, new.preview_url, new.mime_type, new.width, new.height,
            new.display_name, new.prompt, new.model_id, new.source_message_id,
            new.source_node_id, root_id, parents[0] if parents else None,
            json.dumps(new.summary, ensure_ascii=False),
            json.dumps(new.metadata, ensure_ascii=False), now, now, url_sha256(new.original_url),
        ),
    )
    await tx.executemany(
        "INSERT INTO media_asset_relations (id, user_id, from_asset_id, to_asset_id,"
        " relation_type, confidence, parent_position, created_at_ms)"
        " VALUES (?, ?, ?, ?, ?, 100, ?, ?)",
        [
            (new_id("rel"), user_id, asset_id, parent, relation_type, position, now)
            for position, parent in enumerate(parents)
        ],
    )
    row = await tx.read_one("SELECT * FROM media_assets WHERE id = ?", (asset_id,))
    assert row is not None
    return _asset(row)


def url_sha256(original_url: str) -> str:
    """The hex SHA-256 of an asset's originalUrl (what `sha256:` image ids name)."""
    return hashlib.sha256(original_url.encode("utf-8")).hexdigest()


async def by_url_sha256(
    db: Database, user_id: str, digests: Iterable[str]
) -> dict[str, MediaAsset]:
    """The user's assets whose originalUrl hashes to each digest (the earliest registered when
    several share a URL); digests with no such asset are absent from the answer."""
    wanted = _unique(digests)
    if not wanted:
        return {}
    unhashed = await db.read(
        "SELECT id, original_url FROM media_assets"
        " WHERE user_id = ? AND original_url_sha256 IS NULL",
        (user_id,),
    )
    if unhashed:  # registered before the column existed: hashed once, here
        async with db.write() as tx:
            await tx.executemany(
                "UPDATE media_assets SET original_url_sha256 = ? WHERE id = ? AND user_id = ?",
                [(url_sha256(row["original_url"]), row["id"], user_id) for row in unhashed],
            )
    rows = await db.read(
        "SELECT * FROM media_assets WHERE user_id = ?"
        f" AND original_url_sha256 IN ({_placeholders(len(wanted))})"
        " ORDER BY created_at_ms DESC, id DESC",
        (user_id, *wanted),
    )
    found: dict[str, MediaAsset] = {}
    for row in rows:  # newest first, so the earliest registered one is kept last
        found[row["original_url_sha256"]] = _asset(row)
    return found


async def get(db: Database | Transaction, user_id: str, asset_id: str) -> MediaAsset | None:
    row = await db.read_one(
        "SELECT * FROM media_assets WHERE user_id = ? AND id = ?", (user_id, asset_id)
    )
    return None if row is None else _asset(row)


async def ancestors(
    db: Database | Transaction, user_id: str, asset_ids: Iterable[str]
) -> list[MediaAsset]:
    """Every asset on the primary-parent chains above `asset_ids` (not the assets themselves)."""
    start = _unique(asset_ids)
    if not start:
        return []
    rows = await db.read(
        "WITH RECURSIVE up(id) AS ("
        " SELECT primary_parent_asset_id FROM media_assets"
        f"  WHERE user_id = ? AND id IN ({_placeholders(len(start))})"
        "   AND primary_parent_asset_id IS NOT NULL"
        " UNION"
        " SELECT a.primary_parent_asset_id FROM media_assets a JOIN up ON a.id = up.id"
        "  WHERE a.user_id = ? AND a.primary_parent_asset_id IS NOT NULL)"
        " SELECT * FROM media_assets WHERE user_id = ? AND id IN (SELECT id FROM up)"
        " ORDER BY created_at_ms, rowid",
        (user_id, *start, user_id, user_id),
    )
    return [_asset(row) for row in rows]


async def resolution_pool(
    db: Database | Transaction, user_id: str, chat_id: str, named_ids: Iterable[str]
) -> list[MediaAsset]:
    """What a chat turn may resolve to, in registration order: the user's assets registered in
    the chat, those its turn results named, the `named_ids` the user owns, and every ancestor of
    those on the version chain (so "the original" is always known)."""
    named = _unique(named_ids)
    in_named = _placeholders(len(named))
    rows = await db.read(
        "WITH RECURSIVE base(id) AS ("
        " SELECT id FROM media_assets WHERE user_id = ? AND chat_id = ?"
        " UNION SELECT j.value FROM chat_turn_results t, json_each(t.asset_ids) j"
        "  WHERE t.user_id = ? AND t.chat_id = ?"
        f" UNION SELECT id FROM media_assets WHERE user_id = ? AND id IN ({in_named or 'NULL'})"
        "), up(id) AS ("
        " SELECT id FROM base"
        " UNION SELECT a.primary_parent_asset_id FROM media_assets a JOIN up ON a.id = up.id"
        "  WHERE a.user_id = ? AND a.primary_parent_asset_id IS NOT NULL)"
        " SELECT * FROM media_assets WHERE user_id = ? AND id IN (SELECT id FROM up)"
        " ORDER BY created_at_ms, rowid",
        (user_id, chat_id, user_id, chat_id, user_id, *named, user_id, user_id),
    )
    return [_asset(row) for row in rows]


async def lineage(db: Database, user_id: str, asset_id: str) -> Lineage | None:
    """The chain root → asset, the descendants (over registration parent links), the relations."""
    asset = await get(db, user_id, asset_id)
    if asset is None:
        return None
    above = {a.id: a for a in await ancestors(db, user_id, [asset_id])}
    chain = [asset]
    while chain[-1].primary_parent_asset_id in above:
        chain.append(above[chain[-1].primary_parent_asset_id])
    chain.reverse()
    rows = await db.read(
        "WITH RECURSIVE down(id) AS ("
        " SELECT from_asset_id FROM media_asset_relations"
        "  WHERE user_id = ? AND to_asset_id = ? AND parent_position IS NOT NULL"
        " UNION"
        " SELECT r.from_asset_id FROM media_asset_relations r JOIN down ON r.to_asset_id = down.id"
        "  WHERE r.user_id = ? AND r.parent_position IS NOT NULL)"
        " SELECT * FROM media_assets WHERE user_id = ? AND id IN (SELECT id FROM down)"
        " ORDER BY created_at_ms, rowid",
        (user_id, asset_id, user_id, user_id),
    )
    relation_rows = await db.read(
        "SELECT * FROM media_asset_relations WHERE user_id = ? AND from_asset_id = ?"
        " UNION SELECT * FROM media_asset_relations WHERE user_id = ? AND to_asset_id = ?"
        " ORDER BY created_at_ms, id",
        (user_id, asset_id, user_id, asset_id),
    )
    return Lineage(chain, [_asset(row) for row in rows], [_relation(r) for r in relation_rows])


async def add_relation(
    db: Database,
    user_id: str,
    from_asset_id: str,
    to_asset_id: str,
    relation_type: str,
    confidence: int = 100,
) -> tuple[Relation, bool]:
    """Record a relation between two of the user's assets; (relation, created).

    The same (from, to, type) again returns the stored row unchanged with created False.
    Raises UnknownAssets when either end is not the user's.
    """
    async with db.write() as tx:
        await require_owned(tx, user_id, [from_asset_id, to_asset_id])
        created = await tx.execute(
            "INSERT INTO media_asset_relations (id, user_id, from_asset_id, to_asset_id,"
            " relation_type, confidence, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (new_id("rel"), user_id, from_asset_id, to_asset_id, relation_type, confidence,
             now_ms()),
        )
        row = await tx.read_one(
            "SELECT * FROM media_asset_relations WHERE user_id = ? AND from_asset_id = ?"
            " AND to_asset_id = ? AND relation_type = ?",
            (user_id, from_asset_id, to_asset_id, relation_type),
        )
    assert row is not None
    return _relation(row), created == 1
