"""`/assets` (SPEC §12): registration, the version chain, lineage, relations, ownership."""

from __future__ import annotations

import typing
from typing import Any

import httpx
import pytest

from gateway.app import Gateway
from gateway.config import Settings
from gateway.routes.assets import RelationType, SourceType
from gateway.store import assets
from gateway.store.assets import RELATION_TYPES, SOURCE_TYPES
from tests import databases

pytestmark = pytest.mark.both_databases


async def register(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    body = {"mediaType": "image", "sourceType": "upload", "originalUrl": "https://cdn.test/a.png"}
    response = await client.post("/assets", json={**body, **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


def asset_rows(settings: Settings, user_id: str) -> int:
    [row] = databases.rows(settings.storage.database,
                           "SELECT count(*) FROM media_assets WHERE user_id = ?", user_id)
    return int(row[0])


async def test_asset_without_parents_is_its_own_root(alice: httpx.AsyncClient) -> None:
    created = await register(
        alice,
        chatId="chat-1",
        projectId="p1",
        mediaType="image",
        sourceType="generated",
        originalUrl="https://cdn.test/cat.png",
        previewUrl="https://cdn.test/cat.thumb.png",
        mimeType="image/png",
        width=1024,
        height=768,
        displayName="cat",
        prompt="a cat in the rain",
        modelId="img-model-2",
        sourceMessageId="msg-9",
        sourceNodeId="node-3",
        summary={"caption": "猫"},
        metadata={"seed": 42},
    )
    assert created["id"].startswith("ast_")
    assert created["rootAssetId"] == created["id"]
    assert created["primaryParentAssetId"] is None
    assert created["status"] == "ready"
    assert created["summary"] == {"caption": "猫"}
    assert created["metadata"] == {"seed": 42}
    assert created["width"] == 1024 and created["mimeType"] == "image/png"
    assert created["createdAtMs"] == created["updatedAtMs"] > 0
    assert "userId" not in created
    fetched = await alice.get(f"/assets/{created['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == created


async def test_first_parent_is_primary_and_root_comes_from_it(alice: httpx.AsyncClient) -> None:
    original = await register(alice)
    edit = await register(alice, parentAssetIds=[original["id"]])
    other = await register(alice)
    merged = await register(alice, parentAssetIds=[edit["id"], other["id"]],
                            relationType="generated_from")
    assert edit["rootAssetId"] == original["id"]
    assert edit["primaryParentAssetId"] == original["id"]
    assert merged["primaryParentAssetId"] == edit["id"]
    assert merged["rootAssetId"] == original["id"]
    lineage = (await alice.get(f"/assets/{merged['id']}/lineage")).json()
    parent_links = [
        (r["toAssetId"], r["relationType"], r["parentPosition"]) for r in lineage["relations"]
    ]
    assert sorted(parent_links, key=lambda link: link[2]) == [
        (edit["id"], "generated_from", 0),
        (other["id"], "generated_from", 1),
    ]


@pytest.mark.parametrize("relation_type", RELATION_TYPES)
async def test_every_spec_relation_type_is_accepted_for_parents(
    alice: httpx.AsyncClient, relation_type: str
) -> None:
    parent = await register(alice)
    child = await register(alice, parentAssetIds=[parent["id"]], relationType=relation_type)
    relations = (await alice.get(f"/assets/{child['id']}/lineage")).json()["relations"]
    assert [(r["fromAssetId"], r["toAssetId"], r["relationType"]) for r in relations] == [
        (child["id"], parent["id"], relation_type)
    ]


async def test_parents_default_to_edited_from(alice: httpx.AsyncClient) -> None:
    parent = await register(alice)
    child = await register(alice, parentAssetIds=[parent["id"]])
    relations = (await alice.get(f"/assets/{child['id']}/lineage")).json()["relations"]
    assert [r["relationType"] for r in relations] == ["edited_from"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"relationType": "cousin_of", "parentAssetIds": ["x"]}, "relationType"),
        ({"relationType": "edited_from"}, "relationType"),
        ({"sourceType": "scanned"}, "sourceType"),
        ({"mediaType": ""}, "mediaType"),
        ({"originalUrl": None}, "originalUrl"),
        ({"width": -1}, "width"),
        ({"width": "1024"}, "width"),
        ({"parentAssetIds": "ast_1"}, "parentAssetIds"),
        ({"metadata": [1]}, "metadata"),
    ],
)
async def test_invalid_registration_is_422_naming_the_field(
    alice: httpx.AsyncClient, settings: Settings, fields: dict[str, Any], field: str
) -> None:
    body = {"mediaType": "image", "sourceType": "upload", "originalUrl": "https://cdn.test/a.png"}
    response = await alice.post("/assets", json={**body, **fields})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field
    assert asset_rows(settings, "alice") == 0


async def test_text_that_cannot_be_stored_is_422_not_500(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    body = (
        b'{"mediaType": "image", "sourceType": "upload", "originalUrl": "https://x.test/1",'
        b' "displayName": "\\ud800"}'
    )
    response = await alice.post("/assets", content=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "displayName"
    assert asset_rows(settings, "alice") == 0


async def test_parent_owned_by_another_user_is_422_and_nothing_is_written(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, settings: Settings
) -> None:
    mine = await register(alice)
    bobs = await register(bob)
    response = await alice.post(
        "/assets",
        json={"mediaType": "image", "sourceType": "generated", "originalUrl": "https://x.test/1",
              "parentAssetIds": [mine["id"], bobs["id"]]},
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "parentAssetIds"
    assert bobs["id"] in error["message"] and mine["id"] not in error["message"]
    assert asset_rows(settings, "alice") == 1


async def test_another_users_asset_reads_as_missing(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    bobs = await register(bob)
    for response in (
        await alice.get(f"/assets/{bobs['id']}"),
        await alice.get(f"/assets/{bobs['id']}/lineage"),
        await alice.post(f"/assets/{bobs['id']}/relations",
                         json={"toAssetId": bobs["id"], "relationType": "reference_of"}),
        await alice.get("/assets/ast_doesnotexist"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert (await bob.get(f"/assets/{bobs['id']}")).status_code == 200


async def test_lineage_is_the_chain_to_the_root_and_every_descendant(
    alice: httpx.AsyncClient,
) -> None:
    root = await register(alice, displayName="root")
    edit1 = await register(alice, parentAssetIds=[root["id"]], displayName="edit1")
    edit2 = await register(alice, parentAssetIds=[edit1["id"]], displayName="edit2")
    branch = await register(alice, parentAssetIds=[edit1["id"]], displayName="branch")
    await register(alice, displayName="unrelated")

    def names(items: list[dict[str, Any]]) -> list[str]:
        return [item["displayName"] for item in items]

    middle = (await alice.get(f"/assets/{edit1['id']}/lineage")).json()
    assert middle["assetId"] == edit1["id"] and middle["rootAssetId"] == root["id"]
    assert names(middle["chain"]) == ["root", "edit1"]
    assert names(middle["children"]) == ["edit2", "branch"]
    top = (await alice.get(f"/assets/{root['id']}/lineage")).json()
    assert names(top["chain"]) == ["root"]
    assert names(top["children"]) == ["edit1", "edit2", "branch"]
    leaf = (await alice.get(f"/assets/{edit2['id']}/lineage")).json()
    assert names(leaf["chain"]) == ["root", "edit1", "edit2"]
    assert leaf["children"] == []
    assert branch["rootAssetId"] == root["id"]


async def test_a_child_of_two_parents_descends_from_both(alice: httpx.AsyncClient) -> None:
    first = await register(alice)
    second = await register(alice)
    child = await register(alice, parentAssetIds=[first["id"], second["id"]])
    for parent in (first, second):
        children = (await alice.get(f"/assets/{parent['id']}/lineage")).json()["children"]
        assert [c["id"] for c in children] == [child["id"]]
    chain = (await alice.get(f"/assets/{child['id']}/lineage")).json()["chain"]
    assert [a["id"] for a in chain] == [first["id"], child["id"]]


async def test_relation_is_recorded_once_and_is_not_lineage(alice: httpx.AsyncClient) -> None:
    styled = await register(alice)
    reference = await register(alice)
    body = {"toAssetId": reference["id"], "relationType": "reference_of", "confidence": 80}
    first = await alice.post(f"/assets/{styled['id']}/relations", json=body)
    assert first.status_code == 201
    relation = first.json()
    assert relation["id"].startswith("rel_")
    assert (relation["fromAssetId"], relation["toAssetId"]) == (styled["id"], reference["id"])
    assert (relation["relationType"], relation["confidence"], relation["parentPosition"]) == (
        "reference_of", 80, None
    )
    again = await alice.post(f"/assets/{styled['id']}/relations", json=body | {"confidence": 10})
    assert again.status_code == 200
    assert again.json() == relation
    lineage = (await alice.get(f"/assets/{reference['id']}/lineage")).json()
    assert lineage["children"] == []
    assert [r["id"] for r in lineage["relations"]] == [relation["id"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"relationType": "reference_of"}, "toAssetId"),
        ({"toAssetId": "SELF", "relationType": "reference_of"}, "toAssetId"),
        ({"toAssetId": "OTHER", "relationType": "likes"}, "relationType"),
        ({"toAssetId": "OTHER", "relationType": "reference_of", "confidence": 101}, "confidence"),
        ({"toAssetId": "BOBS", "relationType": "reference_of"}, "toAssetId"),
    ],
)
async def test_invalid_relation_is_422_naming_the_field(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    mine, other, bobs = await register(alice), await register(alice), await register(bob)
    ids = {"SELF": mine["id"], "OTHER": other["id"], "BOBS": bobs["id"]}
    if "toAssetId" in body:
        body = body | {"toAssetId": ids[body["toAssetId"]]}
    response = await alice.post(f"/assets/{mine['id']}/relations", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field
    lineage = (await alice.get(f"/assets/{mine['id']}/lineage")).json()
    assert lineage["relations"] == []


async def test_owned_asset_ids_keeps_only_the_callers(
    app: Gateway, alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    mine = await register(alice)
    bobs = await register(bob)
    db = app.services.db
    found = await assets.owned_asset_ids(db, "alice", [mine["id"], bobs["id"], "ast_nope"])
    assert found == {mine["id"]}
    assert await assets.owned_asset_ids(db, "alice", []) == set()


async def test_asset_routes_need_a_key(anonymous: httpx.AsyncClient) -> None:
    assert (await anonymous.post("/assets", json={})).status_code == 401
    assert (await anonymous.get("/assets/ast_1")).status_code == 401


def test_api_literals_match_the_store_tables() -> None:
    assert typing.get_args(RelationType) == RELATION_TYPES
    assert typing.get_args(SourceType) == SOURCE_TYPES
