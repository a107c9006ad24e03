"""Conversations and their messages: the default one per agent, more per agent, history pages,
idempotent posting (SPEC §10).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import ValidationFailed
from gateway.llm import summary
from gateway.routes.common import (
    api,
    app_body_bytes,
    json_body,
    json_response,
    parse_json,
    query_params,
    validate,
)
from gateway.routes.schema import (
    CamelModel,
    CamelRequest,
    JsonObject,
    Limit,
    NonBlankText,
    PageQuery,
    Text,
    cursor_param,
)
from gateway.services import services, user_id
from gateway.store import Database, agents, conversations, messages, tool_calls

MAX_ATTACHMENTS = 9
CONTENT_MAX = 100_000
TITLE_MAX = 100


# The stored records are the answers (gateway/store/records.py), but for messages (below).
ConversationOut = conversations.Conversation


class DisplayParamOut(CamelModel):
    label: str
    value: Any


class DisplayImageOut(CamelModel):
    asset_id: str
    url: str
    label: str
    width: int | None
    height: int | None


class DisplayArgsOut(CamelModel):
    """Built by the gateway from the canonical args and the caller's assets (SPEC §16)."""

    title: str
    prompt: str | None = None
    params: list[DisplayParamOut]
    images: list[DisplayImageOut]
    price_points: int | None = None


class ResultMediaOut(CamelModel):
    kind: Literal["image", "video", "audio"]
    url: str
    asset_id: str | None


class ToolCallResultOut(CamelModel):
    media: list[ResultMediaOut]


class ToolCallOut(CamelModel):
    """A `tool` message's call; status not_completed until its job is read as finished."""

    tool_name: str
    args: dict[str, Any]
    display_args: DisplayArgsOut
    status: Literal["not_completed", "completed", "failed", "cancelled"]
    external_job_id: str | None
    dedupe_key: str
    result: ToolCallResultOut | None
    error: str | None
    updated_at_ms: int


class MessageOut(CamelModel):
    """The message record with its tool call shown as ToolCallOut (built here, above the store)."""

    id: str
    conversation_id: str
    client_message_id: str
    role: str
    content: str
    status: str
    attachments: list[messages.MessageAttachment]
    metadata: dict[str, Any]
    created_at_ms: int
    tool_call: ToolCallOut | None = None  # role "tool" only


class ConversationList(CamelModel):
    conversations: list[ConversationOut]
    next_cursor: str | None


# The default conversation opened with its first page: a view across three records, not a row.
class DefaultConversationOut(CamelModel):
    conversation_id: str
    agent_id: str
    title: str
    summary: str | None
    message_count: int
    opening_message: str | None
    messages: list[MessageOut]
    next_cursor: str | None


class MessagePage(CamelModel):
    messages: list[MessageOut]
    next_cursor: str | None


class MessagePosted(CamelModel):
    conversation: ConversationOut
    message: MessageOut


class HistoryQuery(CamelModel):
    """`?limit=` (1..200, default 50); `?before=` a `nextCursor` for older messages."""

    limit: Limit = 50
    before: str | None = None


class ConversationCreate(CamelRequest):
    title: NonBlankText | None = Field(default=None, max_length=TITLE_MAX)


class AttachmentIn(CamelRequest):
    source: Literal["resource", "asset"]
    reference_id: str = Field(pattern=r"^[A-Za-z0-9._:-]{1,128}$")
    label: Text | None = Field(default=None, max_length=1000)


class MessageIn(CamelRequest):
    client_message_id: Text = Field(min_length=1, max_length=128)
    role: Literal["user", "assistant", "system"]
    content: Text = Field(max_length=CONTENT_MAX)
    status: Literal["completed", "failed"] = "completed"
    attachments: list[AttachmentIn] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)
    metadata: JsonObject = Field(default_factory=dict)


async def _page(
    db: Database, caller: str, found: list[messages.Message]
) -> list[MessageOut]:
    with_calls = await tool_calls.attach(db, caller, found)
    return [MessageOut.model_validate(message) for message in with_calls]


@api(summary="The default conversation with an agent (created on first use), newest page",
     query=HistoryQuery, response=DefaultConversationOut, tag="conversations")
async def default_conversation(request: Request) -> Response:
    query = query_params(request, HistoryQuery)
    before = cursor_param(query.before, "before")
    db, caller = services(request).db, user_id(request)
    agent = await agents.require(db, caller, request.path_params["agent_id"])
    conversation = await conversations.default_for(db, caller, agent.id)
    await services(request).tool_calls.settle(caller, conversation.id)
    found, next_cursor = await messages.page(db, caller, conversation.id, query.limit, before)
    return json_response(DefaultConversationOut(
        conversation_id=conversation.id,
        agent_id=agent.id,
        title=conversation.title,
        summary=conversation.summary,
        message_count=conversation.message_count,
        opening_message=agent.opening_message,
        messages=await _page(db, caller, found),
        next_cursor=next_cursor,
    ))


@api(summary="List an agent's conversations, most recently updated first", query=PageQuery,
     response=ConversationList, tag="conversations")
async def list_conversations(request: Request) -> Response:
    query = query_params(request, PageQuery)
    found, next_cursor = await conversations.list_for_agent(
        services(request).db, user_id(request), request.path_params["agent_id"], query.limit,
        cursor_param(query.cursor, "cursor"),
    )
    return json_response(ConversationList(
        conversations=list(found), next_cursor=next_cursor
    ))


@api(summary="Start another conversation with an agent", request=ConversationCreate,
     response=ConversationOut, status=201, tag="conversations")
async def create_conversation(request: Request) -> Response:
    raw = await app_body_bytes(request)
    # An empty body is a conversation with the default title.
    body = validate(ConversationCreate, parse_json(raw)) if raw.strip() else ConversationCreate()
    conversation = await conversations.create(
        services(request).db, user_id(request), request.path_params["agent_id"],
        body.title.strip() if body.title else None,
    )
    return json_response(conversation, 201)


@api(summary="Read a conversation", response=ConversationOut, tag="conversations")
async def get_conversation(request: Request) -> Response:
    svc, caller = services(request), user_id(request)
    conversation = await conversations.get(svc.db, caller, request.path_params["conversation_id"])
    await svc.tool_calls.settle(caller, conversation.id)
    return json_response(conversation)


@api(summary="Delete a conversation (soft: it vanishes from lists and reads)", status=204,
     tag="conversations")
async def delete_conversation(request: Request) -> Response:
    await conversations.delete(
        services(request).db, user_id(request), request.path_params["conversation_id"]
    )
    return Response(status_code=204)


@api(summary="Older messages of a conversation, oldest first within the page",
     query=HistoryQuery, response=MessagePage, tag="conversations")
async def list_messages(request: Request) -> Response:
    query = query_params(request, HistoryQuery)
    before = cursor_param(query.before, "before")
    db, caller = services(request).db, user_id(request)
    conversation = await conversations.get(db, caller, request.path_params["conversation_id"])
    await services(request).tool_calls.settle(caller, conversation.id)
    found, next_cursor = await messages.page(db, caller, conversation.id, query.limit, before)
    return json_response(
        MessagePage(messages=await _page(db, caller, found), next_cursor=next_cursor)
    )


def _checked(body: MessageIn) -> messages.NewMessage:
    has_text = bool(body.content.strip())
    if body.role == "user" and not has_text:
        raise ValidationFailed("content: a user message needs non-blank text", field="content")
    if body.attachments and not has_text:
        raise ValidationFailed("attachments: attachments only ride with text",
                               field="attachments")
    return messages.NewMessage(
        client_message_id=body.client_message_id,
        role=body.role,
        content=body.content,
        status=body.status,
        attachments=tuple(
            messages.AttachmentRef(a.source, a.reference_id, a.label) for a in body.attachments
        ),
        metadata=body.metadata,
    )


@api(summary="Append a message (idempotent per clientMessageId)", request=MessageIn,
     response=MessagePosted, status=201, also=(200,), errors=(409,), tag="conversations")
async def post_message(request: Request) -> Response:
    new = _checked(await json_body(request, MessageIn))
    svc, caller = services(request), user_id(request)
    appended = await messages.append(svc.db, caller, request.path_params["conversation_id"], new)
    if appended.created:
        summary.schedule(svc, caller, appended.conversation.id,
                         appended.conversation.message_count)
    posted = MessagePosted(
        conversation=appended.conversation,
        message=MessageOut.model_validate(appended.message),
    )
    return json_response(posted, 201 if appended.created else 200)


routes = [
    Route("/agents/{agent_id}/conversation", default_conversation, methods=["GET"]),
    Route("/agents/{agent_id}/conversations", list_conversations, methods=["GET"]),
    Route("/agents/{agent_id}/conversations", create_conversation, methods=["POST"]),
    Route("/conversations/{conversation_id}", get_conversation, methods=["GET"]),
    Route("/conversations/{conversation_id}", delete_conversation, methods=["DELETE"]),
    Route("/conversations/{conversation_id}/messages", list_messages, methods=["GET"]),
    Route("/conversations/{conversation_id}/messages", post_message, methods=["POST"]),
]
