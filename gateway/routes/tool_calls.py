"""`/tools` and a conversation's tool calls: propose, confirm, cancel (SPEC §16).

A call is a `role = "tool"` message; reading the conversation settles it (routes/conversations.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.routes.common import api, json_body, json_response
from gateway.routes.conversations import CONTENT_MAX, ConversationOut, MessageOut, MessagePosted
from gateway.routes.schema import CamelModel, CamelRequest, JsonObject, Text
from gateway.services import services, user_id
from gateway.store import conversations, tool_calls
from gateway.store.tool_calls import ToolCall


class ToolDisplayOut(CamelModel):
    title: str
    fields: list[str]


class ToolPriceOut(CamelModel):
    points: int


class ToolJobOut(CamelModel):
    kind: str


class ToolOut(CamelModel):
    name: str
    description: str
    parameters: dict[str, Any]
    display: ToolDisplayOut
    price: ToolPriceOut | None = None
    job: ToolJobOut
    image_parameters: list[str]


class ToolList(CamelModel):
    tools: list[ToolOut]


class ToolCallIn(CamelRequest):
    """Display data a client sends (`displayArgs`) is not read: the gateway builds it."""

    client_message_id: Text = Field(min_length=1, max_length=128)
    tool_name: Text = Field(min_length=1, max_length=128)
    args: JsonObject | None = None
    assistant_text: Text | None = Field(default=None, max_length=CONTENT_MAX)


@api(summary="The tools an agent may propose (the registry)", response=ToolList, tag="tool calls")
async def list_tools(request: Request) -> Response:
    registry = services(request).tool_calls.registry
    return json_response(ToolList(
        tools=[ToolOut.model_validate(tool.as_json()) for tool in registry.tools.values()]
    ))


@api(summary="Propose a tool call: a tool message waiting for the user's confirmation "
     "(idempotent per clientMessageId)", request=ToolCallIn, response=MessagePosted,
     status=201, also=(200,), errors=(409,), tag="tool calls")
async def propose(request: Request) -> Response:
    body = await json_body(request, ToolCallIn)
    proposed = await services(request).tool_calls.propose(
        user_id(request), request.path_params["conversation_id"], body.client_message_id,
        body.tool_name, body.args, body.assistant_text or "",
    )
    posted = MessagePosted(
        conversation=ConversationOut.model_validate(proposed.conversation),
        message=MessageOut.model_validate(proposed.message),
    )
    return json_response(posted, 201 if proposed.created else 200)


async def _answer(request: Request, call: ToolCall) -> Response:
    svc, caller = services(request), user_id(request)
    conversation = await conversations.get(svc.db, caller, call.conversation_id)
    message = await tool_calls.message_of(svc.db, caller, call)
    return json_response(MessagePosted(
        conversation=ConversationOut.model_validate(conversation),
        message=MessageOut.model_validate(message),
    ))


@api(summary="Confirm a tool call: submit its one job (retries get the same job)",
     response=MessagePosted, errors=(409, 502, 504), tag="tool calls")
async def confirm(request: Request) -> Response:
    call = await services(request).tool_calls.confirm(
        user_id(request), request.path_params["conversation_id"],
        request.path_params["message_id"],
    )
    return await _answer(request, call)


@api(summary="Cancel a tool call nobody confirmed yet (idempotent)", response=MessagePosted,
     errors=(409,), tag="tool calls")
async def cancel(request: Request) -> Response:
    call = await services(request).tool_calls.cancel(
        user_id(request), request.path_params["conversation_id"],
        request.path_params["message_id"],
    )
    return await _answer(request, call)


routes = [
    Route("/tools", list_tools, methods=["GET"]),
    Route("/conversations/{conversation_id}/tool-calls", propose, methods=["POST"]),
    Route("/conversations/{conversation_id}/tool-calls/{message_id}/confirm", confirm,
          methods=["POST"]),
    Route("/conversations/{conversation_id}/tool-calls/{message_id}/cancel", cancel,
          methods=["POST"]),
]
