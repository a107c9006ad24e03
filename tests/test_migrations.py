"""Migrations: ordered, one transaction each, versions recorded, pending() read-only."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.store import migrations
from gateway.store.sqlite import connect_sync
from tests import databases
from tests.postgres_server import PostgresServer
from tests.processes import ROOT


def test_all_migrations_apply_once_and_record_versions(tmp_path: Path) -> None:
    conn = connect_sync(str(tmp_path / "db.sqlite"))
    applied = migrations.apply_pending(conn)
    assert [m.version for m in applied] == sorted(m.version for m in migrations.available())
    assert migrations.apply_pending(conn) == []
    assert migrations.pending(conn) == []
    recorded = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
    assert recorded == [m.version for m in applied]


def test_pending_is_read_only(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    conn = connect_sync(str(path))
    assert len(migrations.pending(conn)) == len(migrations.available())
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    assert tables == []


def test_failing_migration_leaves_nothing_behind(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "0001_good.sql").write_text("CREATE TABLE a (x INTEGER);")
    bad = "CREATE TABLE b (x INTEGER);\nINSERT INTO nope VALUES (1);"
    (folder / "0002_bad.sql").write_text(bad)
    conn = connect_sync(str(tmp_path / "db.sqlite"))
    with pytest.raises(sqlite3.OperationalError):
        migrations.apply_pending(conn, folder)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "a" in names and "b" not in names
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations")] == [1]


def test_database_uses_wal_and_foreign_keys(tmp_path: Path) -> None:
    conn = connect_sync(str(tmp_path / "db.sqlite"))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


@pytest.mark.processes
def test_migrate_command_applies_and_reports(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "cli.db"
    env = {"MEMORY_GATEWAY_STORAGE_DATABASE": str(db), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "gateway", "migrate"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout
    assert migrations.pending(sqlite3.connect(db)) == []


def migrated_before(tmp_path: Path, version: int) -> sqlite3.Connection:
    """A database with every migration before `version` applied, and none from it on."""
    before = tmp_path / "before"
    before.mkdir()
    for migration in migrations.available():
        if migration.version < version:
            (before / migration.path.name).write_text(migration.sql())
    conn = connect_sync(str(tmp_path / "db.sqlite"))
    migrations.apply_pending(conn, before)
    return conn


def test_tool_call_migration_keeps_existing_messages_and_allows_the_tool_role(
    tmp_path: Path,
) -> None:
    conn = migrated_before(tmp_path, 7)
    conn.execute("INSERT INTO agents (id, user_id, name, activity_at_ms, created_at_ms,"
                 " updated_at_ms) VALUES ('agt_1', 'alice', 'a', 1, 1, 1)")
    conn.execute("INSERT INTO conversations (id, user_id, agent_id, title, created_at_ms,"
                 " updated_at_ms) VALUES ('cnv_1', 'alice', 'agt_1', 't', 1, 1)")
    conn.execute("INSERT INTO conversation_messages (id, user_id, conversation_id, agent_id,"
                 " client_message_id, role, content, status, fingerprint, created_at_ms)"
                 " VALUES ('msg_1', 'alice', 'cnv_1', 'agt_1', 'c1', 'user', 'hi', 'completed',"
                 " 'f', 5)")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE conversation_messages SET role = 'tool'")
    applied = migrations.apply_pending(conn)
    assert [m.name for m in applied if m.version == 7] == ["tool_calls"]
    assert [tuple(row) for row in conn.execute(
        "SELECT id, role, content, created_at_ms FROM conversation_messages")] == [
        ("msg_1", "user", "hi", 5)]
    conn.execute("UPDATE conversation_messages SET role = 'tool'")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE conversation_messages SET role = 'robot'")
    indexes = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index'"
        " AND tbl_name = 'conversation_messages'")}
    assert {"conversation_messages_page", "conversation_messages_client_id"} <= indexes
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
def test_migrate_on_postgresql_applies_every_migration_once_and_hides_the_password(
    postgres: PostgresServer,
) -> None:
    url = postgres.create_database().replace("gateway@", "gateway:s3cret@")  # trust: ignored
    env = {"MEMORY_GATEWAY_STORAGE_DATABASE": url, "PATH": "/usr/bin:/bin"}
    runs = [subprocess.run([sys.executable, "-m", "gateway", "migrate"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout.count("applied ") == len(migrations.available())
    assert "applied " not in runs[1].stdout
    assert all("s3cret" not in run.stdout + run.stderr for run in runs)
    recorded = databases.rows(url, "SELECT version FROM schema_migrations ORDER BY version")
    assert [row["version"] for row in recorded] == [m.version for m in migrations.available()]


def test_the_session_change_log_numbers_on_from_the_sessions_generation(tmp_path: Path) -> None:
    """0014 makes the "sessions" generation the log's last row: it goes on from the counter's
    value, so no number a process kept names a different state."""
    conn = migrated_before(tmp_path, 14)
    for n in range(3):
        conn.execute("INSERT INTO memory_sessions (app_id, project_id, session_id, user_id,"
                     " created_at) VALUES ('default', 'default', ?, 'alice', 0)", (f"s{n}",))
    generation = "SELECT value FROM cache_generations WHERE topic = 'sessions'"
    assert conn.execute(generation).fetchone()[0] == 3
    migrations.apply_pending(conn)
    assert conn.execute(generation).fetchone()[0] == 3
    conn.execute("UPDATE memory_sessions SET mappings_version = 2 WHERE session_id = 's1'")
    conn.execute("DELETE FROM memory_sessions WHERE session_id = 's2'")
    assert conn.execute(generation).fetchone()[0] == 5
    assert [tuple(row) for row in conn.execute(
        "SELECT seq, session_id FROM session_changes WHERE seq > 3 ORDER BY seq")] == [
        (4, "s1"), (5, "s2")]
