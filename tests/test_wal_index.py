"""The wal-index watch (gateway/store/wal_index.py): the SQLite adapter's cache generations are
read from the `-shm` header, so every commit of any process must change it, and reads must not."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.store.database import database_for
from gateway.store.sqlite import SqliteDatabase, connect_sync
from gateway.store.wal_index import WalIndexWatch


def _wal_database(path: Path) -> sqlite3.Connection:
    conn = connect_sync(str(path))
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    return conn


def _commit_in_another_process(path: Path, sql: str) -> None:
    script = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
              f"c.execute({sql!r}); c.close()")
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)


def test_every_commit_of_another_connection_or_process_changes_the_stamp(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    mine = _wal_database(path)
    watch = WalIndexWatch.open(mine, str(path))
    assert watch is not None
    other = _wal_database(path)
    seen = {watch.stamp()}
    for round_no in range(20):
        other.execute("INSERT INTO t VALUES (?)", (round_no,))
        stamp = watch.stamp()
        assert stamp not in seen, f"commit {round_no} left the header as it was"
        seen.add(stamp)
    _commit_in_another_process(path, "UPDATE t SET x = x + 1")
    assert watch.stamp() not in seen
    watch.close()


def test_reads_and_checkpoints_leave_the_stamp_alone(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    mine = _wal_database(path)
    mine.execute("INSERT INTO t VALUES (1)")
    watch = WalIndexWatch.open(mine, str(path))
    assert watch is not None
    before = watch.stamp()
    other = _wal_database(path)
    for _ in range(5):
        other.execute("SELECT * FROM t").fetchall()
        mine.execute("SELECT count(*) FROM t").fetchall()
    mine.execute("PRAGMA wal_checkpoint(PASSIVE)")
    assert watch.stamp() == before
    # After a full checkpoint the next writer restarts the WAL from its start: still a change.
    other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    other.execute("INSERT INTO t VALUES (2)")
    assert watch.stamp() != before
    watch.close()


def test_no_watch_without_a_shared_wal_index(tmp_path: Path) -> None:
    memory = sqlite3.connect(":memory:")
    assert WalIndexWatch.open(memory, ":memory:") is None
    rollback = sqlite3.connect(tmp_path / "rollback.sqlite", isolation_level=None)
    rollback.execute("PRAGMA journal_mode = DELETE")
    assert WalIndexWatch.open(rollback, str(tmp_path / "rollback.sqlite")) is None


@pytest.mark.parametrize("watched", [True, False], ids=["wal-index", "data_version"])
async def test_a_generation_moves_with_a_change_made_by_another_process(
    tmp_path: Path, watched: bool
) -> None:
    path = tmp_path / "gw.db"
    db = database_for(str(path))
    assert isinstance(db, SqliteDatabase)
    await db.open()
    try:
        if not watched:  # the PRAGMA path, as where no wal-index can be mapped
            assert db._wal_index is not None
            db._wal_index.close()
            db._wal_index = None
        else:
            assert db._wal_index is not None
        keys_before, sessions_before = db.generation("keys"), db.generation("sessions")
        assert db.generation("keys") == keys_before  # nothing changed: the same number
        _commit_in_another_process(
            path, "UPDATE cache_generations SET value = value + 1 WHERE topic = 'keys'")
        assert db.generation("keys") != keys_before
        assert db.generation("sessions") == sessions_before
    finally:
        await db.close()
