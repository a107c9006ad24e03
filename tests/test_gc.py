"""`memory-gateway gc` (SPEC §13): orphan files, rows whose file vanished, after a grace period."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import respx

from gateway.app import create_app
from gateway.attachments.files import path_from_uri
from gateway.attachments.s3 import split_s3_url
from gateway.config import Settings
from gateway.ops.gc import Entry, Folder, RowState, Snapshot, plan
from gateway.store.file_rows import FileRow
from tests import databases
from tests.attachment_helpers import (
    PNG,
    engine_ok,
    files_under,
    remove_stored,
    rows,
    stored_files,
)
from tests.conftest import client_for, create_key, storage_values
from tests.s3_server import S3Server

pytestmark = pytest.mark.both_databases

HOUR_S = 3600
OLD_S = time.time() - 2 * HOUR_S  # older than the default grace of an hour


def age(path: Path, when: float = OLD_S) -> None:
    os.utime(path, (when, when))


def sql(settings: Settings, statement: str, *params: object) -> None:
    databases.execute(settings.storage.database, statement, *params)


def run_gc(settings: Settings, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    env = {"MEMORY_GATEWAY_STORAGE_DATABASE": settings.storage.database,
           "MEMORY_GATEWAY_STORAGE_ROOT": settings.storage.root, "PATH": "/usr/bin:/bin",
           **(env or {})}
    result = subprocess.run([sys.executable, "-m", "gateway", "gc", *args], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result


def state(settings: Settings) -> tuple[list[Path], list[tuple[str, object]]]:
    """Every file and every row's deletion mark: what gc may change."""
    marks = [(r["id"], r["deleted_at"]) for r in rows(
        settings, "SELECT id, deleted_at FROM resources UNION ALL "
                  "SELECT id, deleted_at FROM memory_attachments ORDER BY 1")]
    return files_under(settings.storage.root), marks


@pytest.mark.processes
async def test_gc_removes_orphans_marks_vanished_rows_and_spares_young_and_pending_work(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    root = Path(settings.storage.root).resolve()
    uploads = []
    for name in ("kept.png", "vanishes.png", "deleted.png"):
        response = await alice.post("/resources", files={"file": (name, PNG + name.encode())})
        assert response.status_code == 201
        uploads.append(response.json())
    kept, vanishing, deleted = uploads
    added = await alice.post("/memories/add", json={"session_id": "s1", "messages": [{
        "role": "user", "sender_id": "alice", "content": [
            {"type": "image", "base64": base64.b64encode(PNG).decode(), "name": "a.png"},
            {"type": "image", "base64": base64.b64encode(PNG[:9]).decode(), "name": "b.png"},
            {"type": "image", "uri": f"file://{root}/alice/memory_attachments/x/client.png"}]}]})
    assert added.status_code == 200
    by_name = {r["name"]: r for r in rows(settings, "SELECT * FROM memory_attachments")}
    # Everything so far is two hours old, rows and files alike.
    sql(settings, "UPDATE resources SET created_at = ?", int(OLD_S * 1000))
    sql(settings, "UPDATE memory_attachments SET created_at = ?", int(OLD_S * 1000))
    for path in root.rglob("*"):
        age(path)

    def file_of(uri: str) -> Path:
        found = path_from_uri(uri)
        assert found is not None
        return found

    # A resource whose file vanished, a base64 file that vanished, a deleted resource whose file
    # stayed (crash between the row and the removal), a stray temp file in a live folder, an old
    # orphan folder, a young orphan folder, a folder a pending intent names, files elsewhere.
    vanished_file = root / "alice" / "resources" / vanishing["id"] / "vanishes.png"
    vanished_file.unlink()
    file_of(by_name["b.png"]["internal_uri"]).unlink()
    sql(settings, "UPDATE resources SET deleted_at = 1 WHERE id = ?", deleted["id"])
    sql(settings, "UPDATE memory_attachments SET deleted_at = 1 WHERE resource_id = ?",
        deleted["id"])
    kept_folder = root / "alice" / "resources" / kept["id"]
    stray = kept_folder / ".part-0123456789abcdef"
    stray.write_bytes(b"half")
    age(stray)
    orphan = root / "alice" / "memory_attachments" / "att_orphan"
    orphan.mkdir(parents=True)
    (orphan / "lost.png").write_bytes(b"lost")
    age(orphan / "lost.png")
    age(orphan)
    young = root / "bob" / "resources" / "res_young"
    young.mkdir(parents=True)
    (young / ".upload").write_bytes(b"streaming")
    pending = root / "bob" / "memory_attachments" / "att_pending"
    pending.mkdir(parents=True)
    (pending / "p.png").write_bytes(b"pending")
    age(pending / "p.png")
    age(pending)
    sql(settings, "INSERT INTO pending_intents (id, user_id, kind, payload, created_at) "
                  "VALUES ('int_1', 'bob', 'memory_add', ?, 1)",
        json.dumps({"mappings": [], "folders": [str(pending)], "resource": None}))
    elsewhere = [root / "alice" / "notes.txt", root / "_other" / "resources" / "r" / "x.png"]
    for path in elsewhere:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"not gc's")
        age(path)

    before = state(settings)
    dry = run_gc(settings, "--dry-run")
    assert state(settings) == before
    assert dry.stdout.splitlines()[0] == (
        "gc (dry run): would remove 3 orphan file(s) and 2 empty folder(s); would mark "
        "1 resource(s) and 1 mapping(s) whose file vanished (grace 3600 s)")

    done = run_gc(settings)
    deleted_folder = root / "alice" / "resources" / deleted["id"]
    assert done.stdout.splitlines()[0] == (
        "gc: removed 3 orphan file(s) and 2 empty folder(s); marked 1 resource(s) and "
        "1 mapping(s) whose file vanished (grace 3600 s)")
    assert sorted(done.stdout.splitlines()[1:]) == sorted([
        f"removed file {stray}", f"removed file {orphan / 'lost.png'}",
        f"removed file {deleted_folder / 'deleted.png'}",
        f"removed folder {orphan}", f"removed folder {deleted_folder}",
        f"marked resource {vanishing['id']} of alice: {vanished_file} is missing",
        f"marked mapping {by_name['b.png']['id']} of alice: "
        f"{file_of(by_name['b.png']['internal_uri'])} is missing",
    ])
    assert not stray.exists() and not orphan.exists() and not deleted_folder.exists()
    assert (kept_folder / "kept.png").read_bytes() == PNG + b"kept.png"
    assert file_of(by_name["a.png"]["internal_uri"]).read_bytes() == PNG
    assert (young / ".upload").exists() and (pending / "p.png").exists()
    assert all(path.exists() for path in elsewhere)
    live = {r["id"] for r in rows(settings, "SELECT id FROM resources WHERE deleted_at IS NULL")}
    assert live == {kept["id"]}
    live_mappings = {r["name"] for r in rows(
        settings, "SELECT name FROM memory_attachments WHERE deleted_at IS NULL")}
    # The client's own file:// URI is not the gateway's file: never marked.
    assert live_mappings == {"kept.png", "a.png", "client.png"}

    again = run_gc(settings)
    assert again.stdout.splitlines() == [
        "gc: removed 0 orphan file(s) and 0 empty folder(s); marked 0 resource(s) and "
        "0 mapping(s) whose file vanished (grace 3600 s)"]
    assert (await alice.get(f"/resources/{vanishing['id']}")).status_code == 404


def test_plan_keeps_what_is_younger_than_the_grace_period() -> None:
    now = 10_000.0
    folder = "/srv/storage/alice/resources/res_1"

    def row(created_s: float, location: str | None = f"{folder}/a.png") -> RowState:
        return RowState(FileRow("resource", "res_1", "alice", f"file://{folder}/a.png",
                                "resource", int(created_s * 1000)), location, False)

    def snapshot(file_age_s: float, row_age_s: float) -> Snapshot:
        entry = Entry(f"{folder}/stray.bin", now - file_age_s)
        return Snapshot(now, (Folder(folder, now - file_age_s, (entry,)),),
                        (row(now - row_age_s),), frozenset())

    young = plan(snapshot(59, 59), grace_s=60)
    assert young.empty
    old = plan(snapshot(60, 60), grace_s=60)
    assert old.orphan_files == [f"{folder}/stray.bin"] and old.empty_folders == [folder]
    assert [s.row.id for s in old.vanished_resources] == ["res_1"]
    protected = plan(Snapshot(now, snapshot(60, 60).folders, snapshot(60, 60).rows,
                              frozenset({folder})), grace_s=60)
    assert protected.empty
    # A row whose file is not one of the store's (a moved root): never taken for vanished.
    moved_root = plan(Snapshot(now, (), (row(now - 60, None),), frozenset()), grace_s=60)
    assert moved_root.empty


async def test_gc_on_s3_removes_orphan_objects_and_marks_rows_whose_object_vanished(
    s3_server: S3Server, tmp_path: Path, engine: respx.MockRouter, database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings().with_values(
        upstream={"base_url": "http://engine.test"},
        storage=storage_values(tmp_path, s3_server, monkeypatch, database_url))
    engine_ok(engine)
    gateway = create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))
    async with gateway.running(), client_for(gateway, create_key(settings, "alice")) as alice:
        kept = (await alice.post("/resources", files={"file": ("kept.png", PNG)})).json()
        gone = (await alice.post("/resources", files={"file": ("gone.png", PNG + b"1")})).json()
    remove_stored(settings, f"alice/resources/{gone['id']}/gone.png")
    bucket, prefix = split_s3_url(settings.storage.files)
    client = s3_server.client()
    for key in ("alice/memory_attachments/att_orphan/lost.png", "alice/notes.txt",
                "_other/resources/r/x.png", "bob/memory_attachments/att_pending/p.png"):
        client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"x")
    sql(settings, "INSERT INTO pending_intents (id, user_id, kind, payload, created_at) "
                  "VALUES ('int_1', 'bob', 'memory_add', ?, 1)",
        json.dumps({"mappings": [], "resource": None, "folders": [
            f"{settings.storage.files}/bob/memory_attachments/att_pending"]}))
    before = stored_files(settings)

    env = {**s3_server.env(), "MEMORY_GATEWAY_STORAGE_FILES": settings.storage.files,
           "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": settings.storage.s3_endpoint_url}
    dry = run_gc(settings, "--dry-run", "--grace-seconds", "0", env=env)
    assert stored_files(settings) == before
    assert dry.stdout.splitlines()[0] == (
        "gc (dry run): would remove 1 orphan file(s) and 1 empty folder(s); would mark "
        "1 resource(s) and 0 mapping(s) whose file vanished (grace 0 s)")
    done = run_gc(settings, "--grace-seconds", "0", env=env)
    lost = f"{settings.storage.files}/alice/memory_attachments/att_orphan/lost.png"
    assert f"removed file {lost}" in done.stdout.splitlines()
    assert stored_files(settings) == sorted(set(before) - {
        "alice/memory_attachments/att_orphan/lost.png"})
    assert stored_files(settings).count(f"alice/resources/{kept['id']}/kept.png") == 1
    live = {r["id"] for r in rows(settings, "SELECT id FROM resources WHERE deleted_at IS NULL")}
    assert live == {kept["id"]}

