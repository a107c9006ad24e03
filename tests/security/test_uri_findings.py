"""Two findings about the URIs an add hands the engine, each failing on the code before the fix.

A. "The engine fetches any URL for any key holder": EverOS fetches an item's http(s) `uri`
   during an add (following redirects, guarding no address), so a loopback, private or
   metadata URI made it read the gateway's network. Now such an add is a 422
   `uri_not_allowed` on every add path, nothing forwarded and nothing written, and so is a job
   whose input images live there.
B. "S3 URIs: `s3://bucket/prefix/bob/x%2F..%2F..%2Falice/…` passes the ownership check" (the
   key was split, then each piece decoded). Now the key is decoded whole first.

The recording fake engine's request list proves what reached the engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from gateway.attachments import fetch_guard
from gateway.config import Settings
from tests.attachment_helpers import rows
from tests.conftest import storage_values
from tests.fake_dns import PUBLIC_ADDRESS, FakeDns
from tests.s3_server import S3Server
from tests.security.support import RecordingEngine, body_of, gateway_with, keyed, settings_for
from tests.test_messages import new_conversation
from tests.tool_call_helpers import (
    JOBS,
    FakeJobs,
    confirm,
    gateway,
    image_id,
    propose,
    register_image,
    user,
    with_jobs,
)

LOOPBACK_PAGE = "http://127.0.0.1:45679/page.html"
ADD_PATHS = ("/memories/add", "/api/v2/memory/add", "/api/v1/memory/add")


def add_body(uri: str, user_id: str = "bob", **extra: Any) -> dict[str, Any]:
    return {"session_id": "s1", **extra, "messages": [{"role": "user", "sender_id": user_id,
                                                        "timestamp": 1764547200000,
                                                        "content": [
        {"type": "text", "text": "read this"},
        {"type": "html", "uri": uri, "name": "page.html"}]}]}


@pytest.fixture
def recording() -> RecordingEngine:
    return RecordingEngine()


async def refused(client: httpx.AsyncClient, path: str, body: dict[str, Any],
                  field: str = "messages[0].content[1].uri") -> None:
    response = await client.post(path, json=body)
    assert response.status_code == 422, (path, response.text)
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("uri_not_allowed", field), error


def nothing_written(settings: Settings) -> None:
    for table in ("memory_attachments", "memory_sessions", "pending_intents"):
        assert rows(settings, f"SELECT * FROM {table}") == [], table


# --- A: URIs the engine would fetch --------------------------------------------------------------

async def test_a_loopback_page_is_refused_on_every_add_path(
    tmp_path: Path, recording: RecordingEngine
) -> None:
    settings = settings_for(tmp_path)
    async with gateway_with(settings, recording) as app, keyed(app, settings, "bob") as bob:
        for path in ADD_PATHS:
            for uri in (LOOPBACK_PAGE, "http://2130706433:45679/page.html",
                        "http://[::ffff:127.0.0.1]/page.html", "http://localhost/page.html",
                        "http://loopback.test/page.html",  # a name that resolves to 127.0.0.1
                        "http://169.254.169.254/latest/meta-data/",
                        "https://nowhere.invalid/page.html"):  # resolves to nothing
                await refused(bob, path, add_body(uri))
    assert recording.requests == []
    nothing_written(settings)


async def test_a_passed_through_route_carrying_messages_is_guarded_too(
    tmp_path: Path, recording: RecordingEngine
) -> None:
    settings = settings_for(tmp_path, allow_paths=["POST /api/v2/memory/import"])
    async with gateway_with(settings, recording) as app, keyed(app, settings, "bob") as bob:
        await refused(bob, "/api/v2/memory/import", add_body("http://10.0.0.5/x.pdf"))
        assert recording.requests == []
        fine = await bob.post("/api/v2/memory/import", json=add_body("https://cdn.example/x"))
        assert fine.status_code == 200 and len(recording.requests) == 1


@pytest.mark.parametrize(("flavor", "path", "body", "field"), [
    ("mem0", "/v3/memories/add/", {"user_id": "bob", "run_id": "r1", "messages": [
        {"role": "user", "content": {"type": "image_url",
                                     "image_url": {"url": "http://169.254.169.254/"}}}]},
     "messages[0].content.image_url.url"),
    ("memos", "/product/add", {"user_id": "bob", "session_id": "s1", "messages": [
        {"type": "file", "file": {"file_data": "http://10.0.0.1/notes.pdf",
                                  "filename": "notes.pdf"}}]},
     "messages[0].file.file_data"),
])
async def test_a_other_engines_native_adds_are_guarded(
    tmp_path: Path, recording: RecordingEngine, flavor: str, path: str, body: dict[str, Any],
    field: str,
) -> None:
    settings = settings_for(tmp_path, flavor=flavor)
    async with gateway_with(settings, recording) as app, keyed(app, settings, "bob") as bob:
        await refused(bob, path, body, field)
    assert recording.requests == []


@pytest.mark.parametrize("uri", [LOOPBACK_PAGE, "file:///etc/passwd"])
async def test_a_refused_add_claims_no_session(
    tmp_path: Path, recording: RecordingEngine, uri: str
) -> None:
    settings = settings_for(tmp_path, flavor="memos")
    body = {"session_id": "s1", "messages": [
        {"type": "file", "file": {"file_data": uri, "filename": "page.html"}}]}
    async with gateway_with(settings, recording) as app, keyed(app, settings, "bob") as bob, \
            keyed(app, settings, "alice") as alice:
        await refused(bob, "/product/add", {"user_id": "bob", **body}, "messages[0].file.file_data")
        fine = {**body, "user_id": "alice", "messages": [{"role": "user", "content": "hello"}]}
        response = await alice.post("/product/add", json=fine)
        assert response.status_code == 200, response.text


async def test_a_public_hosts_allowlisted_hosts_and_the_off_switch_pass(
    tmp_path: Path, recording: RecordingEngine
) -> None:
    cases = [
        ({}, f"https://{PUBLIC_ADDRESS}/summit.jpg"),
        ({}, "https://cdn.example/summit.jpg"),
        ({"fetchable_hosts": ["intranet.test"]}, "http://intranet.test/summit.jpg"),
        ({"fetchable_hosts": ["10.9.0.0/16"]}, "http://10.9.8.7:8000/summit.jpg"),
        ({"fetch_guard": False}, LOOPBACK_PAGE),
    ]
    for index, (upstream, uri) in enumerate(cases):
        settings = settings_for(tmp_path / str(index), **upstream)
        async with gateway_with(settings, recording) as app, \
                keyed(app, settings, "bob") as bob:
            response = await bob.post("/api/v2/memory/add", json=add_body(uri))
            assert response.status_code == 200, (uri, response.text)
        assert body_of(recording.requests[-1])["messages"][0]["content"][1]["uri"] == uri
        assert [row[0] for row in rows(settings, "SELECT internal_uri FROM memory_attachments")
                ] == [uri]


async def test_a_job_inputs_must_be_public_when_proposed_and_when_confirmed(
    settings: Settings, engine: respx.MockRouter, make_key: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dns = FakeDns({"cats.example": [PUBLIC_ADDRESS]})
    monkeypatch.setattr(fetch_guard, "default_resolver", dns.resolve)
    jobs = FakeJobs()
    async with gateway(with_jobs(settings, base_url=JOBS), engine, jobs, 0.0) as app, \
            user(app, make_key, "bob") as bob:
        conversation = await new_conversation(bob)
        metadata = "http://169.254.169.254/latest/meta-data/iam/cat.png"
        await register_image(bob, metadata)
        response = await propose(bob, conversation, image=image_id(metadata), prompt="blue")
        assert response.status_code == 422, response.text
        assert (response.json()["error"]["code"], response.json()["error"]["field"]) == (
            "uri_not_allowed", "args.image")
        assert rows(settings, "SELECT * FROM tool_calls") == []
        # Public when proposed; the name points inside by the time the user confirms.
        cat = "https://cats.example/cat.png"
        await register_image(bob, cat)
        response = await propose(bob, conversation, image=image_id(cat), prompt="blue")
        assert response.status_code == 201, response.text
        message = response.json()["message"]["id"]
        dns.table = {"cats.example": ["10.1.1.1"]}
        response = await confirm(bob, conversation, message)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "args.image"
        assert jobs.submissions == []
        [(status, job)] = rows(settings, "SELECT status, external_job_id FROM tool_calls")
        assert (status, job) == ("not_completed", None)
        dns.table = {"cats.example": [PUBLIC_ADDRESS]}
        response = await confirm(bob, conversation, message)
        assert response.status_code == 200, response.text
        assert [p["payload"]["images"][0]["url"] for p in jobs.payloads()] == [cat]


# --- B: S3 keys decoded whole before the owner is checked ---------------------------------------

async def test_b_an_encoded_traversal_into_another_users_s3_prefix_is_refused(
    tmp_path: Path, recording: RecordingEngine, s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings().with_values(upstream={"base_url": "http://engine.test"},
                                      storage=storage_values(tmp_path, s3_server, monkeypatch))
    store = settings.storage.files
    async with gateway_with(settings, recording) as app, keyed(app, settings, "alice") as alice, \
            keyed(app, settings, "bob") as bob:
        upload = await alice.post("/resources", files={"file": ("secret.png", b"\x89PNG alice")})
        assert upload.status_code == 201
        tail = f"alice/resources/{upload.json()['id']}/secret.png"
        recording.requests.clear()
        for uri in (f"{store}/bob/x%2F..%2F..%2F{tail}", f"{store}/bob/x%2f..%2f..%2f{tail}",
                    f"{store}/bob/x%252F..%252F..%252F{tail}", f"{store}/bob/%2e%2e/{tail}",
                    f"{store}/bob/x%5C..%5C..%5C{tail}", f"{store}/bob/x\\..\\..\\{tail}"):
            response = await bob.post("/api/v2/memory/add", json={
                "session_id": "bobs", "messages": [{"role": "user", "sender_id": "bob",
                                                    "timestamp": 1764547200000,
                                                    "content": [{"type": "image", "uri": uri}]}]})
            assert response.status_code == 422, (uri, response.text)
            assert response.json()["error"]["code"] == "uri_not_allowed"
        assert recording.requests == []
        assert rows(settings, "SELECT * FROM memory_attachments WHERE user_id = 'bob'") == []
