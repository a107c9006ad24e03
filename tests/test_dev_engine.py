"""The built-in dev engine, in process: EverOS v2 add / flush / search / get and health."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.devengine.app import create_dev_engine

pytestmark = pytest.mark.anyio

PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"not really an image" * 4).decode()
TS = 1_780_000_000_000


@pytest.fixture
async def dev(anyio_backend: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a fresh in-memory dev engine whose lifespan is running."""
    app = create_dev_engine()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            yield client


def message(content: Any, *, sender: str = "alice", role: str = "user", ts: int = TS) -> dict:
    return {"sender_id": sender, "role": role, "timestamp": ts, "content": content}


async def add(client: httpx.AsyncClient, session: str, *messages: dict, **scope: str) -> dict:
    body = {"session_id": session, "messages": list(messages), **scope}
    response = await client.post("/api/v2/memory/add", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def flush(client: httpx.AsyncClient, session: str, **scope: str) -> dict:
    response = await client.post("/api/v2/memory/flush", json={"session_id": session, **scope})
    assert response.status_code == 200, response.text
    return response.json()


async def search(client: httpx.AsyncClient, **body: Any) -> dict:
    response = await client.post("/api/v2/memory/search", json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    assert set(payload) == {"request_id", "data"}
    assert set(payload["data"]) == {
        "episodes", "profiles", "agent_cases", "agent_skills", "unprocessed_messages"
    }
    data: dict = payload["data"]
    return data


def image_item(name: str = "photo.png") -> dict:
    return {"type": "image", "base64": PNG_B64, "name": name, "ext": "png"}


async def test_add_answers_accumulated_in_success_envelope(dev: httpx.AsyncClient) -> None:
    payload = await add(dev, "s1", message("hello"), message("again"))
    assert payload["data"] == {"message_count": 2, "status": "accumulated"}
    assert len(payload["request_id"]) == 32


async def test_search_finds_flushed_session_episode_by_keyword(dev: httpx.AsyncClient) -> None:
    await add(dev, "climb", message("I love climbing in Yosemite every spring."))
    await add(dev, "coffee", message("My favourite coffee shop is Blue Bottle."))
    await flush(dev, "climb")
    await flush(dev, "coffee")

    data = await search(dev, user_id="alice", query="where is Yosemite?")

    assert [ep["session_id"] for ep in data["episodes"]] == ["climb"]
    episode = data["episodes"][0]
    assert "Yosemite" in episode["episode"]
    assert episode["sender_ids"] == ["alice"]
    assert episode["user_id"] == "alice"
    assert episode["type"] == "Conversation"
    assert 0 < episode["score"] <= 1
    assert episode["timestamp"].endswith("Z")
    assert episode["id"].startswith("alice_ep_")


async def test_search_ranks_better_matches_first_and_drops_zero_scores(
    dev: httpx.AsyncClient,
) -> None:
    await add(dev, "one", message("red apples"))
    await add(dev, "two", message("red apples and green pears"))
    await add(dev, "three", message("nothing relevant"))
    for session in ("one", "two", "three"):
        await flush(dev, session)

    data = await search(dev, query="green pears apples")

    assert [ep["session_id"] for ep in data["episodes"]] == ["two", "one"]
    assert data["episodes"][0]["score"] > data["episodes"][1]["score"]


async def test_cjk_query_matches_as_substring(dev: httpx.AsyncClient) -> None:
    await add(dev, "zh", message("我昨天上传了一张猫的照片"))
    await add(dev, "other", message("今天天气很好"))
    await flush(dev, "zh")
    await flush(dev, "other")

    data = await search(dev, query="照片")

    assert [ep["session_id"] for ep in data["episodes"]] == ["zh"]


async def test_file_item_is_named_in_episode_text(dev: httpx.AsyncClient) -> None:
    await add(dev, "files", message([
        {"type": "text", "text": "here is my cat"},
        image_item("simple-multimodal-image.png"),
        {"type": "pdf", "uri": "file:///srv/storage/u/report%20Q3.pdf"},
    ]))
    await flush(dev, "files")

    episode = (await search(dev, query="simple-multimodal-image.png"))["episodes"][0]

    assert "[image] simple-multimodal-image.png" in episode["episode"]
    assert "[pdf] report Q3.pdf" in episode["episode"]
    assert "here is my cat" in episode["episode"]


async def test_episode_never_contains_base64(dev: httpx.AsyncClient) -> None:
    data_url = f"data:image/png;base64,{PNG_B64}"
    await add(dev, "inline", message([
        image_item(),
        {"type": "image_url", "image_url": {"url": data_url}},
        {"type": "file", "file": {"file_data": data_url, "filename": "scan.pdf"}},
    ]))
    await flush(dev, "inline")

    data = await search(dev, query="photo scan image")
    text = data["episodes"][0]["episode"]

    assert PNG_B64 not in text and "base64" not in text
    assert "[file] scan.pdf" in text and "[image] inline image" in text


async def test_session_filter_returns_buffered_messages_with_original_items(
    dev: httpx.AsyncClient,
) -> None:
    items = [{"type": "text", "text": "look at this"}, image_item()]
    await add(dev, "buf", message(items), message("plain text", role="assistant", sender="bot"))

    data = await search(dev, query="photo", filters={"session_id": "buf"})

    assert data["episodes"] == []
    first, second = data["unprocessed_messages"]
    assert first["content"] == items  # base64 included, byte for byte
    assert first["content"][1]["base64"] == PNG_B64
    assert (first["session_id"], first["sender_id"], first["role"]) == ("buf", "alice", "user")
    assert first["app_id"] == first["project_id"] == "default"
    assert first["timestamp"].endswith("Z") and first["id"]
    assert second["content"] == "plain text" and second["sender_id"] == "bot"


async def test_buffer_is_returned_only_for_a_top_level_session_id(
    dev: httpx.AsyncClient,
) -> None:
    await add(dev, "buf", message([image_item()]))

    assert (await search(dev, query="photo"))["unprocessed_messages"] == []
    compound = await search(dev, query="photo", filters={"session_id": {"in": ["buf"]}})
    assert compound["unprocessed_messages"] == []


async def test_flush_moves_buffer_into_episode(dev: httpx.AsyncClient) -> None:
    await add(dev, "s", message([{"type": "text", "text": "first turn"}, image_item()]))
    assert (await flush(dev, "s"))["data"] == {"status": "extracted"}

    data = await search(dev, query="photo", filters={"session_id": "s"})

    assert data["unprocessed_messages"] == []
    assert "[image] photo.png" in data["episodes"][0]["episode"]
    assert (await flush(dev, "s"))["data"] == {"status": "no_extraction"}


async def test_later_flushes_extend_the_same_session_episode(dev: httpx.AsyncClient) -> None:
    await add(dev, "s", message("alpha"))
    await flush(dev, "s")
    await add(dev, "s", message("beta", sender="bob"))
    await flush(dev, "s")

    episodes = (await search(dev, query="alpha beta"))["episodes"]

    assert len(episodes) == 1
    assert episodes[0]["score"] == 1.0
    assert episodes[0]["sender_ids"] == ["alice", "bob"]


async def test_flush_of_unknown_session_has_no_extraction(dev: httpx.AsyncClient) -> None:
    assert (await flush(dev, "never-seen"))["data"] == {"status": "no_extraction"}


async def test_scopes_are_isolated(dev: httpx.AsyncClient) -> None:
    await add(dev, "s", message("secret plans"), app_id="a1", project_id="p1")
    await flush(dev, "s", app_id="a1", project_id="p1")

    assert (await search(dev, query="secret"))["episodes"] == []
    found = await search(dev, query="secret", app_id="a1", project_id="p1")
    assert [ep["app_id"] for ep in found["episodes"]] == ["a1"]


async def test_user_id_restricts_to_that_users_sessions(dev: httpx.AsyncClient) -> None:
    await add(dev, "a", message("shared topic"))
    await add(dev, "b", message("shared topic", sender="bob"))
    await flush(dev, "a")
    await flush(dev, "b")

    data = await search(dev, query="topic", user_id="bob")

    assert [ep["session_id"] for ep in data["episodes"]] == ["b"]
    assert (await search(dev, query="topic", agent_id="helper"))["episodes"] == []


async def test_empty_query_returns_recent_episodes(dev: httpx.AsyncClient) -> None:
    for session in ("old", "new"):
        await add(dev, session, message(f"{session} words"))
        await flush(dev, session)

    data = await search(dev, query="", top_k=1)

    assert [ep["session_id"] for ep in data["episodes"]] == ["new"]


async def test_filters_restrict_episodes(dev: httpx.AsyncClient) -> None:
    await add(dev, "a", message("topic", ts=TS))
    await add(dev, "b", message("topic", sender="bob", ts=TS + 60_000))
    await flush(dev, "a")
    await flush(dev, "b")

    async def sessions(filters: dict) -> list[str]:
        data = await search(dev, query="topic", filters=filters)
        return sorted(ep["session_id"] for ep in data["episodes"])

    assert await sessions({"sender_id": "bob"}) == ["b"]
    assert await sessions({"timestamp": {"lt": TS + 1}}) == ["a"]
    assert await sessions({"OR": [{"session_id": "a"}, {"sender_id": "bob"}]}) == ["a", "b"]
    assert await sessions({"session_id": {"ne": "a"}}) == ["b"]


async def test_sdk_filter_nodes_with_null_combinators_are_accepted(
    dev: httpx.AsyncClient,
) -> None:
    from everos_cloud.models import FilterNode

    await add(dev, "a", message("topic"))
    await add(dev, "b", message("topic"))
    await flush(dev, "a")
    await flush(dev, "b")
    node = FilterNode.from_dict({"session_id": "b"})
    assert node is not None
    sent = node.to_dict()
    assert sent == {"session_id": "b", "AND": None, "OR": None}  # what everos-cloud 1.0 sends
    nested = FilterNode.from_dict({"OR": [{"session_id": "a"}, {"session_id": "b"}]})
    assert nested is not None

    by_session = await search(dev, query="topic", filters=sent)
    either = await search(dev, query="topic", filters=nested.to_dict())
    listed = await dev.post("/api/v2/memory/get", json={
        "user_id": "alice", "memory_type": "episode", "filters": sent})

    assert [ep["session_id"] for ep in by_session["episodes"]] == ["b"]
    assert sorted(ep["session_id"] for ep in either["episodes"]) == ["a", "b"]
    assert listed.status_code == 200
    assert [ep["session_id"] for ep in listed.json()["data"]["episodes"]] == ["b"]


async def test_get_lists_session_episodes(dev: httpx.AsyncClient) -> None:
    await add(dev, "a", message("first"))
    await add(dev, "b", message([image_item()]))
    await flush(dev, "a")
    await flush(dev, "b")

    response = await dev.post("/api/v2/memory/get", json={
        "user_id": "alice", "memory_type": "episode", "filters": {"session_id": "b"},
    })

    assert response.status_code == 200
    data = response.json()["data"]
    assert (data["total_count"], data["count"]) == (1, 1)
    assert data["episodes"][0]["session_id"] == "b"
    assert "[image] photo.png" in data["episodes"][0]["episode"]
    assert "score" not in data["episodes"][0]
    assert data["profiles"] == data["agent_cases"] == data["agent_skills"] == []


async def test_v1_aliases_share_the_v2_handlers(dev: httpx.AsyncClient) -> None:
    body = {"session_id": "v1", "messages": [message("legacy client")]}
    assert (await dev.post("/api/v1/memory/add", json=body)).status_code == 200
    flushed = await dev.post("/api/v1/memory/flush", json={"session_id": "v1"})
    assert flushed.json()["data"]["status"] == "extracted"

    response = await dev.post("/api/v1/memory/search", json={"query": "legacy"})

    assert response.json()["data"]["episodes"][0]["session_id"] == "v1"


async def test_openai_style_parts_and_defaults_are_accepted(dev: httpx.AsyncClient) -> None:
    body = {"session_id": "oa", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "openai shaped"},
        {"type": "image_url", "image_url": {"url": "https://cdn.example/pics/dog.jpg"}},
    ]}]}
    assert (await dev.post("/api/v2/memory/add", json=body)).status_code == 200

    data = await search(dev, query="dog", filters={"session_id": "oa"})

    buffered = data["unprocessed_messages"][0]
    assert buffered["sender_id"] == "user" and buffered["timestamp"].endswith("Z")
    await flush(dev, "oa")
    assert "[image] dog.jpg" in (await search(dev, query="dog"))["episodes"][0]["episode"]


def _check_error(response: httpx.Response, status: int, code: str, path: str) -> str:
    assert response.status_code == status, response.text
    payload = response.json()
    assert set(payload) == {"request_id", "error"}
    assert set(payload["error"]) == {"code", "message", "timestamp", "path"}
    assert payload["error"]["code"] == code
    assert payload["error"]["path"] == path
    message: str = payload["error"]["message"]
    return message


@pytest.mark.parametrize(
    ("path", "content", "expected"),
    [
        ("/api/v2/memory/add", b"{not json", "JSON decode error"),
        ("/api/v2/memory/add", b"[1, 2]", "JSON object"),
        ("/api/v2/memory/add", b'{"messages": [{"role": "user", "content": "x"}]}',
         "Field required: session_id"),
        ("/api/v2/memory/add", b'{"session_id": "s"}', "Field required: messages"),
        ("/api/v2/memory/add", b'{"session_id": "s", "messages": []}', "messages"),
        ("/api/v2/memory/add",
         b'{"session_id": "s", "messages": [{"role": "boss", "content": ""}]}',
         "messages.0.role"),
        ("/api/v2/memory/add",
         b'{"session_id": "s", "messages": [{"role": "user", "content": [{"text": "x"}]}]}',
         "string type"),
        ("/api/v2/memory/add", b'{"session_id": "s", "app_id": "..", "messages": []}', "app_id"),
        ("/api/v2/memory/add",
         b'{"session_id": "\\ud800", "messages": [{"role": "user", "content": "x"}]}',
         "JSON decode error"),
        ("/api/v2/memory/add",
         b'{"session_id": "s", "messages": [{"role": "user", "content": "x", "timestamp": NaN}]}',
         "JSON decode error"),
        ("/api/v2/memory/flush", b"{}", "Field required: session_id"),
        ("/api/v2/memory/search", b'{"query": "x", "user_id": "a", "agent_id": "b"}',
         "at most one"),
        ("/api/v2/memory/search", b'{"query": "x", "top_k": 0}', "top_k"),
        ("/api/v2/memory/search", b'{"query": "x", "filters": {"app_id": "a"}}', "reserved"),
        ("/api/v2/memory/search", b'{"query": "x", "filters": {"colour": "red"}}', "colour"),
        ("/api/v2/memory/search", b'{"query": 3}', "query"),
        ("/api/v2/memory/get", b'{"user_id": "a", "memory_type": "agent_case"}', "owner kind"),
    ],
)
async def test_bad_bodies_answer_422_in_the_error_shape(
    dev: httpx.AsyncClient, path: str, content: bytes, expected: str
) -> None:
    response = await dev.post(path, content=content, headers={"content-type": "application/json"})

    assert expected in _check_error(response, 422, "INVALID_INPUT", path)


async def test_deeply_nested_filters_are_rejected_not_crashed(dev: httpx.AsyncClient) -> None:
    depth = 5000
    filters = '{"AND": [' * depth + '{"session_id": "s"}' + "]}" * depth
    content = ('{"query": "x", "filters": ' + filters + "}").encode()

    response = await dev.post("/api/v2/memory/search", content=content)

    assert response.status_code == 422


async def test_unknown_path_and_wrong_method_use_the_error_shape(dev: httpx.AsyncClient) -> None:
    _check_error(await dev.post("/api/v2/memory/nope", json={}), 404, "NOT_FOUND",
                 "/api/v2/memory/nope")
    _check_error(await dev.get("/api/v2/memory/search"), 405, "METHOD_NOT_ALLOWED",
                 "/api/v2/memory/search")


async def test_health_answers_ok(dev: httpx.AsyncClient) -> None:
    response = await dev.get("/health")

    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["capabilities"]["llm"] is False


async def test_file_database_survives_restart(tmp_path: Path, anyio_backend: str) -> None:
    database = str(tmp_path / "engine.db")
    for step in ("write", "read"):
        app = create_dev_engine(database)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://e") as client:
                if step == "write":
                    await add(client, "kept", message("durable note"))
                    await add(client, "kept", message([image_item()]))
                    await flush(client, "kept")
                    await add(client, "kept", message("still buffered"))
                else:
                    data = await search(client, query="durable", filters={"session_id": "kept"})
                    assert "[image] photo.png" in data["episodes"][0]["episode"]
                    assert data["unprocessed_messages"][0]["content"] == "still buffered"


async def test_store_opens_lazily_without_lifespan(anyio_backend: str) -> None:
    app = create_dev_engine()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://e") as client:
        await add(client, "lazy", message("no lifespan ran"))
        data = await search(client, query="x", filters={"session_id": "lazy"})
    app.state.store.close()

    assert data["unprocessed_messages"][0]["content"] == "no lifespan ran"
