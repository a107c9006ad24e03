"""The `memory-gateway` command: serve, keys, migrate, dev-upstream, doctor (and maintenance)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import getpass
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway import __version__, logs
from gateway.config import (
    ENV_PREFIX,
    ConfigError,
    ServerSettings,
    Settings,
    check_dev_engine_flavor,
    config_file,
    load_settings,
    render_example,
)
from gateway.errors import UserErased, ValidationFailed
from gateway.identity.auth import NewKey, generate_key, hash_secret
from gateway.ops import maintenance, user_data
from gateway.store import audit, keys
from gateway.store.database import database_for, is_postgresql, migrate, run_sync, shown_database
from gateway.store.migrations import MigrationsMissing
from gateway.upstream.flavors import check_erased_users
from gateway.userdata.refusal import REFUSE

log = logging.getLogger("gateway.cli")

# Extra verbs registered by feature modules: name -> (help, add_arguments, run(settings, args)).
Verb = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[Settings, Any], int]]
EXTRA_VERBS: dict[str, Verb] = {**maintenance.VERBS, **user_data.VERBS}


def _run_async(main: Coroutine[Any, Any, bool]) -> bool:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is not installed on Windows
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def _uvicorn_server(app: Any, host: str, port: int, log_level: str,
                    guard: ServerSettings | None = None) -> Any:
    """A uvicorn server for `app`; with `guard`, client connections are held to its header
    timeout, body clock and connection caps (gateway/serving/connections.py)."""
    import uvicorn

    from gateway.serving.connections import BodyClock, uvicorn_options
    from gateway.serving.protocol import OneWriteProtocol

    # httptools, a small answer's head and body in one write (gateway/serving/protocol.py); with the
    # guard, also the header timeout, the cap on a head's size and the connection caps.
    options: dict[str, Any] = {"http": OneWriteProtocol}
    if guard is not None:
        options = uvicorn_options(guard.header_timeout_s, guard.max_connections,
                                  guard.max_connections_per_client, guard.max_head_bytes,
                                  BodyClock(guard.body_timeout_s, guard.min_body_rate))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,  # the gateway writes its own access line (gateway.access)
        log_config=None,  # uvicorn's loggers propagate to the root handler set up by main()
        **options,
        lifespan="on",
        proxy_headers=False,  # the gateway is the edge: X-Forwarded-* from clients are not trusted
        server_header=False,
    )

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                freeze_startup_objects()

    return Server(config)


def freeze_startup_objects() -> None:
    """Once serving, put what start-up made (modules, settings, route tables, models) out of
    the collector's sight: its oldest generation then walks only what requests made since,
    rather than stalling a request for 100 ms or more now and then (docs/decisions.md,
    "The collector after start-up")."""
    gc.collect()
    gc.freeze()


def _gateway_app(settings: Settings) -> Any:
    from gateway.app import create_app  # imported where it serves: a worker, after the fork

    return create_app(settings)


def _dev_engine_app(database: str) -> Any:
    from gateway.devengine.app import create_dev_engine

    return create_dev_engine(database)


class ListenError(Exception):
    """A port that cannot be listened on (in use, not permitted, unknown host)."""


def _listen(host: str, port: int, what: str) -> socket.socket:
    """Bind before anything starts, so a busy port is one clear line, not a traceback."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port} ({what}): {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise ListenError(f"cannot listen on {host}:{port} ({what}): {reason}") from None
    return sock


async def _serve_together(servers: list[tuple[Any, socket.socket]]) -> bool:
    """Run the servers until one of them stops, then stop the others; True when all started.

    A server whose start-up fails (uvicorn exits with SystemExit) stops the rest, so the process
    ends instead of serving half of what it should.
    """

    async def one(server: Any, sock: socket.socket) -> None:
        logs.SERVER_NAME.set(getattr(server, "gateway_name", None))  # this task's own lines
        try:
            await server.serve(sockets=[sock])
        except SystemExit:  # uvicorn's way of saying its start-up failed
            pass

    tasks = [asyncio.create_task(one(server, sock)) for server, sock in servers]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for server, _ in servers:
        server.should_exit = True
    await asyncio.gather(*tasks)
    return all(server.started for server, _ in servers)


def serve(settings: Settings) -> int:
    """Run the gateway (and the dev engine when no upstream is set); 1 when start-up fails."""
    from gateway.app import create_app
    from gateway.store import migrations

    migrations.available()  # no schema to apply: say so before anything starts
    listeners: list[tuple[Any, str, int, str]] = []  # (ASGI app, host, port, what it is)
    if not settings.upstream.base_url:
        from gateway.devengine.app import create_dev_engine

        port = settings.dev_engine.port
        dev_url = f"http://127.0.0.1:{port}"
        engine = create_dev_engine(settings.dev_engine.database)
        listeners.append((engine, "127.0.0.1", port, "the dev engine, dev_engine.port"))
        settings = replace(settings, upstream=replace(settings.upstream, base_url=dev_url))
    gateway_app = create_app(settings)
    listeners.append((gateway_app, settings.server.host, settings.server.port,
                      "the gateway, server.port or --port"))
    sockets: list[socket.socket] = []
    refused: list[ListenError] = []
    for _, host, port, what in listeners:  # every busy port named, not only the first
        try:
            sockets.append(_listen(host, port, what))
        except ListenError as exc:
            refused.append(exc)
    if refused:
        for sock in sockets:
            sock.close()
        for refusal in refused:
            print(f"error: {refusal}", file=sys.stderr)
        return 1
    if len(listeners) > 1:  # said only once its port is ours: a busy port stops before this
        log.warning("upstream.base_url is empty: running the built-in dev engine at %s "
                    "(a development default, not a memory product)", settings.upstream.base_url)
    gateway_port = sockets[-1].getsockname()[1]
    servers = [
        # The gateway's clients are held to the connection limits; the dev engine's only
        # client is the gateway.
        (_uvicorn_server(app, host, port, settings.server.log_level,
                         settings.server if app is gateway_app else None), sock)
        for (app, host, port, _), sock in zip(listeners, sockets, strict=True)
    ]
    if len(servers) > 1:  # uvicorn's lines say which server they come from
        for (server, _), name in zip(servers, (logs.DEV_ENGINE, "gateway"), strict=True):
            server.gateway_name = name
    log.info(
        "memory-gateway listening on http://%s:%d, upstream %s",
        settings.server.host,
        gateway_port,
        settings.upstream.base_url,
    )
    started = _run_async(_serve_together(servers))
    if not started:
        for handler in logging.getLogger().handlers:
            handler.flush()  # the log's lines first, then this one
        print("error: start-up failed (the log above says why); stopped", file=sys.stderr)
        return 1
    return 0


def dev_upstream(settings: Settings, host: str, port: int, database: str) -> int:
    from gateway.devengine.app import create_dev_engine

    try:
        sock = _listen(host, port, "the dev engine, --port or dev_engine.port")
    except ListenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server = _uvicorn_server(create_dev_engine(database), host, port, settings.server.log_level)
    log.warning("dev engine on http://%s:%d (a development default, not a memory product)",
                host, sock.getsockname()[1])
    return 0 if _run_async(_serve_together([(server, sock)])) else 1


def _database_line(settings: Settings, config: str | None) -> str:
    """Which database a command works on, and where that choice came from."""
    path = settings.storage.database
    if config:
        origin = f"from {config}"
    elif f"{ENV_PREFIX}STORAGE_DATABASE" in os.environ:
        origin = f"from {ENV_PREFIX}STORAGE_DATABASE"
    else:
        origin = "the default; --config FILE for another"
    shown = shown_database(path) if is_postgresql(path) else Path(path).absolute()
    return f"database {shown} ({origin})"


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip())


def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    new = None
    if args.keys_verb == "create":
        try:
            new = _new_key(args)
        except (ValidationFailed, ValueError) as exc:
            print(f"error: {getattr(exc, 'message', exc)}", file=sys.stderr)
            return 2
    database = settings.storage.database
    existed = is_postgresql(database) or Path(database).exists()
    migrate(database)
    print(("using " if existed else "created ") + _database_line(settings, args.config),
          file=sys.stderr)
    return run_sync(_keys(settings, args, new))


@dataclass(frozen=True)
class _KeyRequest:
    key: NewKey
    kind: str
    scopes: tuple[str, ...]
    name: str
    expires_at_ms: int | None
    users: str


def _new_key(args: argparse.Namespace) -> _KeyRequest:
    """The key `keys create` asked for (ValueError / ValidationFailed when it cannot be)."""
    kind = "admin" if args.admin else "service" if args.service else "user"
    if args.admin and args.service:
        raise ValueError("--admin and --service exclude each other")
    if args.users and kind != "service":
        raise ValueError("--users is for service keys (--service) only")
    if kind == "user" and not args.user:
        raise ValueError("--user is required (or --service / --admin)")
    scopes = tuple(sorted({part.strip() for part in args.scopes.split(",") if part.strip()}))
    if not scopes or not set(scopes) <= {"read", "write"}:
        raise ValueError(f"--scopes: expected read, write or read,write, got {args.scopes!r}")
    expires_at_ms = None
    if args.expires_in:
        expires_at_ms = int((time.time() + parse_duration(args.expires_in)) * 1000)
    owner = args.user or kind  # a service or admin key is named after its owner, or its kind
    return _KeyRequest(generate_key(owner), kind, scopes, args.name, expires_at_ms, args.users)


def parse_duration(text: str) -> float:
    """`90d`, `12h`, `30m`, `45s` (or plain seconds) as seconds; ValueError otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value = text.strip().lower()
    factor = units.get(value[-1:], 0)
    number = value[:-1] if factor else value
    try:
        seconds = float(number) * (factor or 1)
    except ValueError:
        raise ValueError(f"--expires-in: expected a duration such as 90d, 12h or 3600, "
                         f"got {text!r}") from None
    if seconds <= 0:
        raise ValueError("--expires-in: must be positive")
    return seconds


def _cli_actor() -> str:
    """Who ran an admin action from a shell, for the audit log."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _acts_for(key: keys.ApiKey) -> str:
    """Whom a key acts for: a service key's glob (`*` for every user), else its own user."""
    if key.kind == "service":
        return key.users_glob or "*"
    return "-" if key.kind == "admin" else key.user_id


def _key_json(key: keys.ApiKey) -> dict[str, Any]:
    """A key as the admin API shows it (`KeyOut` of gateway/routes/admin.py): camelCase, times
    in ms since the epoch."""
    return {
        "id": key.id, "userId": key.user_id, "kind": key.kind, "scopes": list(key.scopes),
        "name": key.name, "users": key.users_glob, "state": key.state,
        "expiresAt": key.expires_at_ms, "createdAtMs": key.created_at_ms,
        "lastUsedAtMs": key.last_used_at_ms, "revokedAtMs": key.revoked_at_ms,
    }


async def _keys(settings: Settings, args: argparse.Namespace, new: _KeyRequest | None) -> int:
    db = database_for(settings.storage.database)
    await db.open()
    try:
        if new is not None:
            try:
                stored = await keys.insert(
                    db, new.key.key_id, new.key.user_id, hash_secret(new.key.secret),
                    kind=new.kind, scopes=new.scopes, name=new.name,
                    expires_at_ms=new.expires_at_ms, users_glob=new.users,
                    audit=(_cli_actor(), "keys.create"),
                    refuse_erased=settings.auth.erased_users == REFUSE)
            except UserErased as exc:
                print(f"error: {exc.message}", file=sys.stderr)
                return 1
            if new.kind == "service" and not new.users:
                print("warning: this service key may act for every user (no --users GLOB "
                      "limits it)", file=sys.stderr)
            if args.json:
                print(json.dumps({**_key_json(stored), "token": new.key.token}, indent=2))
            else:
                print(f"created {new.kind} key {stored.id} for {stored.user_id}; store it now, "
                      "it is not shown again", file=sys.stderr)
                print(new.key.token)
        elif args.keys_verb == "list":
            found = await keys.list_keys(db, args.user)
            if args.json:
                print(json.dumps([_key_json(key) for key in found], indent=2))
            elif not found:
                print("no keys" + (f" for user {args.user}" if args.user else ""))
            else:
                _print_table([["KEY ID", "KIND", "USER", "ACTS FOR", "SCOPES", "STATE",
                               "CREATED", "EXPIRES", "LAST USED", "NAME"]] + [
                    [key.id, key.kind, key.user_id, _acts_for(key), ",".join(key.scopes),
                     key.state, _when(key.created_at_ms), _when(key.expires_at_ms),
                     _when(key.last_used_at_ms), key.name]
                    for key in found
                ])
        elif args.keys_verb == "show":
            key = await keys.find(db, args.key_id)
            if key is None:
                print(f"error: no key {args.key_id}", file=sys.stderr)
                return 1
            print(json.dumps(_key_json(key), indent=2))
        elif args.keys_verb == "revoke":
            if not await keys.revoke(db, args.key_id, audit=(_cli_actor(), "keys.revoke")):
                print(f"error: no active key {args.key_id}", file=sys.stderr)
                return 1
            print(f"revoked key {args.key_id}")
        return 0
    finally:
        await db.close()


def audit_command(settings: Settings, args: argparse.Namespace) -> int:
    async def show() -> int:
        db = database_for(settings.storage.database)
        await db.open()
        try:
            entries = await audit.page(db, 0, args.limit)
        finally:
            await db.close()
        if args.json:
            print(json.dumps([{"seq": e.seq, "at": _iso(e.at_ms), "admin_key_id": e.admin_key_id,
                               "action": e.action, "target": e.target} for e in entries],
                             indent=2))
        elif not entries:
            print("no admin actions recorded")
        else:
            _print_table([["SEQ", "AT", "BY", "ACTION", "TARGET"]] + [
                [str(e.seq), _when(e.at_ms), e.admin_key_id, e.action, e.target]
                for e in entries])
        return 0

    migrate(settings.storage.database)
    return run_sync(show())


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("memory-gateway")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return __version__


def build_parser() -> argparse.ArgumentParser:
    # `--config` is accepted before or after any command's own arguments: every (sub)parser
    # declares it with a suppressed default, so a later parser never resets an earlier value.
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help="TOML configuration file (`memory-gateway config example` prints "
                             "every key with its default)")

    parser = argparse.ArgumentParser(prog="memory-gateway", description=__doc__,
                                     parents=[config])
    parser.add_argument("--version", action="version", version=f"memory-gateway {_version()}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        return verbs.add_parser(name, help=help_text, description=help_text, parents=[config])

    serve_p = verb("serve", "run the gateway")
    serve_p.add_argument("--host", help="listen address (default: server.host)")
    serve_p.add_argument("--port", type=int, help="listen port (default: server.port)")

    keys_p = verb("keys", "manage API keys")
    key_verbs = keys_p.add_subparsers(dest="keys_verb", required=True, metavar="ACTION")

    def key_verb(name: str, help_text: str) -> argparse.ArgumentParser:
        return key_verbs.add_parser(name, help=help_text, description=help_text,
                                    parents=[config])

    create_p = key_verb("create", "create a key; only the key is printed on stdout (the "
                                  "notice goes to stderr), so KEY=$(memory-gateway keys create "
                                  "--user alice) captures it")
    create_p.add_argument("--user", metavar="USER_ID",
                          help="the user the key is for (required for a user key; names the "
                               "owner of a service or admin key)")
    create_p.add_argument("--service", action="store_true",
                          help="a service key: acts for the user named by X-Memory-Gateway-User "
                               "or by an engine route's user field (docs/identity.md)")
    create_p.add_argument("--users", metavar="GLOB", default="",
                          help="service keys: the user ids it may act for, e.g. 'tenant-a.*' "
                               "(default: any)")
    create_p.add_argument("--admin", action="store_true",
                          help="an admin key: reaches only the /admin/ API")
    create_p.add_argument("--scopes", default="read,write", metavar="SCOPES",
                          help="read, write or read,write (default read,write)")
    create_p.add_argument("--name", default="", help="a label shown in listings")
    create_p.add_argument("--expires-in", metavar="DURATION",
                          help="the key stops working after this long: 90d, 12h, 30m or seconds")
    create_p.add_argument("--json", action="store_true",
                          help="print the key and its details as one JSON object")
    list_p = key_verb("list", "list keys (never the secrets)")
    list_p.add_argument("--user", metavar="USER_ID", help="only this user's keys")
    list_p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    show_p = key_verb("show", "show one key's details (never its secret) as JSON")
    show_p.add_argument("key_id", help="the key's id (the 16 hex digits after mgw_)")
    revoke_p = key_verb("revoke", "revoke a key by id (at once, in every process)")
    revoke_p.add_argument("key_id", help="the key's id (the 16 hex digits after mgw_)")

    audit_p = verb("audit", "show the admin audit log (every key created or revoked, every "
                            "erase and export), oldest first")
    audit_p.add_argument("--limit", type=int, default=1000, help="at most this many entries")
    audit_p.add_argument("--json", action="store_true", help="one JSON array instead of a table")

    config_p = verb("config", "the configuration")
    config_verbs = config_p.add_subparsers(dest="config_verb", required=True, metavar="ACTION")
    config_verbs.add_parser("example", help="print the full commented configuration (every key "
                                            "with its default)", parents=[config])

    verb("migrate", "apply pending database migrations")
    verb("doctor", "check configuration, database, storage and upstream; say what to fix")

    dev_p = verb("dev-upstream", "run the built-in dev engine")
    dev_p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    dev_p.add_argument("--port", type=int, default=None,
                       help="listen port (default: dev_engine.port)")
    dev_p.add_argument("--database", default=None, help="SQLite file, or :memory:")

    for name, (help_text, add_arguments, _) in EXTRA_VERBS.items():
        add_arguments(verb(name, help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line; output cut short by a closed pipe (`| head`) ends quietly."""
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that stays quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE
    except MigrationsMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return code


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    args.config = getattr(args, "config", None)
    if args.verb == "config":  # needs no configuration of its own
        print(render_example(), end="")
        return 0
    if args.verb == "doctor":  # it reports a broken configuration itself
        from gateway.ops.doctor import run as doctor

        return doctor(args.config)
    args.config, _ = config_file(args.config)
    try:
        settings = load_settings(args.config)
        check_erased_users(settings)
        if args.verb == "serve":
            overrides: dict[str, Any] = {}
            if args.host:
                overrides["host"] = args.host
            if args.port is not None:
                overrides["port"] = args.port
            if overrides:
                settings = settings.with_values(server=overrides)
            check_dev_engine_flavor(settings)
            from gateway.attachments.fetch_guard import FetchGuard
            from gateway.toolcalls.registry import load_registry

            load_registry(settings.tools.registry)  # a bad registry stops here, named
            FetchGuard.from_settings(settings.upstream)  # and so does a bad fetchable host
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if args.verb == "serve":
        if settings.server.workers > 1:  # forks first: no log thread or loop in the parent
            from gateway.serving import workers

            return workers.serve(settings, _uvicorn_server, _run_async, _gateway_app,
                                 _dev_engine_app)
        logs.configure(settings.server.log_level, settings.server.log_format)
        return serve(settings)
    logging.basicConfig(level=settings.server.log_level.upper(), format=logs.TEXT_FORMAT)
    if args.verb == "keys":
        return keys_command(settings, args)
    if args.verb == "audit":
        return audit_command(settings, args)
    if args.verb == "migrate":
        done = migrate(settings.storage.database)
        for migration in done:
            print(f"applied {migration.version:04d}_{migration.name}")
        print(f"{_database_line(settings, args.config)} is up to date")
        return 0
    if args.verb == "dev-upstream":
        return dev_upstream(
            settings,
            args.host,
            args.port or settings.dev_engine.port,
            args.database or settings.dev_engine.database,
        )
    _, _, run = EXTRA_VERBS[args.verb]
    return run(settings, args)
