"""The wal-index watch (gateway/store/wal_index.py): the SQLite adapter's cache generations are
read from the `-shm` header, so every commit of any process must change it, and reads must not."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import struct
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


@pytest.mark.processes
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


@pytest.mark.processes
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


_HOLDERS = {
    # a plain connection that has read: the locks SQLite holds on the index meanwhile
    "plain": """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("SELECT * FROM cache_generations").fetchall()
print("open", flush=True)
sys.stdin.readline()
""",
    # the adapter with its watch, read through it
    "watched": """
import asyncio, sys
from gateway.store.database import database_for

async def main():
    db = database_for(sys.argv[1])
    await db.open()
    assert db._wal_index is not None
    before = db.generation("keys")
    print("open", flush=True)
    sys.stdin.readline()  # another process has written meanwhile
    print("moved" if db.generation("keys") != before else "still", flush=True)
    await db.close()

asyncio.run(main())
""",
}


def _locked_bytes(shm: Path) -> set[int]:
    """The bytes of the index's lock region another process finds locked (F_GETLK)."""
    fd = os.open(shm, os.O_RDWR)
    try:
        locked = set()
        for offset in range(96, 144):  # the lock bytes SQLite's unix VFS uses lie in here
            probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
            if struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, probe))[0] != fcntl.F_UNLCK:
                locked.add(offset)
        return locked
    finally:
        os.close(fd)


def _held_locks(path: Path, holder: str) -> tuple[set[int], list[str]]:
    """The index's locks while `holder` has the database open; then what it says after another
    process wrote."""
    with subprocess.Popen([sys.executable, "-c", _HOLDERS[holder], str(path)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().strip() == "open"
        locked = _locked_bytes(path.with_name(path.name + "-shm"))
        _commit_in_another_process(
            path, "UPDATE cache_generations SET value = value + 1 WHERE topic = 'keys'")
        process.stdin.write("go\n")
        process.stdin.flush()
        said = [line.strip() for line in process.stdout]
    assert process.returncode == 0
    return locked, said


@pytest.mark.processes
def test_the_watch_leaves_sqlites_locks_on_the_index_as_they_were(tmp_path: Path) -> None:
    """Closing any descriptor of the -shm file would drop the process's record locks on it:
    SQLite's "dead-man switch" would go, and the next process to open the database would take
    itself for the first and reset the index under every connection's mapping."""
    path = tmp_path / "gw.db"
    asyncio.run(_open_and_close(str(path)))  # the schema, as the gateway leaves it
    plain, _ = _held_locks(path, "plain")
    assert plain, "a connection that read holds a lock on the index"
    watched, said = _held_locks(path, "watched")
    assert watched == plain
    assert said == ["moved"]


async def _open_and_close(path: str) -> None:
    db = database_for(path)
    await db.open()
    await db.close()
