"""The optional rolling summary (SPEC §11): every N messages, off the request path, never fatal."""

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
import respx

from gateway.app import Gateway, create_app
from gateway.config import Settings
from tests.conftest import client_for
from tests.test_agents import make_agent, say

pytestmark = pytest.mark.both_databases

LLM = "http://llm.test/v1"


def completion(text: str) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"role": "assistant",
                                                               "content": text}}]})


@asynccontextmanager
async def gateway_with_llm(
    settings: Settings, engine: respx.MockRouter, llm: respx.MockRouter, **llm_settings: object
) -> AsyncIterator[Gateway]:
    gateway = create_app(
        settings.with_values(llm={"base_url": LLM, "model": "m", **llm_settings}),
        upstream_transport=httpx.MockTransport(engine.async_handler),
        llm_transport=httpx.MockTransport(llm.async_handler),
    )
    async with gateway.running():
        yield gateway


async def default_conversation(client: httpx.AsyncClient) -> tuple[str, str]:
    agent = await make_agent(client)
    body = (await client.get(f"/agents/{agent['id']}/conversation")).json()
    return agent["id"], body["conversationId"]


async def test_summary_is_refreshed_every_n_messages(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    llm = respx.MockRouter(base_url=LLM)
    route = llm.post("/chat/completions").mock(
        side_effect=[completion("They talk about cats."), completion("Cats, then dogs.")]
    )
    async with gateway_with_llm(settings, engine, llm, summary_every_n_messages=3) as gateway, \
            client_for(gateway, make_key("alice")) as alice:
        agent_id, conversation_id = await default_conversation(alice)
        for i, text in enumerate(["I like cats", "tabby ones", "ok"]):
            await say(alice, conversation_id, f"k{i}", text)
        await gateway.services.drain()
        assert route.call_count == 1
        sent = json.loads(route.calls.last.request.content)
        assert sent["model"] == "m"
        prompt = sent["messages"][-1]["content"]
        assert "user: I like cats" in prompt and "user: tabby ones" in prompt

        body = (await alice.get(f"/agents/{agent_id}/conversation")).json()
        assert body["summary"] == "They talk about cats."
        # A retry appends nothing, so it does not count towards the next refresh.
        await say_again(alice, conversation_id)
        for i, text in enumerate(["now dogs", "big ones", "bye"]):
            await say(alice, conversation_id, f"d{i}", text)
        await gateway.services.drain()
        assert route.call_count == 2
        prompt = json.loads(route.calls.last.request.content)["messages"][-1]["content"]
        assert "They talk about cats." in prompt
        assert "now dogs" in prompt and "I like cats" not in prompt
        context = (await alice.get(f"/agents/{agent_id}/context")).json()
        assert context["summary"] == "Cats, then dogs."


async def say_again(client: httpx.AsyncClient, conversation_id: str) -> None:
    response = await client.post(f"/conversations/{conversation_id}/messages",
                                 json={"clientMessageId": "k0", "role": "user",
                                       "content": "I like cats"})
    assert response.status_code == 200


async def test_the_model_call_runs_off_the_request_path(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_model(request: httpx.Request) -> httpx.Response:
        started.set()
        await release.wait()
        return completion("late summary")

    llm = respx.MockRouter(base_url=LLM)
    route = llm.post("/chat/completions").mock(side_effect=slow_model)
    async with gateway_with_llm(settings, engine, llm, summary_every_n_messages=1) as gateway, \
            client_for(gateway, make_key("alice")) as alice:
        agent_id, conversation_id = await default_conversation(alice)
        try:
            posted = await asyncio.wait_for(say(alice, conversation_id, "k", "hello"), 5)
            assert posted["conversation"]["summary"] is None
            # The post has answered; the model call starts afterwards and is still pending.
            await asyncio.wait_for(started.wait(), 5)
            assert gateway.services.background
        finally:
            release.set()
        await gateway.services.drain()
        assert route.call_count == 1
        body = (await alice.get(f"/agents/{agent_id}/conversation")).json()
        assert body["summary"] == "late summary"


async def test_a_failing_model_never_fails_a_message_post(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    llm = respx.MockRouter(base_url=LLM)
    route = llm.post("/chat/completions").mock(
        side_effect=[httpx.Response(500), httpx.ConnectError("down"),
                     httpx.Response(200, json={"unexpected": True})]
    )
    async with gateway_with_llm(settings, engine, llm, summary_every_n_messages=1) as gateway, \
            client_for(gateway, make_key("alice")) as alice:
        agent_id, conversation_id = await default_conversation(alice)
        for i in range(3):
            response = await alice.post(
                f"/conversations/{conversation_id}/messages",
                json={"clientMessageId": f"k{i}", "role": "user", "content": f"m{i}"},
            )
            assert response.status_code == 201
        await gateway.services.drain()
        assert route.call_count == 3
        body = (await alice.get(f"/agents/{agent_id}/conversation")).json()
        assert body["summary"] is None and body["messageCount"] == 3


async def test_without_llm_settings_no_model_is_called(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    llm = respx.MockRouter(base_url=LLM, assert_all_called=False)
    route = llm.route().mock(return_value=completion("should not happen"))
    gateway = create_app(
        settings.with_values(llm={"summary_every_n_messages": 1}),
        upstream_transport=httpx.MockTransport(engine.async_handler),
        llm_transport=httpx.MockTransport(llm.async_handler),
    )
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
        assert gateway.services.llm is None
        agent_id, conversation_id = await default_conversation(alice)
        for i in range(4):
            await say(alice, conversation_id, f"k{i}", f"m{i}")
        await gateway.services.drain()
        body = (await alice.get(f"/agents/{agent_id}/conversation")).json()
    assert not route.called
    assert body["summary"] is None
