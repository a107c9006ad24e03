"""Model disambiguation among tied candidates (SPEC §12), with the model faked by respx."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.resolution.disambiguation import MAX_PROMPT_CHARS, parse_choice
from tests.conftest import client_for

pytestmark = pytest.mark.both_databases

MODEL = "http://llm.test/v1"
TIE_TEXT = "左边那张有猫的，加个帽子"


@pytest.fixture
def llm() -> respx.MockRouter:
    return respx.MockRouter(base_url=MODEL, assert_all_called=False)


def with_model(settings: Settings, engine: respx.MockRouter, llm: respx.MockRouter,
               configured: bool = True) -> Gateway:
    if configured:
        settings = settings.with_values(llm={"base_url": MODEL, "model": "m"})
    return create_app(
        settings,
        upstream_transport=httpx.MockTransport(engine.async_handler),
        llm_transport=httpx.MockTransport(llm.async_handler),
    )


@pytest.fixture
async def client(
    settings: Settings, engine: respx.MockRouter, llm: respx.MockRouter,
    make_key: Callable[[str], str],
) -> AsyncIterator[httpx.AsyncClient]:
    gateway = with_model(settings, engine, llm)
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
        yield alice


def answer(content: Any) -> httpx.Response:
    text = content if isinstance(content, str) else json.dumps(content)
    return httpx.Response(200, json={"choices": [{"message": {"content": text}}]})


async def tie(client: httpx.AsyncClient) -> tuple[list[str], dict[str, Any]]:
    """A 2×2 canvas and "the left one": top-left (a dog) and bottom-left (a cat) tie."""
    ids = []
    for name, prompt in (("tl", "a dog"), ("tr", "a tree"), ("bl", "a cat " + "x" * 500),
                         ("br", "a car")):
        response = await client.post("/assets", json={
            "chatId": "c1", "mediaType": "image", "sourceType": "generated", "prompt": prompt,
            "displayName": name, "originalUrl": f"https://cdn.test/{name}.png",
        })
        ids.append(response.json()["id"])
    spots = [(0, 0), (300, 0), (0, 300), (300, 300)]
    canvas = [
        {"nodeId": f"n{i}", "assetId": asset_id, "url": "https://cdn.test/n.png", "x": x, "y": y,
         "width": 200, "height": 200, "title": f"node {i}"}
        for i, (asset_id, (x, y)) in enumerate(zip(ids, spots, strict=True))
    ]
    body = {"text": TIE_TEXT, "contextPayload": {"canvasImageNodes": canvas}}
    return ids, body


async def resolve(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/chats/c1/resolve", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_the_models_pick_among_tied_candidates_is_the_target(
    client: httpx.AsyncClient, llm: respx.MockRouter
) -> None:
    route = llm.post("/chat/completions").mock(return_value=answer(None))
    ids, body = await tie(client)
    route.mock(
        return_value=answer({"assetId": ids[2], "confidence": 82, "needsClarification": False})
    )
    decided = await resolve(client, body)
    assert decided["resolutionMode"] == "llm_disambiguation"
    assert decided["targetAssetIds"] == [ids[2]]
    assert decided["confidence"] == 82
    assert decided["needsClarification"] is False
    assert ids[2] in decided["reason"]

    assert route.call_count == 1
    sent = json.loads(route.calls.last.request.content)
    assert sent["model"] == "m"
    assert sent["response_format"] == {"type": "json_object"}
    question = json.loads(sent["messages"][-1]["content"])
    assert question["message"] == TIE_TEXT
    summaries = {c["assetId"]: c for c in question["candidates"]}
    assert set(summaries) == {ids[0], ids[2]}
    assert summaries[ids[2]]["name"] == "bl"
    assert summaries[ids[2]]["prompt"].startswith("a cat")
    assert len(summaries[ids[2]]["prompt"]) == MAX_PROMPT_CHARS
    assert summaries[ids[2]]["canvas"] == {"x": 0.0, "y": 300.0, "title": "node 2"}

    audit = (await client.get("/chats/c1/resolutions")).json()["resolutions"][0]
    assert (audit["resolutionMode"], audit["resolvedAssetIds"]) == ("llm_disambiguation", [ids[2]])
    state = (await client.get("/chats/c1/working-state")).json()
    assert state["currentFocusAssetId"] == ids[2]


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(httpx.ReadTimeout("slow"), id="timeout"),
        pytest.param(httpx.ConnectError("down"), id="unreachable"),
        pytest.param(httpx.Response(500, json={"error": "boom"}), id="server-error"),
        pytest.param(answer("I think it is the cat"), id="not-json"),
        pytest.param(answer("[1, 2]"), id="json-not-object"),
        pytest.param(answer({"assetId": "ast_other", "confidence": 90,
                             "needsClarification": False}), id="id-not-tied"),
        pytest.param(answer({"assetId": "TR", "confidence": 90,
                             "needsClarification": False}), id="untied-candidate"),
        pytest.param(answer({"assetId": "BL", "confidence": 90,
                             "needsClarification": True}), id="model-asks"),
        pytest.param(answer({"assetId": "BL", "confidence": 140,
                             "needsClarification": False}), id="confidence-over-100"),
        pytest.param(answer({"assetId": "BL", "confidence": "high",
                             "needsClarification": False}), id="confidence-not-int"),
        pytest.param(answer({"assetId": "BL", "confidence": 20,
                             "needsClarification": False}), id="confidence-too-low"),
        pytest.param(answer({"assetId": "BL", "confidence": 90}), id="field-missing"),
    ],
)
async def test_an_unusable_model_answer_falls_back_to_clarification(
    client: httpx.AsyncClient, llm: respx.MockRouter, reply: Any
) -> None:
    route = llm.post("/chat/completions")
    ids, body = await tie(client)
    if isinstance(reply, httpx.Response) and reply.status_code == 200:
        content = reply.json()["choices"][0]["message"]["content"]
        content = content.replace('"BL"', json.dumps(ids[2])).replace('"TR"', json.dumps(ids[1]))
        reply = answer(content)
    if isinstance(reply, Exception):
        route.mock(side_effect=reply)
    else:
        route.mock(return_value=reply)
    decided = await resolve(client, body)
    assert route.call_count == 1
    assert decided["resolutionMode"] == "clarification"
    assert decided["needsClarification"] is True
    assert decided["targetAssetIds"] == []
    assert set(decided["candidateAssetIds"]) == {ids[0], ids[2]}
    audit = (await client.get("/chats/c1/resolutions")).json()["resolutions"][0]
    assert audit["resolutionMode"] == "clarification" and audit["needsClarification"] is True


async def test_without_llm_configured_no_model_is_called(
    settings: Settings, engine: respx.MockRouter, llm: respx.MockRouter,
    make_key: Callable[[str], str],
) -> None:
    route = llm.post("/chat/completions").mock(
        return_value=answer({"assetId": "x", "confidence": 90, "needsClarification": False})
    )
    gateway = with_model(settings, engine, llm, configured=False)
    async with gateway.running(), client_for(gateway, make_key("alice")) as alice:
        ids, body = await tie(alice)
        decided = await resolve(alice, body)
    assert decided["resolutionMode"] == "clarification"
    assert set(decided["candidateAssetIds"]) == {ids[0], ids[2]}
    assert route.call_count == 0


async def test_no_model_call_when_the_rules_decide(
    client: httpx.AsyncClient, llm: respx.MockRouter
) -> None:
    route = llm.post("/chat/completions").mock(return_value=answer("{}"))
    ids, body = await tie(client)
    body["text"] = "右下那张"
    decided = await resolve(client, body)
    assert (decided["resolutionMode"], decided["targetAssetIds"]) == ("text_reference", [ids[3]])
    body["text"] = "随便改改"  # nothing to go on, but no tie either
    decided = await resolve(client, body)
    assert decided["resolutionMode"] != "llm_disambiguation"
    assert route.call_count == 0


@pytest.mark.parametrize(
    ("given", "picked"),
    [
        ({"assetId": "a", "confidence": 50, "needsClarification": False}, ("a", 50)),
        ({"assetId": "b", "confidence": 100, "needsClarification": False}, ("b", 100)),
        ({"assetId": "a", "confidence": True, "needsClarification": False}, None),
        ({"assetId": "a", "confidence": 80.0, "needsClarification": False}, None),
        ({"assetId": "a", "confidence": -1, "needsClarification": False}, None),
        ({"assetId": "a", "confidence": 80, "needsClarification": "no"}, None),
        ({"assetId": None, "confidence": 80, "needsClarification": False}, None),
        (None, None),
    ],
)
def test_parse_choice_accepts_only_the_structured_form(
    given: dict[str, Any] | None, picked: tuple[str, int] | None
) -> None:
    choice = parse_choice(given, ("a", "b"))
    assert (None if choice is None else (choice.asset_id, choice.confidence)) == picked
