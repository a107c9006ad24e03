"""Helpers for attachment tests: a fake engine that records adds and answers searches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import respx

from gateway.attachments.s3 import split_s3_url
from gateway.config import Settings
from gateway.store import attachments
from gateway.store.attachments import Intent, new_mapping
from gateway.store.database import Database
from gateway.store.ids import new_id
from tests import databases

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def engine_ok(engine: respx.MockRouter) -> dict[str, respx.Route]:
    """Add and flush succeed; returns the routes so tests can read the requests sent."""
    return {
        "add": engine.post("/api/v2/memory/add").mock(
            return_value=httpx.Response(200, json={"request_id": "r", "data": {"status": "ok"}})
        ),
        "flush": engine.post("/api/v2/memory/flush").mock(
            return_value=httpx.Response(200, json={"request_id": "r", "data": {}})
        ),
    }


def answer_search(engine: respx.MockRouter, payload: Any) -> respx.Route:
    return engine.post("/api/v2/memory/search").mock(
        return_value=httpx.Response(200, json=payload)
    )


def episodes(*items: dict[str, Any], unprocessed: list[dict[str, Any]] | None = None) -> dict:
    return {"request_id": "r", "data": {
        "episodes": list(items), "profiles": [], "agent_cases": [], "agent_skills": [],
        "unprocessed_messages": unprocessed or []}}


def rows(settings: Settings, sql: str, *params: Any) -> list[Any]:
    return databases.rows(settings.storage.database, sql, *params)


def files_under(root: str | Path) -> list[Path]:
    base = Path(root)
    return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []


def sent_json(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


def _s3_client(settings: Settings):  # type: ignore[no-untyped-def]
    import botocore.session
    from botocore.config import Config

    return botocore.session.get_session().create_client(
        "s3", endpoint_url=settings.storage.s3_endpoint_url or None,
        region_name=settings.storage.s3_region or None,
        config=Config(s3={"addressing_style": "path"}))


def stored_files(settings: Settings) -> list[str]:
    """Every stored file, as `user/kind/id/name` under the disk root or the S3 prefix."""
    if settings.storage.files:
        bucket, prefix = split_s3_url(settings.storage.files)
        client = _s3_client(settings)
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=f"{prefix}/"):
            keys += [item["Key"][len(prefix) + 1:] for item in page.get("Contents", [])]
        return sorted(keys)
    root = Path(settings.storage.root)
    return [str(path.relative_to(root)) for path in files_under(root)]


def stored_bytes(settings: Settings, relative: str) -> bytes:
    if settings.storage.files:
        bucket, prefix = split_s3_url(settings.storage.files)
        found = _s3_client(settings).get_object(Bucket=bucket, Key=f"{prefix}/{relative}")
        return bytes(found["Body"].read())
    return (Path(settings.storage.root) / relative).read_bytes()


def remove_stored(settings: Settings, relative: str) -> None:
    """Make a stored file vanish behind the gateway's back."""
    if settings.storage.files:
        bucket, prefix = split_s3_url(settings.storage.files)
        _s3_client(settings).delete_object(Bucket=bucket, Key=f"{prefix}/{relative}")
    else:
        (Path(settings.storage.root) / relative).unlink()


def stored_uri(settings: Settings, relative: str) -> str:
    """The internal_uri of a stored file."""
    if settings.storage.files:
        return f"{settings.storage.files.rstrip('/')}/{relative}"
    return (Path(settings.storage.root).resolve() / relative).as_uri()


async def add_mappings(db: Database, user: str, session: str, *names: str) -> None:
    """What an add by `user` to `session` records: the session claimed, and a mapping of a
    client URI per name in `names` (none: the claim alone)."""
    intent = Intent(id=new_id("int"), user_id=user, kind="memory_add")
    for name in names:
        intent.mappings.append(new_mapping(
            user_id=user, app_id="default", project_id="default", session_id=session,
            name=name, content_type="image/png", internal_uri=f"https://cdn.example/{name}",
            source="memory_add_uri"))
    await attachments.begin_intent(db, intent, ("default", "default", session))
    await attachments.commit_intent(db, intent)
