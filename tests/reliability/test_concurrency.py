"""Under load (SPEC §13): 200 concurrent uploads, adds and searches from 20 users against a real
gateway and the dev engine. Every request succeeds, every mapping is there exactly once, every
file matches its row, SQLite stays whole and never reports "database is locked", and no user's
search shows another user's attachment.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.config import Settings
from tests.conftest import create_key
from tests.processes import dev_engine, gateway
from tests.reliability.support import auth, database, db_rows, path_of

pytestmark = pytest.mark.reliability

USERS = [f"user{n:02d}" for n in range(20)]
REQUESTS = 200


def planned(i: int) -> tuple[str, str, dict[str, Any], list[tuple[str, str, str, str]]]:
    """Request i: (user, kind, httpx arguments, the mappings it must leave behind)."""
    user = USERS[i % len(USERS)]
    kind = ("upload", "upload", "upload", "add", "add", "add", "add", "search", "search",
            "search")[i // len(USERS) % 10]
    if kind == "upload":
        name = f"photo-{i}.png"
        data = f"upload {i} of {user}".encode() * 50
        return user, kind, {"url": "/resources", "files": {"file": (name, data, "image/png")}}, [
            (user, "?resource", name, "resource_upload")]
    if kind == "search":
        return user, kind, {"url": "/memories/search",
                            "json": {"query": "photo note", "user_id": user}}, []
    session = f"{user}-s{i % 3}"  # adds of one user share sessions, so they race on them
    inline = {"type": "image", "name": f"note-{i}.png", "ext": "png",
              "base64": base64.b64encode(f"inline {i}".encode() * 40).decode()}
    linked = {"type": "image", "uri": f"https://cdn.example/{user}/{i}.jpg"}
    items = [[inline], [linked], [inline, linked]][i % 3]
    expected = [(user, session, f"note-{i}.png", "memory_add_base64")] * (inline in items) + [
        (user, session, f"{i}.jpg", "memory_add_uri")] * (linked in items)
    body = {"session_id": session, "messages": [{
        "role": "user", "sender_id": user, "timestamp": 1_780_000_000_000 + i,
        "content": [{"type": "text", "text": f"photo note {i}"}, *items]}]}
    return user, kind, {"url": "/memories/add", "json": body}, expected


async def fire(url: str, keys: dict[str, str]) -> tuple[list[tuple[str, int]], float]:
    limits = httpx.Limits(max_connections=REQUESTS, max_keepalive_connections=REQUESTS)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        async def one(i: int) -> tuple[str, int]:
            user, kind, args, _ = planned(i)
            response = await client.post(headers=auth(keys[user]), **args)
            return kind, response.status_code

        started = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        return list(results), time.perf_counter() - started


def test_200_concurrent_mixed_requests_lose_nothing_and_duplicate_nothing(
    tmp_path: Path,
) -> None:
    log = tmp_path / "gateway.log"
    settings = Settings().with_values(storage={"database": str(database(tmp_path))})
    with dev_engine(tmp_path) as engine_url, gateway(tmp_path, engine_url, log=log) as gw:
        keys = {user: create_key(settings, user) for user in USERS}
        results, seconds = asyncio.run(fire(gw.url, keys))
        statuses = Counter(f"{kind} {status}" for kind, status in results)
        foreign = 0
        for user in USERS:  # every user's search, once everything is in: only their own files
            found = httpx.post(gw.url + "/memories/search", headers=auth(keys[user]), timeout=30,
                               json={"query": "photo note uploaded file", "user_id": user})
            assert found.status_code == 200
            uris = [a["internal_uri"] for r in found.json()["results"] for a in r["attachments"]]
            assert uris, user
            foreign += sum(1 for uri in uris if uri.startswith("file:")
                           and f"/storage/{user}/" not in uri)
            foreign += sum(1 for uri in uris if uri.startswith("https:")
                           and f"/{user}/" not in uri)

    print(f"\nconcurrency: {REQUESTS} requests from {len(USERS)} users in {seconds:.2f} s "
          f"({REQUESTS / seconds:.0f} req/s): {dict(sorted(statuses.items()))}")
    assert sorted(statuses) == ["add 200", "search 200", "upload 201"], statuses
    assert foreign == 0

    expected = Counter(m for i in range(REQUESTS) for m in planned(i)[3])
    mappings = db_rows(tmp_path, "SELECT m.user_id, m.session_id, m.name, m.source, m.sha256, "
                                 "m.internal_uri, r.id AS resource_id FROM memory_attachments m "
                                 "LEFT JOIN resources r ON r.id = m.resource_id "
                                 "WHERE m.deleted_at IS NULL")
    found = Counter((m["user_id"], "?resource" if m["resource_id"] else m["session_id"],
                     m["name"], m["source"]) for m in mappings)
    lost, duplicated = expected - found, found - expected
    print(f"concurrency: {len(mappings)} mappings for {sum(expected.values())} expected; "
          f"lost {sum(lost.values())}, duplicated or unexpected {sum(duplicated.values())}")
    assert not lost and not duplicated
    assert len(mappings) == sum(expected.values()) == 60 + 27 + 27 + 2 * 26

    files = sorted(p for p in (tmp_path / "storage").glob("user*/**/*") if p.is_file())
    with_files = [m for m in mappings if m["source"] != "memory_add_uri"]
    assert sorted(path_of(m["internal_uri"]) for m in with_files) == files
    for mapping in with_files:
        data = path_of(mapping["internal_uri"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == mapping["sha256"]
    assert db_rows(tmp_path, "SELECT COUNT(*) AS n FROM pending_intents") == [{"n": 0}]

    conn = sqlite3.connect(database(tmp_path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    stderr = log.read_text()
    assert stderr.count("database is locked") == 0
    assert "Traceback" not in stderr, stderr[-3000:]
