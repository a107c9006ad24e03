"""Files the EverOS SDKs sign and upload (SPEC §18): the sign routes in the Cloud's shapes, the
upload form (or an S3 presigned POST), adds naming object keys, and gc of unused objects."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx

from gateway.config import Settings
from gateway.ops import gc
from tests.attachment_helpers import PNG, engine_ok, rows, sent_json
from tests.attachment_helpers import stored_files as all_stored_files
from tests.conftest import StartGateway, client_for, on_both_stores

# On both databases and both file stores (conftest).
pytestmark = [pytest.mark.both_databases, on_both_stores]


def sign_body(*names: tuple[str, str]) -> dict[str, Any]:
    return {"objectList": [{"fileId": f"f{i}", "fileName": name, "fileType": kind}
                           for i, (name, kind) in enumerate(names)]}


async def sign(client: httpx.AsyncClient, name: str = "harbour.png", kind: str = "image",
               path: str = "/api/v2/object/sign") -> dict[str, Any]:
    response = await client.post(path, json=sign_body((name, kind)))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == 0 and answer["error"] == "OK", answer
    [item] = answer["result"]["data"]["objectList"]
    return dict(item)


async def post_form(client: httpx.AsyncClient, item: dict[str, Any], data: bytes,
                    content_type: str = "image/png", name: str = "harbour.png",
                    **changed: str) -> int:
    """The SDK's step: the signed fields (some `changed`), then `file`, to the signed URL."""
    info = item["objectSignedInfo"]
    files = {"file": (name, data, content_type)}
    fields = {**info["fields"], **{key.replace("_", "-"): v for key, v in changed.items()}}
    if info["url"].startswith("http://gateway.test/"):
        response = await client.post(info["url"], data=fields, files=files)
    else:  # a real S3 presigned POST
        response = httpx.post(info["url"], data=fields, files=files)
    return response.status_code


def add_body(uri: str, session: str = "trip", sender: str = "alice") -> dict[str, Any]:
    return {"session_id": session, "messages": [{
        "role": "user", "sender_id": sender, "timestamp": 1760000000000,
        "content": [{"type": "text", "text": "the harbour"}, {"type": "image", "uri": uri}]}]}


def stored_files(settings: Settings) -> list[str]:
    """The users' files (not the gateway's own link secret beside them)."""
    return [name for name in all_stored_files(settings) if not name.startswith("_")]


def mappings(settings: Settings) -> list[dict[str, Any]]:
    return [dict(r) for r in rows(settings, "SELECT * FROM memory_attachments")]


async def test_sign_answers_in_the_clouds_shape_with_an_object_key_per_file(
        alice: httpx.AsyncClient, settings: Settings) -> None:
    for path in ("/api/v2/object/sign", "/api/v1/object/sign"):
        response = await alice.post(path, json=sign_body(("a.png", "image"), ("b.pdf", "file")))
        answer = response.json()
        assert response.status_code == 200 and answer["status"] == 0
        first, second = answer["result"]["data"]["objectList"]
        assert (first["fileId"], first["fileName"], first["fileType"]) == ("f0", "a.png", "image")
        assert first["objectKey"].endswith("/a.png") and second["objectKey"].endswith("/b.pdf")
        assert first["objectKey"] != second["objectKey"]
        info = first["objectSignedInfo"]
        assert info["maxSize"] == settings.uploads.max_image_bytes
        assert set(info) == {"url", "fields", "maxSize"} and info["fields"]


@pytest.mark.parametrize(("body", "status"), [
    ({}, 2018),
    ({"objectList": []}, 2018),
    ({"objectList": [{"fileId": "a", "fileName": "a.png", "fileType": "audio"}]}, 2018),
    ({"objectList": [{"fileId": "a", "fileName": "", "fileType": "image"}]}, 2018),
    ({"objectList": [{"fileId": "a", "fileName": "notes.txt", "fileType": "image"}]}, 2018),
    ({"objectList": [{"fileId": "a", "fileName": f"{i}.png", "fileType": "image"}
                     for i in range(51)]}, 1007),
    ({"objectList": [{"fileId": "a", "fileName": "a.png", "fileType": "image"}] * 2}, 1009),
])
async def test_sign_refuses_bad_bodies_with_the_clouds_status_and_records_nothing(
        alice: httpx.AsyncClient, settings: Settings, body: dict[str, Any], status: int) -> None:
    response = await alice.post("/api/v2/object/sign", json=body)
    answer = response.json()
    assert response.status_code == 200 and answer["status"] == status
    assert answer["error"] != "OK"
    assert (answer["result"]["data"] is None) == (status != 2018)
    assert rows(settings, "SELECT * FROM uploaded_objects") == []


async def test_sign_needs_a_key(anonymous: httpx.AsyncClient) -> None:
    response = await anonymous.post("/api/v2/object/sign", json=sign_body(("a.png", "image")))
    assert response.status_code == 401


async def test_uploaded_object_named_in_an_add_is_mapped_and_handed_to_the_engine(
        alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings) -> None:
    routes = engine_ok(engine)
    item = await sign(alice)
    assert await post_form(alice, item, PNG) in (200, 204)
    response = await alice.post("/api/v2/memory/add", json=add_body(item["objectKey"]))
    assert response.status_code == 200, response.text

    [mapping] = mappings(settings)
    assert mapping["source"] == "memory_add_object" and mapping["name"] == "harbour.png"
    assert mapping["content_type"] == "image/png" and mapping["session_id"] == "trip"
    object_id = item["objectKey"].split("/")[1]
    assert stored_files(settings) == [f"alice/memory_attachments/{object_id}/harbour.png"]
    handed = sent_json(routes["add"])["messages"][0]["content"][1]["uri"]
    if settings.storage.files:  # an engine off the gateway's disk gets a signed URL
        assert handed.startswith("http") and httpx.get(handed).content == PNG
    else:
        assert handed == mapping["internal_uri"] and handed.startswith("file://")


async def test_another_users_object_key_is_refused_and_nothing_forwarded(
        alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
        settings: Settings) -> None:
    routes = engine_ok(engine)
    item = await sign(alice)
    assert await post_form(alice, item, PNG) in (200, 204)
    response = await bob.post("/api/v2/memory/add",
                              json=add_body(item["objectKey"], session="bobs", sender="bob"))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "object_key_not_found"
    made_up = item["objectKey"].replace(item["objectKey"].split("/")[1], "obj_" + "0" * 32)
    response = await alice.post("/api/v2/memory/add", json=add_body(made_up))
    assert response.status_code == 422
    assert not routes["add"].called
    assert mappings(settings) == []


async def test_an_object_key_signed_but_never_uploaded_is_refused(
        alice: httpx.AsyncClient, engine: respx.MockRouter) -> None:
    routes = engine_ok(engine)
    item = await sign(alice)
    response = await alice.post("/api/v2/memory/add", json=add_body(item["objectKey"]))
    assert response.status_code == 422 and not routes["add"].called


async def test_upload_form_refuses_oversize_and_mismatched_types(
        settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str]
) -> None:
    small = settings.with_values(uploads={"max_image_bytes": 512})
    async with start_gateway(small) as app, client_for(app, make_key("alice")) as alice:
        item = await sign(alice)
        assert item["objectSignedInfo"]["maxSize"] == 512
        assert await post_form(alice, item, PNG) in (400, 403, 413)  # PNG is > 512 bytes
        # A text file sent as such: the signed Content-Type no longer holds (S3: its policy).
        assert await post_form(alice, item, b"just text", "text/plain", "notes.txt",
                               Content_Type="text/plain") in (400, 403, 422)
        if not small.storage.files:  # the gateway's form also reads the file part's own type
            assert await post_form(alice, item, b"just text", "text/plain", "notes.txt") == 422
        assert stored_files(small) == []
        # The form stays open after a refusal; a fitting file goes through once.
        assert await post_form(alice, item, PNG[:300]) in (200, 204)


async def test_upload_form_is_single_use_and_needs_its_signed_fields(
        alice: httpx.AsyncClient, anonymous: httpx.AsyncClient, settings: Settings) -> None:
    if settings.storage.files:
        item = await sign(alice)
        assert item["objectSignedInfo"]["url"].startswith(settings.storage.s3_endpoint_url)
        return
    item = await sign(alice)
    info = item["objectSignedInfo"]
    tampered = {**info["fields"], "Content-Type": "image/gif"}
    response = await anonymous.post(info["url"], data=tampered,
                                    files={"file": ("harbour.png", PNG, "image/png")})
    assert response.status_code == 422
    assert await post_form(anonymous, item, PNG) == 204  # no key: the token is the credential
    assert await post_form(anonymous, item, PNG) == 404  # used once
    unknown = info["url"].rsplit("/", 1)[0] + "/not-a-token"
    response = await anonymous.post(unknown, data=info["fields"],
                                    files={"file": ("harbour.png", PNG, "image/png")})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_gc_removes_objects_never_added_after_their_lifetime(
        alice: httpx.AsyncClient, engine: respx.MockRouter, settings: Settings,
        app: Any) -> None:
    engine_ok(engine)
    unused = await sign(alice)
    used = await sign(alice, "kept.png")
    for item in (unused, used):
        assert await post_form(alice, item, PNG) in (200, 204)
    assert (await alice.post("/api/v2/memory/add", json=add_body(used["objectKey"]))
            ).status_code == 200
    svc = app.services
    fresh = gc.plan(await gc.take_snapshot(svc.db, svc.files), 0)
    assert fresh.orphan_files == [] and fresh.expired_objects == []

    later = gc.plan(await gc.take_snapshot(svc.db, svc.files,
                                           now_s=10 ** 10), 0)
    assert len(later.expired_objects) == 2 and len(later.orphan_files) == 1
    await gc.apply(svc.db, svc.files, later)
    assert [name.rsplit("/", 1)[1] for name in stored_files(settings)] == ["kept.png"]
    assert rows(settings, "SELECT * FROM uploaded_objects") == []
    response = await alice.post("/api/v2/memory/add",
                                json=add_body(unused["objectKey"], session="again"))
    assert response.status_code == 422


def test_sign_envelope_round_trips_through_the_sdk_model() -> None:
    from everos_cloud.models import SignEnvelope

    from gateway.attachments import objects

    parsed = SignEnvelope.from_dict(json.loads(json.dumps(objects.envelope(
        0, "OK", {"objectList": [{"fileId": "a", "fileName": "a.png", "fileType": "image",
                                  "objectKey": "mgw-object/obj_1/a.png", "objectSignedInfo": {
                                      "url": "http://x/uploads/t", "fields": {"key": "k"},
                                      "maxSize": 5}}]}, "r"))))
    assert parsed is not None and parsed.status == 0
    assert parsed.result is not None


@pytest.mark.parametrize("spell", [
    lambda key: key.upper(),
    lambda key: key + "/",
    lambda key: "/" + key,
    lambda key: key.replace("/", "%2F"),
    lambda key: key.replace("mgw-object/", "mgw-object/./"),
    lambda key: key.replace("mgw-object/", "mgw-object//"),
    lambda key: key.rsplit("/", 1)[0] + "/other.png",
    lambda key: key.rsplit("/", 1)[0],
    lambda key: " " + key,
])
async def test_other_spellings_of_an_object_key_name_nothing_and_forward_nothing(
        alice: httpx.AsyncClient, bob: httpx.AsyncClient, engine: respx.MockRouter,
        settings: Settings, spell: Callable[[str], str]) -> None:
    routes = engine_ok(engine)
    item = await sign(alice)
    assert await post_form(alice, item, PNG) in (200, 204)
    for client, sender in ((alice, "alice"), (bob, "bob")):
        response = await client.post("/api/v2/memory/add", json=add_body(
            spell(item["objectKey"]), session=f"{sender}-s", sender=sender))
        assert response.status_code == 422, response.text
    assert not routes["add"].called and mappings(settings) == []


async def test_an_expired_object_key_and_an_expired_form_are_refused(
        settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
        engine: respx.MockRouter) -> None:
    routes = engine_ok(engine)
    short = settings.with_values(uploads={"sign_ttl_s": 0, "object_ttl_s": 0})
    async with start_gateway(short) as app, client_for(app, make_key("alice")) as alice:
        item = await sign(alice)
        if not short.storage.files:  # the gateway's own form has expired at once
            assert await post_form(alice, item, PNG) == 404
        response = await alice.post("/api/v2/memory/add", json=add_body(item["objectKey"]))
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "object_key_not_found"
    assert not routes["add"].called


async def test_an_engine_elsewhere_gets_a_signed_url_for_the_object(
        settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
        engine: respx.MockRouter) -> None:
    routes = engine_ok(engine)
    remote = settings.with_values(server={"public_url": "http://gateway.test"},
                                  upstream={"file_access": "url"})
    async with start_gateway(remote) as app, client_for(app, make_key("alice")) as alice:
        item = await sign(alice)
        assert await post_form(alice, item, PNG) in (200, 204)
        assert (await alice.post("/memories/add", json=add_body(item["objectKey"]))
                ).status_code == 200
        handed = sent_json(routes["add"])["messages"][0]["content"][1]["uri"]
        if remote.storage.files:
            assert httpx.get(handed).content == PNG  # an S3 presigned URL
        else:
            assert handed.startswith("http://gateway.test/files/")
            async with client_for(app) as anyone:
                assert (await anyone.get(handed)).content == PNG


async def test_sign_routes_are_not_served_where_no_sdk_signs(
        settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
        engine: respx.MockRouter) -> None:
    sign_route = engine.post("/api/v2/object/sign").mock(return_value=httpx.Response(200))
    async with start_gateway(settings.with_values(upstream={"flavor": "mem0"})) as app, \
            client_for(app, make_key("alice")) as alice:
        response = await alice.post("/api/v2/object/sign", json=sign_body(("a.png", "image")))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "route_not_found"
    assert not sign_route.called


async def test_cloud_refusing_to_sign_fails_the_add_with_nothing_mapped(
        settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
        engine: respx.MockRouter) -> None:
    cloud = settings.with_values(upstream={"flavor": "everos-cloud"})
    add = engine.post("/api/v2/memory/add").mock(return_value=httpx.Response(202, json={}))
    sign_route = engine.post("/api/v2/object/sign").mock(return_value=httpx.Response(
        200, json={"status": 1001, "error": "token invalid", "result": {"data": None}}))
    async with start_gateway(cloud) as app, client_for(app, make_key("alice")) as alice:
        item = await sign(alice)
        assert await post_form(alice, item, PNG) in (200, 204)
        response = await alice.post("/api/v2/memory/add", json=add_body(item["objectKey"]))
    assert response.status_code == 502
    assert sign_route.called and not add.called
    assert mappings(cloud) == []
    sent = json.loads(sign_route.calls.last.request.content)
    assert sent["objectList"][0]["fileName"] == "harbour.png"
    assert sent["objectList"][0]["fileType"] == "image"


@pytest.mark.parametrize("key", ["mms/0f3c2a9b8d7e6f5a4b3c2d1e0f9a8b7c/harbour.png",
                                 "/mms/0f3c2a9b8d7e6f5a4b3c2d1e0f9a8b7c/harbour.png",
                                 "mgw-object/../mms/x/harbour.png"])
async def test_a_clouds_own_object_key_cannot_be_named_by_a_client(
        settings: Settings, start_gateway: StartGateway, make_key: Callable[[str], str],
        engine: respx.MockRouter, key: str) -> None:
    """The Cloud's object keys (what the gateway hands it for a user's stored file) are bare
    paths the Cloud reads as its own objects: one in a client's add, intercepted or passed
    through, would hand bob alice's file. Only the gateway's own keys and URIs pass."""
    cloud = settings.with_values(upstream={"flavor": "everos-cloud"})
    add = engine.post("/api/v2/memory/add").mock(return_value=httpx.Response(202, json={}))
    group = engine.post("/api/v1/memories/group").mock(
        return_value=httpx.Response(202, json={}))
    async with start_gateway(cloud) as app, client_for(app, make_key("bob")) as bob:
        native = await bob.post("/api/v2/memory/add", json=add_body(key, "bob-s", "bob"))
        passed = await bob.post("/api/v1/memories/group", json={
            "group_id": "bobs-group", "messages": [{
                "role": "user", "sender_id": "bob", "timestamp": 1760000000000,
                "content": [{"type": "image", "uri": key}]}]})
    assert native.status_code == 422, native.text
    assert passed.status_code == 422, passed.text
    assert not add.called and not group.called
