"""The identity checks made on bodies before anything reaches the engine (SPEC §3).

The engine trusts ids in request bodies, so: a `user` message's `sender_id` must be the caller,
a `user_id` (top level, in `filters`, or in the query string) must be the caller, an `agent_id`
must be one of the caller's agents, and a named session must not belong to another user.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.errors import Forbidden, NotFound, SessionOwnedByAnotherUser
from gateway.identity.canonical import cube_owner, derived_group, group_is_derived_for
from gateway.identity.named import (
    AGENT,
    CUBE,
    FILTERS,
    GROUP,
    SENDER,
    SESSION,
    USER,
    check_canonical,
    named_values,
)

if TYPE_CHECKING:
    from gateway.identity.named import Named

AgentCheck = Callable[[str, str], Awaitable[bool]]
SessionOwner = Callable[[str, str, str], Awaitable[str | None]]
SessionClaim = Callable[[str, str, str, str], Awaitable[None]]  # (user, app, project, session)


async def _no_agents(user_id: str, agent_id: str) -> bool:
    return False


async def _no_sessions(app_id: str, project_id: str, session_id: str) -> str | None:
    return None


async def _no_claims(user_id: str, app_id: str, project_id: str, session_id: str) -> None:
    return None


# The owner scope of MemOS cubes and of conversation groups (EverMemOS `group_id`, EverOS Cloud
# groups) in the sessions table: a group is a session of the default scope; a cube id lives
# apart from sessions (app ids starting with `_` are never a client's default). Cubes are owned
# by their names (canonical.cube_owner) and claim no row; the scope stays for rows made before.
CUBE_SCOPE = ("_cube", "_cube")
GROUP_SCOPE = ("default", "default")

# Filter operators that name exactly the values given (EverOS/Cloud, mem0 and MemOS DSLs).
_POSITIVE_OPERATORS = frozenset({"eq", "in", "$eq", "$in"})


def _named(value: Any) -> list[Any] | None:
    """The values a filter condition names, or None when it reaches beyond them (ne, gt, ...)."""
    return named_values(value, _POSITIVE_OPERATORS)


@dataclass
class OwnershipRules:
    """Answers "is this the caller's agent" and "who owns this session"; filled in by the app."""

    owns_agent: AgentCheck = _no_agents
    session_owner: SessionOwner = _no_sessions
    claim_session: SessionClaim = _no_claims
    # Body keys that name a session (mem0 calls it `run_id`); set at assembly from the flavour.
    session_keys: tuple[str, ...] = ("session_id",)

    async def check_filters(self, filters: Any, body: Mapping[str, Any], user_id: str) -> None:
        """Every user, agent and session a filter tree names, AND/OR lists and operators included.

        A user or agent condition must name only the caller and the caller's agents (`ne`, `gt`
        and the like reach other users: 403). Sessions named are checked for their owner; wider
        session conditions are left to the search, which drops other users' sessions.
        """
        app_id, project_id = _scope_value(body, "app_id"), _scope_value(body, "project_id")
        stack: list[Any] = [filters]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
                continue
            if not isinstance(node, Mapping):
                continue
            for key, value in node.items():
                if key in ("user_id", "agent_id"):
                    check_canonical(USER if key == "user_id" else AGENT, key, value)
                    named = _named(value)
                    if named is None:
                        raise Forbidden(f"filters: {key} may only name your own", field=key)
                    for one in named:
                        if key == "user_id":
                            await self.check_ids(one, None, user_id)
                        else:
                            await self.check_ids(None, one, user_id)
                elif key in self.session_keys:
                    check_canonical(SESSION, key, value)
                    for one in _named(value) or ():
                        if isinstance(one, str) and one:
                            await self.check_session(app_id, project_id, one, user_id)
                elif isinstance(value, Mapping | list):
                    stack.append(value)

    async def check_named(self, named: Named, user_id: str, *, claims: bool = False) -> bool:
        """SPEC §3 on every id a request names (403 / 404 on the first that is not the caller's).

        True when the request is bounded to the caller through a field its route model says
        the engine filters by (`named.scopes`): that field names the caller, one of the
        caller's agents, or a session, group or cube the caller owns. An empty list names no
        one and bounds nothing. On a route that claims (an add), a session, group or cube of
        another user is a 403; elsewhere one that is not the caller's is a 404 whether it is
        another user's or no one's, so the answer tells nothing of other users.
        """
        scoped = False
        for kind, where, value in named.ids:
            pins = where in named.scopes
            if kind in (USER, SENDER) and type(value) is str:  # the usual case, checked fast
                if value != user_id:
                    raise Forbidden(f"{where} must be the authenticated user", field=where)
                scoped = scoped or pins
            elif kind in (USER, SENDER):
                ones = _values(value, where)
                for one in ones:
                    if one != user_id:
                        raise Forbidden(f"{where} must be the authenticated user", field=where)
                scoped = scoped or (pins and bool(ones))
            elif kind == AGENT:
                ones = _values(value, where)
                for one in ones:
                    if not isinstance(one, str) or not await self.owns_agent(user_id, one):
                        raise Forbidden(f"{where} is not one of your agents", field=where)
                scoped = scoped or (pins and bool(ones))
            elif kind == FILTERS:  # an unmodelled route (upstream.allow_paths)
                bounded = await self.check_filter_tree(value, named, user_id)
                scoped = scoped or (pins and bounded)
            else:
                mine = await self._check_owned(kind, value, named, user_id, claims)
                scoped = scoped or (pins and mine)
        return scoped

    async def _check_owned(self, kind: str, value: Any, named: Named, user_id: str,
                           claims: bool) -> bool:
        """Sessions, groups and cubes: True when every one named is the caller's."""
        app_id, project_id = _owner_scope(kind, named)
        ones = [one for one in (value if isinstance(value, list) else [value])
                if isinstance(one, str) and one]
        mine = bool(ones)
        for one in ones:
            owner = await self._owner(kind, app_id, project_id, one, user_id)
            if owner == user_id:
                continue
            if not claims:
                raise NotFound(f"no such {_NOUNS.get(kind, kind)}")
            if owner is not None:
                raise SessionOwnedByAnotherUser(
                    f"this {_NOUNS.get(kind, kind)} belongs to another user")
            mine = False  # no one's yet: the add claims it
        return mine

    async def _owner(self, kind: str, app_id: str, project_id: str, one: str, user_id: str
                     ) -> str | None:
        """Who owns a session, group or cube: by its name where an engine derives it for a
        user (SPEC §5: theirs from the first request, whoever asks first), else by the first
        claim. A derived id of someone other than the caller answers `_SOMEONE`, whether or
        not that user exists, so the answer tells nothing of other users."""
        if kind == CUBE:
            return user_id if cube_owner(one) == user_id else _SOMEONE
        if kind == GROUP and derived_group(one):
            return user_id if group_is_derived_for(one, user_id) else _SOMEONE
        return await self.session_owner(app_id, project_id, one)

    async def claim(self, named: Named, user_id: str) -> None:
        """An add's sessions, groups and cubes become the caller's (403 if another's first).
        Cubes and derived groups are owned by their names, not by claims."""
        for kind, where, value in named.ids:
            if kind not in (SESSION, GROUP) or where.startswith(("query.", "path.")):
                continue  # an add claims what its body names
            app_id, project_id = _owner_scope(kind, named)
            for one in value if isinstance(value, list) else [value]:
                if isinstance(one, str) and one and not (kind == GROUP and derived_group(one)):
                    await self.claim_once(user_id, app_id, project_id, one)

    async def claim_once(self, user_id: str, app_id: str, project_id: str,
                         session_id: str) -> None:
        """Claim a session unless it is the caller's already: no row ever changes owner, so a
        conversation's every next add needs no write transaction (403 if another user's)."""
        if await self.session_owner(app_id, project_id, session_id) != user_id:
            await self.claim_session(user_id, app_id, project_id, session_id)

    async def claim_written(self, named: Named, user_id: str) -> None:
        """What an add the gateway made will write into: never another user's (403), else the
        caller's from now on."""
        if named.ids:
            await self.check_named(named, user_id, claims=True)
            await self.claim(named, user_id)

    async def check_filter_tree(self, filters: Any, named: Named, user_id: str) -> bool:
        """`check_filters` over a tree; True when it names the caller or one of their agents."""
        await self.check_filters(filters, {"app_id": named.app_id,
                                           "project_id": named.project_id}, user_id)
        return _bounded(filters)

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


_AND = ("AND", "and", "$and")
# The owner of an id derived for a user other than the caller: never a user id (§3 grammar).
_SOMEONE = "/derived"
_NOUNS = {SESSION: "session", GROUP: "group", CUBE: "cube"}


def _owner_scope(kind: str, named: Named) -> tuple[str, str]:
    if kind == GROUP:
        return GROUP_SCOPE
    if kind == CUBE:
        return CUBE_SCOPE
    return named.app_id, named.project_id


def _bounded(node: Any) -> bool:
    """A filter tree every match of which names the caller or one of their agents (ANDs only)."""
    if not isinstance(node, Mapping):
        return False
    if node.get("user_id") is not None or node.get("agent_id") is not None:
        return True
    for key in _AND:
        children = node.get(key)
        if isinstance(children, list) and any(_bounded(child) for child in children):
            return True
    return False


def _values(value: Any, where: str) -> list[Any]:
    """The ids a user or agent field names; 403 for conditions that reach beyond them."""
    named = _named(value)
    if named is None:
        raise Forbidden(f"{where}: may only name your own", field=where)
    return named


def _scope_value(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) and value else "default"
