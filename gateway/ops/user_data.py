"""`memory-gateway users erase|export`: a user's data from the command line (SPEC §17).

Both work on the database, the files and the engine the configuration names, like the server
does; an erasure a crash interrupted (here or in a server) is finished by running it again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

from gateway.attachments.files import create_file_store
from gateway.config import Settings
from gateway.errors import GatewayError
from gateway.identity.auth import validate_user_id
from gateway.store import audit, user_rows
from gateway.store.database import database_for
from gateway.upstream.client import create_upstream
from gateway.upstream.flavors import flavor_for
from gateway.userdata.erasure import Eraser, Progress, answer
from gateway.userdata.export import export_archive

CLI_ADMIN = "cli"  # the audit log's admin_key_id for what the command line did
BAR_WIDTH = 30


@asynccontextmanager
async def _opened(settings: Settings) -> AsyncIterator[Eraser]:
    db = database_for(settings.storage.database)
    files = create_file_store(settings.storage)
    upstream = create_upstream(settings.upstream)
    await db.open()
    try:
        await files.open_store()
        yield Eraser(db, files, upstream, flavor_for(settings))
    finally:
        await upstream.aclose()
        await files.close()
        await db.close()


class ProgressBar:
    """`[#####-----]  52%  conversation_messages  5200/10000` on one line of a terminal; written
    elsewhere (a file, a pipe), one plain line per step instead, no `\r` frames."""

    def __init__(self, total: int, out: TextIO) -> None:
        self.total = max(total, 1)
        self.out = out
        self.live = out.isatty()
        self.step = ""

    def __call__(self, progress: Progress) -> None:
        done = sum(progress.counts.values())
        if not self.live:
            if progress.step != self.step:
                self.step = progress.step
                self.out.write(f"erasing: {progress.step} {done}/{self.total}\n")
                self.out.flush()
            return
        share = min(done / self.total, 1.0) if progress.step != "done" else 1.0
        filled = round(share * BAR_WIDTH)
        self.out.write(f"\r[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {share:4.0%}  "
                       f"{progress.step:<28} {done}/{self.total}")
        if progress.step == "done":
            self.out.write("\n")
        self.out.flush()


async def _erase(settings: Settings, user_id: str, show: bool) -> dict[str, object]:
    async with _opened(settings) as eraser:
        total = 0
        for table in user_rows.USER_TABLES:
            total += await user_rows.count_rows(eraser.db, table, user_id)
        async for _ in eraser.files.user_files(user_id):
            total += 1
        found = await user_rows.erasure(eraser.db, user_id)
        if found is not None:
            total += sum(found.counts.values())  # what an interrupted run already removed
        bar = ProgressBar(total, sys.stderr) if show else None
        erasure = await eraser.erase(user_id, CLI_ADMIN, bar)
        return answer(user_id, erasure)


def erase(settings: Settings, args: argparse.Namespace) -> int:
    """Erase a user (or finish an interrupted erasure); prints the answer as JSON."""
    try:
        validate_user_id(args.user_id)
        result = asyncio.run(_erase(settings, args.user_id, not args.quiet))
    except GatewayError as exc:
        print(f"error: {exc.message} (the erasure is recorded: run this again to finish it)"
              if exc.status >= 500 else f"error: {exc.message}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    engine = result["engine"]
    if isinstance(engine, dict) and not engine["erased"]:
        print(f"note: the engine serves no delete: {len(engine['remaining'])} session(s) stay "
              "upstream, unreachable through the gateway; remove them from the engine's own "
              "storage, and keep this answer as the record of what is left", file=sys.stderr)
    return 0


async def _export(settings: Settings, user_id: str, target: Path) -> int:
    partial = target.with_name(f".{target.name}.part")
    size = 0
    async with _opened(settings) as eraser:
        await user_rows.require_known(eraser.db, user_id)
        with open(partial, "wb") as out:
            async for chunk in export_archive(eraser.db, eraser.files, eraser.upstream,
                                              eraser.flavor, user_id):
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        await audit.record(eraser.db, CLI_ADMIN, "users.export", user_id)
    os.replace(partial, target)
    return size


def export(settings: Settings, args: argparse.Namespace) -> int:
    """Write a user's export zip to FILE (whole or not at all)."""
    target = Path(args.output)
    try:
        validate_user_id(args.user_id)
        size = asyncio.run(_export(settings, args.user_id, target))
    except GatewayError as exc:
        target.with_name(f".{target.name}.part").unlink(missing_ok=True)
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    print(f"wrote {target} ({size} bytes)")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    # `--config` after the action too, declared as gateway/cli.py declares it for every parser.
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help="TOML configuration file (`memory-gateway config example` "
                        "prints every key with its default)")
    actions = parser.add_subparsers(dest="users_verb", required=True, metavar="ACTION")
    erase_p = actions.add_parser("erase", parents=[config], help="erase a user's credentials, "
                                 "rows, files and engine memories (resumable)")
    erase_p.add_argument("user_id", metavar="USER_ID", help="the user whose data is erased")
    erase_p.add_argument("--quiet", action="store_true", help="no progress bar")
    export_p = actions.add_parser("export", parents=[config],
                                  help="write a user's data as a zip")
    export_p.add_argument("user_id", metavar="USER_ID", help="the user whose data is exported")
    export_p.add_argument("-o", "--output", required=True, metavar="FILE",
                          help="the zip to write (whole or not at all)")


def run(settings: Settings, args: argparse.Namespace) -> int:
    return erase(settings, args) if args.users_verb == "erase" else export(settings, args)


VERBS = {"users": ("erase or export one user's data", _arguments, run)}
