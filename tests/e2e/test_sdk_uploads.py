"""Files the engines' own SDKs upload, through a real gateway process (SPEC §18).

`everos-cloud` 1.x `upload(path)` then an add naming the object key, and the `everos` 0.4 SDK's
multimodal add with a local path (its own venv), both against the fake EverOS Cloud: the file
lands in the gateway's store, the Cloud gets its own object key (the gateway signs and uploads
through it with the engine's key), a later search carries the attachment, and bob cannot use
alice's key. On local disk and on S3 (a real presigned POST to the suite's SeaweedFS).
"""

from __future__ import annotations

import json
import secrets
import time
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest
from everos_cloud import EverOS
from everos_cloud.client import EverOSAPIError, EverOSStorageError
from everos_cloud.models import FilterNode

from tests.e2e.client_venvs import client_python, run_client
from tests.fake_engines import ENGINE_KEY, fake_engine
from tests.processes import dev_engine, gateway
from tests.s3_server import S3Server, objects

pytestmark = pytest.mark.e2e
PNG = b"\x89PNG\r\n\x1a\n" + b"harbour-at-dawn" * 64
CLOUD_KEY = json.dumps({"Authorization": f"Bearer {ENGINE_KEY}"})


def store_env(backend: str, request: pytest.FixtureRequest) -> tuple[dict[str, str], str]:
    if backend == "disk":
        return {}, ""
    server: S3Server = request.getfixturevalue("s3_server")
    prefix = f"sdk-{secrets.token_hex(4)}"
    return {**server.env(), "MEMORY_GATEWAY_STORAGE_FILES": f"s3://{server.bucket}/{prefix}",
            "MEMORY_GATEWAY_STORAGE_S3_ENDPOINT_URL": server.endpoint_url}, prefix


def stored(tmp_path: Path, backend: str, request: pytest.FixtureRequest, prefix: str
           ) -> list[str]:
    if backend == "disk":
        root = tmp_path / "storage"
        return sorted(str(p.relative_to(root)) for p in root.rglob("*.png"))
    return objects(request.getfixturevalue("s3_server"), prefix)


@pytest.mark.parametrize("backend", ["disk", "s3"])
def test_everos_cloud_sdk_upload_then_add_names_the_stored_file(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    assert version("everos-cloud").startswith("1.")
    env, prefix = store_env(backend, request)
    photo = tmp_path / "harbour.png"
    photo.write_bytes(PNG)
    with fake_engine("everos-cloud") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud",
                    MEMORY_GATEWAY_UPSTREAM_HEADERS=CLOUD_KEY,
                    MEMORY_GATEWAY_UPLOADS_MAX_IMAGE_BYTES="2048", **env) as gw:
        with EverOS(api_key=gw.key("alice"), host=gw.url) as alice, \
                EverOS(api_key=gw.key("bob"), host=gw.url) as bob:
            # The form refuses a file over the signed size, and signing a text file as an
            # image is refused by the sign route itself, as the Cloud does.
            big = tmp_path / "big.png"
            big.write_bytes(PNG * 4)
            with pytest.raises(EverOSStorageError) as oversize:
                alice.upload(str(big))
            assert oversize.value.status in (400, 413)
            notes = tmp_path / "notes.txt"
            notes.write_text("not an image")
            # Status 2018 carries its message as `result.data`, a string, which the SDK's own
            # generated model fails to parse (as against the Cloud): the upload raises either way.
            with pytest.raises((EverOSStorageError, ValueError)):
                alice.upload(str(notes), file_type="image")
            refused = httpx.post(f"{gw.url}/api/v2/object/sign", headers={
                "Authorization": f"Bearer {gw.key('alice')}"}, json={"objectList": [
                    {"fileId": "n", "fileName": "notes.txt", "fileType": "image"}]}).json()
            assert refused["status"] == 2018 and isinstance(refused["result"]["data"], str)
            assert stored(tmp_path, backend, request, prefix) == []

            key = alice.upload(str(photo))
            assert [name.rsplit("/", 1)[1] for name in stored(tmp_path, backend, request,
                                                               prefix)] == ["harbour.png"]
            added = alice.add(session_id="trip-1", messages=[{
                "sender_id": "alice", "role": "user", "timestamp": int(time.time() * 1000),
                "content": [{"type": "text", "text": "the harbour at dawn"},
                            {"type": "image", "uri": key}]}])
            assert added.status == "queued"
            # The Cloud holds the file under its own key, uploaded by the gateway.
            assert list(httpx.get(f"{engine_url}/_objects").json().values()) == [len(PNG)]

            found = alice.search("harbour", user_id="alice",
                                 filters=FilterNode.from_dict({"session_id": "trip-1"}))
            [episode] = found.episodes
            [attachment] = episode.additional_properties["attachments"]
            assert attachment["name"] == "harbour.png" and attachment["type"] == "image"

            with pytest.raises(EverOSAPIError) as refused:
                bob.add(session_id="bobs", messages=[{
                    "sender_id": "bob", "role": "user", "timestamp": int(time.time() * 1000),
                    "content": [{"type": "image", "uri": key}]}])
            assert refused.value.status == 422


@pytest.mark.parametrize("backend", ["disk", "s3"])
def test_everos_04_sdk_multimodal_add_with_a_local_path(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    python = client_python("everos-cloud-0.4", "everos-cloud==0.4.1")
    env, prefix = store_env(backend, request)
    photo = tmp_path / "harbour.png"
    photo.write_bytes(PNG)
    with fake_engine("everos-cloud-v1") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud-v1",
                    MEMORY_GATEWAY_UPSTREAM_HEADERS=CLOUD_KEY, **env) as gw:
        result = run_client(python, "everos_04_upload.py", GATEWAY_URL=gw.url,
                            ALICE_KEY=gw.key("alice"), BOB_KEY=gw.key("bob"),
                            PHOTO=str(photo))
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip().endswith("ok")
        assert list(httpx.get(f"{engine_url}/_objects").json().values()) == [len(PNG)]
        # Only the uploaded file: objects signed but never uploaded hold nothing.
        assert len(stored(tmp_path, backend, request, prefix)) == 1


def test_everos_cloud_sdk_upload_to_a_local_engine_hands_it_the_file_uri(
        tmp_path: Path) -> None:
    # The default flavour: the built-in dev engine reads the gateway's disk.
    photo = tmp_path / "harbour.png"
    photo.write_bytes(PNG)
    with dev_engine(tmp_path) as engine_url, gateway(tmp_path, engine_url) as gw:
        with EverOS(api_key=gw.key("alice"), host=gw.url) as alice:
            key = alice.upload(str(photo))
            alice.add(session_id="trip-1", messages=[{
                "sender_id": "alice", "role": "user", "content": [
                    {"type": "text", "text": "the harbour at dawn"},
                    {"type": "image", "uri": key}]}])
            found = alice.search("harbour", user_id="alice",
                                 filters=FilterNode.from_dict({"session_id": "trip-1"}))
    [buffered] = found.unprocessed_messages
    [attachment] = buffered.additional_properties["attachments"]
    assert attachment["name"] == "harbour.png"
    assert attachment["internal_uri"].startswith("file://")
    # What the engine was handed (and keeps): the stored file's URI, not the object key.
    content = repr(buffered.content)  # the SDK parses content into its own models
    assert attachment["internal_uri"] in content and key not in content
