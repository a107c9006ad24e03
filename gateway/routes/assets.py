"""`/assets`: register media assets, read them, their lineage, and relations between them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import NotFound, ValidationFailed
from gateway.routes.common import api, json_body, json_response
from gateway.routes.schema import CamelModel, CamelRequest, JsonObject, Text
from gateway.services import services, user_id
from gateway.store import assets
from gateway.store.assets import MediaAsset, NewAsset, RelationType, SourceType, UnknownAssets

AssetId = Annotated[Text, Field(min_length=1, max_length=64)]
ShortText = Annotated[Text, Field(min_length=1, max_length=128)]
Url = Annotated[Text, Field(min_length=1, max_length=8192)]
MAX_PARENTS = 16


# NewAsset's fields with the request's checks, plus the parents and their relation, which the
# store takes as separate arguments (they become relation rows, not asset columns).
class AssetIn(CamelRequest):
    chat_id: ShortText | None = None
    project_id: ShortText | None = None
    media_type: Annotated[str, Field(min_length=1, max_length=32)]
    source_type: SourceType
    original_url: Url
    preview_url: Url | None = None
    mime_type: Annotated[Text, Field(min_length=1, max_length=255)] | None = None
    width: Annotated[int, Field(ge=0, lt=2**31)] | None = None
    height: Annotated[int, Field(ge=0, lt=2**31)] | None = None
    display_name: Annotated[Text, Field(max_length=512)] | None = None
    prompt: Annotated[Text, Field(max_length=20_000)] | None = None
    model_id: ShortText | None = None
    source_message_id: ShortText | None = None
    source_node_id: ShortText | None = None
    parent_asset_ids: Annotated[list[AssetId], Field(max_length=MAX_PARENTS)] = []
    relation_type: RelationType | None = None
    summary: JsonObject = Field(default_factory=dict)
    metadata: JsonObject = Field(default_factory=dict)


# The stored records are the answers (gateway/store/records.py).
AssetOut = MediaAsset
RelationOut = assets.Relation


class RelationIn(CamelRequest):
    to_asset_id: AssetId
    relation_type: RelationType
    confidence: Annotated[int, Field(ge=0, le=100)] = 100


class LineageOut(CamelModel):
    asset_id: str
    root_asset_id: str
    chain: list[AssetOut] = Field(description="root first, the asset itself last")
    children: list[AssetOut] = Field(
        description="every asset derived from this one (children, their children, ...), "
        "in registration order"
    )
    relations: list[RelationOut] = Field(description="every relation from or to this asset")


def _unknown(exc: UnknownAssets, field: str) -> ValidationFailed:
    return ValidationFailed(f"{field}: unknown asset ids: {', '.join(exc.missing)}", field=field)


async def _owned(request: Request) -> MediaAsset:
    asset_id = request.path_params["asset_id"]
    asset = await assets.get(services(request).db, user_id(request), asset_id)
    if asset is None:
        raise NotFound(f"no asset {asset_id}")
    return asset


@api(summary="Register a media asset", request=AssetIn, response=AssetOut, status=201, tag="assets")
async def register_asset(request: Request) -> Response:
    body = await json_body(request, AssetIn)
    if body.relation_type is not None and not body.parent_asset_ids:
        raise ValidationFailed("relationType: needs parentAssetIds", field="relationType")
    new = NewAsset(**body.model_dump(exclude={"parent_asset_ids", "relation_type"}))
    try:
        asset = await assets.register(
            services(request).db,
            user_id(request),
            new,
            body.parent_asset_ids,
            body.relation_type or assets.DEFAULT_PARENT_RELATION,
        )
    except UnknownAssets as exc:
        raise _unknown(exc, "parentAssetIds") from None
    return json_response(asset, 201)


@api(summary="Read a media asset", response=AssetOut, tag="assets")
async def read_asset(request: Request) -> Response:
    return json_response(await _owned(request))


@api(summary="An asset's version chain back to its root, and everything derived from it",
     response=LineageOut, tag="assets")
async def read_lineage(request: Request) -> Response:
    asset = await _owned(request)
    found = await assets.lineage(services(request).db, user_id(request), asset.id)
    if found is None:  # vanished between the two reads; assets are never deleted today
        raise NotFound(f"no asset {asset.id}")
    return json_response(
        LineageOut(
            asset_id=asset.id,
            root_asset_id=asset.root_asset_id,
            chain=found.chain,
            children=found.descendants,
            relations=found.relations,
        )
    )


@api(summary="Relate this asset to another of the caller's assets (idempotent)",
     request=RelationIn, response=RelationOut, status=201, also=(200,), tag="assets")
async def add_relation(request: Request) -> Response:
    asset = await _owned(request)
    body = await json_body(request, RelationIn)
    if body.to_asset_id == asset.id:
        raise ValidationFailed("toAssetId: an asset cannot relate to itself", field="toAssetId")
    try:
        relation, created = await assets.add_relation(
            services(request).db,
            user_id(request),
            asset.id,
            body.to_asset_id,
            body.relation_type,
            body.confidence,
        )
    except UnknownAssets as exc:
        raise _unknown(exc, "toAssetId") from None
    return json_response(relation, 201 if created else 200)


routes = [
    Route("/assets", register_asset, methods=["POST"]),
    Route("/assets/{asset_id}", read_asset, methods=["GET"]),
    Route("/assets/{asset_id}/lineage", read_lineage, methods=["GET"]),
    Route("/assets/{asset_id}/relations", add_relation, methods=["POST"]),
]
