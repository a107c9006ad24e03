"""`/agents`: create, list (latest conversation activity first), read, update, delete (§10)."""

from __future__ import annotations

from typing import Any

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
    JsonObject,
    NonBlankText,
    PageQuery,
    Text,
    cursor_param,
    refuse_null,
)
from gateway.services import services, user_id
from gateway.store import agents

NAME_MAX = 200
OPENING_MESSAGE_MAX = 4000


AgentOut = agents.Agent  # the stored record is the answer (gateway/store/records.py)


class AgentList(CamelModel):
    agents: list[AgentOut]
    next_cursor: str | None


class AgentCreate(CamelRequest):
    name: NonBlankText = Field(max_length=NAME_MAX)
    profile: JsonObject = Field(default_factory=dict)
    opening_message: Text | None = Field(default=None, max_length=OPENING_MESSAGE_MAX)


class AgentPatch(CamelPatch):
    """Only the fields sent change; `openingMessage: null` clears it."""

    name: NonBlankText | None = Field(default=None, max_length=NAME_MAX)
    profile: JsonObject | None = None
    opening_message: Text | None = Field(default=None, max_length=OPENING_MESSAGE_MAX)


@api(summary="Create an agent", request=AgentCreate, response=AgentOut, status=201, tag="agents")
async def create_agent(request: Request) -> Response:
    body = await json_body(request, AgentCreate)
    agent = await agents.create(
        services(request).db, user_id(request), body.name.strip(), body.profile,
        body.opening_message,
    )
    return json_response(agent, 201)


@api(summary="List agents, latest conversation activity first", query=PageQuery,
     response=AgentList, tag="agents")
async def list_agents(request: Request) -> Response:
    query = query_params(request, PageQuery)
    found, next_cursor = await agents.list_page(
        services(request).db, user_id(request), query.limit, cursor_param(query.cursor, "cursor")
    )
    return json_response(AgentList(agents=list(found),
                                   next_cursor=next_cursor))


@api(summary="Read an agent", response=AgentOut, tag="agents")
async def get_agent(request: Request) -> Response:
    return json_response(await agents.require(*mine(request, "agent_id")))


@api(summary="Update an agent's name, profile or opening message", request=AgentPatch,
     response=AgentOut, tag="agents")
async def update_agent(request: Request) -> Response:
    body = await json_body(request, AgentPatch)
    refuse_null(body, "name", "profile")
    changes: dict[str, Any] = {}
    if body.name is not None:
        changes["name"] = body.name.strip()
    if body.profile is not None:
        changes["profile"] = body.profile
    if "opening_message" in body.model_fields_set:
        changes["opening_message"] = body.opening_message
    return json_response(await agents.update(*mine(request, "agent_id"), **changes))


@api(summary="Delete an agent and its conversations", status=204, tag="agents")
async def delete_agent(request: Request) -> Response:
    await agents.delete(*mine(request, "agent_id"))
    return no_content()


routes = item_routes("/agents", "/agents/{agent_id}", create=create_agent, listing=list_agents,
                     get=get_agent, update=update_agent, delete=delete_agent)
