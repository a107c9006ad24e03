"""The engine's part of an erasure or an export: the flavour's own calls, made for one user."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from gateway.errors import UpstreamBadResponse
from gateway.store import Database
from gateway.upstream.client import UpstreamClient
from gateway.upstream.flavors.base import DEFAULT_SCOPE, DataOwner, EngineCall, Flavor


async def data_owner(db: Database, user_id: str) -> DataOwner:
    """The user, their agents and the scopes of their sessions, read before rows go."""
    agents = await db.read("SELECT id FROM agents WHERE user_id = ? ORDER BY id", (user_id,))
    claimed = await db.read("SELECT app_id, project_id, session_id FROM memory_sessions "
                            "WHERE user_id = ? ORDER BY app_id, project_id, session_id",
                            (user_id,))
    # Scopes starting with "_" are the gateway's own (MemOS cubes), never an engine's.
    scopes = {(DEFAULT_SCOPE, DEFAULT_SCOPE),
              *((row[0], row[1]) for row in claimed if not row[0].startswith("_"))}
    groups = tuple(row[2] for row in claimed
                   if (row[0], row[1]) == (DEFAULT_SCOPE, DEFAULT_SCOPE))
    return DataOwner(user_id, tuple(row[0] for row in agents), tuple(sorted(scopes)), groups)


async def _answer(upstream: UpstreamClient, call: EngineCall, user_id: str) -> Any:
    headers = [(upstream.settings.user_header, user_id), *upstream.settings.headers.items()]
    body = None
    if call.body is not None:
        headers.append(("Content-Type", "application/json"))
        body = json.dumps(call.body, ensure_ascii=False).encode()
    status, _, raw = await upstream.call(call.method, call.path, headers, body)
    if not 200 <= status < 300:
        raise UpstreamBadResponse(
            f"the engine answered {call.method} {call.path.split('?')[0]} with {status}")
    try:
        answer = json.loads(raw) if raw.strip() else None
    except ValueError:
        answer = raw.decode("utf-8", "replace")
    refused = call.refusal(answer) if call.refusal is not None else None
    if refused is not None:
        raise UpstreamBadResponse(f"the engine refused {call.path}: {refused}")
    return answer


async def erase_upstream(upstream: UpstreamClient, flavor: Flavor, owner: DataOwner) -> bool:
    """Delete the user's memories through the engine's own delete routes; False when the engine
    serves none (nothing was sent). A refused or failed call raises: the erasure stays open."""
    if flavor.erase_calls is None:
        return False
    for call in flavor.erase_calls(owner):
        await _answer(upstream, call, owner.user_id)
    return True


async def export_upstream(upstream: UpstreamClient, flavor: Flavor, owner: DataOwner
                          ) -> AsyncIterator[dict[str, Any]]:
    """One JSON Lines record per listing call the flavour has: the call and the engine's answer."""
    for call in flavor.export_calls(owner) if flavor.export_calls is not None else []:
        answer = await _answer(upstream, call, owner.user_id)
        yield {"method": call.method, "path": call.path, "body": call.body, "answer": answer}
