"""A user with rows in every table that holds a user's rows, and files in their folders, written
through the gateway's own database and file-store adapters (either backend): what the erasure
and export tests and bench/user_data.py start from. `SEEDED` must name every table of
gateway.store.user_rows.USER_TABLES (tests/test_user_data.py checks it)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from gateway.attachments.files import FileStore
from gateway.store import Database
from gateway.store.ids import new_id, now_ms

DAY_MS = 86_400_000


async def _insert(db: Database, table: str, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    sql = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
           f"({', '.join('?' for _ in columns)})")
    async with db.write() as tx:
        await tx.executemany(sql, [tuple(row[c] for c in columns) for row in rows])


async def seed_user(db: Database, files: FileStore, user_id: str, *, messages: int = 3,
                    stored_files: int = 2, file_bytes: int = 64) -> dict[str, int]:
    """Rows for `user_id` in every table and `stored_files` files; the rows written per table."""
    now = now_ms()
    session = f"s-{user_id}"
    agent, conversation, fact, asset = (new_id(kind) for kind in ("agt", "cnv", "fct", "ast"))
    written: dict[str, list[dict[str, Any]]] = {
        "agents": [{"id": agent, "user_id": user_id, "name": "helper", "activity_at_ms": now,
                    "created_at_ms": now, "updated_at_ms": now}],
        "conversations": [{"id": conversation, "user_id": user_id, "agent_id": agent,
                           "title": "t", "created_at_ms": now, "updated_at_ms": now}],
        "conversation_messages": [
            {"id": new_id("t"), "user_id": user_id, "conversation_id": conversation,
             "agent_id": agent, "client_message_id": f"c-{n}", "role": "user",
             "content": f"message {n} of {user_id}", "status": "completed",
             "fingerprint": "f", "created_at_ms": now + n} for n in range(messages)],
        "agent_memories": [{"id": new_id("t"), "user_id": user_id, "agent_id": agent,
                            "type": "note", "content": "likes tea", "importance": 3,
                            "status": "active", "created_at_ms": now, "updated_at_ms": now}],
        "memory_facts": [{"id": fact, "user_id": user_id, "scope": "image", "fact_type": "style",
                          "fact_key": "palette", "value": "pastel", "confidence": 80,
                          "source_type": "manual", "created_at_ms": now, "updated_at_ms": now}],
        "memory_fact_observations": [{"id": new_id("t"), "user_id": user_id, "fact_id": fact,
                                      "value": "pastel", "source_type": "manual", "explicit": 0,
                                      "counted": 1, "created_at_ms": now}],
        "media_assets": [{"id": asset, "user_id": user_id, "media_type": "image",
                          "source_type": "upload", "original_url": "https://x.test/a.png",
                          "root_asset_id": asset, "created_at_ms": now, "updated_at_ms": now}],
        "uploaded_objects": [{"id": new_id("obj"), "user_id": user_id,
                              "object_key": f"mgw-object/{new_id('k')}/a.png", "file_id": "f",
                              "file_name": "a.png", "file_type": "image",
                              "content_type": "image/png", "max_size": 1024,
                              "internal_uri": f"file:///nowhere/{user_id}/a.png",
                              "signed_at_ms": now, "upload_expires_at_ms": now + 60_000,
                              "expires_at_ms": now + 60_000}],
        "media_asset_relations": [{"id": new_id("t"), "user_id": user_id, "from_asset_id": asset,
                                   "to_asset_id": asset, "relation_type": "edited_from",
                                   "created_at_ms": now}],
        "conversation_working_state": [{"user_id": user_id, "chat_id": conversation,
                                        "updated_at_ms": now}],
        "conversation_summary_memory": [{"user_id": user_id, "chat_id": conversation,
                                         "updated_at_ms": now}],
        "chat_turn_results": [{"id": new_id("t"), "user_id": user_id, "chat_id": conversation,
                               "asset_ids": "[]", "created_at_ms": now}],
        "message_target_resolutions": [{
            "id": new_id("t"), "user_id": user_id, "chat_id": conversation, "raw_text": "this",
            "uploaded_asset_ids": "[]", "selected_asset_ids": "[]",
            "candidate_asset_ids": "[]", "resolved_asset_ids": "[]", "resolution_mode": "none",
            "confidence": 0, "needs_clarification": 0, "reasoning": "", "created_at_ms": now}],
        "tool_calls": [{"message_id": new_id("t"), "user_id": user_id,
                        "conversation_id": conversation, "tool_name": "t", "job_kind": "k",
                        "args": "{}", "display_args": "{}", "status": "not_completed",
                        "dedupe_key": new_id("t"), "created_at_ms": now, "updated_at_ms": now}],
        "dev_jobs": [{"id": new_id("t"), "user_id": user_id, "idempotency_key": new_id("t"),
                      "kind": "k", "payload": "{}", "created_at_ms": now}],
        "pending_intents": [{"id": new_id("t"), "user_id": user_id, "kind": "add",
                             "payload": json.dumps({"mappings": [], "folders": []}),
                             # held by a live process: no start-up settles it meanwhile
                             "created_at": now, "owner": "seed", "lease_until": now + DAY_MS}],
        "api_keys": [{"id": secrets.token_hex(8), "user_id": user_id, "secret_sha256": "0" * 64,
                      "created_at_ms": now}],
        "memory_sessions": [{"app_id": "default", "project_id": "default", "session_id": session,
                             "user_id": user_id, "created_at": now}],
        "resources": [],
        "memory_attachments": [],
    }
    for n in range(stored_files):
        resource = new_id("t")
        folder = files.folder(user_id, "resources", resource)
        stored = await files.write_bytes(folder, f"file-{n}.txt",
                                         (f"{user_id} {n} ".encode() * file_bytes)[:file_bytes])
        written["resources"].append({
            "id": resource, "user_id": user_id, "name": stored.name, "safe_name": stored.name,
            "content_type": "text/plain", "size": stored.size, "sha256": stored.sha256,
            "session_id": session, "internal_uri": stored.uri, "created_at": now})
        written["memory_attachments"].append({
            "id": new_id("t"), "user_id": user_id, "session_id": session, "resource_id": resource,
            "content_type": "text/plain", "name": stored.name, "internal_uri": stored.uri,
            "source": "resource", "sha256": stored.sha256, "created_at": now})
    for table, rows in written.items():
        await _insert(db, table, rows)
    return {table: len(rows) for table, rows in written.items()}
