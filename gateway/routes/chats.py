"""`/chats/{chat_id}`: a chat's working memory, its turn results, target resolution and its audit.

A chat id is the client's own string (1..128 characters, no `/`), scoped by the caller.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.context import services, user_id
from gateway.disambiguation import disambiguate
from gateway.errors import ValidationFailed
from gateway.resolution import (
    AssetInfo,
    CanvasNode,
    Decision,
    ResolutionInput,
    WorkingState,
    resolve_targets,
)
from gateway.routes.common import api, json_body, json_response, query_params
from gateway.routes.schema import (
    CamelModel,
    CamelRequest,
    JsonObject,
    PageQuery,
    Text,
    cursor_param,
)
from gateway.store import assets, resolutions, working_state
from gateway.store.assets import MediaAsset, UnknownAssets
from gateway.store.cursors import encode_cursor
from gateway.store.database import Database
from gateway.store.resolutions import Audit, Resolution
from gateway.store.working_state import ChatWorkingState

log = logging.getLogger("gateway.resolution")

MAX_CHAT_ID_CHARS = 128
MAX_IDS = 200
MAX_CANVAS_NODES = 500
MAX_TEXT_CHARS = 20_000

Id = Annotated[Text, Field(min_length=1, max_length=128)]
IdList = Annotated[list[Id], Field(max_length=MAX_IDS)]
CanvasSnapshot = Annotated[list[JsonObject], Field(max_length=MAX_CANVAS_NODES)]


# --- working state -----------------------------------------------------------------------------


class WorkingStateIn(CamelRequest):
    """The whole state; omitted fields become empty. `turnCount` is not writable."""

    current_focus_asset_id: Id | None = None
    selected_asset_ids: IdList = []
    last_uploaded_asset_ids: IdList = []
    last_generated_asset_ids: IdList = []
    last_referenced_asset_ids: IdList = []
    last_resolved_asset_ids: IdList = []
    active_canvas_node_ids: IdList = []
    last_canvas_snapshot: CanvasSnapshot | None = None


class WorkingStateOut(CamelModel):
    chat_id: str
    current_focus_asset_id: str | None
    selected_asset_ids: list[str]
    last_uploaded_asset_ids: list[str]
    last_generated_asset_ids: list[str]
    last_referenced_asset_ids: list[str]
    last_resolved_asset_ids: list[str]
    active_canvas_node_ids: list[str]
    last_canvas_snapshot: list[dict[str, Any]] | None
    turn_count: int
    updated_at_ms: int | None = Field(description="null until the chat has a stored state")

    @classmethod
    def of(cls, chat_id: str, state: ChatWorkingState) -> WorkingStateOut:
        return cls(chat_id=chat_id, **state.__dict__)


# --- turn results ------------------------------------------------------------------------------


class ResultsIn(CamelRequest):
    asset_ids: Annotated[list[Id], Field(min_length=1, max_length=MAX_IDS)]


class ResultsOut(CamelModel):
    id: str
    chat_id: str
    asset_ids: list[str]
    created_at_ms: int
    working_state: WorkingStateOut


# --- resolution --------------------------------------------------------------------------------


class CanvasNodeIn(CamelRequest):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, strict=True, allow_inf_nan=False
    )

    node_id: Id
    asset_id: Id | None = None
    url: Annotated[Text, Field(max_length=8192)]
    title: Annotated[Text, Field(max_length=512)] | None = None
    prompt: Annotated[Text, Field(max_length=20_000)] | None = None
    x: float
    y: float
    width: Annotated[float, Field(ge=0)] | None = None
    height: Annotated[float, Field(ge=0)] | None = None
    is_selected: bool = False


class ContextPayload(CamelRequest):
    source: Annotated[Text, Field(max_length=64)] | None = None
    project_id: Id | None = None
    selected_node_ids: IdList = []
    selected_asset_ids: IdList = []
    focus_policy: Literal["auto", "selected", "latest_result", "original"] = "auto"
    canvas_image_nodes: Annotated[list[CanvasNodeIn], Field(max_length=MAX_CANVAS_NODES)] = []

    @property
    def states_selection(self) -> bool:
        """Whether the request says what is selected (an empty selection included)."""
        return bool(
            {"selected_node_ids", "selected_asset_ids", "canvas_image_nodes"}
            & self.model_fields_set
        )


class ResolveIn(CamelRequest):
    text: Annotated[Text, Field(max_length=MAX_TEXT_CHARS)]
    uploaded_asset_ids: IdList = []
    context_payload: ContextPayload = ContextPayload()


class ResolveOut(CamelModel):
    resolution_id: str
    target_asset_ids: list[str]
    candidate_asset_ids: list[str]
    resolution_mode: str
    confidence: int
    needs_clarification: bool
    reason: str


class ResolutionOut(CamelModel):
    id: str
    chat_id: str
    raw_text: str
    uploaded_asset_ids: list[str]
    selected_asset_ids: list[str]
    candidate_asset_ids: list[str]
    resolved_asset_ids: list[str]
    resolution_mode: str
    confidence: int
    needs_clarification: bool
    reasoning: str
    created_at_ms: int

    @classmethod
    def of(cls, found: Resolution) -> ResolutionOut:
        return cls(
            id=found.id, chat_id=found.chat_id, created_at_ms=found.created_at_ms,
            **found.audit.__dict__,
        )


class ResolutionsPage(CamelModel):
    resolutions: list[ResolutionOut] = Field(description="newest first")
    next_cursor: str | None = Field(description="pass as `cursor` for older ones; null at the end")


# --- helpers -----------------------------------------------------------------------------------


def _chat_id(request: Request) -> str:
    chat_id: str = request.path_params["chat_id"]
    if not 1 <= len(chat_id) <= MAX_CHAT_ID_CHARS:
        raise ValidationFailed(
            f"chatId: must be 1..{MAX_CHAT_ID_CHARS} characters", field="chatId"
        )
    return chat_id


async def _require_owned(db: Database, caller: str, fields: dict[str, list[str]]) -> None:
    """422 naming the first field that holds an id which is not one of the caller's assets."""
    owned = await assets.owned_asset_ids(db, caller, (i for ids in fields.values() for i in ids))
    for field, ids in fields.items():
        missing = [i for i in ids if i not in owned]
        if missing:
            raise ValidationFailed(
                f"{field}: unknown asset ids: {', '.join(missing)}", field=field
            )


def _asset_info(asset: MediaAsset) -> AssetInfo:
    return AssetInfo(
        id=asset.id,
        root_asset_id=asset.root_asset_id,
        primary_parent_asset_id=asset.primary_parent_asset_id,
        source_type=asset.source_type,
        media_type=asset.media_type,
        created_at_ms=asset.created_at_ms,
        display_name=asset.display_name,
        prompt=asset.prompt,
    )


def _in_registration_order(ids: list[str], pool: dict[str, AssetInfo]) -> tuple[str, ...]:
    order = {asset_id: index for index, asset_id in enumerate(pool)}
    return tuple(sorted((i for i in ids if i in pool), key=order.__getitem__))


def _snapshot(node: CanvasNode) -> dict[str, Any]:
    """A canvas node as remembered: its place and identity, not its (possibly long) prompt."""
    kept = dataclasses.asdict(node)
    del kept["prompt"]
    return kept


def state_after(
    state: ChatWorkingState, inp: ResolutionInput, decision: Decision, states_selection: bool
) -> ChatWorkingState:
    """The working state once a turn is resolved: it counts, and remembers what it saw and chose.

    A clarification keeps the previous focus and resolved assets; an upload-less turn keeps the
    last uploads; a turn without canvas nodes keeps the last canvas.
    """
    targets = list(decision.target_asset_ids)
    canvas = inp.canvas_nodes
    return dataclasses.replace(
        state,
        turn_count=state.turn_count + 1,
        current_focus_asset_id=targets[0] if targets else state.current_focus_asset_id,
        last_resolved_asset_ids=targets or state.last_resolved_asset_ids,
        last_referenced_asset_ids=(
            targets if decision.mode == "text_reference" else state.last_referenced_asset_ids
        ),
        last_uploaded_asset_ids=list(inp.uploaded_asset_ids) or state.last_uploaded_asset_ids,
        selected_asset_ids=(
            list(inp.selected_asset_ids) if states_selection else state.selected_asset_ids
        ),
        active_canvas_node_ids=(
            [n.nodeId for n in canvas if n.assetId in targets]
            if canvas
            else state.active_canvas_node_ids
        ),
        last_canvas_snapshot=(
            [_snapshot(n) for n in canvas] if canvas else state.last_canvas_snapshot
        ),
    )


async def _resolution_input(
    db: Database, caller: str, chat_id: str, body: ResolveIn, state: ChatWorkingState
) -> ResolutionInput:
    context = body.context_payload
    uploads = list(dict.fromkeys(body.uploaded_asset_ids))
    await _require_owned(
        db,
        caller,
        {
            "uploadedAssetIds": uploads,
            "contextPayload.selectedAssetIds": context.selected_asset_ids,
        },
    )
    # A canvas may show images that are not (the caller's) assets: such a node keeps its place
    # for positions and ordinals but can never be a target.
    on_canvas = await assets.owned_asset_ids(
        db, caller, (n.asset_id for n in context.canvas_image_nodes if n.asset_id)
    )
    nodes = tuple(
        CanvasNode(
            nodeId=n.node_id,
            assetId=n.asset_id if n.asset_id in on_canvas else None,
            url=n.url,
            x=n.x,
            y=n.y,
            width=n.width,
            height=n.height,
            title=n.title,
            prompt=n.prompt,
            isSelected=n.is_selected,
        )
        for n in context.canvas_image_nodes
    )
    selected_nodes = set(context.selected_node_ids)
    selected = [
        *context.selected_asset_ids,
        *(n.assetId for n in nodes if n.assetId and (n.isSelected or n.nodeId in selected_nodes)),
    ]
    named = [*uploads, *selected, *on_canvas, *state.asset_ids()]
    pool = {
        a.id: _asset_info(a)
        for a in await assets.resolution_pool(db, caller, chat_id, named)
    }
    latest = await working_state.latest_result(db, caller, chat_id)
    multi = await working_state.latest_result(db, caller, chat_id, min_assets=2)
    return ResolutionInput(
        text=body.text,
        uploaded_asset_ids=tuple(uploads),
        selected_asset_ids=tuple(dict.fromkeys(selected)),
        selected_node_ids=tuple(context.selected_node_ids),
        focus_policy=context.focus_policy,
        canvas_nodes=nodes,
        assets=pool,
        working_state=WorkingState(
            current_focus_asset_id=state.current_focus_asset_id,
            selected_asset_ids=tuple(state.selected_asset_ids),
            last_uploaded_asset_ids=tuple(state.last_uploaded_asset_ids),
            last_generated_asset_ids=tuple(state.last_generated_asset_ids),
            last_referenced_asset_ids=tuple(state.last_referenced_asset_ids),
            last_resolved_asset_ids=tuple(state.last_resolved_asset_ids),
            active_canvas_node_ids=tuple(state.active_canvas_node_ids),
            turn_count=state.turn_count,
        ),
        latest_result_ids=_in_registration_order(latest.asset_ids if latest else [], pool),
        last_multi_result_ids=_in_registration_order(multi.asset_ids if multi else [], pool),
    )


# --- handlers ----------------------------------------------------------------------------------


@api(summary="A chat's working memory (defaults when none is stored)", response=WorkingStateOut,
     tag="chats")
async def read_working_state(request: Request) -> Response:
    chat_id = _chat_id(request)
    state = await working_state.get(services(request).db, user_id(request), chat_id)
    return json_response(WorkingStateOut.of(chat_id, state))


@api(summary="Replace a chat's working memory", request=WorkingStateIn, response=WorkingStateOut,
     tag="chats")
async def replace_working_state(request: Request) -> Response:
    chat_id = _chat_id(request)
    body = await json_body(request, WorkingStateIn)
    db, caller = services(request).db, user_id(request)
    await _require_owned(
        db,
        caller,
        {
            "currentFocusAssetId": [body.current_focus_asset_id] if body.current_focus_asset_id
            else [],
            "selectedAssetIds": body.selected_asset_ids,
            "lastUploadedAssetIds": body.last_uploaded_asset_ids,
            "lastGeneratedAssetIds": body.last_generated_asset_ids,
            "lastReferencedAssetIds": body.last_referenced_asset_ids,
            "lastResolvedAssetIds": body.last_resolved_asset_ids,
        },
    )
    state = await working_state.replace(
        db, caller, chat_id, ChatWorkingState(**body.model_dump())
    )
    return json_response(WorkingStateOut.of(chat_id, state))


@api(summary="Record a turn's result assets: the latest results and the new focus",
     request=ResultsIn, response=ResultsOut, status=201, tag="chats")
async def record_results(request: Request) -> Response:
    chat_id = _chat_id(request)
    body = await json_body(request, ResultsIn)
    try:
        result, state = await working_state.record_result(
            services(request).db, user_id(request), chat_id, body.asset_ids
        )
    except UnknownAssets as exc:
        raise ValidationFailed(
            f"assetIds: unknown asset ids: {', '.join(exc.missing)}", field="assetIds"
        ) from None
    out = ResultsOut(
        id=result.id,
        chat_id=chat_id,
        asset_ids=result.asset_ids,
        created_at_ms=result.created_at_ms,
        working_state=WorkingStateOut.of(chat_id, state),
    )
    return json_response(out, 201)


@api(summary="Which images this turn means (rules first, a model only for ties)",
     request=ResolveIn, response=ResolveOut, tag="chats")
async def resolve(request: Request) -> Response:
    chat_id = _chat_id(request)
    body = await json_body(request, ResolveIn)
    svc, caller = services(request), user_id(request)
    state = await working_state.get(svc.db, caller, chat_id)
    inp = await _resolution_input(svc.db, caller, chat_id, body, state)
    decision = await disambiguate(svc.llm, inp, resolve_targets(inp))
    audit = Audit(
        raw_text=body.text,
        uploaded_asset_ids=list(inp.uploaded_asset_ids),
        selected_asset_ids=list(inp.selected_asset_ids),
        candidate_asset_ids=list(decision.candidate_asset_ids),
        resolved_asset_ids=list(decision.target_asset_ids),
        resolution_mode=decision.mode,
        confidence=decision.confidence,
        needs_clarification=decision.needs_clarification,
        reasoning=decision.reason,
    )
    states_selection = body.context_payload.states_selection
    resolution, _ = await resolutions.record(
        svc.db,
        caller,
        chat_id,
        audit,
        lambda stored: state_after(stored, inp, decision, states_selection),
    )
    svc.metrics.resolution(decision.mode)
    log.info(
        json.dumps(
            {
                "chatId": chat_id,
                "hasCurrentUpload": bool(inp.uploaded_asset_ids),
                "selectedAssetCount": len(inp.selected_asset_ids),
                "candidateAssetCount": len(decision.candidate_asset_ids),
                "resolvedAssetCount": len(decision.target_asset_ids),
                "resolutionMode": decision.mode,
                "confidence": decision.confidence,
                "needsClarification": decision.needs_clarification,
            },
            ensure_ascii=False,
        )
    )
    return json_response(
        ResolveOut(
            resolution_id=resolution.id,
            target_asset_ids=list(decision.target_asset_ids),
            candidate_asset_ids=list(decision.candidate_asset_ids),
            resolution_mode=decision.mode,
            confidence=decision.confidence,
            needs_clarification=decision.needs_clarification,
            reason=decision.reason,
        )
    )


@api(summary="A chat's resolution audit, newest first", query=PageQuery,
     response=ResolutionsPage, tag="chats")
async def list_resolutions(request: Request) -> Response:
    chat_id = _chat_id(request)
    query = query_params(request, PageQuery)
    found = await resolutions.list_for_chat(
        services(request).db, user_id(request), chat_id, query.limit + 1,
        cursor_param(query.cursor, "cursor"),
    )
    page = found[: query.limit]
    next_cursor = (
        encode_cursor(page[-1].created_at_ms, page[-1].id) if len(found) > query.limit else None
    )
    return json_response(
        ResolutionsPage(resolutions=[ResolutionOut.of(r) for r in page], next_cursor=next_cursor)
    )


routes = [
    Route("/chats/{chat_id}/working-state", read_working_state, methods=["GET"]),
    Route("/chats/{chat_id}/working-state", replace_working_state, methods=["PUT"]),
    Route("/chats/{chat_id}/results", record_results, methods=["POST"]),
    Route("/chats/{chat_id}/resolve", resolve, methods=["POST"]),
    Route("/chats/{chat_id}/resolutions", list_resolutions, methods=["GET"]),
]
