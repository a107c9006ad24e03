"""`GET /agents/{agent_id}/context`: what a prompt needs, in one call (SPEC §11)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import NotFound
from gateway.routes.agent_memories import MemoryOut
from gateway.routes.common import api, json_response, query_params
from gateway.routes.conversations import MessageOut
from gateway.routes.facts import FactOut
from gateway.routes.schema import CamelModel
from gateway.services import services, user_id
from gateway.store import agent_memories, agents, conversations, facts, messages, tool_calls


class ContextQuery(CamelModel):
    """Which conversation (default: the agent's default one) and how much of each part."""

    conversation_id: str | None = None
    memory_limit: Annotated[int, Field(ge=0, le=50)] = 10
    message_limit: Annotated[int, Field(ge=0, le=200)] = 20
    fact_limit: Annotated[int, Field(ge=0, le=100)] = 20


class ContextOut(CamelModel):
    agent_id: str
    conversation_id: str | None
    summary: str | None
    memories: list[MemoryOut]
    recent_messages: list[MessageOut]
    facts: list[FactOut]


@api(summary="Prompt context: summary, top memories, recent messages, active facts",
     query=ContextQuery, response=ContextOut, tag="context")
async def agent_context(request: Request) -> Response:
    query = query_params(request, ContextQuery)
    db, caller = services(request).db, user_id(request)
    agent = await agents.require(db, caller, request.path_params["agent_id"])
    conversation: conversations.Conversation | None
    if query.conversation_id is not None:
        conversation = await conversations.get(db, caller, query.conversation_id)
        if conversation.agent_id != agent.id:
            raise NotFound("no such conversation")
    else:
        # Reading context never creates the default conversation.
        conversation = await conversations.find_default(db, caller, agent.id)
    recent: list[messages.Message] = []
    if conversation is not None and query.message_limit:
        # A prompt sees tool calls as settled as any other read of the conversation would.
        await services(request).tool_calls.settle(caller, conversation.id)
        recent, _ = await messages.page(db, caller, conversation.id, query.message_limit)
        recent = await tool_calls.attach(db, caller, recent)
    memories = await agent_memories.for_prompt(db, caller, agent.id, query.memory_limit)
    active_facts = await facts.for_prompt(db, caller, query.fact_limit)
    return json_response(ContextOut(
        agent_id=agent.id,
        conversation_id=conversation.id if conversation else None,
        summary=conversation.summary if conversation else None,
        memories=list(memories),
        recent_messages=[MessageOut.model_validate(m) for m in recent],
        facts=active_facts,
    ))


routes = [Route("/agents/{agent_id}/context", agent_context, methods=["GET"])]
