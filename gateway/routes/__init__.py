"""Owned routes, one module per resource; everything else goes to the proxy."""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.config import Settings
from gateway.routes import (
    admin,
    agent_memories,
    agents,
    assets,
    attachments,
    chats,
    context,
    conversations,
    facts,
    files,
    health,
    memories,
    operations,
    resolve,
    resources,
    tool_calls,
    uploads,
    user_data,
)
from gateway.upstream.flavors import flavor_for

PUBLIC_PATHS = health.PUBLIC_PATHS | operations.PUBLIC_PATHS | {"/files/{token}",
                                                                  "/uploads/{token}"}
# Paths under these need no key either (the token in the path is the credential).
PUBLIC_PREFIXES: tuple[str, ...] = (*files.PUBLIC_PREFIXES, *uploads.PUBLIC_PREFIXES)

# Paths under these prefixes are the gateway's own: an unknown one is a 404, never proxied.
OWNED_PREFIXES: tuple[str, ...] = (
    "/resources",
    "/agents",
    "/conversations",
    "/memory-facts",
    "/assets",
    "/chats",
    "/tools",
    "/attachments",
    "/files",
    "/uploads",
    "/me",
)


def all_routes(settings: Settings | None = None) -> list[BaseRoute]:
    """Every owned route; the memory routes follow `upstream.flavor` (default: everos)."""
    flavor = flavor_for(settings or Settings())
    return [
        *health.routes, *operations.routes, *memories.memory_routes(flavor), *resources.routes,
        *assets.routes, *chats.routes, *resolve.routes, *agents.routes, *conversations.routes,
        *agent_memories.routes, *context.routes, *facts.routes, *tool_calls.routes,
        *attachments.routes, *files.routes, *admin.routes,
        *uploads.upload_routes(flavor),
        *user_data.routes,
    ]
