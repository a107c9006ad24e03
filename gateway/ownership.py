"""The identity checks made on bodies before anything reaches the engine (SPEC §3).

The engine trusts ids in request bodies, so: a `user` message's `sender_id` must be the caller,
a `user_id` (top level, in `filters`, or in the query string) must be the caller, an `agent_id`
must be one of the caller's agents, and a named session must not belong to another user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import Forbidden, SessionOwnedByAnotherUser

AgentCheck = Callable[[str, str], Awaitable[bool]]
SessionOwner = Callable[[str, str, str], Awaitable[str | None]]


async def _no_agents(user_id: str, agent_id: str) -> bool:
    return False


async def _no_sessions(app_id: str, project_id: str, session_id: str) -> str | None:
    return None


@dataclass
class OwnershipRules:
    """Answers "is this the caller's agent" and "who owns this session"; filled in by the app."""

    owns_agent: AgentCheck = _no_agents
    session_owner: SessionOwner = _no_sessions

    async def check_body(self, body: Any, user_id: str) -> None:
        if not isinstance(body, Mapping):
            return
        filters = body.get("filters")
        scopes: list[Mapping[str, Any]] = [body]
        if isinstance(filters, Mapping):
            scopes.append(filters)
        for scope in scopes:
            await self.check_ids(scope.get("user_id"), scope.get("agent_id"), user_id)
        messages = body.get("messages")
        if isinstance(messages, list):
            for index, message in enumerate(messages):
                if not isinstance(message, Mapping) or message.get("role") != "user":
                    continue
                sender = message.get("sender_id")
                if sender is not None and sender != user_id:
                    raise Forbidden(
                        f"messages[{index}].sender_id must be the authenticated user",
                        field=f"messages[{index}].sender_id",
                    )
        for scope in scopes:
            session_id = scope.get("session_id")
            if isinstance(session_id, str) and session_id:
                await self.check_session(
                    _scope_value(body, "app_id"), _scope_value(body, "project_id"), session_id,
                    user_id,
                )

    async def check_ids(self, named_user: Any, agent_id: Any, user_id: str) -> None:
        if named_user is not None and named_user != user_id:
            raise Forbidden("user_id must be the authenticated user", field="user_id")
        if agent_id is not None:
            if not isinstance(agent_id, str) or not await self.owns_agent(user_id, agent_id):
                raise Forbidden("agent_id is not one of your agents", field="agent_id")

    async def check_session(
        self, app_id: str, project_id: str, session_id: str, user_id: str
    ) -> None:
        owner = await self.session_owner(app_id, project_id, session_id)
        if owner is not None and owner != user_id:
            raise SessionOwnedByAnotherUser()


def _scope_value(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) and value else "default"
