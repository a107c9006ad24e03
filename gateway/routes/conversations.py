"""Conversations and their messages: the default one per agent, more per agent, history pages,
idempotent posting (SPEC §10).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import summariser
from gateway.errors import ValidationFailed
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
from gateway.store import agents, conversations, messages

MAX_ATTACHMENTS = 9
CONTENT_MAX = 100_000
TITLE_MAX = 100


# The stored records are the answers (gateway/store/records.py).
MessageOut = messages.Message
ConversationOut = conversations.Conversation


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


@api(summary="The default conversation with an agent (created on first use), newest page",
     query=HistoryQuery, response=DefaultConversationOut, tag="conversations")
async def default_conversation(request: Request) -> Response:
    query = query_params(request, HistoryQuery)
    before = cursor_param(query.before, "before")
    db, caller = services(request).db, user_id(request)
    agent = await agents.require(db, caller, request.path_params["agent_id"])
    conversation = await conversations.default_for(db, caller, agent.id)
    found, next_cursor = await messages.page(db, caller, conversation.id, query.limit, before)
    return json_response(DefaultConversationOut(
        conversation_id=conversation.id,
        agent_id=agent.id,
        title=conversation.title,
        summary=conversation.summary,
        message_count=conversation.message_count,
        opening_message=agent.opening_message,
        messages=found,
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
    conversation = await conversations.get(
        services(request).db, user_id(request), request.path_params["conversation_id"]
    )
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
    found, next_cursor = await messages.page(db, caller, conversation.id, query.limit, before)
    return json_response(MessagePage(messages=found, next_cursor=next_cursor))


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
        summariser.schedule(svc, caller, appended.conversation.id,
                            appended.conversation.message_count)
    posted = MessagePosted(
        conversation=appended.conversation,
        message=appended.message,
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
