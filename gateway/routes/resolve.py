"""`POST /chats/{chat_id}/resolve`: which images a chat turn means. Builds the `ResolutionInput`,
runs the rules (a model only for ties), then records the audit and the chat's new working state.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.resolution.disambiguation import disambiguate
from gateway.resolution.resolver import (
    AssetInfo,
    CanvasNode,
    Decision,
    ResolutionInput,
    ResultTurn,
    WorkingState,
    resolve_targets,
)
from gateway.routes.chats import (
    MAX_CANVAS_NODES,
    Id,
    IdList,
    chat_id_param,
    require_owned_assets,
)
from gateway.routes.common import api, json_body, json_response
from gateway.routes.schema import CamelModel, CamelRequest, Text
from gateway.services import services, user_id
from gateway.store import assets, resolutions, working_state
from gateway.store.assets import MediaAsset
from gateway.store.database import Database
from gateway.store.resolutions import Audit
from gateway.store.working_state import ChatWorkingState

log = logging.getLogger("gateway.resolution")

MAX_TEXT_CHARS = 20_000


# --- request and response ----------------------------------------------------------------------


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


# The decision under the API's names (targets, reason), not the stored Audit of what it saw.
class ResolveOut(CamelModel):
    resolution_id: str
    target_asset_ids: list[str]
    candidate_asset_ids: list[str]
    resolution_mode: str
    confidence: int
    needs_clarification: bool
    reason: str


# --- helpers -----------------------------------------------------------------------------------


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
    return state.model_copy(update=dict(
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
    ))


async def _resolution_input(
    db: Database, caller: str, chat_id: str, body: ResolveIn, state: ChatWorkingState
) -> ResolutionInput:
    context = body.context_payload
    uploads = list(dict.fromkeys(body.uploaded_asset_ids))
    await require_owned_assets(
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
    turns = await working_state.result_turns(db, caller, chat_id)
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
        # the version chain by turns: each turn's results in registration order
        result_turns=tuple(
            ResultTurn(number, _in_registration_order(turn.asset_ids, pool))
            for number, turn in enumerate(turns, 1)
        ),
    )


# --- handler -----------------------------------------------------------------------------------


@api(summary="Which images this turn means (rules first, a model only for ties)",
     request=ResolveIn, response=ResolveOut, tag="chats")
async def resolve(request: Request) -> Response:
    chat_id = chat_id_param(request)
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
    log.info("target resolved: %s", decision.mode, extra={"resolution": {
        "chatId": chat_id,
        "hasCurrentUpload": bool(inp.uploaded_asset_ids),
        "selectedAssetCount": len(inp.selected_asset_ids),
        "candidateAssetCount": len(decision.candidate_asset_ids),
        "resolvedAssetCount": len(decision.target_asset_ids),
        "resolutionMode": decision.mode,
        "confidence": decision.confidence,
        "needsClarification": decision.needs_clarification,
    }})
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


routes = [Route("/chats/{chat_id}/resolve", resolve, methods=["POST"])]
