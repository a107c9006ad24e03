"""The `memory-gateway` command: serve, keys, migrate, dev-upstream, doctor (and maintenance)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from gateway import logs
from gateway.config import ConfigError, Settings, check_dev_engine_flavor, load_settings
from gateway.errors import ValidationFailed
from gateway.identity.auth import NewKey, generate_key, hash_secret
from gateway.ops import maintenance
from gateway.store import keys
from gateway.store.database import database_for, migrate, run_sync, shown_database

log = logging.getLogger("gateway.cli")

# Extra verbs registered by feature modules: name -> (help, add_arguments, run(settings, args)).
Verb = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[Settings, Any], int]]
EXTRA_VERBS: dict[str, Verb] = {**maintenance.VERBS}


def _run_async(main: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop ships with uvicorn[standard]
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main)


def _uvicorn_server(app: Any, host: str, port: int, log_level: str) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,  # the gateway writes its own access line (gateway.access)
        log_config=None,  # uvicorn's loggers propagate to the root handler set up by main()
        http="httptools",
        lifespan="on",
        proxy_headers=False,  # the gateway is the edge: X-Forwarded-* from clients are not trusted
        server_header=False,
    )
    return uvicorn.Server(config)


def serve(settings: Settings) -> int:
    from gateway.app import create_app

    servers = []
    if not settings.upstream.base_url:
        from gateway.devengine.app import create_dev_engine

        port = settings.dev_engine.port
        dev_url = f"http://127.0.0.1:{port}"
        log.warning(
            "upstream.base_url is empty: running the built-in dev engine at %s "
            "(a development default, not a memory product)",
            dev_url,
        )
        engine = create_dev_engine(settings.dev_engine.database)
        servers.append(_uvicorn_server(engine, "127.0.0.1", port, settings.server.log_level))
        settings = replace(settings, upstream=replace(settings.upstream, base_url=dev_url))
    app = create_app(settings)
    servers.append(
        _uvicorn_server(app, settings.server.host, settings.server.port, settings.server.log_level)
    )
    log.info(
        "memory-gateway listening on http://%s:%d, upstream %s",
        settings.server.host,
        settings.server.port,
        settings.upstream.base_url,
    )

    async def run_all() -> None:
        await asyncio.gather(*(server.serve() for server in servers))

    _run_async(run_all())
    return 0


def dev_upstream(settings: Settings, host: str, port: int, database: str) -> int:
    from gateway.devengine.app import create_dev_engine

    server = _uvicorn_server(create_dev_engine(database), host, port, settings.server.log_level)
    log.warning("dev engine on http://%s:%d (a development default, not a memory product)",
                host, port)
    _run_async(server.serve())
    return 0


def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.keys_verb == "create":
        try:
            new = generate_key(args.user)
        except ValidationFailed as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 2
    return run_sync(_keys(settings, args, new if args.keys_verb == "create" else None))


async def _keys(settings: Settings, args: argparse.Namespace, new: NewKey | None) -> int:
    db = database_for(settings.storage.database)
    await db.open()
    try:
        if new is not None:
            await keys.insert(db, new.key_id, new.user_id, hash_secret(new.secret))
            print(f"created key {new.key_id} for user {new.user_id}; store it now, "
                  "it is not shown again:")
            print(new.token)
        elif args.keys_verb == "list":
            for key in await keys.list_keys(db, args.user):
                state = "revoked" if key.revoked_at_ms else "active"
                print(f"{key.id}\t{key.user_id}\t{state}\t{key.created_at_ms}")
        elif args.keys_verb == "revoke":
            if not await keys.revoke(db, args.key_id):
                print(f"error: no active key {args.key_id}", file=sys.stderr)
                return 1
            print(f"revoked key {args.key_id}")
        return 0
    finally:
        await db.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memory-gateway", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)

    def with_config(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument("--config", help="TOML configuration file")
        return sub

    serve_p = with_config(verbs.add_parser("serve", help="run the gateway"))
    serve_p.add_argument("--host")
    serve_p.add_argument("--port", type=int)

    keys_p = with_config(verbs.add_parser("keys", help="manage API keys"))
    key_verbs = keys_p.add_subparsers(dest="keys_verb", required=True)
    create_p = key_verbs.add_parser("create", help="create a key; printed as the last line")
    create_p.add_argument("--user", required=True)
    list_p = key_verbs.add_parser("list", help="list keys (never the secrets)")
    list_p.add_argument("--user")
    revoke_p = key_verbs.add_parser("revoke", help="revoke a key by id")
    revoke_p.add_argument("key_id")

    with_config(verbs.add_parser("migrate", help="apply pending database migrations"))
    with_config(verbs.add_parser(
        "doctor", help="check configuration, database, storage and upstream; say what to fix"
    ))

    dev_p = with_config(verbs.add_parser("dev-upstream", help="run the built-in dev engine"))
    dev_p.add_argument("--host", default="127.0.0.1")
    dev_p.add_argument("--port", type=int, default=None)
    dev_p.add_argument("--database", default=None, help="SQLite file, or :memory:")

    for name, (help_text, add_arguments, _) in EXTRA_VERBS.items():
        sub = with_config(verbs.add_parser(name, help=help_text))
        add_arguments(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.verb == "doctor":  # it reports a broken configuration itself
        from gateway.ops.doctor import run as doctor

        return doctor(args.config)
    try:
        settings = load_settings(args.config)
        if args.verb == "serve":
            overrides: dict[str, Any] = {}
            if args.host:
                overrides["host"] = args.host
            if args.port:
                overrides["port"] = args.port
            if overrides:
                settings = settings.with_values(server=overrides)
            check_dev_engine_flavor(settings)
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if args.verb == "serve":
        if settings.server.workers > 1:  # forks first: no log thread or loop in the parent
            from gateway import workers

            return workers.serve(settings, _uvicorn_server, _run_async)
        logs.configure(settings.server.log_level, settings.server.log_format)
        return serve(settings)
    logging.basicConfig(level=settings.server.log_level.upper(), format=logs.TEXT_FORMAT)
    if args.verb == "keys":
        return keys_command(settings, args)
    if args.verb == "migrate":
        done = migrate(settings.storage.database)
        for migration in done:
            print(f"applied {migration.version:04d}_{migration.name}")
        print(f"database {shown_database(settings.storage.database)} is up to date")
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
