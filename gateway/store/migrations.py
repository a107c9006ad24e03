"""Ordered SQL migrations (`NNNN_name.sql`), each applied in one transaction.

The files live in the checkout's top-level `migrations/` folder; a wheel or sdist install carries
them inside the package as `gateway/migrations/` (mapped at build time, setup.py), every `.sql`
file and subfolder included. `MIGRATIONS_DIR` is the packaged copy when there is one, else the
checkout's folder beside the package. Finding no migration is an error, never an empty schema.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationsMissing(RuntimeError):
    """No migration file where the schema should be: the installation is incomplete."""


def _locate() -> Path:
    packaged = resources.files("gateway") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))  # installed packages are plain folders, never zipped
    return Path(str(resources.files("gateway"))).parent / "migrations"  # a source checkout


MIGRATIONS_DIR = _locate()


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    def sql(self) -> str:
        return self.path.read_text(encoding="utf-8")


def available(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The folder's `NNNN_name.sql` files in order (subfolders are other dialects' and skipped);
    MigrationsMissing when there is none."""
    found = []
    paths = sorted(directory.glob("*.sql")) if directory.is_dir() else []
    if not paths:
        raise MigrationsMissing(
            f"no migrations found in {directory}: this installation of memory-gateway is "
            "incomplete (reinstall it)"
        )
    for path in paths:
        match = _NAME.match(path.name)
        if match is None:
            raise RuntimeError(f"migration file name not NNNN_name.sql: {path.name}")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions in {directory}")
    return found


def _ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
    )


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}


def pending(conn: sqlite3.Connection, directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Migrations not yet applied; reads only."""
    done = applied_versions(conn)
    return [m for m in available(directory) if m.version not in done]


def apply_pending(conn: sqlite3.Connection, directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """Apply every pending migration, each in its own transaction with its version recorded.

    `conn` must be in autocommit mode (isolation_level=None) so that the transaction is ours.
    """
    _ensure_table(conn)
    applied = []
    for migration in pending(conn, directory):
        script = (
            "BEGIN IMMEDIATE;\n"
            + migration.sql()
            + f"\n;INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES "
            f"({migration.version}, '{migration.name}', {int(time.time() * 1000)});\nCOMMIT;"
        )
        try:
            conn.executescript(script)
        except Exception:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(migration)
    return applied
