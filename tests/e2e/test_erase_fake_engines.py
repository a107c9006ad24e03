"""Erasing a user through gateway processes in front of the fake EverOS Cloud engines (v2 and
the legacy v1, tests/fake_engines.py): the gateway calls the engine's own delete, after which
the engine, asked directly, holds nothing of the user and everything of the others."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx

from gateway.identity.auth import generate_key, hash_secret
from tests.e2e.real_engine_helpers import message, now_ms
from tests.fake_engines import fake_engine
from tests.processes import GatewayProcess, gateway


def _admin(gw: GatewayProcess, tmp: Path) -> httpx.Client:
    new = generate_key("ops")
    with sqlite3.connect(tmp / "storage" / "_gateway.db") as conn:
        conn.execute("INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms, kind) "
                     "VALUES (?, ?, ?, ?, 'admin')",
                     (new.key_id, new.user_id, hash_secret(new.secret), now_ms()))
    return httpx.Client(base_url=gw.url, timeout=60,
                        headers={"Authorization": f"Bearer {new.token}"})


def _client(gw: GatewayProcess, user_id: str) -> httpx.Client:
    return httpx.Client(base_url=gw.url, timeout=60,
                        headers={"Authorization": f"Bearer {gw.key(user_id)}"})


def _v2_texts(engine_url: str, query: str) -> list[str]:
    answer: dict[str, Any] = httpx.post(f"{engine_url}/api/v2/memory/search",
                                        json={"query": query}).json()
    return sorted(episode["episode"] for episode in answer["data"]["episodes"])


def test_cloud_v2_erase_deletes_the_users_memories_in_the_engine(tmp_path: Path) -> None:
    with fake_engine("everos-cloud") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud") as gw:
        for user, text in (("alice", "alice sails at dawn"), ("bob", "bob sails at noon")):
            with _client(gw, user) as client:
                added = client.post("/api/v2/memory/add", json={
                    "session_id": f"trip-{user}",
                    "messages": [message("user", user, text, now_ms())]})
                assert added.status_code == 202, added.text
        assert _v2_texts(engine_url, "sails") == ["alice sails at dawn", "bob sails at noon"]
        with _admin(gw, tmp_path) as admin:
            erased = admin.delete("/admin/users/alice")
        assert erased.status_code == 200, erased.text
        assert erased.json()["engine"] == {"erased": True, "remaining": []}
        assert _v2_texts(engine_url, "sails") == ["bob sails at noon"]


def test_cloud_v1_erase_deletes_the_users_memories_in_the_engine(tmp_path: Path) -> None:
    with fake_engine("everos-cloud-v1") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud-v1") as gw:
        for user in ("alice", "bob"):
            with _client(gw, user) as client:
                added = client.post("/api/v1/memories", json={
                    "user_id": user, "session_id": f"s-{user}",
                    "messages": [message("user", user, f"{user} likes kites", now_ms())]})
                assert added.status_code == 200, added.text
        with _admin(gw, tmp_path) as admin:
            erased = admin.delete("/admin/users/alice")
        assert erased.status_code == 200, erased.text
        assert erased.json()["engine"] == {"erased": True, "remaining": []}

        def found(user: str) -> int:
            answer = httpx.post(f"{engine_url}/api/v1/memories/search",
                                json={"query": "kites", "filters": {"user_id": user}}).json()
            return len(answer["data"]["episodes"])

        assert (found("alice"), found("bob")) == (0, 1)
