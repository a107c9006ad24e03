"""Maintenance verbs that work on the database and storage outside the server: backfill."""

from __future__ import annotations

import argparse
import asyncio

from gateway.config import Settings
from gateway.store import Database
from gateway.store import attachments as attachment_store


async def _backfill(settings: Settings) -> tuple[int, int]:
    db = Database(settings.storage.database)
    await db.open()
    try:
        settled = await attachment_store.settle_leftover_intents(db)
        made = await attachment_store.backfill(db)
        return len(settled), made
    finally:
        await db.close()


def backfill(settings: Settings, args: argparse.Namespace) -> int:
    """Settle interrupted adds/uploads and give every live resource its mapping (idempotent)."""
    settled, made = asyncio.run(_backfill(settings))
    print(f"settled {settled} interrupted add/upload(s); made {made} resource mapping(s)")
    return 0


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    return None


VERBS = {
    "backfill": ("give every live resource its attachment mapping (idempotent)", _no_arguments,
                 backfill),
}
