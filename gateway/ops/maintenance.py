"""Maintenance verbs that work on the database and storage outside the server: backfill, gc.

Neither settles pending intents: a running server may have those calls in flight, and only its
own start-up (gateway/attachments/recovery.py) knows that none are.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from gateway.attachments.files import create_file_store
from gateway.config import Settings
from gateway.ops import gc as garbage
from gateway.store import attachments as attachment_store
from gateway.store.database import database_for


async def _backfill(settings: Settings) -> tuple[int, int]:
    db = database_for(settings.storage.database)
    await db.open()
    try:
        pending = len(await attachment_store.leftover_intents(db))
        made = await attachment_store.backfill(db)
        return pending, made
    finally:
        await db.close()


def backfill(settings: Settings, args: argparse.Namespace) -> int:
    """Give every live resource its mapping (idempotent)."""
    pending, made = asyncio.run(_backfill(settings))
    print(f"made {made} resource mapping(s); {pending} pending add/upload(s) left to the "
          "server's next start-up")
    return 0


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    return None


async def _gc(settings: Settings, grace_s: float, dry_run: bool) -> garbage.Plan:
    db = database_for(settings.storage.database)
    files = create_file_store(settings.storage)
    await db.open()
    try:
        await files.open_store()
        return await garbage.collect(db, files, grace_s, dry_run=dry_run)
    finally:
        await files.close()
        await db.close()


def gc(settings: Settings, args: argparse.Namespace) -> int:
    """Remove files with no row and mark rows whose file vanished, past the grace period."""
    grace_s = settings.storage.gc_grace_s if args.grace_seconds is None else args.grace_seconds
    if grace_s < 0:
        print("error: --grace-seconds must not be negative", file=sys.stderr)
        return 2
    done = asyncio.run(_gc(settings, grace_s, args.dry_run))
    for line in garbage.report(done, grace_s, args.dry_run):
        print(line)
    return 0


def _gc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="print what would be removed or marked, change nothing")
    parser.add_argument("--grace-seconds", type=float, default=None,
                        help="leave what is younger than this alone (default: storage.gc_grace_s)")


VERBS = {
    "backfill": ("give every live resource its attachment mapping (idempotent)", _no_arguments,
                 backfill),
    "gc": ("remove files with no row and mark rows whose file vanished (--dry-run)",
           _gc_arguments, gc),
}
