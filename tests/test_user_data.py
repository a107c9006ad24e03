"""A user's data (SPEC §17): erase (`DELETE /admin/users/{id}`) and export (`GET
/admin/users/{id}/export`, `GET /me/export`), on SQLite and PostgreSQL, on disk and S3.

Each test seeds alice and bob with rows in every table that holds a user's rows and with files
(tests/user_data_seed.py), then checks alice's side by the rows and files left and bob's by
counting every one of his rows and files before and after.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway, create_app
from gateway.config import ConfigError, Settings
from gateway.devengine.app import create_dev_engine
from gateway.errors import SessionOwnedByAnotherUser
from gateway.identity.auth import generate_key, hash_secret
from gateway.identity.ownership import CUBE_SCOPE, GROUP_SCOPE
from gateway.store import attachments as attachment_store
from gateway.store import user_rows
from gateway.store.ids import now_ms
from gateway.store.user_rows import USER_TABLES
from tests import databases
from tests.attachment_helpers import stored_bytes, stored_files
from tests.conftest import StartGateway, client_for, on_both_stores
from tests.user_data_seed import seed_user

pytestmark = [pytest.mark.both_databases, on_both_stores]
TABLES = [table.name for table in USER_TABLES]


def admin_token(settings: Settings) -> str:
    """An admin key, made as the admin API's key rows are (kind 'admin')."""
    new = generate_key("ops")
    databases.execute(
        settings.storage.database,
        "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms, kind) "
        "VALUES (?, ?, ?, ?, 'admin')", new.key_id, new.user_id, hash_secret(new.secret), now_ms())
    return new.token


def holdings(settings: Settings, user_id: str) -> dict[str, Any]:
    """Every row count of the user per table, and their stored files with their bytes."""
    found: dict[str, Any] = {
        table: databases.rows(settings.storage.database,
                              f"SELECT COUNT(*) FROM {table} WHERE user_id = ?", user_id)[0][0]
        for table in TABLES}
    found["files"] = {name: stored_bytes(settings, name) for name in stored_files(settings)
                      if name.startswith(f"{user_id}/")}
    return found


async def seed(app: Gateway, user_id: str, **sizes: int) -> dict[str, int]:
    return await seed_user(app.services.db, app.services.files, user_id, **sizes)


@pytest.fixture
async def admin(app: Gateway, settings: Settings) -> Any:
    async with client_for(app, admin_token(settings)) as client:
        yield client


async def test_every_table_with_a_user_id_is_erased_and_exported(
    app: Gateway, settings: Settings,
) -> None:
    in_schema = await user_rows.tables_with_user_id(app.services.db)
    assert in_schema == set(TABLES), "a table holding users' rows is missing from USER_TABLES"
    seeded = await seed(app, "alice")
    assert sorted(table for table, count in seeded.items() if count) == sorted(TABLES)


async def test_erase_removes_every_row_and_file_of_the_user_and_nothing_of_others(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
) -> None:
    seeded = await seed(app, "alice", messages=5, stored_files=3)
    await seed(app, "bob", messages=4, stored_files=2)
    bob_before = holdings(settings, "bob")
    assert len(holdings(settings, "alice")["files"]) == 3

    response = await admin.delete("/admin/users/alice")

    assert response.status_code == 200
    assert response.json() == {
        "userId": "alice", "status": "erased",
        "counts": dict(sorted({**seeded, "files": 3}.items())),
        "engine": {"erased": False, "remaining": ["s-alice"]},
    }
    left = holdings(settings, "alice")
    assert left == {**{table: 0 for table in TABLES}, "files": {}}
    assert holdings(settings, "bob") == bob_before
    audit = databases.rows(settings.storage.database,
                           "SELECT action, target FROM admin_audit ORDER BY seq")
    assert [tuple(row) for row in audit] == [("users.erase", "alice")]
    kept = databases.rows(settings.storage.database,
                          "SELECT erasing_user_id, user_sha256, status FROM user_erasures")
    assert [tuple(row) for row in kept] == [(None, user_rows.user_sha256("alice"), "erased")]


async def test_second_erase_is_a_no_op_with_the_same_answer(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
) -> None:
    await seed(app, "alice")
    first = await admin.delete("/admin/users/alice")
    again = await admin.delete("/admin/users/alice")
    assert again.status_code == 200
    assert again.json() == first.json()
    audit = databases.rows(settings.storage.database, "SELECT action FROM admin_audit")
    assert len(audit) == 1


async def test_erased_user_is_refused_with_401_for_any_credential(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
    make_key: Callable[[str], str],
) -> None:
    before = make_key("alice")
    async with client_for(app, before) as alice:
        assert (await alice.get("/agents")).status_code == 200
        await admin.delete("/admin/users/alice")
        assert (await alice.get("/agents")).status_code == 401
    async with client_for(app, make_key("alice")) as again:  # a key made after the erasure
        refused = await again.get("/agents")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    async with client_for(app, make_key("bob")) as bob:
        assert (await bob.get("/agents")).status_code == 200


@asynccontextmanager
async def erased_alice_in_fresh_mode(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    """A gateway with `auth.erased_users = "fresh"` (on mem0, which deletes) where alice held
    data and was erased; with an admin client."""
    engine.delete("/memories").mock(return_value=httpx.Response(200, json={"message": "ok"}))
    fresh = settings.with_values(auth={"erased_users": "fresh"}, upstream={"flavor": "mem0"})
    async with start_gateway(fresh) as app:
        await seed(app, "alice")
        async with client_for(app, admin_token(settings)) as admin:
            assert (await admin.delete("/admin/users/alice")).status_code == 200
            yield app, admin


async def test_fresh_mode_lets_an_erased_id_back_with_an_empty_account(
    settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
    engine: respx.MockRouter,
) -> None:
    async with erased_alice_in_fresh_mode(settings, start_gateway, engine) as (app, _):
        async with client_for(app, make_key("alice")) as alice:
            answer = await alice.get("/resources")
    assert answer.status_code == 200
    assert answer.json()["items"] == []


async def test_admin_routes_are_404_to_other_credentials_and_admin_keys_reach_only_them(
    app: Gateway, admin: httpx.AsyncClient, alice: httpx.AsyncClient, settings: Settings,
) -> None:
    await seed(app, "bob")
    refused = await alice.delete("/admin/users/bob")
    assert refused.status_code == 404
    assert (await alice.get("/admin/users/bob/export")).status_code == 404
    assert holdings(settings, "bob")["conversation_messages"] == 3
    assert (await admin.get("/agents")).status_code == 404
    assert (await admin.get("/me/export")).status_code == 404


async def test_erase_refuses_an_invalid_user_id_and_writes_nothing(
    app: Gateway, admin: httpx.AsyncClient, settings: Settings,
) -> None:
    response = await admin.delete("/admin/users/-alice")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "user_id"
    assert databases.rows(settings.storage.database, "SELECT * FROM user_erasures") == []


def _archive(response: httpx.Response) -> zipfile.ZipFile:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    return zipfile.ZipFile(io.BytesIO(response.content))


async def test_export_holds_every_table_the_files_and_a_manifest(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
) -> None:
    seeded = await seed(app, "alice", messages=7, stored_files=3, file_bytes=300_000)
    await seed(app, "bob")
    archive = _archive(await admin.get("/admin/users/alice/export"))

    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["counts"] == seeded
    for table in TABLES:
        lines = archive.read(f"{table}.jsonl").decode().splitlines()
        rows = [json.loads(line) for line in lines]
        assert len(rows) == seeded[table]
        assert all(row["user_id"] == "alice" for row in rows)
    keys = [json.loads(line) for line in archive.read("api_keys.jsonl").splitlines()]
    assert all("secret_sha256" not in key for key in keys)
    stored = {name: stored_bytes(settings, name) for name in stored_files(settings)
              if name.startswith("alice/")}
    assert sorted(f"files/{name.removeprefix('alice/')}" for name in stored) == \
        sorted(entry["path"] for entry in manifest["files"])
    for entry in manifest["files"]:
        data = archive.read(entry["path"])
        assert data == stored["alice/" + entry["path"].removeprefix("files/")]
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["size"] == len(data) == 300_000
    assert b"bob" not in b"".join(archive.read(name) for name in archive.namelist()
                                  if name.endswith(".jsonl"))
    audit = databases.rows(settings.storage.database, "SELECT action, target FROM admin_audit")
    assert [tuple(row) for row in audit] == [("users.export", "alice")]


async def test_a_user_exports_their_own_data_with_their_own_key(
    app: Gateway, alice: httpx.AsyncClient, settings: Settings,
) -> None:
    await seed(app, "alice")
    await seed(app, "bob")
    archive = _archive(await alice.get("/me/export"))
    messages = archive.read("conversation_messages.jsonl").decode().splitlines()
    assert sorted(json.loads(line)["content"] for line in messages) == [
        f"message {n} of alice" for n in range(3)]
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["userId"] == "alice"
    assert manifest["counts"]["api_keys"] == 2  # the seeded one and the one exporting


# --- the engine's part ---------------------------------------------------------------------


def _settings_for(settings: Settings, flavor: str) -> Settings:
    return settings.with_values(upstream={"flavor": flavor})


async def test_mem0_erase_deletes_through_delete_memories_for_the_user_and_their_agents(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    deleted = engine.delete("/memories").mock(
        return_value=httpx.Response(200, json={"message": "All relevant memories deleted"}))
    async with start_gateway(_settings_for(settings, "mem0")) as app:
        await seed(app, "alice")
        agent = holdings_agent(settings, "alice")
        async with client_for(app, admin_token(settings)) as admin:
            response = await admin.delete("/admin/users/alice")
    assert response.json()["engine"] == {"erased": True, "remaining": []}
    assert [dict(call.request.url.params) for call in deleted.calls] == [
        {"user_id": "alice"}, {"agent_id": agent}]


def holdings_agent(settings: Settings, user_id: str) -> str:
    return str(databases.rows(settings.storage.database,
                              "SELECT id FROM agents WHERE user_id = ?", user_id)[0][0])


async def test_memos_erase_deletes_by_user_filter_and_a_200_failure_keeps_it_open(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    route = engine.post("/product/delete_memory").mock(side_effect=[
        httpx.Response(200, json={"code": 200, "message": "Failed to delete memories",
                                  "data": {"status": "failure"}}),
        httpx.Response(200, json={"code": 200, "message": "ok", "data": {"status": "success"}}),
    ])
    async with start_gateway(_settings_for(settings, "memos")) as app:
        await seed(app, "alice")
        async with client_for(app, admin_token(settings)) as admin:
            failed = await admin.delete("/admin/users/alice")
            assert failed.status_code == 502
            assert holdings(settings, "alice")["conversation_messages"] == 3  # nothing removed
            async with client_for(app, databases_key(settings, "alice")) as alice:
                assert (await alice.get("/agents")).status_code == 401  # refused meanwhile
            finished = await admin.delete("/admin/users/alice")
    assert finished.status_code == 200
    assert finished.json()["engine"] == {"erased": True, "remaining": []}
    assert [json.loads(call.request.content) for call in route.calls] == [
        {"user_id": "alice"}, {"user_id": "alice"}]
    assert holdings(settings, "alice")["conversation_messages"] == 0


def databases_key(settings: Settings, user_id: str) -> str:
    new = generate_key(user_id)
    databases.execute(settings.storage.database,
                      "INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms) "
                      "VALUES (?, ?, ?, ?)", new.key_id, user_id, hash_secret(new.secret),
                      now_ms())
    return new.token


async def test_cloud_erase_deletes_each_scope_for_the_user_and_their_agents(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    route = engine.post("/api/v2/memory/delete").mock(
        return_value=httpx.Response(200, json={"data": {"count": 1}}))
    async with start_gateway(_settings_for(settings, "everos-cloud")) as app:
        await seed(app, "alice")
        databases.execute(settings.storage.database,
                          "INSERT INTO memory_sessions (app_id, project_id, session_id, user_id, "
                          "created_at) VALUES ('shop', 'p1', 's2', 'alice', 0)")
        agent = holdings_agent(settings, "alice")
        async with client_for(app, admin_token(settings)) as admin:
            response = await admin.delete("/admin/users/alice")
    assert response.json()["engine"] == {"erased": True, "remaining": []}
    assert [json.loads(call.request.content) for call in route.calls] == [
        {"app_id": "default", "project_id": "default", "user_id": "alice"},
        {"app_id": "default", "project_id": "default", "agent_id": agent},
        {"app_id": "shop", "project_id": "p1", "user_id": "alice"},
        {"app_id": "shop", "project_id": "p1", "agent_id": agent},
    ]


async def test_mem0_export_includes_the_engine_memories_it_lists(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    listed = engine.get("/memories").mock(return_value=httpx.Response(
        200, json={"results": [{"id": "m1", "memory": "likes tea", "user_id": "alice"}]}))
    async with start_gateway(_settings_for(settings, "mem0")) as app:
        await seed(app, "alice")
        async with client_for(app, admin_token(settings)) as admin:
            archive = _archive(await admin.get("/admin/users/alice/export"))
    records = [json.loads(line) for line in archive.read("engine.jsonl").splitlines()]
    assert records[0]["answer"]["results"][0]["memory"] == "likes tea"
    assert dict(listed.calls.last.request.url.params) == {"user_id": "alice"}
    assert json.loads(archive.read("manifest.json"))["counts"]["engine"] == 1


async def test_start_up_finishes_an_erasure_a_crash_interrupted(
    settings: Settings, start_gateway: StartGateway,
) -> None:
    async with start_gateway(settings) as app:
        await seed(app, "alice", messages=4, stored_files=2)
        await seed(app, "bob")
        bob_before = holdings(settings, "bob")
        # The process dies right after recording the erasure and removing one batch.
        await user_rows.begin_erasure(app.services.db, "alice", "key-1")
        await user_rows.delete_batch(app.services.db, USER_TABLES[4], "alice", 2)
    async with start_gateway(settings) as app:
        await app.services.drain()
    assert holdings(settings, "alice") == {**{table: 0 for table in TABLES}, "files": {}}
    assert holdings(settings, "bob") == bob_before
    kept = databases.rows(settings.storage.database, "SELECT status, counts FROM user_erasures")
    assert kept[0][0] == "erased"
    assert json.loads(kept[0][1])["conversation_messages"] == 4


async def test_cloud_v1_erase_deletes_by_user_and_by_each_group_claimed(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    route = engine.post("/api/v1/memories/delete").mock(return_value=httpx.Response(200))
    async with start_gateway(_settings_for(settings, "everos-cloud-v1")) as app:
        await seed(app, "alice")
        databases.execute(settings.storage.database,
                          "INSERT INTO memory_sessions (app_id, project_id, session_id, user_id, "
                          "created_at) VALUES ('_cube', '_cube', 'cube-1', 'alice', 0)")
        async with client_for(app, admin_token(settings)) as admin:
            response = await admin.delete("/admin/users/alice")
    assert response.json()["engine"] == {"erased": True, "remaining": []}
    assert [json.loads(call.request.content) for call in route.calls] == [
        {"user_id": "alice"}, {"group_id": "s-alice"},
        {"group_id": "6384e2b2184bcbf5_group"}]  # the group EverMemOS made of alice as a sender


async def test_an_engine_that_cannot_list_fails_the_export_before_any_byte(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    engine.get("/memories").mock(return_value=httpx.Response(500, json={"detail": "down"}))
    async with start_gateway(_settings_for(settings, "mem0")) as app:
        await seed(app, "alice")
        async with client_for(app, admin_token(settings)) as admin:
            response = await admin.get("/admin/users/alice/export")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_bad_response"
    assert databases.rows(settings.storage.database, "SELECT * FROM admin_audit") == []


# --- tombstones and the lifecycle of an erased id (issue 51) -----------------------------------


@asynccontextmanager
async def on_dev_engine(settings: Settings) -> AsyncIterator[Gateway]:
    """A gateway in front of the built-in dev engine, both in process."""
    dev = create_dev_engine()
    async with dev.router.lifespan_context(dev):
        gateway = create_app(settings, upstream_transport=httpx.ASGITransport(app=dev))
        async with gateway.running():
            yield gateway


def _said(user: str, text: str) -> dict[str, Any]:
    return {"session_id": "diary", "messages": [
        {"role": "user", "sender_id": user, "timestamp": now_ms(), "content": text}]}


async def test_an_erased_users_session_stays_reserved_for_everyone(
    settings: Settings, make_key: Callable[[str], str],
) -> None:
    """Issue 51 (1): erasing alice must not hand her unflushed `diary` to bob."""
    async with on_dev_engine(settings) as app:
        alice, bob = client_for(app, make_key("alice")), client_for(app, make_key("bob"))
        added = await alice.post("/api/v2/memory/add", json=_said("alice", "my bank PIN is 4321"))
        assert added.status_code == 200, added.text
        search = {"user_id": "bob", "query": "PIN", "filters": {"session_id": "diary"}}
        tasks = {"session_id": "diary"}
        before = [await bob.post("/api/v2/memory/add", json=_said("bob", "mine now")),
                  await bob.post("/api/v2/memory/search", json=search),
                  await bob.get("/api/v2/tasks", params=tasks)]
        assert [answer.status_code for answer in before] == [403, 404, 404]
        async with client_for(app, admin_token(settings)) as admin:
            erased = await admin.delete("/admin/users/alice")
        assert erased.json()["engine"] == {"erased": False, "remaining": ["diary"]}

        after = [await bob.post("/api/v2/memory/add", json=_said("bob", "mine now")),
                 await bob.post("/api/v2/memory/search", json=search),
                 await bob.get("/api/v2/tasks", params=tasks)]
        assert [(a.status_code, a.json()["error"]["code"]) for a in after] == \
            [(b.status_code, b.json()["error"]["code"]) for b in before]
        anywhere = await bob.post("/api/v2/memory/search", json={"user_id": "bob",
                                                                 "query": "PIN 4321"})
        assert anywhere.status_code == 200
        assert "4321" not in anywhere.text
        await alice.aclose()
        await bob.aclose()
    kept = databases.rows(settings.storage.database,
                          "SELECT user_id FROM memory_sessions WHERE session_id = 'diary'")
    assert [tuple(row) for row in kept] == [(user_rows.TOMBSTONE,)]


async def test_an_erased_users_groups_runs_and_cubes_are_claimable_by_no_one(
    app: Gateway, admin: httpx.AsyncClient,
) -> None:
    """Every owned id lives in memory_sessions, each kind under its own scope: all stay taken."""
    db = app.services.db
    owned = [("default", "default", "run-1"), GROUP_SCOPE + ("group-1",),
             CUBE_SCOPE + ("cube-1",), ("shop", "p1", "s-1")]
    for app_id, project_id, name in owned:
        await attachment_store.claim_session(db, "alice", app_id, project_id, name)
    assert (await admin.delete("/admin/users/alice")).status_code == 200
    for app_id, project_id, name in owned:
        assert await attachment_store.session_owner(db, app_id, project_id, name) == \
            user_rows.TOMBSTONE
        for claimant in ("bob", "alice"):
            with pytest.raises(SessionOwnedByAnotherUser):
                await attachment_store.claim_session(db, claimant, app_id, project_id, name)
    listed = (await admin.get("/admin/users")).json()["items"]
    assert [item["userId"] for item in listed] == []


async def test_fresh_is_refused_at_start_up_where_the_engine_cannot_erase(
    settings: Settings,
) -> None:
    fresh = settings.with_values(auth={"erased_users": "fresh"})
    with pytest.raises(ConfigError, match="auth.erased_users: fresh needs an engine"):
        create_app(fresh)
    create_app(fresh.with_values(upstream={"flavor": "mem0"}))  # mem0 deletes: accepted


async def test_every_later_erase_reports_what_stays_upstream(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
) -> None:
    """Issue 51 (9): the second erase reported `remaining: []` once a row came back."""
    await seed(app, "alice")
    first = (await admin.delete("/admin/users/alice")).json()
    assert first["engine"] == {"erased": False, "remaining": ["s-alice"]}
    databases_key(settings, "alice")  # a key written behind the admin API's back
    again = (await admin.delete("/admin/users/alice")).json()
    assert again["engine"] == first["engine"]
    assert (await admin.delete("/admin/users/alice")).json()["engine"] == first["engine"]


async def test_erasing_or_exporting_an_id_never_seen_is_404_and_records_nothing(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
) -> None:
    erased = await admin.delete("/admin/users/nosuchuser")
    exported = await admin.get("/admin/users/nosuchuser/export")
    assert [erased.status_code, exported.status_code] == [404, 404]
    assert erased.json()["error"]["code"] == "not_found"
    assert databases.rows(settings.storage.database, "SELECT * FROM user_erasures") == []
    assert databases.rows(settings.storage.database, "SELECT * FROM admin_audit") == []
    await seed(app, "alice")
    assert (await admin.delete("/admin/users/alice")).status_code == 200
    assert (await admin.get("/admin/users/alice/export")).status_code == 200  # erased: known


async def test_a_key_for_a_refused_erased_id_is_409_and_nothing_is_created(
    app: Gateway, settings: Settings, admin: httpx.AsyncClient,
) -> None:
    await seed(app, "alice")
    assert (await admin.delete("/admin/users/alice")).status_code == 200
    keys_before = databases.rows(settings.storage.database, "SELECT id FROM api_keys")
    for kind in ("user", "service"):
        refused = await admin.post("/admin/keys", json={"userId": "alice", "kind": kind})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "user_erased"
    assert databases.rows(settings.storage.database, "SELECT id FROM api_keys") == keys_before
    made = await admin.post("/admin/keys", json={"userId": "bob"})
    assert made.status_code == 201


async def test_fresh_lets_a_key_be_made_for_an_erased_id(
    settings: Settings, start_gateway: StartGateway, engine: respx.MockRouter,
) -> None:
    async with erased_alice_in_fresh_mode(settings, start_gateway, engine) as (_, admin):
        made = await admin.post("/admin/keys", json={"userId": "alice"})
    assert made.status_code == 201
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_erase_progress_draws_a_bar_on_a_terminal_and_plain_lines_elsewhere() -> None:
    from gateway.ops.user_data import ProgressBar
    from gateway.userdata.erasure import Progress

    steps = [Progress("engine", {}), Progress("files", {"files": 1}),
             Progress("files", {"files": 2}), Progress("done", {"files": 2})]
    terminal, log = _Terminal(), io.StringIO()
    for out in (terminal, log):
        bar = ProgressBar(2, out)
        for step in steps:
            bar(step)
    assert terminal.getvalue().count("\r") == 4 and terminal.getvalue().endswith("\n")
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == ["erasing: engine 0/2", "erasing: files 1/2",
                                           "erasing: done 2/2"]


@pytest.mark.processes
def test_users_help_points_to_nothing_a_pip_install_lacks() -> None:
    for verb in ("erase", "export"):
        result = subprocess.run([sys.executable, "-m", "gateway", "users", verb, "--help"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0
        assert "config.example.toml" not in result.stdout and "docs/" not in result.stdout
        assert "memory-gateway config example" in " ".join(result.stdout.split())
