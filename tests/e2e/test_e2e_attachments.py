"""End to end with real processes: upload → add → search, the file:// path holding the bytes;
and the same on S3. The files and the database do not meet (rows name files by URI), so the
two axes are paired, not crossed: files on disk with SQLite (what `scripts/run` starts), on S3
with PostgreSQL (as deployed); each database and each store is run once."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import pytest

from tests.processes import dev_engine, free_port, gateway
from tests.s3_server import S3Server, objects

pytestmark = pytest.mark.e2e
ON_SQLITE = pytest.mark.parametrize("database_backend", ["sqlite"], indirect=True)
ON_POSTGRESQL = pytest.mark.parametrize("database_backend", ["postgresql"], indirect=True)
PNG = b"\x89PNG\r\n\x1a\n" + b"e2e-bytes" * 100
TS = 1_780_000_000_000


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


@ON_SQLITE
def test_upload_add_search_returns_real_files(
    tmp_path: Path, on_database: dict[str, str]
) -> None:
    with dev_engine(tmp_path) as engine_url, gateway(tmp_path, engine_url, **on_database) as gw:
        alice = httpx.Client(base_url=gw.url, timeout=20,
                             headers={"Authorization": f"Bearer {gw.key('alice')}"})
        bob = httpx.Client(base_url=gw.url, timeout=20,
                           headers={"Authorization": f"Bearer {gw.key('bob')}"})
        with alice, bob:
            uploaded = alice.post("/resources",
                                  files={"file": ("simple-multimodal-image.png", PNG)})
            assert uploaded.status_code == 201, uploaded.text
            added = alice.post("/memories/add", json={
                "session_id": "holiday", "messages": [{
                    "role": "user", "sender_id": "alice", "timestamp": TS, "content": [
                        {"type": "text", "text": "the lighthouse at dusk, lighthouse.png"},
                        {"type": "image", "base64": base64.b64encode(PNG[::-1]).decode(),
                         "name": "lighthouse.png", "ext": "png"}]}]})
            assert added.status_code == 200, added.text
            flushed = alice.post("/api/v2/memory/flush", json={"session_id": "holiday"})
            assert flushed.status_code == 200, flushed.text

            found = alice.post("/memories/search",
                               json={"query": "simple multimodal image", "user_id": "alice"})
            assert found.status_code == 200, found.text
            by_name = {a["name"]: a for r in found.json()["results"] for a in r["attachments"]}
            assert path_of(by_name["simple-multimodal-image.png"]["internal_uri"]).read_bytes() \
                == PNG

            found = alice.post("/memories/search", json={"query": "lighthouse",
                                                         "user_id": "alice"})
            attachments = [a for r in found.json()["results"] for a in r["attachments"]]
            assert [a["name"] for a in attachments] == ["lighthouse.png"]
            assert path_of(attachments[0]["internal_uri"]).read_bytes() == PNG[::-1]

            found = bob.post("/memories/search", json={"query": "lighthouse", "user_id": "bob"})
            assert found.status_code == 200
            assert all(r["attachments"] == [] for r in found.json()["results"])
            assert "lighthouse" not in found.text
            assert bob.get(f"/resources/{uploaded.json()['id']}").status_code == 404


@ON_POSTGRESQL
def test_files_on_s3_upload_add_search_download_and_delete(
    tmp_path: Path, s3_server: S3Server, on_database: dict[str, str]
) -> None:
    port = free_port()
    prefix = f"e2e-{secrets.token_hex(4)}"
    public_url = f"http://127.0.0.1:{port}"
    with dev_engine(tmp_path) as engine_url, gateway(
            tmp_path, engine_url, port=port, **s3_server.env(), **on_database,
            MEMORY_GATEWAY_STORAGE_FILES=f"s3://{s3_server.bucket}/{prefix}",
            MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL=s3_server.endpoint_url,
            MEMORY_GATEWAY_SERVER_PUBLIC_URL=public_url) as gw:
        alice = httpx.Client(timeout=20, headers={"Authorization": f"Bearer {gw.key('alice')}"})
        bob = httpx.Client(timeout=20, headers={"Authorization": f"Bearer {gw.key('bob')}"})
        with alice, bob:
            uploaded = alice.post(gw.url + "/resources",
                                  files={"file": ("simple-multimodal-image.png", PNG)})
            assert uploaded.status_code == 201, uploaded.text
            resource = uploaded.json()
            added = alice.post(gw.url + "/memories/add", json={
                "session_id": "holiday", "messages": [{
                    "role": "user", "sender_id": "alice", "timestamp": TS, "content": [
                        {"type": "text", "text": "the lighthouse at dusk, lighthouse.png"},
                        {"type": "image", "base64": base64.b64encode(PNG[::-1]).decode(),
                         "name": "lighthouse.png", "ext": "png"}]}]})
            assert added.status_code == 200, added.text
            assert alice.post(gw.url + "/api/v2/memory/flush",
                              json={"session_id": "holiday"}).status_code == 200
            assert objects(s3_server, prefix) == sorted([
                f"alice/resources/{resource['id']}/simple-multimodal-image.png",
                *[key for key in objects(s3_server, prefix) if "memory_attachments" in key]])
            assert len(objects(s3_server, prefix)) == 2

            for query, name, data in (("simple multimodal image",
                                       "simple-multimodal-image.png", PNG),
                                      ("lighthouse", "lighthouse.png", PNG[::-1])):
                found = alice.post(gw.url + "/memories/search",
                                   json={"query": query, "user_id": "alice"})
                assert found.status_code == 200, found.text
                by_name = {a["name"]: a for r in found.json()["results"]
                           for a in r["attachments"]}
                attachment = by_name[name]
                assert attachment["internal_uri"].startswith(f"s3://{s3_server.bucket}/{prefix}/")
                assert attachment["url"].startswith(public_url + "/attachments/att_")
                download = alice.get(attachment["url"])
                assert download.status_code == 200 and download.content == data
                assert bob.get(attachment["url"]).status_code == 404
            content = alice.get(f"{gw.url}/resources/{resource['id']}/content")
            assert content.content == PNG and content.headers["content-type"] == "image/png"

            assert alice.delete(f"{gw.url}/resources/{resource['id']}").status_code == 204
            assert [key for key in objects(s3_server, prefix) if "/resources/" in key] == []
