"""Erasing a user in front of the real EverOS 1.5.1 engine, which serves no delete (SPEC §17):
the gateway removes everything it holds, refuses the user from then on, and its answer lists
the sessions that stay upstream; the engine, asked directly, still has them, and no one can
claim or read them through the gateway (tombstones)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.identity.auth import generate_key, hash_secret
from gateway.store.user_rows import USER_TABLES
from tests.e2e.real_engine_helpers import message, new_session, now_ms, png
from tests.everos_engine import EverosEngine, eventually, everos_engine
from tests.processes import gateway

pytestmark = pytest.mark.e2e


def _admin_key(database: Path) -> str:
    new = generate_key("ops")
    with sqlite3.connect(database) as conn:
        conn.execute("INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms, kind) "
                     "VALUES (?, ?, ?, ?, 'admin')",
                     (new.key_id, new.user_id, hash_secret(new.secret), now_ms()))
    return new.token


def _rows_of(database: Path, user_id: str) -> dict[str, int]:
    with sqlite3.connect(database) as conn:
        return {table.name: conn.execute(f"SELECT COUNT(*) FROM {table.name} WHERE user_id = ?",
                                         (user_id,)).fetchone()[0] for table in USER_TABLES}


@pytest.fixture(scope="module")
def everos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EverosEngine]:
    """An engine of this module's own: what it is left holding (an erased user's sessions, files
    it was handed that are gone) never reaches the session's shared engine and its tests."""
    with everos_engine(tmp_path_factory.mktemp("everos-erase")) as engine:
        yield engine


def _episode_of(everos: EverosEngine, user: str, session: str) -> dict[str, Any] | None:
    response = everos.post("/api/v2/memory/search", {"query": "cliff", "user_id": user})
    assert response.status_code == 200, response.text
    found = [e for e in response.json()["data"]["episodes"] if e["session_id"] == session]
    return found[0] if found else None


def test_erase_on_local_everos_lists_the_sessions_that_stay_upstream(
    everos: EverosEngine, tmp_path: Path,
) -> None:
    user = f"erin-{secrets.token_hex(4)}"  # the engine is shared by the session's tests
    session = new_session("erase")
    with gateway(tmp_path, everos.url, log=tmp_path / "gateway.log") as gw:
        database = tmp_path / "storage" / "_gateway.db"
        with httpx.Client(base_url=gw.url, timeout=60,
                          headers={"Authorization": f"Bearer {gw.key(user)}"}) as client:
            at = now_ms()
            added = client.post("/api/v2/memory/add", json={"session_id": session, "messages": [
                message("user", user, "my windmill photos from the cliff walk", at)]})
            assert added.status_code == 200, added.text
            flushed = client.post("/api/v2/memory/flush", json={"session_id": session})
            assert flushed.status_code == 200, flushed.text
            uploaded = client.post("/resources", files={"file": ("cliff.png", png(2, 3),
                                                                 "image/png")})
            assert uploaded.status_code == 201, uploaded.text
            resource_session = uploaded.json()["session_id"]
            # The engine reads an upload's file from the gateway's disk in the background: let
            # it finish before the erase removes the file, or its queue stalls on the missing
            # file and holds up the tests after this one.
            # (Extraction runs behind the engine's own queue: on a machine busy with the rest
            # of the suite it took over 30 s once, alone about 5 s.)
            eventually(lambda: _episode_of(everos, user, resource_session), timeout=120.0,
                       what="the upload's episode")

            with httpx.Client(base_url=gw.url, timeout=120, headers={
                    "Authorization": f"Bearer {_admin_key(database)}"}) as admin:
                erased = admin.delete(f"/admin/users/{user}")

            assert erased.status_code == 200, erased.text
            answer = erased.json()
            assert answer["status"] == "erased"
            assert answer["engine"] == {"erased": False,
                                        "remaining": sorted([session, resource_session])}
            assert answer["counts"]["files"] == 1
            refused = client.post("/api/v2/memory/search", json={"query": "windmill",
                                                                 "user_id": user})
            assert refused.status_code == 401
    assert _rows_of(database, user) == {table.name: 0 for table in USER_TABLES}
    assert not (tmp_path / "storage" / user).exists()

    # What the answer says stays upstream is there: the engine still finds the session.
    def found() -> dict[str, Any] | None:
        response = everos.post("/api/v2/memory/search", {"query": "windmill cliff",
                                                         "user_id": user})
        assert response.status_code == 200, response.text
        episodes = [e for e in response.json()["data"]["episodes"]
                    if e["session_id"] == session]
        return episodes[0] if episodes else None

    assert "windmill" in eventually(found, what="the erased user's episode")["episode"]


def test_an_erased_users_session_stays_reserved_on_local_everos(
    everos: EverosEngine, tmp_path: Path,
) -> None:
    """Issue 51 (1), as seen on EverOS 1.5.1: after alice's erasure, bob's add to her unflushed
    session made it his, and his search read her message from `unprocessed_messages`."""
    suffix = secrets.token_hex(4)
    alice, bob = f"alice-{suffix}", f"bob-{suffix}"
    diary = new_session("diary")
    with gateway(tmp_path, everos.url, log=tmp_path / "gateway.log") as gw:
        database = tmp_path / "storage" / "_gateway.db"

        def client(user: str) -> httpx.Client:
            return httpx.Client(base_url=gw.url, timeout=60,
                                headers={"Authorization": f"Bearer {gw.key(user)}"})

        def said(user: str, text: str) -> dict[str, Any]:
            return {"session_id": diary, "messages": [message("user", user, text, now_ms())]}

        search = {"user_id": bob, "query": "PIN", "filters": {"session_id": diary}}
        with client(alice) as as_alice, client(bob) as as_bob:
            added = as_alice.post("/api/v2/memory/add", json=said(alice, "my bank PIN is 4321"))
            assert added.status_code == 200, added.text
            assert as_bob.post("/api/v2/memory/add",
                               json=said(bob, "hello")).status_code == 403
            with httpx.Client(base_url=gw.url, timeout=120, headers={
                    "Authorization": f"Bearer {_admin_key(database)}"}) as admin:
                erased = admin.delete(f"/admin/users/{alice}")
            assert erased.status_code == 200, erased.text
            assert erased.json()["engine"] == {"erased": False, "remaining": [diary]}

            claim = as_bob.post("/api/v2/memory/add", json=said(bob, "hello"))
            assert claim.status_code == 403, claim.text
            assert claim.json()["error"]["code"] == "session_owned_by_another_user"
            read = as_bob.post("/api/v2/memory/search", json=search)
            assert read.status_code == 404, read.text
            anywhere = as_bob.post("/api/v2/memory/search", json={"user_id": bob,
                                                                  "query": "bank PIN"})
            assert anywhere.status_code == 200, anywhere.text
            assert "4321" not in anywhere.text
    # The engine still holds her message under the session: the reservation is what guards it.
    held = everos.post("/api/v2/memory/search", {"user_id": alice, "query": "PIN",
                                                 "filters": {"session_id": diary}})
    assert "4321" in held.text
