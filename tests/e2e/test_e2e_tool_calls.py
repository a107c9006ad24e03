"""End to end with real processes: the README's tool-call walk-through on the dev job runner,
with the gateway restarted between the confirmation and the read."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import BACKENDS
from tests.processes import dev_engine, gateway

pytestmark = pytest.mark.e2e
CAT = "https://example.com/cat.png"


def tool_call(client: httpx.Client, conversation_id: str, message_id: str) -> dict[str, Any]:
    page = client.get(f"/conversations/{conversation_id}/messages")
    assert page.status_code == 200, page.text
    [message] = [m for m in page.json()["messages"] if m["id"] == message_id]
    return dict(message["toolCall"])


@pytest.mark.parametrize("database_backend", BACKENDS, indirect=True)
def test_propose_confirm_restart_read_until_completed(
    tmp_path: Path, on_database: dict[str, str]
) -> None:
    with dev_engine(tmp_path) as engine_url:
        with gateway(tmp_path, engine_url, **on_database) as gw:
            key = gw.key("alice")
            alice = httpx.Client(base_url=gw.url, timeout=20,
                                 headers={"Authorization": f"Bearer {key}"})
            with alice:
                assert "edit_image" in [t["name"] for t in alice.get("/tools").json()["tools"]]
                agent = alice.post("/agents", json={"name": "Painter"}).json()["id"]
                conversation = alice.get(f"/agents/{agent}/conversation").json()["conversationId"]
                original = alice.post("/assets", json={
                    "mediaType": "image", "sourceType": "upload", "originalUrl": CAT}).json()["id"]
                image = "sha256:" + hashlib.sha256(CAT.encode()).hexdigest()
                proposed = alice.post(f"/conversations/{conversation}/tool-calls", json={
                    "clientMessageId": "call-1", "toolName": "edit_image",
                    "args": {"image": image, "prompt": "make it blue"}})
                assert proposed.status_code == 201, proposed.text
                message = proposed.json()["message"]["id"]
                confirmed = alice.post(
                    f"/conversations/{conversation}/tool-calls/{message}/confirm")
                assert confirmed.status_code == 200, confirmed.text
                job = confirmed.json()["message"]["toolCall"]["externalJobId"]
        # A new gateway process on the same storage: the call and its job are still there.
        with gateway(tmp_path, engine_url, **on_database) as gw:
            alice = httpx.Client(base_url=gw.url, timeout=20,
                                 headers={"Authorization": f"Bearer {key}"})
            with alice:
                call = tool_call(alice, conversation, message)
                for _ in range(100):  # the dev runner takes jobs.dev_delay_s (1 s)
                    if call["status"] != "not_completed":
                        break
                    time.sleep(0.1)
                    call = tool_call(alice, conversation, message)
                assert (call["status"], call["externalJobId"]) == ("completed", job)
                [media] = call["result"]["media"]
                png = alice.get(f"/resources/{media['url'].removeprefix('resource://')}/content")
                assert png.content.startswith(b"\x89PNG")
                latest = alice.post(f"/chats/{conversation}/resolve",
                                    json={"text": "now the latest one, brighter"}).json()
                assert latest["targetAssetIds"] == [media["assetId"]]
                asset = alice.get(f"/assets/{media['assetId']}").json()
                assert asset["rootAssetId"] == original
