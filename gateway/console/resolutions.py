"""`/console/resolutions`: the target-resolution audit (§12) per conversation: the text, the
rule that decided, the chosen assets (thumbnails where they are the user's stored images) or
the clarification asked."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import guard
from gateway.console.calls import as_user
from gateway.console.rendering import next_url, page
from gateway.services import services
from gateway.store import resolutions
from gateway.store.cursors import decode_cursor, encode_cursor

PAGE = 50
# An asset URL naming one of the gateway's stored files: shown through the console's file route
# (as the asset's owner), never fetched from anywhere else.
_STORED = (re.compile(r"^resource://([A-Za-z0-9_-]+)$"),
           re.compile(r"/resources/([A-Za-z0-9_-]+)/content(?:[?#].*)?$"))
_ATTACHED = re.compile(r"/attachments/([A-Za-z0-9_-]+)/content(?:[?#].*)?$")


def stored_file(url: str | None) -> tuple[str, str] | None:
    """(kind, id) of the stored file an asset URL names, for the console's file route."""
    for pattern in _STORED:
        found = pattern.search(url or "")
        if found:
            return "resource", found.group(1)
    found = _ATTACHED.search(url or "")
    return ("attachment", found.group(1)) if found else None


async def _asset(request: Request, who: guard.Operator, user: str,
                 asset_id: str) -> dict[str, Any]:
    answer = await as_user(request, who, user, "GET", f"/assets/{asset_id}")
    if not answer.ok:
        return {"id": asset_id, "missing": True}
    asset = answer.json()
    shown = stored_file(asset.get("previewUrl")) or stored_file(asset.get("originalUrl"))
    return {"id": asset_id, "missing": False, "name": asset.get("displayName") or "",
            "url": asset.get("originalUrl") or "", "file": shown}


async def audit_page(request: Request) -> Response:
    who = await guard.operator(request)
    user = request.query_params.get("user", "").strip()
    chat = request.query_params.get("conversation", "").strip()
    raw_cursor = request.query_params.get("cursor", "")
    before = decode_cursor(raw_cursor, "cursor") if raw_cursor else None
    found = await resolutions.recent(services(request).db, user or None, chat or None,
                                     PAGE + 1, before)
    more = len(found) > PAGE
    found = found[:PAGE]
    shown = []
    for owner, resolution in found:
        chosen = [await _asset(request, who, owner, asset_id)
                  for asset_id in resolution.resolved_asset_ids]
        shown.append({"user": owner, "resolution": resolution, "chosen": chosen})
    cursor = (encode_cursor(found[-1][1].created_at_ms, found[-1][1].id)
              if more and found else None)
    return page(request, "resolutions.html", who, rows=shown, user=user, conversation=chat,
                next_url=next_url(request, cursor))


routes = [Route("/console/resolutions", audit_page, methods=["GET"])]
