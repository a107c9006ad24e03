"""The built-in dev engine, in process: it validates, answers and extracts like EverOS 1.5.1.

`PARITY` is a table of requests and the statuses the real engine gives them (read from its
request models, filter compiler, parser and exception handlers, and checked against a running
`everos` 1.5.1 with a multimodal model configured); the shapes are checked against the field
sets of the engine's answer DTOs (`everos/memory/search/dto.py`, `everos/memory/get/dto.py`).
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.devengine.app import create_dev_engine

pytestmark = pytest.mark.anyio

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWj"
                       "R9awAAAABJRU5ErkJggg==")
PNG_B64 = base64.b64encode(PNG).decode()
TS = 1_780_000_000_000
HOUR = 3_600_000
ADD, FLUSH, SEARCH, GET = (f"/api/v2/memory/{name}" for name in ("add", "flush", "search", "get"))

# The engine's answer DTOs, field for field.
SEARCH_DATA = {"episodes", "profiles", "agent_cases", "agent_skills", "unprocessed_messages"}
GET_DATA = {"episodes", "profiles", "agent_cases", "agent_skills", "total_count", "count"}
GET_EPISODE = {"id", "user_id", "app_id", "project_id", "session_id", "timestamp", "sender_ids",
               "summary", "subject", "episode", "type"}
SEARCH_EPISODE = GET_EPISODE | {"score", "atomic_facts"}
GET_CASE = {"id", "agent_id", "app_id", "project_id", "session_id", "task_intent", "approach",
            "quality_score", "key_insight", "timestamp"}
SEARCH_CASE = GET_CASE | {"score"}
GET_PROFILE = {"id", "user_id", "app_id", "project_id", "profile_data"}
SEARCH_PROFILE = GET_PROFILE | {"score"}
UNPROCESSED = {"id", "app_id", "project_id", "session_id", "sender_id", "sender_name", "role",
               "content", "timestamp", "tool_calls", "tool_call_id"}
CONTENT_ITEM = {"type", "text", "uri", "base64", "ext", "name", "extras"}


@pytest.fixture
async def dev(anyio_backend: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a fresh in-memory dev engine whose lifespan is running."""
    app = create_dev_engine()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            yield client


def message(content: Any, *, sender: str = "alice", role: str = "user", ts: int = TS,
            **extra: Any) -> dict:
    return {"sender_id": sender, "role": role, "timestamp": ts, "content": content, **extra}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image_item(name: str = "photo.png") -> dict:
    return {"type": "image", "base64": PNG_B64, "name": name, "ext": "png"}


def tool_round(i: int, ts: int, agent: str = "bot") -> list[dict]:
    call = {"id": f"call{i}", "type": "function",
            "function": {"name": "weather", "arguments": f'{{"day": {i}}}'}}
    return [message("", sender=agent, role="assistant", ts=ts, tool_calls=[call]),
            message("sunny", sender="runner", role="tool", ts=ts + 1, tool_call_id=f"call{i}")]


async def add(client: httpx.AsyncClient, session: str, *messages: dict, **scope: Any) -> dict:
    body = {"session_id": session, "messages": list(messages), **scope}
    response = await client.post(ADD, json=body)
    assert response.status_code == 200, response.text
    payload: dict = response.json()
    return payload


async def flush(client: httpx.AsyncClient, session: str, **scope: str) -> dict:
    response = await client.post(FLUSH, json={"session_id": session, **scope})
    assert response.status_code == 200, response.text
    payload: dict = response.json()
    return payload


async def search(client: httpx.AsyncClient, **body: Any) -> dict:
    body.setdefault("user_id" if "agent_id" not in body else "agent_id", "alice")
    response = await client.post(SEARCH, json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    assert set(payload) == {"request_id", "data"}
    assert set(payload["data"]) == SEARCH_DATA
    data: dict = payload["data"]
    return data


async def get(client: httpx.AsyncClient, **body: Any) -> dict:
    body.setdefault("user_id" if "agent_id" not in body else "agent_id", "alice")
    body.setdefault("memory_type", "episode")
    response = await client.post(GET, json=body)
    assert response.status_code == 200, response.text
    data: dict = response.json()["data"]
    assert set(data) == GET_DATA
    return data


# --- validation: the engine's status for the engine's request ---------------------------------

OK_MESSAGE = message("hi")
OK_ADD = {"session_id": "p", "messages": [OK_MESSAGE]}
OK_SEARCH = {"user_id": "alice", "query": "hi", "method": "keyword"}


def _add(**change: Any) -> dict:
    return {**OK_ADD, **change}


def _msg(**change: Any) -> dict:
    return _add(messages=[{**OK_MESSAGE, **change}])


def _without(body: dict, key: str) -> dict:
    return {k: v for k, v in body.items() if k != key}


def _item(**item: Any) -> dict:
    return _msg(content=[item])


def _search(**change: Any) -> dict:
    return {**OK_SEARCH, **change}


def _get(**change: Any) -> dict:
    return {"user_id": "alice", "memory_type": "episode", **change}


def _nested(depth: int) -> bytes:
    filters = '{"AND": [' * depth + '{"session_id": "s"}' + "]}" * depth
    return ('{"user_id": "a", "method": "keyword", "query": "x", "filters": ' + filters
            + "}").encode()


PARITY: list[tuple[str, str, Any, int]] = [
    # add and its messages (MemorizeAddRequest, MessageItemDTO, ContentItemDTO)
    ("add", ADD, OK_ADD, 200),
    ("add ignores unknown keys", ADD, _add(colour="red"), 200),
    ("add needs sender_id", ADD, _add(messages=[_without(OK_MESSAGE, "sender_id")]), 422),
    ("add needs timestamp", ADD, _add(messages=[_without(OK_MESSAGE, "timestamp")]), 422),
    ("timestamp must be positive", ADD, _msg(timestamp=0), 422),
    ("a numeric string is a timestamp", ADD, _msg(timestamp=str(TS)), 200),
    ("seconds are a timestamp", ADD, _msg(timestamp=TS // 1000), 200),
    ("a timestamp no datetime holds", ADD, _msg(timestamp=10**17), 500),
    ("role must be user, assistant or tool", ADD, _msg(role="system"), 422),
    ("a tool message needs tool_call_id", ADD, _msg(role="tool"), 422),
    ("sender_id charset", ADD, _msg(sender_id="a b"), 422),
    ("sender_id length", ADD, _msg(sender_id="a" * 129), 422),
    ("no messages", ADD, _add(messages=[]), 422),
    ("501 messages", ADD, _add(messages=[OK_MESSAGE] * 501), 422),
    ("empty session_id", ADD, _add(session_id=""), 422),
    ("session_id length", ADD, _add(session_id="s" * 129), 422),
    ("app_id default_app", ADD, _add(app_id="default_app"), 422),
    ("app_id path", ADD, _add(app_id="a/b"), 422),
    ("app_id dot-dot", ADD, _add(app_id=".."), 422),
    ("project_id default_project", ADD, _add(project_id="default_project"), 422),
    ("OpenAI image_url part", ADD, _item(type="image_url", image_url={"url": "x"}), 422),
    ("unknown content-item key", ADD, _item(type="image", base64=PNG_B64, mime="image/png"),
     422),
    ("content item without type", ADD, _item(text="x"), 422),
    ("tool call without function", ADD, _msg(role="assistant", tool_calls=[{"id": "c"}]), 422),
    ("empty content list", ADD, _msg(content=[]), 200),
    ("text item without text", ADD, _item(type="text"), 200),
    ("file item with no bytes", ADD, _item(type="image", name="x.png"), 415),
    ("unknown extension", ADD, _item(type="doc", base64=b64(b"x"), ext="zzz"), 415),
    ("no extension", ADD, _item(type="doc", base64=b64(b"x")), 415),
    ("bad base64", ADD, _item(type="doc", base64="!!notbase64", ext="txt"), 415),
    ("resource uri", ADD, _item(type="image", uri="resource://res_1/x.png"), 415),
    ("missing file uri", ADD, _item(type="doc", uri="file:///nonexistent/x.txt"), 415),
    ("image", ADD, _item(type="image", base64=PNG_B64, ext="png", name="p.png"), 200),
    ("text file", ADD, _item(type="doc", base64=b64(b"notes"), ext="txt", name="n.txt"), 200),
    ("queued add", ADD, _add(async_mode=True), 202),
    ("not JSON", ADD, b"{bad", 422),
    ("not an object", ADD, b"[1, 2]", 422),
    ("empty body", ADD, b"", 422),
    # flush (MemorizeFlushRequest)
    ("flush", FLUSH, {"session_id": "p"}, 200),
    ("flush needs session_id", FLUSH, {}, 422),
    ("flush project_id default_project", FLUSH, {"session_id": "p",
                                                 "project_id": "default_project"}, 422),
    # search (SearchRequest) and its filters (filters.py)
    ("search", SEARCH, OK_SEARCH, 200),
    ("search needs an owner", SEARCH, _without(OK_SEARCH, "user_id"), 422),
    ("search takes one owner", SEARCH, _search(agent_id="bot"), 422),
    ("search needs a query", SEARCH, _without(OK_SEARCH, "query"), 422),
    ("search query not empty", SEARCH, _search(query=""), 422),
    ("search refuses unknown keys", SEARCH, _search(limit=5), 422),
    ("top_k 0", SEARCH, _search(top_k=0), 422),
    ("top_k 101", SEARCH, _search(top_k=101), 422),
    ("top_k -2", SEARCH, _search(top_k=-2), 422),
    ("radius above 1", SEARCH, _search(radius=2), 422),
    ("unknown method", SEARCH, _search(method="fuzzy"), 422),
    ("reserved filter field", SEARCH, _search(filters={"app_id": "a"}), 422),
    ("owner filter field", SEARCH, _search(filters={"owner_id": "a"}), 422),
    ("user_id is no filter field", SEARCH, _search(filters={"user_id": "alice"}), 422),
    ("unknown filter field", SEARCH, _search(filters={"colour": "red"}), 422),
    ("session_id must be a string", SEARCH, _search(filters={"session_id": 5}), 422),
    ("empty operator map", SEARCH, _search(filters={"session_id": {}}), 422),
    ("empty in", SEARCH, _search(filters={"session_id": {"in": []}}), 422),
    ("unknown operator", SEARCH, _search(filters={"session_id": {"like": "s"}}), 422),
    ("ne on sender_id", SEARCH, _search(filters={"sender_id": {"ne": "a"}}), 422),
    ("eq null", SEARCH, _search(filters={"session_id": {"eq": None}}), 422),
    ("bad timestamp", SEARCH, _search(filters={"timestamp": {"gte": "soon"}}), 422),
    ("bad AND child", SEARCH, _search(filters={"AND": [1]}), 422),
    ("nested unknown field", SEARCH, _search(filters={"AND": [{"colour": "red"}]}), 422),
    ("null field is no condition", SEARCH, _search(filters={"session_id": None}), 200),
    ("null combinators", SEARCH, _search(filters={"session_id": "p", "AND": None}), 200),
    ("ISO timestamp", SEARCH, _search(filters={"timestamp": {"gte": "2026-01-01T00:00:00Z"}}),
     200),
    ("parent_type", SEARCH, _search(filters={"parent_type": "cluster"}), 200),
    ("agent search", SEARCH, {"agent_id": "bot", "query": "x", "enable_llm_rerank": True}, 200),
    ("llm_multiround for an agent", SEARCH, {"agent_id": "bot", "query": "x",
                                             "method": "llm_multiround"}, 500),
    ("filters nested 50 deep", SEARCH, _nested(50), 200),
    ("filters nested 300 deep", SEARCH, _nested(300), 422),
    ("filters nested 5000 deep", SEARCH, _nested(5000), 400),
    # get (GetRequest)
    ("get", GET, _get(), 200),
    ("get needs memory_type", GET, _without(_get(), "memory_type"), 422),
    ("get needs an owner", GET, {"memory_type": "episode"}, 422),
    ("user owns no agent cases", GET, _get(memory_type="agent_case"), 422),
    ("agent owns no episodes", GET, {"agent_id": "bot", "memory_type": "episode"}, 422),
    ("page 0", GET, _get(page=0), 422),
    ("page_size 101", GET, _get(page_size=101), 422),
    ("sort_by", GET, _get(sort_by="score"), 422),
    ("get refuses unknown keys", GET, _get(limit=5), 422),
    ("profile", GET, _get(memory_type="profile"), 200),
    ("agent cases", GET, {"agent_id": "bot", "memory_type": "agent_case"}, 200),
    ("skills by a filter field", GET, {"agent_id": "bot", "memory_type": "agent_skill",
                                       "filters": {"session_id": "s"}}, 500),
    ("cases by sender_id", GET, {"agent_id": "bot", "memory_type": "agent_case",
                                 "filters": {"sender_id": "bot"}}, 500),
    ("cases by session", GET, {"agent_id": "bot", "memory_type": "agent_case",
                               "filters": {"session_id": "s"}}, 200),
]


async def send(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        return await client.post(path, content=body, headers={"content-type": "application/json"})
    return await client.post(path, json=body)


@pytest.mark.parametrize(("path", "body", "status"), [row[1:] for row in PARITY],
                         ids=[row[0] for row in PARITY])
async def test_requests_get_the_engines_status(dev: httpx.AsyncClient, path: str, body: Any,
                                              status: int) -> None:
    response = await send(dev, path, body)

    assert response.status_code == status, response.text


def _check_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    payload = response.json()
    assert set(payload) == {"request_id", "error"}
    assert set(payload["error"]) == {"code", "message", "timestamp", "path"}
    assert payload["error"]["code"] == code
    assert payload["error"]["path"] == response.request.url.path
    assert datetime.fromisoformat(payload["error"]["timestamp"]).utcoffset() is not None
    assert response.headers["x-request-id"] == payload["request_id"]
    message: str = payload["error"]["message"]
    return message


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (ADD, _add(messages=[_without(OK_MESSAGE, "sender_id")]),
         "Field required: messages.0.sender_id"),
        (ADD, _msg(role="tool"), "Value error, tool_call_id is required when role is 'tool'"
                                 ": messages.0"),
        (ADD, b"{bad", "JSON decode error: 1"),
        (ADD, b"", "Field required"),
        (ADD, b"[1, 2]", "Input should be a valid dictionary or object to extract fields from"),
        (SEARCH, _search(query=""), "Search query cannot be empty."),
        (SEARCH, _without(OK_SEARCH, "user_id"),
         "Value error, exactly one of user_id / agent_id must be provided"),
        (SEARCH, _search(filters={"colour": "red"}), "unsupported filter field: 'colour'"),
        (SEARCH, _search(filters={"app_id": "a"}),
         "filter field 'app_id' is reserved; pass it at the top of the request"),
        (SEARCH, _search(filters={"sender_id": {"ne": "a"}}),
         "operator 'ne' is not supported on array field 'sender_id'"),
    ],
)
async def test_refusals_carry_the_engines_message(dev: httpx.AsyncClient, path: str, body: Any,
                                                  message: str) -> None:
    assert _check_error(await send(dev, path, body), 422, "INVALID_INPUT") == message


async def test_unreadable_files_are_415_with_the_parsers_message(dev: httpx.AsyncClient) -> None:
    response = await dev.post(ADD, json=_item(type="image", name="x.png"))

    assert _check_error(response, 415, "UNSUPPORTED_FORMAT") == \
        "content item has neither uri nor base64 (type='image')"


async def test_routing_errors_answer_in_starlettes_detail_shape(dev: httpx.AsyncClient) -> None:
    missing = await dev.post("/api/v2/memory/nope", json={})
    wrong_method = await dev.get(SEARCH)
    too_deep = await send(dev, SEARCH, _nested(5000))

    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    assert (wrong_method.status_code, wrong_method.json()) == (
        405, {"detail": "Method Not Allowed"})
    assert too_deep.json() == {"detail": "There was an error parsing the body"}


async def test_v1_aliases_share_the_v2_handlers(dev: httpx.AsyncClient) -> None:
    body = {"session_id": "v1", "messages": [message("legacy client")]}
    assert (await dev.post("/api/v1/memory/add", json=body)).status_code == 200
    flushed = await dev.post("/api/v1/memory/flush", json={"session_id": "v1"})
    assert flushed.json()["data"]["status"] == "extracted"

    response = await dev.post("/api/v1/memory/search", json={"user_id": "alice",
                                                             "query": "legacy"})

    assert response.json()["data"]["episodes"][0]["session_id"] == "v1"


# --- the buffer ---------------------------------------------------------------------------------


async def test_add_buffers_under_engine_made_message_ids(dev: httpx.AsyncClient) -> None:
    payload = await add(dev, "buf", message("hello"),
                        message("hi there", sender="bot", role="assistant", ts=TS + 1500))

    data = await search(dev, query="hello", filters={"session_id": "buf"})

    assert payload["data"] == {"message_count": 2, "status": "accumulated"}
    assert len(payload["request_id"]) == 32
    first, second = data["unprocessed_messages"]
    assert set(first) == UNPROCESSED
    assert (first["id"], second["id"]) == (f"m_buf_{TS}_000", f"m_buf_{TS + 1500}_001")
    assert (first["content"], first["sender_id"], first["role"]) == ("hello", "alice", "user")
    assert second["timestamp"] == "2026-05-28T20:26:41.500000Z"
    assert first["timestamp"] == "2026-05-28T20:26:40Z"
    assert first["tool_calls"] is None and first["sender_name"] is None


async def test_a_message_sent_again_keeps_the_first_of_its_id(dev: httpx.AsyncClient) -> None:
    await add(dev, "dup", message("original"))
    again = await add(dev, "dup", message("same time, same position"))

    data = await search(dev, query="x", filters={"session_id": "dup"})

    assert again["data"]["message_count"] == 1
    assert [m["content"] for m in data["unprocessed_messages"]] == ["original"]


async def test_buffered_items_keep_their_keys_and_parse_records(dev: httpx.AsyncClient) -> None:
    items = [{"type": "text", "text": "look at this"}, image_item(),
             {"type": "doc", "base64": b64(b"meeting notes"), "ext": "txt", "name": "notes.txt"}]
    await add(dev, "buf", message(items))

    content = (await search(dev, query="x", filters={"session_id": "buf"})
               )["unprocessed_messages"][0]["content"]

    assert [set(item) for item in content] == [
        CONTENT_ITEM, CONTENT_ITEM | {"parse_status", "parse_error"},
        CONTENT_ITEM | {"parsed_content", "parse_status"}]
    assert content[1]["base64"] == PNG_B64  # the buffer keeps the payload until extraction
    assert (content[1]["parse_status"], content[1]["parse_error"]) == ("failed", "LLMError")
    assert (content[2]["parsed_content"], content[2]["parse_status"]) == (
        "meeting notes", "success")


async def test_buffer_is_answered_only_for_a_top_level_session_string(
    dev: httpx.AsyncClient,
) -> None:
    await add(dev, "buf", message("waiting"))

    assert (await search(dev, query="x"))["unprocessed_messages"] == []
    compound = await search(dev, query="x", filters={"session_id": {"in": ["buf"]}})
    assert compound["unprocessed_messages"] == []
    by_agent = await search(dev, agent_id="bot", query="x", filters={"session_id": "buf"})
    assert [m["content"] for m in by_agent["unprocessed_messages"]] == ["waiting"]


async def test_defer_extraction_only_buffers(dev: httpx.AsyncClient) -> None:
    answer = await add(dev, "d", message("early"), message("late", ts=TS + 5 * HOUR),
                       defer_extraction=True)

    assert answer["data"]["status"] == "accumulated"
    assert (await get(dev))["episodes"] == []


# --- episodes -----------------------------------------------------------------------------------


async def test_flush_makes_an_episode_for_each_user_sender(dev: httpx.AsyncClient) -> None:
    await add(dev, "s", message("plan the hike"),
              message("sure", sender="bot", role="assistant", ts=TS + 1, sender_name="Helper"),
              *tool_round(0, TS + 2),
              message("count me in", sender="bob", ts=TS + 10))
    assert (await flush(dev, "s"))["data"] == {"status": "extracted"}

    listed = {owner: await get(dev, user_id=owner) for owner in ("alice", "bob")}

    for owner, data in listed.items():
        (episode,) = data["episodes"]
        assert set(episode) == GET_EPISODE
        assert episode["user_id"] == owner and episode["session_id"] == "s"
        assert episode["id"].startswith(f"{owner}_ep_") and episode["id"].endswith("_00000001")
        assert episode["sender_ids"] == ["alice", "bot", "bob"]  # a tool result has no sender
        assert episode["episode"] == "alice: plan the hike\nHelper: sure\nbob: count me in"
        assert episode["summary"] == episode["episode"][:200] and episode["subject"] == ""
        assert episode["timestamp"] == "2026-05-28T20:26:40.010000Z"  # the closing message
        assert episode["type"] == "Conversation"
    assert (await flush(dev, "s"))["data"] == {"status": "no_extraction"}


async def test_search_answers_every_field_of_the_engines_episode(dev: httpx.AsyncClient) -> None:
    await add(dev, "climb", message("I love climbing in Yosemite every spring."))
    await add(dev, "coffee", message("My favourite coffee shop is Blue Bottle."))
    await flush(dev, "climb")
    await flush(dev, "coffee")

    data = await search(dev, query="where is Yosemite?", filters={"session_id": "climb"})

    (episode,) = data["episodes"]
    assert set(episode) == SEARCH_EPISODE
    assert episode["atomic_facts"] == [] and 0 < episode["score"] <= 1
    assert data["profiles"] == data["agent_cases"] == data["agent_skills"] == []


async def test_a_gap_of_over_four_hours_closes_a_cell_on_add(dev: httpx.AsyncClient) -> None:
    first = await add(dev, "day", message("morning run"), message("nice", sender="bot",
                                                                  role="assistant", ts=TS + 1))
    second = await add(dev, "day", message("evening swim", ts=TS + 5 * HOUR))

    episodes = (await get(dev))["episodes"]
    buffered = (await search(dev, query="x", filters={"session_id": "day"})
                )["unprocessed_messages"]

    assert first["data"]["status"] == "accumulated"
    assert second["data"]["status"] == "extracted"
    assert [ep["episode"] for ep in episodes] == ["alice: morning run\nbot: nice"]
    assert [m["content"] for m in buffered] == ["evening swim"]


async def test_a_flush_cuts_several_episodes_at_gaps(dev: httpx.AsyncClient) -> None:
    await add(dev, "long", message("breakfast"), message("lunch", ts=TS + 4 * HOUR),
              message("dinner", ts=TS + 9 * HOUR), defer_extraction=True)
    await flush(dev, "long")

    episodes = (await get(dev, sort_order="asc"))["episodes"]

    assert [ep["episode"] for ep in episodes] == ["alice: breakfast\nalice: lunch",
                                                  "alice: dinner"]
    assert [ep["id"][-8:] for ep in episodes] == ["00000001", "00000002"]
    assert len({ep["session_id"] for ep in episodes}) == 1


async def test_a_buffer_without_a_user_message_waits(dev: httpx.AsyncClient) -> None:
    answer = await add(dev, "a", message("hello?", sender="bot", role="assistant"),
                       message("anyone?", sender="bot", role="assistant", ts=TS + 5 * HOUR))

    assert answer["data"]["status"] == "accumulated"
    assert len((await search(dev, query="x", filters={"session_id": "a"})
                )["unprocessed_messages"]) == 2


async def test_episodes_invent_no_file_names(dev: httpx.AsyncClient) -> None:
    await add(dev, "files", message([
        {"type": "text", "text": "here is my cat"},
        image_item("simple-multimodal-image.png"),
        {"type": "image", "uri": "https://cdn.example/pics/dog.jpg", "name": "dog.jpg"},
    ]))
    await flush(dev, "files")

    (episode,) = (await get(dev))["episodes"]

    assert episode["episode"] == "alice: here is my cat"
    assert (await search(dev, query="simple-multimodal-image.png"))["episodes"] == []


async def test_parsed_files_are_restated_as_the_engine_renders_them(
    dev: httpx.AsyncClient, tmp_path: Path,
) -> None:
    notes = tmp_path / "agenda.md"
    notes.write_text("1. budget\n2. hiring")
    mail = (b"Subject: Offsite\nFrom: ann@example.com\nTo: team@example.com\n\n"
            b"See you at the lake.\n")
    await add(dev, "docs", message([
        {"type": "text", "text": "files for Monday"},
        {"type": "doc", "uri": notes.as_uri(), "name": "agenda.md"},
        {"type": "email", "base64": b64(mail), "ext": "eml", "name": "offsite.eml"},
        {"type": "pdf", "base64": b64(b"%PDF-1.4"), "ext": "pdf", "name": "report.pdf"},
    ]))
    await flush(dev, "docs")

    (episode,) = (await get(dev))["episodes"]

    assert episode["episode"] == (
        "alice: files for Monday\n[DOC: agenda.md]\n1. budget\n2. hiring\n"
        "[EMAIL: offsite.eml]\nSubject: Offsite\nFrom: ann@example.com\nTo: team@example.com"
        "\n\nSee you at the lake.")


async def test_an_emails_inline_images_get_the_parsers_ocr_failed_marker(
    dev: httpx.AsyncClient,
) -> None:
    mail = (
        "Subject: Pics\nMIME-Version: 1.0\nContent-Type: multipart/related; boundary=B\n\n"
        "--B\nContent-Type: text/html\n\n<html><body><p>Look</p><img src=\"cid:p1\"></body>"
        "</html>\n--B\nContent-Type: image/png\nContent-ID: <p1>\n"
        "Content-Disposition: inline; filename=\"cat.png\"\nContent-Transfer-Encoding: base64"
        f"\n\n{PNG_B64}\n--B--\n"
    ).encode()
    await add(dev, "mail", message([{"type": "email", "base64": b64(mail), "ext": "eml"}]))

    item = (await search(dev, query="x", filters={"session_id": "mail"})
            )["unprocessed_messages"][0]["content"][0]

    assert item["parsed_content"] == "Subject: Pics\n\nLook\n[image: cat.png, OCR failed]"


async def test_search_ranks_better_matches_first_and_drops_misses(dev: httpx.AsyncClient) -> None:
    await add(dev, "one", message("red apples"))
    await add(dev, "two", message("red apples and green pears"))
    await add(dev, "three", message("nothing relevant"))
    for session in ("one", "two", "three"):
        await flush(dev, session)

    data = await search(dev, query="green pears apples", filters={"parent_type": "memcell"})

    assert [ep["session_id"] for ep in data["episodes"]] == ["two", "one"]
    assert data["episodes"][0]["score"] > data["episodes"][1]["score"]


async def test_cjk_query_matches_as_substring(dev: httpx.AsyncClient) -> None:
    await add(dev, "zh", message("我昨天上传了一张猫的照片"))
    await add(dev, "other", message("今天天气很好", sender="bob"))
    await flush(dev, "zh")
    await flush(dev, "other")

    data = await search(dev, query="照片")

    assert [ep["session_id"] for ep in data["episodes"]] == ["zh"]


async def test_scopes_and_owners_are_isolated(dev: httpx.AsyncClient) -> None:
    await add(dev, "s", message("secret plans"), app_id="a1", project_id="p1")
    await add(dev, "b", message("secret plans", sender="bob"))
    await flush(dev, "s", app_id="a1", project_id="p1")
    await flush(dev, "b")

    assert (await search(dev, query="secret"))["episodes"] == []
    found = await search(dev, query="secret", app_id="a1", project_id="p1")
    assert [ep["app_id"] for ep in found["episodes"]] == ["a1"]
    assert [ep["session_id"] for ep in (await search(dev, query="secret", user_id="bob")
                                        )["episodes"]] == ["b"]


async def test_ids_are_numbered_per_app_and_project(dev: httpx.AsyncClient) -> None:
    await add(dev, "s", message("one scope"))
    await add(dev, "s", message("another scope"), project_id="p2")
    await flush(dev, "s")
    await flush(dev, "s", project_id="p2")

    first = (await get(dev))["episodes"]
    second = (await get(dev, project_id="p2"))["episodes"]

    assert [ep["id"] for ep in first] == [ep["id"] for ep in second]  # as the engine numbers
    assert [ep["episode"] for ep in first + second] == ["alice: one scope", "alice: another scope"]


async def test_filters_select_episodes(dev: httpx.AsyncClient) -> None:
    await add(dev, "a", message("topic"))
    await add(dev, "b", message("topic", ts=TS + 60_000),
              message("ok", sender="bot", role="assistant", ts=TS + 60_001))
    await flush(dev, "a")
    await flush(dev, "b")

    async def sessions(filters: dict) -> list[str | None]:
        data = await search(dev, query="topic", filters=filters)
        return sorted((ep["session_id"] for ep in data["episodes"]), key=str)

    assert await sessions({"sender_id": "bot"}) == ["b"]
    assert await sessions({"timestamp": {"lt": TS + 1}}) == ["a"]
    assert await sessions({"timestamp": {"gte": "2026-05-28T20:27:00Z"}}) == [None, "b"]
    assert await sessions({"OR": [{"session_id": "a"}, {"sender_id": "bot"}]}) == ["a", "b"]
    assert await sessions({"session_id": {"ne": "a"}}) == ["b"]  # a merged one has no session
    assert await sessions({"session_id": {"in": ["a", "b"]}}) == ["a", "b"]


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
    listed = await get(dev, filters=sent)

    assert [ep["session_id"] for ep in by_session["episodes"]] == ["b"]
    assert sorted(ep["session_id"] for ep in either["episodes"]) == ["a", "b"]
    assert [ep["session_id"] for ep in listed["episodes"]] == ["b"]


async def test_get_pages_and_sorts(dev: httpx.AsyncClient) -> None:
    for i in range(3):
        await add(dev, "s", message(f"note {i}", ts=TS + i * 5 * HOUR))
    await flush(dev, "s")

    newest = await get(dev, page_size=2)
    oldest = await get(dev, page_size=2, page=2, sort_order="asc")

    assert (newest["total_count"], newest["count"]) == (3, 2)
    assert [ep["episode"] for ep in newest["episodes"]] == ["alice: note 2", "alice: note 1"]
    assert [ep["episode"] for ep in oldest["episodes"]] == ["alice: note 2"]
    assert all("score" not in ep for ep in newest["episodes"])


# --- merged episodes ------------------------------------------------------------------------------


async def test_a_user_in_two_sessions_gets_a_merged_episode(dev: httpx.AsyncClient) -> None:
    await add(dev, "trip", message("we hiked to the lake"))
    await flush(dev, "trip")
    assert (await search(dev, query="lake"))["episodes"][0]["session_id"] == "trip"
    await add(dev, "dinner", message("pasta by the lake", ts=TS + HOUR))
    await flush(dev, "dinner")

    episodes = (await search(dev, query="lake"))["episodes"]
    merged = [ep for ep in episodes if ep["session_id"] is None]

    assert [ep["session_id"] for ep in episodes] == ["dinner", "trip", None]  # ties: sessions first
    (one,) = merged
    assert set(one) == SEARCH_EPISODE
    assert one["episode"] == "alice: we hiked to the lake\n\nalice: pasta by the lake"
    assert (one["sender_ids"], one["summary"], one["subject"]) == ([], "", "")
    assert one["timestamp"] == "2026-05-28T21:26:40Z"  # its newest member's
    clustered = await search(dev, query="lake", filters={"parent_type": "cluster"})
    assert [ep["id"] for ep in clustered["episodes"]] == [one["id"]]
    assert all(ep["session_id"] for ep in (await get(dev))["episodes"])  # listings leave it out


async def test_the_merged_episode_follows_later_extractions(dev: httpx.AsyncClient) -> None:
    for i, session in enumerate(("a", "b", "c")):
        await add(dev, session, message(f"chapter {session}", ts=TS + i))
        await flush(dev, session)

    merged = (await search(dev, query="chapter", filters={"parent_type": "cluster"}))["episodes"]
    bob = await search(dev, user_id="bob", query="chapter")

    assert [ep["episode"] for ep in merged] == [
        "alice: chapter a\n\nalice: chapter b\n\nalice: chapter c"]
    assert bob["episodes"] == []


async def test_a_session_filter_never_returns_the_merged_episode(dev: httpx.AsyncClient) -> None:
    for session in ("a", "b"):
        await add(dev, session, message("same words"))
        await flush(dev, session)

    data = await search(dev, query="same words", filters={"session_id": "a"})

    assert [ep["session_id"] for ep in data["episodes"]] == ["a"]


# --- agent memory -------------------------------------------------------------------------------


def trajectory(ts: int = TS) -> list[dict]:
    rounds = [m for i in range(3) for m in tool_round(i, ts + 10 * (i + 1))]
    return [message("what is the weather this week?", ts=ts), *rounds,
            message("sunny all week", sender="bot", role="assistant", ts=ts + 100),
            message("thanks", ts=ts + 200),
            message("you are welcome", sender="bot2", role="assistant", ts=ts + 300)]


async def test_each_assistant_sender_owns_the_cells_agent_case(dev: httpx.AsyncClient) -> None:
    await add(dev, "task", *trajectory())
    await flush(dev, "task")

    found = await search(dev, agent_id="bot", query="weather")
    listed = [await get(dev, agent_id=agent, memory_type="agent_case") for agent in ("bot", "bot2")]

    (case,) = found["agent_cases"]
    assert set(case) == SEARCH_CASE
    assert found["episodes"] == found["profiles"] == found["agent_skills"] == []
    assert case["id"].startswith("bot_ac_") and case["agent_id"] == "bot"
    assert case["session_id"] == "task"
    assert case["task_intent"] == "what is the weather this week?\nthanks"
    assert case["approach"] == ('weather({"day": 0})\nweather({"day": 1})\nweather({"day": 2})\n'
                                "sunny all week\nyou are welcome")
    assert (case["quality_score"], case["key_insight"]) == (0.5, None)
    assert case["timestamp"] == "2026-05-28T20:26:40.300000Z"
    for agent, data in zip(("bot", "bot2"), listed, strict=True):
        (one,) = data["agent_cases"]
        assert set(one) == GET_CASE and one["agent_id"] == agent
    assert (await get(dev, agent_id="bot", memory_type="agent_skill"))["agent_skills"] == []


@pytest.mark.parametrize(
    "messages",
    [
        [message("quick question"), message("quick answer", sender="bot", role="assistant")],
        trajectory()[:-3],  # ends on a tool result
        [m for m in trajectory() if m["role"] != "user"],  # no user message
        trajectory()[:5] + trajectory()[7:],  # two tool rounds
    ],
    ids=["no tools", "not closed by the assistant", "no user", "two tool rounds"],
)
async def test_no_agent_case_where_the_engines_extractor_skips(
    dev: httpx.AsyncClient, messages: list[dict],
) -> None:
    await add(dev, "t", *messages)
    await flush(dev, "t")

    assert (await get(dev, agent_id="bot", memory_type="agent_case"))["agent_cases"] == []


async def test_an_agent_search_with_filter_fields_fails_once_agent_memory_exists(
    dev: httpx.AsyncClient,
) -> None:
    body = {"agent_id": "bot", "query": "weather", "filters": {"session_id": "task"}}
    before = await dev.post(SEARCH, json=body)
    await add(dev, "task", *trajectory())
    await flush(dev, "task")

    after = await dev.post(SEARCH, json=body)

    assert before.status_code == 200
    _check_error(after, 500, "INTERNAL_ERROR")
    assert (await search(dev, agent_id="bot", query="weather"))["agent_cases"]


# --- profiles and queued adds -------------------------------------------------------------------


async def test_a_user_with_episodes_has_a_profile_without_invented_text(
    dev: httpx.AsyncClient,
) -> None:
    assert (await search(dev, query="x", include_profile=True))["profiles"] == []
    await add(dev, "s", message("likes tea"))
    await flush(dev, "s")

    (profile,) = (await search(dev, query="x", include_profile=True))["profiles"]
    listed = await get(dev, memory_type="profile")

    assert set(profile) == SEARCH_PROFILE and profile["score"] is None
    assert profile["profile_data"] == {"summary": "", "explicit_info": [],
                                       "implicit_traits": [], "profile_timestamp_ms": TS}
    assert [set(p) for p in listed["profiles"]] == [GET_PROFILE]
    assert listed["total_count"] == 1


async def test_a_queued_add_answers_202_and_its_task(dev: httpx.AsyncClient) -> None:
    accepted = await dev.post(ADD, json=_add(async_mode=True))
    failed = await dev.post(ADD, json={**_item(type="image", name="x.png"), "async_mode": True})

    task = await dev.get(f"/api/v2/tasks/{accepted.json()['request_id']}")
    listed = await dev.get("/api/v2/tasks", params={"session_id": "p", "status": "failed"})

    assert accepted.status_code == failed.status_code == 202
    assert accepted.json()["data"] == {"status": "queued", "message_count": 1, "pending": 1}
    assert task.json()["data"]["status"] == "success"
    assert set(task.json()["data"]) == {"id", "status", "task_type", "error", "error_code",
                                        "created_at", "finished_at"}
    (item,) = listed.json()["data"]["items"]
    assert item["id"] == failed.json()["request_id"]
    assert item["error_code"] == "UnsupportedModalityError"
    assert _check_error(await dev.get("/api/v2/tasks/nope"), 404, "NOT_FOUND") == \
        "task nope not found or expired"
    assert (await dev.get("/api/v2/tasks", params={"status": "done"})).status_code == 422


# --- the process ------------------------------------------------------------------------------


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
                    await flush(client, "kept")
                    await add(client, "kept", message("still buffered", ts=TS + 1))
                else:
                    data = await search(client, query="durable",
                                        filters={"session_id": "kept"})
                    assert data["episodes"][0]["episode"] == "alice: durable note"
                    assert data["unprocessed_messages"][0]["content"] == "still buffered"


async def test_a_database_of_an_earlier_dev_engine_is_started_afresh(
    tmp_path: Path, anyio_backend: str,
) -> None:
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE sessions (pk INTEGER PRIMARY KEY, episode TEXT)")
        conn.execute("CREATE TABLE buffer (seq INTEGER PRIMARY KEY, content TEXT)")
    app = create_dev_engine(str(database))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://e") as client:
            await add(client, "new", message("works"))
            data = await search(client, query="x", filters={"session_id": "new"})

    assert [m["content"] for m in data["unprocessed_messages"]] == ["works"]


async def test_store_opens_lazily_without_lifespan(anyio_backend: str) -> None:
    app = create_dev_engine()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://e") as client:
        await add(client, "lazy", message("no lifespan ran"))
        data = await search(client, query="x", filters={"session_id": "lazy"})
    app.state.store.close()

    assert data["unprocessed_messages"][0]["content"] == "no lifespan ran"


async def test_objects_signed_and_uploaded_as_on_the_cloud_may_be_named_in_adds(
        dev: httpx.AsyncClient) -> None:
    """`upstream.flavor = "everos-cloud"` on the dev engine: the Cloud's sign route, its POST
    form target, then an add naming the object key (read as the Cloud's model would)."""
    signed = await dev.post("/api/v2/object/sign", json={"objectList": [
        {"fileId": "f1", "fileName": "harbour.png", "fileType": "image"}]})
    assert signed.status_code == 200 and signed.json()["status"] == 0
    [item] = signed.json()["result"]["data"]["objectList"]
    key, info = item["objectKey"], item["objectSignedInfo"]
    assert key.endswith("/harbour.png") and item["fileId"] == "f1"
    named = {"session_id": "s", "messages": [message([{"type": "image", "uri": key}])]}
    assert (await dev.post(ADD, json=named)).status_code == 415  # not uploaded yet

    uploaded = await dev.post(info["url"], data=info["fields"],
                              files={"file": ("harbour.png", PNG, "image/png")})
    assert uploaded.status_code == 204
    again = await dev.post(info["url"], data=info["fields"],
                           files={"file": ("harbour.png", PNG, "image/png")})
    assert again.status_code == 403  # a signed form is used once

    added = await dev.post(ADD, json=named)
    assert added.status_code == 200, added.text
    refused = await dev.post("/api/v1/object/sign", json={"objectList": []})
    assert refused.json()["status"] != 0
