"""`/chats/{chat_id}` (SPEC §12): working state read/replace, turn results, the audit list."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.config import Settings
from tests import databases

pytestmark = pytest.mark.both_databases

EMPTY_STATE = {
    "currentFocusAssetId": None,
    "selectedAssetIds": [],
    "lastUploadedAssetIds": [],
    "lastGeneratedAssetIds": [],
    "lastReferencedAssetIds": [],
    "lastResolvedAssetIds": [],
    "activeCanvasNodeIds": [],
    "lastCanvasSnapshot": None,
    "turnCount": 0,
}


async def register(client: httpx.AsyncClient, **fields: Any) -> str:
    body = {"mediaType": "image", "sourceType": "generated", "originalUrl": "https://cdn.test/x"}
    response = await client.post("/assets", json={**body, **fields})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def state_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("chatId", "updatedAtMs")}


async def test_a_chat_without_state_reads_as_defaults(alice: httpx.AsyncClient) -> None:
    response = await alice.get("/chats/new-chat/working-state")
    assert response.status_code == 200
    body = response.json()
    assert body["chatId"] == "new-chat"
    assert body["updatedAtMs"] is None
    assert state_fields(body) == EMPTY_STATE


async def test_put_replaces_the_whole_state_and_get_returns_it(alice: httpx.AsyncClient) -> None:
    a, b = await register(alice), await register(alice)
    full = {
        "currentFocusAssetId": a,
        "selectedAssetIds": [a, b],
        "lastUploadedAssetIds": [a],
        "lastGeneratedAssetIds": [b],
        "lastReferencedAssetIds": [a],
        "lastResolvedAssetIds": [b],
        "activeCanvasNodeIds": ["n1"],
        "lastCanvasSnapshot": [{"nodeId": "n1", "x": 0, "y": 0}],
    }
    put = await alice.put("/chats/c1/working-state", json=full)
    assert put.status_code == 200
    assert state_fields(put.json()) == {**full, "turnCount": 0}
    assert put.json()["updatedAtMs"] > 0
    assert (await alice.get("/chats/c1/working-state")).json() == put.json()

    replaced = await alice.put("/chats/c1/working-state", json={"lastGeneratedAssetIds": [a]})
    assert state_fields(replaced.json()) == {**EMPTY_STATE, "lastGeneratedAssetIds": [a]}


async def test_put_keeps_the_turn_count(alice: httpx.AsyncClient) -> None:
    a = await register(alice)
    for _ in range(2):
        response = await alice.post(
            "/chats/c1/resolve", json={"text": "hi", "uploadedAssetIds": [a]}
        )
        assert response.status_code == 200
    put = await alice.put("/chats/c1/working-state", json={"turnCount": 0})
    assert put.json()["turnCount"] == 2


@pytest.mark.parametrize(
    "field",
    ["currentFocusAssetId", "selectedAssetIds", "lastUploadedAssetIds", "lastGeneratedAssetIds",
     "lastReferencedAssetIds", "lastResolvedAssetIds"],
)
async def test_put_naming_another_users_asset_is_422_and_keeps_the_state(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, field: str
) -> None:
    mine, bobs = await register(alice), await register(bob)
    await alice.put("/chats/c1/working-state", json={"lastGeneratedAssetIds": [mine]})
    value: Any = bobs if field == "currentFocusAssetId" else [mine, bobs]
    response = await alice.put("/chats/c1/working-state", json={field: value})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field
    state = (await alice.get("/chats/c1/working-state")).json()
    assert state["lastGeneratedAssetIds"] == [mine]


async def test_put_rejects_malformed_fields(alice: httpx.AsyncClient) -> None:
    response = await alice.put("/chats/c1/working-state", json={"selectedAssetIds": "a"})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "selectedAssetIds"


async def test_chat_ids_are_scoped_per_user(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    mine = await register(alice)
    await alice.put("/chats/same/working-state", json={"currentFocusAssetId": mine})
    bobs_view = (await bob.get("/chats/same/working-state")).json()
    assert bobs_view["currentFocusAssetId"] is None and bobs_view["updatedAtMs"] is None
    assert (await alice.get("/chats/same/working-state")).json()["currentFocusAssetId"] == mine


async def test_chat_id_longer_than_128_characters_is_422(alice: httpx.AsyncClient) -> None:
    ok = await alice.get(f"/chats/{'c' * 128}/working-state")
    assert ok.status_code == 200
    response = await alice.get(f"/chats/{'c' * 129}/working-state")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "chatId"


async def test_results_become_latest_and_focus_and_change_nothing_else(
    alice: httpx.AsyncClient,
) -> None:
    uploaded, first, second = [await register(alice) for _ in range(3)]
    before = await alice.put(
        "/chats/c1/working-state",
        json={"lastUploadedAssetIds": [uploaded], "currentFocusAssetId": uploaded},
    )
    response = await alice.post("/chats/c1/results", json={"assetIds": [first, second]})
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("trn_")
    assert body["chatId"] == "c1" and body["assetIds"] == [first, second]
    expected = {
        **state_fields(before.json()),
        "lastGeneratedAssetIds": [first, second],
        "currentFocusAssetId": first,
    }
    assert state_fields(body["workingState"]) == expected
    assert state_fields((await alice.get("/chats/c1/working-state")).json()) == expected


@pytest.mark.parametrize("asset_ids", [[], "x", None])
async def test_results_need_a_list_of_asset_ids(
    alice: httpx.AsyncClient, asset_ids: Any
) -> None:
    response = await alice.post("/chats/c1/results", json={"assetIds": asset_ids})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "assetIds"


async def test_results_naming_another_users_asset_are_422_and_not_recorded(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, settings: Settings
) -> None:
    mine, bobs = await register(alice), await register(bob)
    response = await alice.post("/chats/c1/results", json={"assetIds": [mine, bobs]})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "assetIds"
    [(count,)] = databases.rows(settings.storage.database, "SELECT count(*) FROM chat_turn_results")
    assert count == 0
    state = (await alice.get("/chats/c1/working-state")).json()
    assert state["lastGeneratedAssetIds"] == [] and state["currentFocusAssetId"] is None


async def test_resolutions_are_listed_newest_first_with_a_cursor(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    upload = await register(alice)
    texts = [f"turn {n}" for n in range(5)]
    ids = []
    for text in texts:
        response = await alice.post(
            "/chats/c1/resolve", json={"text": text, "uploadedAssetIds": [upload]}
        )
        ids.append(response.json()["resolutionId"])
    await alice.post("/chats/other/resolve", json={"text": "elsewhere"})

    async def page(**params: Any) -> dict[str, Any]:
        response = await alice.get("/chats/c1/resolutions", params={"limit": 2, **params})
        return dict(response.json())

    first = await page()
    assert [r["rawText"] for r in first["resolutions"]] == ["turn 4", "turn 3"]
    second = await page(cursor=first["nextCursor"])
    assert [r["rawText"] for r in second["resolutions"]] == ["turn 2", "turn 1"]
    last = await page(cursor=second["nextCursor"])
    assert [r["rawText"] for r in last["resolutions"]] == ["turn 0"]
    assert last["nextCursor"] is None
    every = (await alice.get("/chats/c1/resolutions")).json()["resolutions"]
    assert [r["id"] for r in every] == ids[::-1]
    assert every[0] == {
        "id": ids[-1],
        "chatId": "c1",
        "rawText": "turn 4",
        "uploadedAssetIds": [upload],
        "selectedAssetIds": [],
        "candidateAssetIds": [upload],
        "resolvedAssetIds": [upload],
        "resolutionMode": "current_upload",
        "confidence": every[0]["confidence"],
        "needsClarification": False,
        "reasoning": every[0]["reasoning"],
        "createdAtMs": every[0]["createdAtMs"],
    }
    assert 0 <= every[0]["confidence"] <= 100 and every[0]["reasoning"]
    assert (await bob.get("/chats/c1/resolutions")).json() == {
        "resolutions": [], "nextCursor": None
    }


@pytest.mark.parametrize(
    ("params", "field"), [({"limit": 0}, "limit"), ({"limit": "x"}, "limit"),
                          ({"cursor": "!!!"}, "cursor"), ({"cursor": "bm9wZQ"}, "cursor")]
)
async def test_bad_resolution_list_parameters_are_422(
    alice: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    response = await alice.get("/chats/c1/resolutions", params=params)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


async def test_chat_routes_need_a_key(anonymous: httpx.AsyncClient) -> None:
    assert (await anonymous.get("/chats/c1/working-state")).status_code == 401
    assert (await anonymous.post("/chats/c1/resolve", json={"text": "x"})).status_code == 401
