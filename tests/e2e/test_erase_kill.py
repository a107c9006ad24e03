"""An erasure killed with SIGKILL part-way (SPEC §17), then run again: nothing of the user is
left, nothing of any other user was touched, and the counts of the two runs add up to exactly
what the user had. On SQLite with files on disk and on PostgreSQL with files on S3, through the
real `memory-gateway users erase` process: the rows and the files meet only by name (a row holds
its file's URI), so the database and the store are paired, not crossed; each database and each
store carries both tests once."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gateway.attachments.files import create_file_store
from gateway.config import Settings
from gateway.store.database import database_for, run_sync
from gateway.store.user_rows import USER_TABLES
from tests import databases
from tests.attachment_helpers import stored_files
from tests.processes import ROOT, free_port, gateway_env
from tests.user_data_seed import seed_user

pytestmark = pytest.mark.parametrize(("database_backend", "files_backend"),
                                     [("sqlite", "disk"), ("postgresql", "s3")], indirect=True)
MESSAGES = 30_000
FILES = 300


def _env(settings: Settings, tmp: Path) -> dict[str, str]:
    storage = settings.storage
    return gateway_env(tmp, free_port(), "http://127.0.0.1:9", **{
        "MEMORY_GATEWAY_STORAGE_DATABASE": storage.database,
        "MEMORY_GATEWAY_STORAGE_ROOT": storage.root,
        "MEMORY_GATEWAY_STORAGE_FILES": storage.files,
        "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": storage.s3_endpoint_url,
        "MEMORY_GATEWAY_STORAGE_S3_REGION": storage.s3_region,
    })


async def _seed(settings: Settings) -> dict[str, int]:
    db = database_for(settings.storage.database)
    files = create_file_store(settings.storage)
    await db.open()
    try:
        await files.open_store()
        seeded = await seed_user(db, files, "alice", messages=MESSAGES, stored_files=FILES)
        for other in ("bob", "carol"):
            await seed_user(db, files, other, messages=50, stored_files=5)
        return seeded
    finally:
        await files.close()
        await db.close()


def _holdings(settings: Settings, user_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {
        table.name: databases.rows(settings.storage.database,
                                   f"SELECT COUNT(*) FROM {table.name} WHERE user_id = ?",
                                   user_id)[0][0]
        for table in USER_TABLES}
    found["files"] = sorted(name for name in stored_files(settings)
                            if name.startswith(f"{user_id}/"))
    return found


def _erasure(settings: Settings) -> list[Any]:
    return databases.rows(settings.storage.database,
                          "SELECT status, erasing_user_id, counts FROM user_erasures")


def test_an_erasure_killed_midway_is_finished_by_running_it_again(
    settings: Settings, tmp_path: Path,
) -> None:
    seeded = run_sync(_seed(settings))
    others = {user: _holdings(settings, user) for user in ("bob", "carol")}
    env = _env(settings, tmp_path)
    command = [sys.executable, "-m", "gateway", "users", "erase", "alice"]
    proc = subprocess.Popen([*command, "--quiet"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            found = _erasure(settings)
            if found and sum(json.loads(found[0][2]).values()) > 0:
                break
            time.sleep(0.005)
        assert proc.poll() is None, proc.communicate()[1].decode()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    status, erasing, counts = _erasure(settings)[0]
    assert (status, erasing) == ("erasing", "alice"), "killed after it finished: seed more"
    interrupted = json.loads(counts)
    assert sum(interrupted.values()) < sum(seeded.values()) + FILES

    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=300)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "erased"
    # Rows are counted in the transaction that deletes them: the two runs add up exactly.
    assert {k: v for k, v in result["counts"].items() if k != "files"} == seeded
    # A file is counted after its folder is gone: one killed in between is removed, uncounted.
    assert 0 < result["counts"]["files"] <= FILES
    # not a terminal: plain progress lines (no bar), the last at the end of the count
    assert "\r" not in done.stderr
    assert re.search(r"^erasing: done (\d+)/\1$", done.stderr, flags=re.M), done.stderr
    assert _holdings(settings, "alice") == {**{t.name: 0 for t in USER_TABLES}, "files": []}
    assert {user: _holdings(settings, user) for user in others} == others
    assert [tuple(row)[:2] for row in _erasure(settings)] == [("erased", None)]


async def _seed_small(settings: Settings) -> dict[str, int]:
    db = database_for(settings.storage.database)
    files = create_file_store(settings.storage)
    await db.open()
    try:
        await files.open_store()
        await seed_user(db, files, "bob", messages=2, stored_files=1)
        return await seed_user(db, files, "alice", messages=40, stored_files=4)
    finally:
        await files.close()
        await db.close()


def test_users_export_writes_the_whole_zip_to_the_file_named(
    settings: Settings, tmp_path: Path,
) -> None:
    seeded = run_sync(_seed_small(settings))
    target = tmp_path / "alice.zip"
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "users", "export", "alice", "-o", str(target)],
        env=_env(settings, tmp_path), cwd=ROOT, capture_output=True, text=True, check=False,
        timeout=120)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(target) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert manifest["counts"] == seeded
        assert len(manifest["files"]) == 4
        for entry in manifest["files"]:
            assert hashlib.sha256(archive.read(entry["path"])).hexdigest() == entry["sha256"]
    assert [row[0] for row in databases.rows(
        settings.storage.database, "SELECT action FROM admin_audit")] == ["users.export"]
