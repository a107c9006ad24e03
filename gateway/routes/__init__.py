"""Owned routes, one module per resource; everything else goes to the proxy."""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.config import Settings
from gateway.routes import (
    agent_memories,
    agents,
    assets,
    chats,
    context,
    conversations,
    facts,
    health,
    memories,
    operations,
    resolve,
    resources,
    tool_calls,
)
from gateway.upstream.flavors import flavor_for

PUBLIC_PATHS = health.PUBLIC_PATHS | operations.PUBLIC_PATHS

# Paths under these prefixes are the gateway's own: an unknown one is a 404, never proxied.
OWNED_PREFIXES: tuple[str, ...] = (
    "/resources",
    "/agents",
    "/conversations",
    "/memory-facts",
    "/assets",
    "/chats",
    "/tools",
)


def all_routes(settings: Settings | None = None) -> list[BaseRoute]:
    """Every owned route; the memory routes follow `upstream.flavor` (default: everos)."""
    flavor = flavor_for(settings or Settings())
    return [
        *health.routes, *operations.routes, *memories.memory_routes(flavor), *resources.routes,
        *assets.routes, *chats.routes, *resolve.routes, *agents.routes, *conversations.routes,
        *agent_memories.routes, *context.routes, *facts.routes, *tool_calls.routes,
    ]
