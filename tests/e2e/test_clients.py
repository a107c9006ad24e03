"""Real engine clients against a real gateway process (flavour set), a fake engine behind it.

The `everos-cloud` SDK (1.x, the Cloud's v2 API) only has its base URL changed: it adds a message
with an image and searches, and gets the gateway's attachments on what it parses. mem0's
`MemoryClient` is not here: it calls the hosted platform's `/v3/memories/...` paths, not the
open-source server's `/memories` and `/search` (docs/engines.md). The same SDK also drives the
default `everos` flavour with the built-in dev engine behind the gateway, filters included.
"""

from __future__ import annotations

import base64
from importlib.metadata import version
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from everos_cloud import EverOS
from everos_cloud.models import FilterNode

from tests.fake_engines import fake_engine
from tests.processes import dev_engine, gateway

pytestmark = pytest.mark.e2e
PNG = b"\x89PNG\r\n\x1a\n" + b"harbour-at-dawn" * 64


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def test_everos_cloud_client_adds_an_image_and_finds_its_file(tmp_path: Path) -> None:
    assert version("everos-cloud").startswith("1.")
    with fake_engine("everos-cloud") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud") as gw:
        with EverOS(api_key=gw.key("alice"), host=gw.url) as alice, \
                EverOS(api_key=gw.key("bob"), host=gw.url) as bob:
            added = alice.add(session_id="trip-1", messages=[{
                "sender_id": "alice", "role": "user", "content": [
                    {"type": "text", "text": "the harbour at dawn"},
                    {"type": "image", "base64": base64.b64encode(PNG).decode(),
                     "name": "harbour.png"}]}])
            assert added.status == "queued" and added.message_count == 1

            found = alice.search("harbour", user_id="alice",
                                 filters=FilterNode.from_dict({"session_id": "trip-1"}))
            [episode] = found.episodes
            [attachment] = episode.additional_properties["attachments"]
            assert attachment["name"] == "harbour.png" and attachment["type"] == "image"
            assert path_of(attachment["internal_uri"]).read_bytes() == PNG
            [buffered] = found.unprocessed_messages
            assert [a["name"] for a in buffered.additional_properties["attachments"]] == [
                "harbour.png"]

            # Another user's search: the session is dropped, never its files.
            theirs = bob.search("harbour", user_id="bob")
            assert theirs.episodes == []


def test_everos_cloud_client_naming_another_user_is_refused(tmp_path: Path) -> None:
    from everos_cloud.client import EverOSAPIError

    with fake_engine("everos-cloud") as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR="everos-cloud") as gw:
        with EverOS(api_key=gw.key("alice"), host=gw.url) as alice:
            with pytest.raises(EverOSAPIError) as refused:
                # The SDK's default sender_id is the role ("user"), which is not the caller.
                alice.add(session_id="s", messages=[{"role": "user", "content": "hello"}])
            assert refused.value.status == 403


def test_everos_cloud_client_through_the_gateway_to_the_dev_engine(tmp_path: Path) -> None:
    # The SDK's FilterNode serialises {"session_id": ..., "AND": null, "OR": null}.
    with dev_engine(tmp_path) as engine_url, gateway(tmp_path, engine_url) as gw:
        with EverOS(api_key=gw.key("alice"), host=gw.url) as alice:
            added = alice.add(session_id="trip-1", messages=[{
                "sender_id": "alice", "role": "user", "content": "the harbour at dawn"}])
            assert added.message_count == 1
            alice.add(session_id="trip-2", messages=[{
                "sender_id": "alice", "role": "user", "content": "the harbour at dusk"}])
            assert alice.flush(session_id="trip-1").status == "extracted"
            alice.flush(session_id="trip-2")

            one = alice.search("harbour", user_id="alice",
                               filters=FilterNode.from_dict({"session_id": "trip-1"}))
            either = alice.search("harbour", user_id="alice", filters=FilterNode.from_dict(
                {"OR": [{"session_id": "trip-1"}, {"session_id": "trip-2"}]}))
            listed = alice.get("episode", user_id="alice",
                               filters=FilterNode.from_dict({"session_id": "trip-2"}))

    assert [episode.session_id for episode in one.episodes] == ["trip-1"]
    assert sorted(episode.session_id for episode in either.episodes) == ["trip-1", "trip-2"]
    assert [episode.session_id for episode in listed.episodes] == ["trip-2"]
