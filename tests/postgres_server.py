"""A throw-away PostgreSQL cluster for the suite: initdb in a temp folder, pg_ctl on a free
loopback port (its unix socket in the same folder), stopped by PID.

The binaries come from the Debian package (`scripts/setup-services` installs it when missing).
PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` OS user the
package creates (or `nobody`). Nothing here skips: a cluster that cannot start raises.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests import databases
from tests.processes import free_port

SUPERUSER = "gateway"
# Durability off: a test cluster is thrown away; this keeps CREATE DATABASE and commits cheap.
TEST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off",
                 "max_connections=300", "shared_buffers=64MB")


def binaries() -> Path:
    """The folder holding initdb and pg_ctl: the newest /usr/lib/postgresql/*/bin, else PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb): run scripts/setup-services "
                           "as root, or `apt-get install postgresql`")
    return Path(initdb).resolve().parent


def _run_as() -> list[str]:
    """The command prefix that drops root (PostgreSQL will not run as root)."""
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"]
    raise RuntimeError("running as root and no `postgres` or `nobody` user to run PostgreSQL as")


@dataclass
class PostgresServer:
    folder: Path
    port: int
    pid: int

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = "t_" + uuid.uuid4().hex[:16]
        self.psql(f"CREATE DATABASE {name}")
        return self.database_url(name)

    def empty_tables(self, url: str) -> None:
        """Every table of a migrated database emptied (the migrations' record kept): a fresh
        start per test for a fraction of what creating and migrating a database costs. Rows
        are few, so DELETE (foreign keys and triggers off for it) beats TRUNCATE."""
        databases.execute(
            url,
            "DO $$ DECLARE t text; BEGIN SET LOCAL session_replication_role = replica;"
            " FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename <> 'schema_migrations' LOOP"
            " EXECUTE 'DELETE FROM ' || quote_ident(t); END LOOP; END $$",
        )

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [str(binaries() / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database, "-c", sql],
            capture_output=True, text=True, check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return out.stdout

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT), then remove the folder."""
        try:
            os.kill(self.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def start() -> PostgresServer:
    """initdb + pg_ctl start in a new temp folder, on a free port; raises when it cannot."""
    bin_dir = binaries()
    folder = Path(tempfile.mkdtemp(prefix="gateway-pg-"))
    data = folder / "data"
    prefix = _run_as()
    if prefix:
        user = prefix[2]
        shutil.chown(folder, user=user)
        os.chmod(folder, 0o700)
    init = subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "trust",
         "-E", "UTF8", "--no-locale", "--no-sync"],
        capture_output=True, text=True, check=False,
    )
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
    port = free_port()
    options = " ".join([f"-p {port}", f"-k {folder}", "-c listen_addresses=127.0.0.1",
                        *(f"-c {setting}" for setting in TEST_SETTINGS)])
    started = subprocess.run(
        [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"),
         "-w", "-t", "60", "-o", options, "start"],
        capture_output=True, text=True, check=False,
    )
    pid_file = data / "postmaster.pid"
    if started.returncode != 0 or not pid_file.exists():
        log = (folder / "server.log").read_text(errors="replace") if (
            folder / "server.log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {log[-2000:]}")
    pid = int(pid_file.read_text().splitlines()[0])
    return PostgresServer(folder, port, pid)
