"""Files anyone can reach with the right key (SPEC §9, §15): download URLs on search
attachments, `GET /attachments/{id}/content`, and the signed, expiring URLs an engine off the
gateway's disk is handed for uploads and inline files, for every flavour, on disk and S3."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway, create_app
from gateway.attachments.files import DiskFileStore
from gateway.attachments.links import SECRET_FILE, FileLinks
from gateway.config import ConfigError, Settings
from tests.attachment_helpers import (
    PNG,
    answer_search,
    engine_ok,
    episodes,
    rows,
    stored_files,
)
from tests.conftest import client_for, on_both_stores
from tests.engine_fixtures import answer, sent

pytestmark = pytest.mark.both_databases

PUBLIC = "http://gateway.test"  # the in-process client's base URL: links resolve against it
B64 = base64.b64encode(PNG).decode()
_URL = re.compile(r"https?://[^\s\"<>\\]+")


def gateway_for(settings: Settings, engine: respx.MockRouter) -> Gateway:
    return create_app(settings, upstream_transport=httpx.MockTransport(engine.async_handler))


async def fetch(anonymous: httpx.AsyncClient, url: str) -> httpx.Response:
    """GET a link as whoever holds it: no key; the gateway in process, S3 over the network."""
    if url.startswith(PUBLIC):
        return await anonymous.get(url.removeprefix(PUBLIC))
    async with httpx.AsyncClient() as outside:
        return await outside.get(url)


def links_in(payload: Any) -> list[str]:
    return _URL.findall(json.dumps(payload))


@on_both_stores
async def test_search_attachments_carry_download_urls_for_the_files_the_gateway_stores(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    engine_ok(engine)
    gateway = gateway_for(settings.with_values(server={"public_url": PUBLIC + "/"}), engine)
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice, \
            client_for(gateway, make_key("bob")) as bob:
        added = await alice.post("/memories/add", json={"session_id": "s1", "messages": [{
            "role": "user", "sender_id": "alice", "content": [
                {"type": "image", "base64": B64, "name": "shot.png"},
                {"type": "image", "uri": "https://cdn.example/cdn.png"}]}]})
        assert added.status_code == 200
        answer_search(engine, episodes({"session_id": "s1", "episode": "shot.png and cdn.png"}))
        found = (await alice.post("/memories/search", json={"query": "x"})).json()
        by_name = {a["name"]: a for a in found["results"][0]["attachments"]}
        assert set(by_name) == {"shot.png", "cdn.png"}
        assert "url" not in by_name["cdn.png"]  # the client's own URI: theirs to serve
        [mapping] = rows(settings, "SELECT id FROM memory_attachments WHERE name = 'shot.png'")
        url = by_name["shot.png"]["url"]
        assert url == f"{PUBLIC}/attachments/{mapping['id']}/content"
        content = await alice.get(url.removeprefix(PUBLIC))
        assert content.status_code == 200 and content.content == PNG
        assert content.headers["content-type"] == "image/png"
        assert content.headers["content-length"] == str(len(PNG))
        stolen = await bob.get(url.removeprefix(PUBLIC))
        assert stolen.status_code == 404 and stolen.json()["error"]["code"] == "not_found"
        [uri_mapping] = rows(settings, "SELECT id FROM memory_attachments WHERE name = 'cdn.png'")
        missing = await alice.get(f"/attachments/{uri_mapping['id']}/content")
        assert missing.status_code == 404
        anonymous = await client_for(gateway).get(url.removeprefix(PUBLIC))
        assert anonymous.status_code == 401


async def test_without_a_public_url_attachments_have_no_url(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    await alice.post("/resources", files={"file": ("photo.png", PNG, "image/png")})
    [resource] = (await alice.get("/resources")).json()["items"]
    answer_search(engine, episodes({"session_id": resource["session_id"],
                                    "episode": "photo.png"}))
    found = (await alice.post("/memories/search", json={"query": "x"})).json()
    [attachment] = found["results"][0]["attachments"]
    assert set(attachment) == {"type", "name", "internal_uri"}


# flavour, extra upstream settings, add path, recorded add answer, flush path
FLAVOURS = [
    ("everos", {"file_access": "url"}, "/api/v2/memory/add", None, "/api/v2/memory/flush"),
    ("everos-cloud", {}, "/api/v2/memory/add", "everos_cloud_v2_add", "/api/v2/memory/flush"),
    ("everos-cloud-v1", {}, "/api/v1/memories", "everos_cloud_v1_add",
     "/api/v1/memories/flush"),
    ("mem0", {}, "/memories", "mem0_add", None),
    ("memos", {}, "/product/add", "memos_add", None),
]


@on_both_stores
@pytest.mark.parametrize(("flavor", "upstream", "add_path", "recorded", "flush_path"), FLAVOURS,
                         ids=[f[0] for f in FLAVOURS])
async def test_an_engine_off_the_gateways_disk_gets_signed_urls_for_uploads_and_inline_files(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    flavor: str, upstream: dict[str, str], add_path: str, recorded: str | None,
    flush_path: str | None,
) -> None:
    if recorded is None:
        add = engine_ok(engine)["add"]
    else:
        add = answer(engine, add_path, recorded)
    if flush_path:
        engine.post(flush_path).mock(return_value=httpx.Response(200, json={}))
    configured = settings.with_values(upstream={"flavor": flavor, **upstream},
                                      server={"public_url": PUBLIC})
    gateway = gateway_for(configured, engine)
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice, \
            client_for(gateway) as anonymous:
        uploaded = await alice.post("/resources",
                                    files={"file": ("harbour.png", PNG, "image/png")})
        assert uploaded.status_code == 201, uploaded.text
        _, ingest = sent(add)
        [link] = set(links_in(ingest))  # one link, in an item or a line of text or both
        assert "file://" not in json.dumps(ingest) and "s3://" not in json.dumps(ingest)
        fetched = await fetch(anonymous, link)
        assert fetched.status_code == 200 and fetched.content == PNG
        assert fetched.headers["content-type"] == "image/png"

        added = await alice.post("/memories/add", json={"session_id": "s1", "messages": [{
            "role": "user", "sender_id": "alice", "content": [
                {"type": "text", "text": "at the harbour"},
                {"type": "image", "base64": B64, "name": "inline.png"}]}]})
        assert added.status_code == 200, added.text
        _, body = sent(add)
        if flavor == "everos":  # the client's bytes, unchanged: the file travels inline
            assert body["messages"][0]["content"][1]["base64"] == B64
        else:
            [inline_link] = set(links_in(body))
            assert inline_link != link
            assert (await fetch(anonymous, inline_link)).content == PNG
    kinds = sorted(path.split("/")[1] for path in stored_files(settings) if "/" in path)
    assert kinds == ["memory_attachments", "resources"]


async def test_files_tokens_refuse_tampering_and_expiry_in_the_one_error_shape(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    engine_ok(engine)
    gateway = gateway_for(settings.with_values(
        upstream={"file_access": "url"}, server={"public_url": PUBLIC}), engine)
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice, \
            client_for(gateway) as anonymous:
        await alice.post("/resources", files={"file": ("harbour.png", PNG, "image/png")})
        [resource] = rows(settings, "SELECT internal_uri FROM resources")
        links = gateway.services.links
        good = links.token(resource["internal_uri"], "harbour.png", "image/png",
                           int(time.time()) + 60)
        assert (await anonymous.get(f"/files/{good}")).content == PNG
        payload, _, signature = good.partition(".")
        forged = links.token("file:///etc/passwd", "passwd", "text/plain",
                             int(time.time()) + 60).partition(".")[0]
        for bad in (f"{forged}.{signature}", f"{payload}.{signature[:-2]}AA", payload,
                    "not-a-token", f"{payload}x.{signature}", f"{payload}.{signature[:-1]}é",
                    "%C3%8A%C3%9Dw.%C2%86%F1%A3%89%BD%C3%A7", f"é{payload}.{signature}"):
            response = await anonymous.get(f"/files/{bad}")
            assert response.status_code == 404, bad
            assert set(response.json()["error"]) >= {"code", "message", "status", "request_id"}
        expired = links.token(resource["internal_uri"], "harbour.png", "image/png",
                              int(time.time()) - 1)
        response = await anonymous.get(f"/files/{expired}")
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "file_link_expired"
        # Signed, but not one of the store's files: nothing outside the object folders is served.
        outside = links.token("file:///etc/hostname", "hostname", "text/plain",
                              int(time.time()) + 60)
        assert (await anonymous.get(f"/files/{outside}")).status_code == 404
        # A deleted resource's link stops working with the file.
        [listed] = (await alice.get("/resources")).json()["items"]
        assert (await alice.delete(f"/resources/{listed['id']}")).status_code == 204
        assert (await anonymous.get(f"/files/{good}")).status_code == 404


def test_the_signing_secret_is_generated_once_in_the_storage_root(tmp_path: Path) -> None:
    settings = Settings().with_values(storage={"root": str(tmp_path)},
                                      server={"public_url": PUBLIC})
    store = DiskFileStore(tmp_path)
    first, second = FileLinks(settings, store, True), FileLinks(settings, store, True)
    token = first.token("file:///x", "x", "text/plain", int(time.time()) + 60)
    assert second.verify(token).uri == "file:///x"  # another process on the same root
    assert (tmp_path / SECRET_FILE).stat().st_mode & 0o077 == 0
    configured = FileLinks(settings.with_values(server={"file_url_secret": "s" * 40}), store,
                           True)
    with pytest.raises(Exception, match="no such file"):
        configured.verify(token)


def test_file_access_defaults_per_flavour_and_url_needs_a_way_to_make_urls(
    tmp_path: Path
) -> None:
    base = Settings().with_values(storage={"root": str(tmp_path)})
    store = DiskFileStore(tmp_path)

    def access(settings: Settings, local: bool) -> str:
        return FileLinks(settings, store, local).access

    assert access(base, True) == "path"  # EverOS on the gateway's disk reads file:// URIs
    assert access(base, False) == "name"  # nothing to make URLs with: the name only
    public = base.with_values(server={"public_url": PUBLIC})
    assert access(public, False) == "url"
    assert access(public.with_values(upstream={"file_access": "url"}), True) == "url"
    on_s3 = base.with_values(storage={"files": "s3://bucket/prefix"})
    assert access(on_s3, True) == "url"  # S3 presigns: an engine never reads S3 keys
    with pytest.raises(ConfigError, match="public_url"):
        access(base.with_values(upstream={"file_access": "url"}), False)
    with pytest.raises(ConfigError, match="file_access"):
        base.with_values(upstream={"file_access": "sometimes"})
    with pytest.raises(ConfigError, match="storage.files"):
        base.with_values(storage={"files": "/var/files"})


async def test_files_an_engine_sdk_uploaded_get_a_download_url_that_serves_them(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    """SPEC §9, §18: a signed, uploaded object named in an add (source memory_add_object)."""
    engine_ok(engine)
    gateway = gateway_for(settings.with_values(server={"public_url": PUBLIC}), engine)
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
        signed = await alice.post("/api/v2/object/sign", json={"objectList": [
            {"fileId": "f1", "fileName": "harbour.png", "fileType": "image"}]})
        [item] = signed.json()["result"]["data"]["objectList"]
        info = item["objectSignedInfo"]
        uploaded = await alice.post(info["url"].removeprefix(PUBLIC), data=info["fields"],
                                    files={"file": ("harbour.png", PNG, "image/png")})
        assert uploaded.status_code in (200, 204), uploaded.text
        added = await alice.post("/api/v2/memory/add", json={"session_id": "s1", "messages": [{
            "role": "user", "sender_id": "alice", "timestamp": 1760000000000, "content": [
                {"type": "text", "text": "harbour.png"},
                {"type": "image", "uri": item["objectKey"]}]}]})
        assert added.status_code == 200, added.text
        answer_search(engine, episodes({"session_id": "s1", "episode": "harbour.png at dawn"}))
        found = (await alice.post("/memories/search", json={"query": "x"})).json()
        [attachment] = found["results"][0]["attachments"]
        [mapping] = rows(settings, "SELECT id, source FROM memory_attachments")
        assert mapping["source"] == "memory_add_object"
        assert attachment["url"] == f"{PUBLIC}/attachments/{mapping['id']}/content"
        content = await alice.get(attachment["url"].removeprefix(PUBLIC))
        assert content.status_code == 200 and content.content == PNG
