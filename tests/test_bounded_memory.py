"""Bounded memory per request (SPEC §13): the parsing budget and the cap on engine answers."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import respx

from gateway.app import Gateway, create_app
from gateway.config import Settings
from tests.conftest import client_for

BUDGET = 4000
GET_BODY = {"user_id": "alice", "memory_type": "episode"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.with_values(limits={"max_body_bytes": BUDGET, "max_parsing_bytes": BUDGET,
                                        "max_upstream_answer_bytes": 10_000})


async def test_bodies_past_the_parsing_budget_get_503_with_retry_after(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={"data": []}))
    first = json.dumps({**GET_BODY, "page_size": 5}).encode()
    padded = first[:-1] + b"," + b'"pad": "' + b"x" * (3000 - len(first)) + b'"}'
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_body() -> AsyncIterator[bytes]:  # 2990 of its 3000 bytes, the rest late
        yield padded[:-10]
        started.set()
        await release.wait()
        yield padded[-10:]

    holding = asyncio.create_task(alice.post(
        "/api/v2/memory/get", content=slow_body(),
        headers={"Content-Type": "application/json", "Content-Length": str(len(padded))}))
    await started.wait()
    refused = await alice.post("/api/v2/memory/get", content=b"{" + b" " * 1500 + json.dumps(
        GET_BODY).encode()[1:], headers={"Content-Type": "application/json"})
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "parsing_budget_exhausted"
    assert not any(call.request.url.path == "/api/v2/memory/get" for call in engine.calls)
    release.set()
    held = await holding
    assert held.status_code == 422  # the held request went on (its extra field is refused)
    # The budget is given back: the same request now passes.
    again = await alice.post("/api/v2/memory/get", content=b"{" + b" " * 1500 + json.dumps(
        GET_BODY).encode()[1:], headers={"Content-Type": "application/json"})
    assert again.status_code == 200
    assert app.services.proxy.parsing.in_use == 0


async def test_a_body_is_charged_with_the_bytes_it_sent_not_the_length_it_declared(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    """Issue 51 (7): one declared length took the whole budget before a byte arrived."""
    engine.post("/api/v2/memory/get").mock(return_value=httpx.Response(200, json={"data": []}))
    started, release = asyncio.Event(), asyncio.Event()

    async def stalled_body() -> AsyncIterator[bytes]:  # declares the whole budget, sends 10
        yield b'{"user_id"'
        started.set()
        await release.wait()

    holding = asyncio.create_task(alice.post(
        "/api/v2/memory/get", content=stalled_body(),
        headers={"Content-Type": "application/json", "Content-Length": str(BUDGET)}))
    await started.wait()
    body = b"{" + b" " * 1500 + json.dumps(GET_BODY).encode()[1:]
    others = [await alice.post("/api/v2/memory/get", content=body,
                               headers={"Content-Type": "application/json"}) for _ in range(3)]
    assert [answer.status_code for answer in others] == [200, 200, 200]
    assert app.services.proxy.parsing.in_use == 10
    release.set()
    holding.cancel()


async def test_budget_is_given_back_after_refused_and_failed_bodies(
    app: Gateway, alice: httpx.AsyncClient
) -> None:
    for body in (b"{not json", b"x" * (BUDGET + 1), b'{"session_id": 5, "messages": []}'):
        response = await alice.post("/memories/add", content=body,
                                    headers={"Content-Type": "application/json"})
        assert response.status_code in (413, 422)
    assert app.services.proxy.parsing.in_use == 0


async def test_search_answer_larger_than_the_cap_is_502(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    big = {"data": {"episodes": [{"id": str(n), "user_id": "alice"} for n in range(1000)]}}
    engine.post("/api/v2/memory/search").mock(return_value=httpx.Response(200, json=big))
    response = await alice.post("/api/v2/memory/search", json={"user_id": "alice", "query": "q"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_answer_too_large"


async def test_unsized_answer_larger_than_the_cap_is_502(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b" " * 1000
        yield b"{}"

    engine.post("/api/v2/memory/search").mock(
        side_effect=lambda request: httpx.Response(200, content=chunks()))
    response = await alice.post("/api/v2/memory/search", json={"user_id": "alice", "query": "q"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_answer_too_large"


async def test_large_plain_answer_still_streams_past_the_cap(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    gateway = create_app(settings.with_values(upstream={"allow_paths": ["GET /big"]}),
                         upstream_transport=httpx.MockTransport(engine.async_handler))
    engine.get("/big").mock(return_value=httpx.Response(200, content=b"z" * 50_000))
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
        response = await alice.get("/big")
    assert response.status_code == 200
    assert response.content == b"z" * 50_000
