"""`memory-gateway doctor`: check an installation and say what to fix, one line per check.

Read-only: it opens the database read-only, writes one temp file into the storage root (and
one probe object into the S3 prefix when files live there; both removed), and sends the engine
a GET /health and an empty search (which changes nothing). Exit code 0 when nothing FAILs,
1 otherwise.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

import asyncpg
import httpx

from gateway.attachments.fetch_guard import FetchGuard
from gateway.attachments.files import create_file_store
from gateway.config import (
    CONFIG_ENV,
    ENV_PREFIX,
    ConfigError,
    Settings,
    check_dev_engine_flavor,
    config_file,
    load_settings,
)
from gateway.devengine.app import ENGINE_NAME as DEV_ENGINE_NAME
from gateway.search import page_scan
from gateway.store import migrations, postgresql
from gateway.store.database import is_postgresql, run_sync, shown_database
from gateway.store.migrations import Migration
from gateway.upstream.flavors import check_erased_users

OK, WARN, FAIL = "OK", "WARN", "FAIL"
MIN_FREE_BYTES = 1024**3
PROBE_TIMEOUT_S = 5.0
HEALTH_PATH = "/health"


@dataclass(frozen=True)
class Check:
    level: str
    name: str
    detail: str
    fix: str = ""

    def lines(self) -> str:
        text = f"{self.level:<4} {self.name:<13} {self.detail}"
        return text + (f"\n     {'':<13} fix: {self.fix}" if self.fix else "")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


# --- configuration --------------------------------------------------------------------------


def check_settings(
    settings: Settings, path: str | None, environ: Mapping[str, str]
) -> Iterator[Check]:
    overrides = sorted(name for name in environ
                       if name.startswith(ENV_PREFIX) and name != CONFIG_ENV)
    source = f"loaded from {path}" if path else "defaults (no --config file)"
    if overrides:
        source += f", {len(overrides)} environment override(s): {', '.join(overrides)}"
    yield Check(OK, "configuration", source)
    llm = settings.llm
    if bool(llm.base_url) != bool(llm.model):
        yield Check(WARN, "llm", "only one of llm.base_url and llm.model is set: no model is used",
                    "set both to enable the summariser and model disambiguation, or neither")
    yield _check_search(settings)
    yield from _check_tool_calls(settings)
    try:
        FetchGuard.from_settings(settings.upstream)
    except ConfigError as exc:
        yield Check(FAIL, "fetchable hosts", str(exc),
                    "list host names, host:port, addresses or CIDRs (docs/security.md)")
    if settings.metrics.enabled and settings.server.host not in ("127.0.0.1", "localhost", "::1"):
        yield Check(WARN, "metrics",
                    f"/metrics needs no key and the gateway listens on {settings.server.host}",
                    "firewall /metrics from clients, or set metrics.enabled = false")


def _check_tool_calls(settings: Settings) -> Iterator[Check]:
    from gateway.toolcalls.registry import load_registry

    try:
        registry = load_registry(settings.tools.registry)
    except ConfigError as exc:
        yield Check(FAIL, "tools", str(exc), "correct the registry file (docs/tool-calls.md)")
    else:
        names = ", ".join(registry.tools) or "none"
        yield Check(OK, "tools", f"{len(registry.tools)} from {registry.source}: {names}")
    if settings.jobs.base_url:
        yield Check(OK, "jobs", f"confirmed tool calls run on {settings.jobs.base_url}")
    else:
        yield Check(WARN, "jobs", "jobs.base_url is empty: confirmed tool calls run on the "
                    "built-in dev job runner (placeholder images)",
                    "set jobs.base_url to your job service before real users confirm paid work")


def _check_search(settings: Settings) -> Check:
    if not settings.server.native_search:
        return Check(OK, "search", "Python path (server.native_search = false)")
    if page_scan.AVAILABLE:
        return Check(OK, "search", "C page scanner built and in use")
    return Check(WARN, "search", "the C page scanner was not built: searches take the Python "
                 "path, several times slower", "install a C compiler, then rebuild: "
                 "`scripts/setup-venv --force` in a checkout, `pip install --force-reinstall "
                 "--no-deps memory-gateway` otherwise; or set server.native_search = false")


# --- database -------------------------------------------------------------------------------


def check_database(settings: Settings, config: str | None = None) -> Iterator[Check]:
    path = Path(settings.storage.database)
    migrate = "memory-gateway migrate" + (f" --config {config}" if config else "")
    if is_postgresql(settings.storage.database):
        yield from _check_postgresql(settings.storage.database, migrate)
        return
    if not path.exists():
        parent = _existing_ancestor(path.parent)
        if not os.access(parent, os.W_OK):
            yield Check(FAIL, "database", f"{path} does not exist and {parent} is not writable",
                        f"make {parent} writable by the gateway's user, or change "
                        "storage.database")
            return
        yield Check(WARN, "database", f"{path} does not exist yet",
                    f"run `{migrate}` (serve also creates it at start-up)")
        return
    if not path.is_file():
        yield Check(FAIL, "database", f"{path} is not a file", "point storage.database at a file")
        return
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        yield Check(FAIL, "database", f"cannot open {path}: {exc}",
                    "check the path and its permissions")
        return
    try:
        try:
            problems = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
        except sqlite3.DatabaseError as exc:
            yield Check(FAIL, "database", f"{path}: {exc}",
                        "restore it from a backup, or move it aside and run `memory-gateway "
                        "migrate` to start empty")
            return
        if problems != ["ok"]:
            shown = "; ".join(problems[:3])
            yield Check(FAIL, "database", f"integrity check failed: {shown}",
                        "restore from a backup (or try `sqlite3 DB .recover`)")
            return
        if not writable:
            yield Check(FAIL, "database", f"{path} passes its integrity check but is not writable",
                        "the gateway writes to the file and its folder: fix their owner or mode")
        else:
            yield Check(OK, "database", f"{path}: integrity ok")
        yield from _check_migrations(conn, migrate)
    finally:
        conn.close()


async def _postgresql_state(url: str) -> tuple[str, set[int], list[migrations.Migration]]:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        version = str(await conn.fetchval("SHOW server_version"))
        waiting = await postgresql.pending(conn)
        applied = await postgresql.applied(conn)
        return version, applied, waiting
    finally:
        await conn.close()


NOTIFY_WAIT_S = 5.0


async def _notifications_arrive(url: str) -> bool:
    """Whether a NOTIFY on the gateway's cache channel reaches a LISTEN on another connection:
    what keeps the processes' caches in step (gateway/store/postgresql.py). A pooler in
    transaction mode (PgBouncer's default) drops LISTEN."""
    arrived = asyncio.Event()
    listener = await asyncpg.connect(url, timeout=5)
    try:
        await listener.add_listener(postgresql.CACHE_CHANNEL, lambda *_: arrived.set())
        sender = await asyncpg.connect(url, timeout=5)
        try:
            await sender.execute("SELECT pg_notify($1, 'doctor')", postgresql.CACHE_CHANNEL)
        finally:
            await sender.close()
        try:
            await asyncio.wait_for(arrived.wait(), NOTIFY_WAIT_S)
        except TimeoutError:
            return False
        return True
    finally:
        await listener.close()


def _check_postgresql(url: str, migrate: str) -> Iterator[Check]:
    shown = shown_database(url)
    try:
        version, applied, waiting = run_sync(_postgresql_state(url))
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        yield Check(FAIL, "database", f"cannot reach {shown}: {exc}",
                    "check that PostgreSQL runs, the host, port, user, password and database "
                    "name in storage.database, and pg_hba.conf")
        return
    yield Check(OK, "database", f"{shown}: PostgreSQL {version} reachable")
    try:
        arrived = run_sync(_notifications_arrive(url))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        arrived, detail = False, f"cannot LISTEN: {exc}"
    else:
        detail = f"a NOTIFY did not arrive within {NOTIFY_WAIT_S:g} s"
    if arrived:
        yield Check(OK, "cache notifications", "LISTEN/NOTIFY reaches other connections")
    else:
        yield Check(FAIL, "cache notifications", detail,
                    "connect the gateway to PostgreSQL directly or through a pooler in session "
                    "mode: other processes' key revocations and session changes arrive as "
                    "notifications (docs/scale-out.md)")
    known = migrations.available()
    yield _migration_state(known, applied, waiting, migrate)


def _migration_state(known: Sequence[Migration], applied: set[int],
                     waiting: Sequence[Migration], migrate: str) -> Check:
    """One line for either database: unknown versions, pending ones, or up to date."""
    unknown = sorted(applied - {m.version for m in known})
    if unknown:
        return Check(FAIL, "migrations",
                     f"database has migration(s) this version does not know: {unknown}",
                     "run the gateway version that created this database, or a newer one")
    if waiting:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in waiting)
        return Check(WARN, "migrations", f"{len(waiting)} pending: {names}",
                     f"run `{migrate}` (serve also applies them at start-up)")
    return Check(OK, "migrations", f"up to date ({len(known)} applied)")


def _check_migrations(conn: sqlite3.Connection, migrate: str) -> Iterator[Check]:
    try:
        known = migrations.available()
        waiting = migrations.pending(conn)
        applied = migrations.applied_versions(conn)
    except (RuntimeError, sqlite3.Error) as exc:
        yield Check(FAIL, "migrations", f"cannot read migrations: {exc}",
                    "reinstall the gateway (its migrations/ folder is damaged)")
        return
    yield _migration_state(known, applied, waiting, migrate)


# --- storage --------------------------------------------------------------------------------


def check_storage(settings: Settings) -> Iterator[Check]:
    root = Path(settings.storage.root)
    if root.exists() and not root.is_dir():
        yield Check(FAIL, "storage", f"{root} exists but is not a folder",
                    "move the file away or point storage.root at a folder")
        return
    if not root.exists():
        parent = _existing_ancestor(root)
        if os.access(parent, os.W_OK):
            yield Check(WARN, "storage", f"{root} does not exist yet (serve creates it)")
        else:
            yield Check(FAIL, "storage", f"{root} does not exist and {parent} is not writable",
                        f"create {root} writable by the gateway's user, or change storage.root")
            return
    else:
        try:
            with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
                pass
        except OSError as exc:
            yield Check(FAIL, "storage", f"cannot write into {root}: {exc.strerror or exc}",
                        f"make {root} writable by the gateway's user (chown/chmod)")
            return
        yield Check(OK, "storage", f"{root} is writable")
    seen: set[int] = set()
    database = settings.storage.database
    for where in (root, *(() if is_postgresql(database) else (Path(database).parent,))):
        existing = _existing_ancestor(where)
        device = existing.stat().st_dev
        if device in seen:
            continue
        seen.add(device)
        free = shutil.disk_usage(existing).free
        if free < MIN_FREE_BYTES:
            yield Check(WARN, "disk space", f"{_size(free)} free under {existing}",
                        f"free space or move storage: uploads fail when the disk fills "
                        f"(warning below {_size(MIN_FREE_BYTES)})")
        else:
            yield Check(OK, "disk space", f"{_size(free)} free under {existing}")


def check_file_store(settings: Settings) -> Iterator[Check]:
    """Files on S3: the bucket takes, returns and deletes a probe object."""
    files = settings.storage.files
    if not files:
        return
    fix = ("check storage.files (the bucket must exist), storage.s3_endpoint_url, "
           "storage.s3_region and the AWS_* credentials")
    try:
        store = create_file_store(settings.storage)
    except ConfigError as exc:
        yield Check(FAIL, "file store", str(exc), "install the S3 client")
        return

    async def probe() -> None:
        try:
            await store.open_store()
            await store.probe()
        finally:
            await store.close()

    try:
        asyncio.run(probe())
    except Exception as exc:  # any failure to use the store is the finding
        yield Check(FAIL, "file store", f"{files}: {exc}", fix)
    else:
        yield Check(OK, "file store", f"{files} takes, returns and deletes objects")


# --- upstream -------------------------------------------------------------------------------


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _is_dev_engine(port: int) -> bool:
    """Whether the built-in dev engine answers on the port (started by a running `serve`)."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}{HEALTH_PATH}", timeout=PROBE_TIMEOUT_S)
        return answer.status_code == 200 and answer.json().get("engine") == DEV_ENGINE_NAME
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def check_upstream(settings: Settings) -> Iterator[Check]:
    upstream = settings.upstream
    flavor = upstream.flavor
    try:
        check_erased_users(settings)
    except ConfigError as exc:
        yield Check(FAIL, "upstream", str(exc),
                    'set auth.erased_users = "refuse" (or an engine that deletes)')
        return
    if not upstream.base_url:
        try:
            check_dev_engine_flavor(settings)
        except ConfigError as exc:
            yield Check(FAIL, "upstream", str(exc),
                        f"set upstream.base_url to your {flavor} server, or use flavor everos")
            return
        port = settings.dev_engine.port
        yield Check(WARN, "upstream",
                    f"upstream.base_url is empty: `serve` runs the built-in dev engine on "
                    f"127.0.0.1:{port} (a development default, not a memory product)",
                    "set upstream.base_url to your EverOS engine for real use")
        if _port_in_use(port):
            if _is_dev_engine(port):
                yield Check(OK, "dev engine", f"running on 127.0.0.1:{port} (a running "
                            "gateway's own, or `memory-gateway dev-upstream`)")
            else:
                yield Check(WARN, "dev engine", f"port {port} is already in use by something "
                            "else: `serve` cannot start its dev engine",
                            "stop what listens there, or set dev_engine.port")
        return
    base = upstream.base_url.rstrip("/")
    timeout = httpx.Timeout(PROBE_TIMEOUT_S, connect=min(upstream.connect_timeout_s,
                                                         PROBE_TIMEOUT_S))
    with httpx.Client(timeout=timeout, headers=dict(upstream.headers)) as client:
        began = time.perf_counter()
        try:
            health = client.get(base + HEALTH_PATH)
        except httpx.HTTPError as exc:
            yield Check(FAIL, "upstream", f"cannot reach {base}{HEALTH_PATH}: "
                        f"{type(exc).__name__}: {exc}",
                        "start the engine, or correct upstream.base_url "
                        "(MEMORY_GATEWAY_UPSTREAM_BASE_URL)")
            return
        took = (time.perf_counter() - began) * 1000
        engine = _engine_name(health)
        detail = f"{base}: GET {HEALTH_PATH} → {health.status_code} in {took:.0f} ms{engine}"
        if health.status_code >= 500:
            yield Check(FAIL, "upstream", detail, "the engine is up but unhealthy: see its logs")
            return
        yield Check(OK, "upstream", detail)
        yield _check_flavor(client, base, flavor, settings)


def _engine_name(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    name = body.get("engine") or body.get("name")
    version = body.get("version")
    parts = [str(p) for p in (name, version) if isinstance(p, str | int | float) and p]
    return f" ({' '.join(parts)})" if parts else ""


def _check_flavor(client: httpx.Client, base: str, flavor: str, settings: Settings) -> Check:
    path = settings.upstream.search_path
    try:
        # An empty search changes nothing; any answer but 404/405 shows the path is served.
        answer = client.post(base + path, json={})
    except httpx.HTTPError as exc:
        return Check(FAIL, "flavour", f"{flavor}: POST {path} failed: {type(exc).__name__}: {exc}",
                     "check the engine's logs")
    if answer.status_code in (404, 405):
        return Check(FAIL, "flavour",
                     f"{flavor}: the engine does not serve POST {path} ({answer.status_code})",
                     "set upstream.flavor to the engine you run (or upstream.search_path), or "
                     "point upstream.base_url at the engine the flavour names")
    return Check(OK, "flavour", f"{flavor}: POST {path} is served ({answer.status_code})")


# --- the command ----------------------------------------------------------------------------


def run(config: str | None, out: IO[str] | None = None,
        environ: Mapping[str, str] | None = None) -> int:
    """Run every check, print one line each (and a fix), then a summary; 1 when any FAILs."""
    out = out or sys.stdout
    environ = os.environ if environ is None else environ
    counts = {OK: 0, WARN: 0, FAIL: 0}

    def report(check: Check) -> None:
        counts[check.level] += 1
        print(check.lines(), file=out, flush=True)

    config, origin = config_file(config, environ)
    report(Check(OK, "config file", f"{config} ({origin})" if config else
                 "none: --config FILE, MEMORY_GATEWAY_CONFIG or ./config.toml names one; "
                 "defaults and environment variables only"))
    try:
        settings = load_settings(config, environ)
    except ConfigError as exc:
        report(Check(FAIL, "configuration", str(exc),
                     "correct the key named above (`memory-gateway config example` prints "
                     "every key)"))
    else:
        for group in (check_settings(settings, config, environ), check_database(settings, config),
                      check_storage(settings), check_file_store(settings),
                      check_upstream(settings)):
            for check in group:
                report(check)
    print(f"doctor: {counts[OK]} ok, {counts[WARN]} warning(s), {counts[FAIL]} failure(s)",
          file=out)
    return 1 if counts[FAIL] else 0
