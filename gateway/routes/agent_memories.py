"""`/agents/{agent_id}/memories`: long-term agent memories with their source message (§11)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from gateway.routes.common import (
    api,
    item_routes,
    json_body,
    json_response,
    mine,
    no_content,
    query_params,
)
from gateway.routes.schema import (
    CamelModel,
    CamelPatch,
    CamelRequest,
    NonBlankText,
    PageQuery,
    cursor_param,
    refuse_null,
)
from gateway.services import services, user_id
from gateway.store import agent_memories

TYPE_MAX = 80
CONTENT_MAX = 2000
Importance = Literal[1, 2, 3, 4, 5]


MemoryOut = agent_memories.AgentMemory  # the stored record is the answer


class MemoryList(CamelModel):
    memories: list[MemoryOut]
    next_cursor: str | None


class MemoryQuery(PageQuery):
    """`?status=active|disabled` narrows the list; by default both are listed."""

    status: Literal["active", "disabled"] | None = None


class MemoryCreate(CamelRequest):
    type: NonBlankText = Field(max_length=TYPE_MAX)
    content: NonBlankText = Field(max_length=CONTENT_MAX)
    importance: Importance = 3
    status: Literal["active", "disabled"] = "active"
    source_message_id: str | None = Field(default=None, max_length=128)


class MemoryPatch(CamelPatch):
    """Only type, content, importance and status (active|disabled) can change."""

    type: NonBlankText | None = Field(default=None, max_length=TYPE_MAX)
    content: NonBlankText | None = Field(default=None, max_length=CONTENT_MAX)
    importance: Importance | None = None
    status: Literal["active", "disabled"] | None = None


@api(summary="Remember something for an agent", request=MemoryCreate, response=MemoryOut,
     status=201, tag="agent memories")
async def create_memory(request: Request) -> Response:
    body = await json_body(request, MemoryCreate)
    memory = await agent_memories.create(
        services(request).db, user_id(request), request.path_params["agent_id"],
        type=body.type.strip(), content=body.content.strip(), importance=body.importance,
        status=body.status, source_message_id=body.source_message_id,
    )
    return json_response(memory, 201)


@api(summary="List an agent's memories (not the deleted ones), newest first", query=MemoryQuery,
     response=MemoryList, tag="agent memories")
async def list_memories(request: Request) -> Response:
    query = query_params(request, MemoryQuery)
    statuses = (query.status,) if query.status else ("active", "disabled")
    found, next_cursor = await agent_memories.list_page(
        services(request).db, user_id(request), request.path_params["agent_id"], statuses,
        query.limit, cursor_param(query.cursor, "cursor"),
    )
    return json_response(MemoryList(memories=list(found),
                                    next_cursor=next_cursor))


@api(summary="Read one memory", response=MemoryOut, tag="agent memories")
async def get_memory(request: Request) -> Response:
    return json_response(await agent_memories.get(*mine(request, "agent_id", "memory_id")))


@api(summary="Change a memory's type, content, importance or status", request=MemoryPatch,
     response=MemoryOut, tag="agent memories")
async def update_memory(request: Request) -> Response:
    body = await json_body(request, MemoryPatch)
    refuse_null(body, "type", "content", "importance", "status")
    changes: dict[str, Any] = {}
    if body.type is not None:
        changes["type"] = body.type.strip()
    if body.content is not None:
        changes["content"] = body.content.strip()
    if body.importance is not None:
        changes["importance"] = body.importance
    if body.status is not None:
        changes["status"] = body.status
    return json_response(
        await agent_memories.update(*mine(request, "agent_id", "memory_id"), **changes))


@api(summary="Delete a memory (status deleted: gone from lists and prompts)", status=204,
     tag="agent memories")
async def delete_memory(request: Request) -> Response:
    await agent_memories.delete(*mine(request, "agent_id", "memory_id"))
    return no_content()


routes = item_routes("/agents/{agent_id}/memories", "/agents/{agent_id}/memories/{memory_id}",
                     create=create_memory, listing=list_memories, get=get_memory,
                     update=update_memory, delete=delete_memory)
