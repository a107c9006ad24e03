"""`/chats/{chat_id}`: a chat's working memory, its turn results and its resolution audit.

A chat id is the client's own string (1..128 characters, no `/`), scoped by the caller. Resolving
a turn (`POST /chats/{chat_id}/resolve`) is `gateway/routes/resolve.py`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import ValidationFailed
from gateway.routes.common import api, json_body, json_response, query_params
from gateway.routes.schema import (
    CamelModel,
    CamelRequest,
    JsonObject,
    PageQuery,
    Text,
    cursor_param,
)
from gateway.services import services, user_id
from gateway.store import assets, resolutions, working_state
from gateway.store.assets import UnknownAssets
from gateway.store.cursors import keyset_page
from gateway.store.database import Database
from gateway.store.resolutions import Resolution
from gateway.store.working_state import ChatWorkingState, TurnResult

MAX_CHAT_ID_CHARS = 128
MAX_IDS = 200
MAX_CANVAS_NODES = 500

Id = Annotated[Text, Field(min_length=1, max_length=128)]
IdList = Annotated[list[Id], Field(max_length=MAX_IDS)]
CanvasSnapshot = Annotated[list[JsonObject], Field(max_length=MAX_CANVAS_NODES)]


# --- working state -----------------------------------------------------------------------------


# ChatWorkingState's writable fields, with the request's checks (ids, sizes, JSON).
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


class _ChatKey(CamelModel):
    chat_id: str


# The stored state with its chat (chat first: pydantic lists the last base's fields first).
class WorkingStateOut(ChatWorkingState, _ChatKey):
    @classmethod
    def of(cls, chat_id: str, state: ChatWorkingState) -> WorkingStateOut:
        return cls(chat_id=chat_id, **dict(state))


# --- turn results ------------------------------------------------------------------------------


class ResultsIn(CamelRequest):
    asset_ids: Annotated[list[Id], Field(min_length=1, max_length=MAX_IDS)]


class ResultsOut(TurnResult):  # the stored turn result, and the working state it left
    working_state: WorkingStateOut


# --- resolution audit --------------------------------------------------------------------------


ResolutionOut = Resolution  # the stored record is the answer (gateway/store/records.py)


class ResolutionsPage(CamelModel):
    resolutions: list[ResolutionOut] = Field(description="newest first")
    next_cursor: str | None = Field(description="pass as `cursor` for older ones; null at the end")


# --- helpers -----------------------------------------------------------------------------------


def chat_id_param(request: Request) -> str:
    """The `chat_id` path parameter; 422 when it is longer than a chat id may be."""
    chat_id: str = request.path_params["chat_id"]
    if not 1 <= len(chat_id) <= MAX_CHAT_ID_CHARS:
        raise ValidationFailed(
            f"chatId: must be 1..{MAX_CHAT_ID_CHARS} characters", field="chatId"
        )
    return chat_id


async def require_owned_assets(db: Database, caller: str, fields: dict[str, list[str]]) -> None:
    """422 naming the first field that holds an id which is not one of the caller's assets."""
    owned = await assets.owned_asset_ids(db, caller, (i for ids in fields.values() for i in ids))
    for field, ids in fields.items():
        missing = [i for i in ids if i not in owned]
        if missing:
            raise ValidationFailed(
                f"{field}: unknown asset ids: {', '.join(missing)}", field=field
            )


# --- handlers ----------------------------------------------------------------------------------


@api(summary="A chat's working memory (defaults when none is stored)", response=WorkingStateOut,
     tag="chats")
async def read_working_state(request: Request) -> Response:
    chat_id = chat_id_param(request)
    state = await working_state.get(services(request).db, user_id(request), chat_id)
    return json_response(WorkingStateOut.of(chat_id, state))


@api(summary="Replace a chat's working memory", request=WorkingStateIn, response=WorkingStateOut,
     tag="chats")
async def replace_working_state(request: Request) -> Response:
    chat_id = chat_id_param(request)
    body = await json_body(request, WorkingStateIn)
    db, caller = services(request).db, user_id(request)
    await require_owned_assets(
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
    chat_id = chat_id_param(request)
    body = await json_body(request, ResultsIn)
    try:
        result, state = await working_state.record_result(
            services(request).db, user_id(request), chat_id, body.asset_ids
        )
    except UnknownAssets as exc:
        raise ValidationFailed(
            f"assetIds: unknown asset ids: {', '.join(exc.missing)}", field="assetIds"
        ) from None
    out = ResultsOut(**dict(result), working_state=WorkingStateOut.of(chat_id, state))
    return json_response(out, 201)


@api(summary="A chat's resolution audit, newest first", query=PageQuery,
     response=ResolutionsPage, tag="chats")
async def list_resolutions(request: Request) -> Response:
    chat_id = chat_id_param(request)
    query = query_params(request, PageQuery)
    found = await resolutions.list_for_chat(
        services(request).db, user_id(request), chat_id, query.limit + 1,
        cursor_param(query.cursor, "cursor"),
    )
    page, next_cursor = keyset_page(found, query.limit,
                                    lambda resolution: (resolution.created_at_ms, resolution.id))
    return json_response(
        ResolutionsPage(resolutions=page, next_cursor=next_cursor)
    )


routes = [
    Route("/chats/{chat_id}/working-state", read_working_state, methods=["GET"]),
    Route("/chats/{chat_id}/working-state", replace_working_state, methods=["PUT"]),
    Route("/chats/{chat_id}/results", record_results, methods=["POST"]),
    Route("/chats/{chat_id}/resolutions", list_resolutions, methods=["GET"]),
]
