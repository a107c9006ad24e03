"""`/resources` (SPEC §7): streamed upload, ingestion, all-or-nothing, dedupe, list, delete."""

from __future__ import annotations

import hashlib
import os

import httpx
import pytest
import respx

from gateway.config import Settings
from tests import databases
from tests.attachment_helpers import (
    PNG,
    answer_search,
    engine_ok,
    episodes,
    rows,
    sent_json,
    stored_bytes,
    stored_files,
    stored_uri,
)
from tests.conftest import StartGateway, client_for, on_both_stores

# The route suite runs on both databases and through both production upstream clients over a
# loopback engine, paired (conftest): SQLite with the native client, PostgreSQL with httpx; and
# with files on local disk and on S3.
pytestmark = [pytest.mark.both_databases, pytest.mark.both_clients, on_both_stores]


async def upload(client: httpx.AsyncClient, data: bytes = PNG, name: str = "photo.png",
                 **fields: str) -> httpx.Response:
    return await client.post("/resources", files={"file": (name, data, "image/png")},
                             data=fields)


async def test_upload_stores_file_ingests_and_maps(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    routes = engine_ok(engine)
    response = await upload(alice, metadata='{"album": "trip"}')
    assert response.status_code == 201, response.text
    body = response.json()
    rid = body["id"]
    assert body["uri"] == f"resource://{rid}"
    assert body["name"] == "photo.png" and body["content_type"] == "image/png"
    assert body["size"] == len(PNG) and body["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert body["session_id"] == f"resource:alice:{rid}"
    assert body["metadata"] == {"album": "trip"}
    assert "file://" not in response.text
    assert stored_files(settings) == [f"alice/resources/{rid}/photo.png"]
    assert stored_bytes(settings, f"alice/resources/{rid}/photo.png") == PNG
    uri = stored_uri(settings, f"alice/resources/{rid}/photo.png")
    added = sent_json(routes["add"])
    assert added["session_id"] == f"resource:alice:{rid}"
    message = added["messages"][0]
    assert message["role"] == "user" and message["sender_id"] == "alice"
    assert isinstance(message["timestamp"], int)
    text, item = message["content"]
    assert text["type"] == "text" and "photo.png" in text["text"]
    if settings.storage.files:  # the engine cannot read S3 keys: it gets a presigned URL
        signed = item.pop("uri")
        assert signed.startswith(settings.storage.s3_endpoint_url) and "Signature=" in signed
        assert httpx.get(signed).content == PNG
        assert item == {"type": "image", "name": "photo.png", "ext": "png"}
    else:
        assert item == {"type": "image", "uri": uri, "name": "photo.png", "ext": "png"}
    assert sent_json(routes["flush"])["session_id"] == f"resource:alice:{rid}"
    mapping = rows(settings, "SELECT * FROM memory_attachments WHERE resource_id = ?", rid)
    assert len(mapping) == 1 and mapping[0]["internal_uri"] == uri
    assert mapping[0]["user_id"] == "alice" and mapping[0]["deleted_at"] is None


async def test_flush_can_be_turned_off(settings: Settings, engine: respx.MockRouter,
                                       make_key, start_gateway: StartGateway) -> None:
    routes = engine_ok(engine)
    no_flush = settings.with_values(resources={"flush_after_ingest": False})
    async with start_gateway(no_flush) as gateway, \
            client_for(gateway, make_key("alice")) as client:
        assert (await upload(client)).status_code == 201
    assert routes["add"].called and not routes["flush"].called


async def test_upstream_failure_keeps_nothing_and_returns_its_answer(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine.post("/api/v2/memory/add").mock(
        return_value=httpx.Response(500, json={"error": {"code": "BOOM"}})
    )
    response = await upload(alice)
    assert response.status_code == 500  # the engine's status, in the gateway's shape (SPEC §4)
    assert response.json() == {"error": {
        "code": "upstream_error", "message": '{"error": {"code": "BOOM"}}', "status": 500,
        "upstream_status": 500, "request_id": response.headers["x-request-id"]}}
    assert stored_files(settings) == []
    assert rows(settings, "SELECT * FROM resources") == []
    assert rows(settings, "SELECT * FROM memory_attachments") == []
    assert rows(settings, "SELECT * FROM pending_intents") == []


async def test_flush_failure_is_a_failed_ingestion(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    engine.post("/api/v2/memory/flush").mock(side_effect=httpx.ReadTimeout("slow"))
    response = await upload(alice)
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    assert stored_files(settings) == []
    assert rows(settings, "SELECT * FROM resources") == []


async def test_unreachable_engine_is_502_and_nothing_kept(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine.post("/api/v2/memory/add").mock(side_effect=httpx.ConnectError("refused"))
    response = await upload(alice)
    assert response.status_code == 502
    assert stored_files(settings) == []
    assert rows(settings, "SELECT * FROM memory_attachments") == []


async def test_same_bytes_same_name_returns_existing_and_repairs_mapping(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    routes = engine_ok(engine)
    first = (await upload(alice)).json()
    conn_rows = rows(settings, "SELECT id FROM memory_attachments")
    assert len(conn_rows) == 1
    databases.execute(settings.storage.database, "DELETE FROM memory_attachments")
    again = await upload(alice)
    assert again.status_code == 200
    assert again.json()["id"] == first["id"]
    assert routes["add"].call_count == 1
    assert len(rows(settings, "SELECT * FROM memory_attachments WHERE deleted_at IS NULL")) == 1
    assert len(rows(settings, "SELECT * FROM resources")) == 1
    other_name = await upload(alice, name="copy.png")
    assert other_name.status_code == 201 and other_name.json()["id"] != first["id"]


async def test_list_detail_content_and_pagination(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    ids = [(await upload(alice, data=PNG + bytes([i]), name=f"p{i}.png")).json()["id"]
           for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await alice.get("/resources", params=params)).json()
        seen += [item["id"] for item in page["items"]]
        assert "file://" not in str(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    detail = await alice.get(f"/resources/{ids[0]}")
    assert detail.status_code == 200 and detail.json()["name"] == "p0.png"
    content = await alice.get(f"/resources/{ids[0]}/content")
    assert content.content == PNG + bytes([0])
    assert content.headers["content-type"] == "image/png"
    assert (await bob.get(f"/resources/{ids[0]}")).status_code == 404
    assert (await bob.get(f"/resources/{ids[0]}/content")).status_code == 404
    assert (await bob.delete(f"/resources/{ids[0]}")).status_code == 404
    assert (await bob.get("/resources")).json()["items"] == []
    assert (await alice.get("/resources", params={"limit": 0})).status_code == 422
    assert (await alice.get("/resources", params={"cursor": "garbage"})).status_code == 422


async def test_an_uploaded_html_file_is_served_as_inert_bytes(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    # The uploader names the type: served from the gateway's origin, it must not run there.
    engine_ok(engine)
    page = b"<script>fetch('/resources').then(r => r.text()).then(alert)</script>"
    rid = (await alice.post("/resources", files={"file": ("x.html", page, "text/html")}
                            )).json()["id"]
    content = await alice.get(f"/resources/{rid}/content")
    assert content.content == page
    assert content.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in content.headers["content-security-policy"]
    assert "default-src 'none'" in content.headers["content-security-policy"]


async def test_delete_hides_resource_and_attachments_and_removes_file(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    body = (await upload(alice)).json()
    answer_search(engine, episodes({"session_id": body["session_id"],
                                    "episode": "alice uploaded photo.png"}))
    search = await alice.post("/memories/search", json={"query": "photo"})
    assert search.json()["results"][0]["attachments"] != []
    assert (await alice.delete(f"/resources/{body['id']}")).status_code == 204
    assert stored_files(settings) == []
    assert (await alice.get(f"/resources/{body['id']}")).status_code == 404
    assert (await alice.get("/resources")).json()["items"] == []
    search = await alice.post("/memories/search", json={"query": "photo"})
    assert search.json()["results"][0]["attachments"] == []
    mapping = rows(settings, "SELECT deleted_at FROM memory_attachments")
    assert mapping[0]["deleted_at"] is not None


async def test_upload_over_limit_is_413_and_leaves_nothing(
    settings: Settings, engine: respx.MockRouter, make_key, start_gateway: StartGateway
) -> None:
    routes = engine_ok(engine)
    limited = settings.with_values(limits={"max_upload_bytes": 1000})

    async def chunked_body():
        yield b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\r\n"
        for _ in range(10):
            yield b"x" * 500
        yield b"\r\n--B--\r\n"

    async with start_gateway(limited) as gateway, \
            client_for(gateway, make_key("alice")) as client:
        response = await client.post("/resources", content=chunked_body(),
                                     headers={"Content-Type": "multipart/form-data; boundary=B"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert stored_files(settings) == []
    assert not routes["add"].called


async def test_missing_file_field_and_bad_metadata_are_422(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    routes = engine_ok(engine)
    response = await alice.post("/resources", data={"name": "x"},
                                files={"other": ("a.txt", b"hi", "text/plain")})
    assert response.status_code == 422
    response = await alice.post("/resources", data={"name": "x"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "file"
    response = await upload(alice, metadata="[1, 2]")
    assert response.status_code == 422 and response.json()["error"]["field"] == "metadata"
    response = await upload(alice, metadata="{not json")
    assert response.status_code == 422
    assert stored_files(settings) == []
    assert not routes["add"].called


async def test_name_field_overrides_and_hostile_names_stay_inside(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    hostile = ["../../../etc/passwd", "/abs/olute.png", "C:\\win\\photo.png", "nul\x00byte.png",
               "a" * 600 + ".png", "", "..", "...", "con.txt", " .hidden. "]
    for index, name in enumerate(hostile):
        response = await alice.post(
            "/resources", files={"file": ("x.png", PNG + bytes([index]), "image/png")},
            data={"name": name})
        assert response.status_code == 201, (name, response.text)
    for stored in stored_files(settings):
        user, kind, _, name = stored.split("/")
        assert (user, kind) == ("alice", "resources")
        assert len(name.encode()) <= 255 and name not in ("", ".", "..")
    names = [r["name"] for r in rows(settings, "SELECT name FROM resources ORDER BY created_at")]
    assert "passwd" in names and "photo.png" in names and "olute.png" in names


async def test_another_users_session_name_cannot_be_used_for_uploads(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    routes = engine_ok(engine)
    body = (await upload(alice, app_id="app1", project_id="p1")).json()
    assert sent_json(routes["add"])["app_id"] == "app1"
    assert body["session_id"].startswith("resource:alice:")


async def test_malformed_multipart_is_422_and_leaves_nothing(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    routes = engine_ok(engine)
    body = (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\n"
            b"X-\xff\xfe: broken\r\n\r\nabc\r\n--B--\r\n")
    response = await alice.post("/resources", content=body,
                                headers={"Content-Type": "multipart/form-data; boundary=B"})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "body"
    assert stored_files(settings) == []
    assert not routes["add"].called


@pytest.mark.parametrize("oversized", [
    b"X-Padding: " + b"v" * 70_000,  # one part header line far past the parser's bound
    b"X-" + b"n" * 70_000 + b": v",  # a header name as long
])
async def test_oversized_part_header_is_422_and_leaves_nothing(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings, oversized: bytes
) -> None:
    routes = engine_ok(engine)
    body = (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\n"
            + oversized + b"\r\n\r\nabc\r\n--B--\r\n")
    response = await alice.post("/resources", content=body,
                                headers={"Content-Type": "multipart/form-data; boundary=B"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error" and error["field"] == "body"
    assert "header" in error["message"].lower()
    assert stored_files(settings) == []
    assert not routes["add"].called
    listed = await alice.get("/resources")
    assert listed.status_code == 200 and listed.json()["items"] == []


async def test_a_large_upload_streams_in_parts_and_reads_back_whole(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    data = os.urandom(11 * 1024 * 1024 + 3)  # three parts of a multipart upload on S3
    response = await upload(alice, data=data, name="big.bin")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["size"] == len(data) and body["sha256"] == hashlib.sha256(data).hexdigest()
    content = await alice.get(f"/resources/{body['id']}/content")
    assert content.status_code == 200 and content.content == data
    assert content.headers["content-length"] == str(len(data))
    assert stored_files(settings) == [f"alice/resources/{body['id']}/big.bin"]


async def test_a_name_field_sent_after_the_file_still_names_it(
    alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings
) -> None:
    engine_ok(engine)
    multipart = (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"tmp.bin\"\r\n"
                 b"Content-Type: image/png\r\n\r\n" + PNG + b"\r\n"
                 b"--B\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nholiday.png\r\n"
                 b"--B--\r\n")
    response = await alice.post("/resources", content=multipart,
                                headers={"Content-Type": "multipart/form-data; boundary=B"})
    assert response.status_code == 201, response.text
    rid = response.json()["id"]
    assert response.json()["name"] == "holiday.png"
    assert stored_files(settings) == [f"alice/resources/{rid}/holiday.png"]
    assert (await alice.get(f"/resources/{rid}/content")).content == PNG
