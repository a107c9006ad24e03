"""Rows of `dev_jobs`: the built-in dev job runner's jobs (gateway/devjobs/), one per
(user, idempotency key), so a retried submission gets the same job, across restarts too.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from gateway.store.database import Database
from gateway.store.ids import new_id, now_ms


@dataclass(frozen=True)
class DevJob:
    id: str
    user_id: str
    kind: str
    payload: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    created_at_ms: int
    finished_at_ms: int | None


def _job(row: sqlite3.Row) -> DevJob:
    return DevJob(
        id=row["id"],
        user_id=row["user_id"],
        kind=row["kind"],
        payload=json.loads(row["payload"]),
        result=None if row["result"] is None else json.loads(row["result"]),
        error=row["error"],
        created_at_ms=row["created_at_ms"],
        finished_at_ms=row["finished_at_ms"],
    )


async def submit(
    db: Database, user_id: str, idempotency_key: str, kind: str, payload: dict[str, Any]
) -> tuple[DevJob, bool]:
    """The job for this key, created now unless it exists; (job, created)."""
    async with db.write() as tx:
        created = await tx.execute(
            "INSERT INTO dev_jobs (id, user_id, idempotency_key, kind, payload, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, idempotency_key) DO NOTHING",
            (new_id("djob"), user_id, idempotency_key, kind,
             json.dumps(payload, ensure_ascii=False), now_ms()),
        )
        row = await tx.read_one(
            "SELECT * FROM dev_jobs WHERE user_id = ? AND idempotency_key = ?",
            (user_id, idempotency_key),
        )
    assert row is not None
    return _job(row), created == 1


async def get(db: Database, user_id: str, job_id: str) -> DevJob | None:
    row = await db.read_one(
        "SELECT * FROM dev_jobs WHERE user_id = ? AND id = ?", (user_id, job_id)
    )
    return None if row is None else _job(row)


async def finish(
    db: Database,
    user_id: str,
    job_id: str,
    *,
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> DevJob:
    """Record the job's outcome once; a job finished meanwhile keeps its first outcome."""
    async with db.write() as tx:
        await tx.update(
            "dev_jobs",
            {"result": None if result is None else json.dumps(result, ensure_ascii=False),
             "error": error, "finished_at_ms": now_ms()},
            "user_id = ? AND id = ? AND finished_at_ms IS NULL",
            (user_id, job_id),
        )
        row = await tx.read_one(
            "SELECT * FROM dev_jobs WHERE user_id = ? AND id = ?", (user_id, job_id)
        )
    assert row is not None
    return _job(row)
