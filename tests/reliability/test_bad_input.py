"""Bad input (SPEC §8–§10, §13), hypothesis at 1,000 examples a property: safe names, label
normalisation and the raw walker, each as a pure function and through the running app.

The app runs once per module in a blocking portal (real SQLite file, fake engine), so each
example is one request: hostile upload names stay inside their folder, any add body is answered
without a server error and without leftovers, stored labels are the normalised ones, and search
attaches exactly the names that occur in `raw` outside `base64` values.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import string
import tempfile
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gateway.app import create_app
from gateway.attachments.files import MAX_NAME_BYTES, last_segment, safe_name
from gateway.config import Settings
from gateway.search.matching import searchable_text, walk_strings
from gateway.store.labels import normalise_label
from tests.conftest import ENGINE, create_key
from tests.reliability.scripted_engine import EMPTY_SEARCH

pytestmark = pytest.mark.reliability

EXAMPLES = settings(max_examples=1000, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DROPPED = set(string.punctuation) - set("-_.")
unicode_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=120)
hostile_names = st.one_of(
    unicode_text,
    st.builds(lambda a, b, c: a + b + c,
              st.sampled_from(["", "../", "..\\", "/etc/", "C:\\x\\", "./", "~/", "\x00"]),
              st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
              st.sampled_from(["", ".png", ".PNG", ". ", ".tar.gz", "..", ".", "\x00.png"])),
    st.sampled_from(["..", ".", "con", "CON.txt", "nul.png", " ", "a" * 300 + ".png",
                     "é" * 150 + ".jpg"]),
)


# --- the app, once per module -----------------------------------------------------------------


@dataclass
class Live:
    portal: BlockingPortal
    client: httpx.AsyncClient
    settings: Settings
    search_answer: dict[str, Any] | bytes = field(default_factory=lambda: EMPTY_SEARCH)
    engine_calls: int = 0

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response: httpx.Response = self.portal.call(
            partial(self.client.request, method, path, **kwargs))
        return response

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.settings.storage.database)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def inline_files(self) -> set[Path]:
        """Every file under storage/*/memory_attachments/ (where adds write, and nowhere else)."""
        root = Path(self.settings.storage.root)
        if not root.exists():
            return set()
        return {path for user in root.iterdir() if user.is_dir()
                for path in (user / "memory_attachments").rglob("*") if path.is_file()}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("bad-input")
    config = Settings().with_values(
        upstream={"base_url": ENGINE},
        storage={"root": str(tmp / "storage"), "database": str(tmp / "gw.db")},
        limits={"max_inline_file_bytes": 4096},
    )
    holder: dict[str, Live] = {}

    def engine(request: httpx.Request) -> httpx.Response:
        holder["live"].engine_calls += 1
        if request.url.path.endswith("/search"):
            answer = holder["live"].search_answer
            if isinstance(answer, bytes):
                return httpx.Response(200, content=answer,
                                      headers={"Content-Type": "application/json"})
            return httpx.Response(200, json=answer)
        return httpx.Response(200, json={"request_id": "r", "data": {"status": "ok"}})

    token = create_key(config, "alice")
    app = create_app(config, upstream_transport=httpx.MockTransport(engine))
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(app.running()):
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app), base_url="http://gateway.test",
                headers={"Authorization": f"Bearer {token}"})
            live = Live(portal, client, config)
            holder["live"] = live
            try:
                yield live
            finally:
                portal.call(client.aclose)


# --- safe names -------------------------------------------------------------------------------


@EXAMPLES
@given(hostile_names)
@example(".000000000000000 0")  # an extension cut to 16 characters on a space inside it
@example("photo.abcdefghijklmno p q")
def test_a_safe_name_is_one_real_file_inside_its_folder_and_stable(name: str) -> None:
    safe = safe_name(name)
    assert safe and len(safe.encode()) <= MAX_NAME_BYTES + 17
    assert safe_name(safe) == safe
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "resources" / "res_1"
        folder.mkdir(parents=True)
        (folder / safe).write_bytes(b"x")
        assert os.listdir(folder) == [safe]
        assert sorted(os.listdir(Path(tmp) / "resources")) == ["res_1"]


@EXAMPLES
@given(hostile_names)
def test_an_upload_with_a_hostile_name_lands_inside_its_own_folder(live: Live, name: str) -> None:
    data = os.urandom(16)
    response = live.request("POST", "/resources", files={"file": ("f", data, "image/png")},
                            data={"name": name})
    assert response.status_code in (201, 422), response.text
    if response.status_code == 422:
        return
    body = response.json()
    # no name: the part's filename; NUL never kept in a name
    display = last_segment((name or "f").replace("\x00", "")).strip() or "file"
    assert body["name"] == display
    folder = Path(live.settings.storage.root).resolve() / "alice" / "resources" / body["id"]
    assert [p.read_bytes() for p in folder.iterdir()] == [data]
    assert [p.name for p in folder.iterdir()] == [safe_name(display)]


# --- label normalisation ----------------------------------------------------------------------


def kept_in_order(result: str, source: str) -> bool:
    """`result` is `source`'s kept characters, in order (a space may stand for any whitespace)."""
    remaining = iter(source)
    return all(any(ch == s or (ch == " " and s.isspace()) for s in remaining) for ch in result)


@EXAMPLES
@given(label=st.one_of(st.none(), unicode_text), name=st.one_of(st.none(), unicode_text),
       reference_id=st.text(string.ascii_letters + string.digits + "_-", max_size=30))
def test_a_label_is_clean_short_stable_and_comes_from_its_sources(
    label: str | None, name: str | None, reference_id: str
) -> None:
    result = normalise_label(label, name, reference_id)
    assert result
    result.encode("utf-8")
    if result in (reference_id, "图片") and not kept_in_order(result, label or ""):
        return
    assert len(result) <= 24
    assert not any(ch in DROPPED or unicodedata.category(ch) == "Cc" for ch in result)
    assert result == result.strip() and "  " not in result
    assert all(ch == " " or not ch.isspace() for ch in result)
    assert normalise_label(result, None, "other") == result
    assert kept_in_order(result, label or "") or kept_in_order(result, name or "")


@pytest.fixture(scope="module")
def conversation(live: Live) -> tuple[str, str, str]:
    """(conversation id, resource id, resource name) for the label examples."""
    resource = live.request("POST", "/resources",
                            files={"file": ("  Holiday (1)!.png ", b"label-bytes", "image/png")})
    assert resource.status_code == 201
    agent = live.request("POST", "/agents", json={"name": "labels"}).json()
    found = live.request("GET", f"/agents/{agent['id']}/conversation").json()
    return found["conversationId"], resource.json()["id"], resource.json()["name"]


@EXAMPLES
@given(label=st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)),
                                          max_size=200)))
def test_a_stored_attachment_label_is_the_normalised_one(
    live: Live, conversation: tuple[str, str, str], label: str | None
) -> None:
    conversation_id, resource_id, resource_name = conversation
    attachment: dict[str, Any] = {"source": "resource", "referenceId": resource_id}
    if label is not None:
        attachment["label"] = label
    response = live.request("POST", f"/conversations/{conversation_id}/messages", json={
        "clientMessageId": os.urandom(8).hex(), "role": "user", "content": "see this",
        "attachments": [attachment]})
    assert response.status_code == 201, response.text
    [stored] = response.json()["message"]["attachments"]
    assert stored["label"] == normalise_label(label, resource_name, resource_id)


# --- the raw walker ---------------------------------------------------------------------------


def naive_strings(value: Any) -> list[str]:
    """Every string outside `base64` values: the definition, iterative so any depth works."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(v for k, v in item.items() if k != "base64")
        elif isinstance(item, list):
            stack.extend(item)
    return found


NAMES = ["photo.png", "Report (1).PDF", "notes", "图片.jpg", "x.tar.gz", "e.p", "a.png.bak"]
fragments = st.one_of(
    st.text(max_size=12),
    st.sampled_from(NAMES).map(str.upper),
    st.sampled_from(NAMES),
    st.builds(lambda a, n, b: a + n + b, st.text(max_size=5), st.sampled_from(NAMES),
              st.text(max_size=5)),
)
raw_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | fragments,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["base64", "text", "name", "uri", "content", "base64s"]),
                      children, max_size=4),
    max_leaves=25,
)


@EXAMPLES
@given(raw=raw_values, depth=st.integers(0, 3000),
       shape=st.sampled_from(["dict", "list", "base64"]))
def test_the_walker_reads_every_string_outside_base64_at_any_depth(
    raw: Any, depth: int, shape: str
) -> None:
    value = raw
    for _ in range(depth):
        value = [value] if shape == "list" else {"base64" if shape == "base64" else "k": value}
    expected = [] if shape == "base64" and depth else naive_strings(raw)
    assert sorted(walk_strings(value)) == sorted(expected)
    assert searchable_text(value) == "\x00".join(walk_strings(value)).lower()


@pytest.fixture(scope="module")
def mapped_session(live: Live) -> str:
    """A session of alice's whose mappings carry NAMES (URI items: nothing is written)."""
    response = live.request("POST", "/memories/add", json={"session_id": "walker", "messages": [{
        "role": "user", "sender_id": "alice", "content": [
            {"type": "file", "uri": f"https://cdn.example/{i}/f", "name": name}
            for i, name in enumerate(NAMES)]}]})
    assert response.status_code == 200, response.text
    return "walker"


@EXAMPLES
@given(raw=raw_values)
def test_search_attaches_exactly_the_names_that_occur_outside_base64(
    live: Live, mapped_session: str, raw: Any
) -> None:
    item = {"session_id": mapped_session, "episode": "e", "extra": raw}
    live.search_answer = {**EMPTY_SEARCH, "data": {**EMPTY_SEARCH["data"], "episodes": [item]}}
    response = live.request("POST", "/memories/search", json={"query": "q", "user_id": "alice"})
    assert response.status_code == 200, response.text
    [result] = response.json()["results"]
    assert result["raw"] == json.loads(json.dumps(item))
    strings = [s.lower() for s in naive_strings(item)]
    expected = {n for n in NAMES if any(n.lower() in s for s in strings)}
    assert {a["name"] for a in result["attachments"]} == expected


# --- any add body -----------------------------------------------------------------------------

b64 = st.one_of(st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
                st.text(string.ascii_letters + string.digits + "+/=$ -_", max_size=40),
                st.just("A" * 8000))
items = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)}),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "file", "doc"]), "base64": b64},
                          optional={"name": hostile_names, "ext": st.text(max_size=6)}),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "audio"]),
                           "uri": st.text(min_size=1, max_size=40)},
                          optional={"name": hostile_names, "base64": b64}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.one_of(
        st.fixed_dictionaries({"url": st.one_of(st.text(max_size=30),
                                                b64.map(lambda d: f"data:image/png;base64,{d}"),
                                                st.just("data:text/plain,hello"))}),
        st.text(max_size=10))}),
    st.fixed_dictionaries({"type": st.just("file"), "file": st.fixed_dictionaries(
        {"file_data": b64}, optional={"filename": hostile_names})}),
    st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=8), st.integers()),
                    max_size=3),
)
messages = st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant"]),
    "sender_id": st.sampled_from(["alice", "alice", "bob"]),
    "content": st.one_of(st.text(max_size=20), st.lists(items, max_size=4)),
}), min_size=1, max_size=3)
add_bodies = st.fixed_dictionaries(
    {"messages": messages},
    optional={"session_id": st.one_of(st.text(max_size=12), st.integers(), st.none()),
              "app_id": st.sampled_from(["default", "app"]), "extra": st.text(max_size=10)})


def file_uris(live: Live) -> set[Path]:
    return {Path(unquote(urlsplit(uri).path)) for (uri,) in live.rows(
        "SELECT internal_uri FROM memory_attachments WHERE source = 'memory_add_base64'")}


@EXAMPLES
@given(body=add_bodies)
def test_any_add_body_is_answered_without_a_server_error_or_leftovers(
    live: Live, body: dict[str, Any]
) -> None:
    files_before, calls_before = live.inline_files(), live.engine_calls
    mappings_before = live.rows("SELECT COUNT(*) FROM memory_attachments")[0][0]
    response = live.request("POST", "/memories/add", json=body)
    event(f"status {response.status_code}")
    assert response.status_code in (200, 403, 413, 422), response.text
    assert live.rows("SELECT COUNT(*) FROM pending_intents") == [(0,)]
    if response.status_code != 200:
        assert response.json()["error"]["status"] == response.status_code
        assert live.inline_files() == files_before and live.engine_calls == calls_before
        assert live.rows("SELECT COUNT(*) FROM memory_attachments")[0][0] == mappings_before
        return
    assert live.engine_calls == calls_before + 1
    new = live.inline_files() - files_before
    assert new <= file_uris(live)  # every new file belongs to a mapping
    root = Path(live.settings.storage.root).resolve()
    assert {path.parent.parent for path in file_uris(live)} <= {
        root / "alice" / "memory_attachments"}  # and sits in its own folder of alice's
    assert not any((root / user / "resources").exists() for user in ("bob", "_x"))


# --- the search path reading odd engine answers (routes/memories.py, serving/jsonio.py) ---------


def test_search_keeps_integers_beyond_64_bits_in_raw(live: Live, mapped_session: str) -> None:
    big = -(2**63) - 1
    live.search_answer = {**EMPTY_SEARCH, "data": {**EMPTY_SEARCH["data"], "episodes": [
        {"session_id": mapped_session, "episode": "photo.png", "count": big}]}}
    response = live.request("POST", "/memories/search", json={"query": "q", "user_id": "alice"})
    assert response.status_code == 200
    assert response.json()["results"][0]["raw"]["count"] == big


def test_a_search_answer_nested_too_deep_is_a_bad_upstream_answer(live: Live) -> None:
    deep = b"[" * 5000 + b'"photo.png"' + b"]" * 5000
    live.search_answer = (b'{"data": {"episodes": [{"session_id": "walker", "extra": '
                          + deep + b"}]}}")
    response = live.request("POST", "/memories/search", json={"query": "q", "user_id": "alice"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_bad_response"
