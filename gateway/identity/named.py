"""The kinds of identity a request can name, and where it names them (SPEC §3, §5).

Shared by the route tables that find the ids (gateway/upstream/routes.py) and the rules that
check them (gateway/identity/ownership.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.identity.canonical import check_id

USER = "user"  # must be the caller
SENDER = "sender"  # a `user` message's sender: must be the caller
AGENT = "agent"  # must be one of the caller's agents
SESSION = "session"  # must not be another user's session (scoped by app_id/project_id)
GROUP = "group"  # a conversation group: owned like a session (default scope)
CUBE = "cube"  # a MemOS memory cube: `<user_id>` or `<user_id>:<name>`, that user's by name
FILTERS = "filters"  # a filter tree: every user, agent and session it names, checked as above
KINDS = (USER, SENDER, AGENT, SESSION, GROUP, CUBE, FILTERS)
OWNED = (SESSION, GROUP, CUBE)  # owned by whoever claims them first (or derived: canonical.py)
_OUTSIDE_THE_BODY = ("query.", "path.")


class Named:
    """Every id a request names, in order: (kind, where, value). `where` is the error's
    `field`: a body key path as `messages[0].sender_id`, else `query.user_id`, `path.group_id`.

    Ids are added with `add`, which keeps an id named again (the same kind and string, in the
    same part: body, or query and path) once, where it was first named, unless only the later
    one bounds the route: each check answers the same for it, so the first that fails still
    fails first, and a body naming one session a million times costs one entry (SPEC §13)."""

    __slots__ = ("ids", "app_id", "project_id", "scopes", "_seen")

    def __init__(self, app_id: str = "default", project_id: str = "default",
                 ids: list[tuple[str, str, Any]] | None = None,
                 scopes: set[str] | None = None) -> None:
        self.ids: list[tuple[str, str, Any]] = [] if ids is None else ids
        self.app_id = app_id
        self.project_id = project_id
        # The `where` of each id through which the engine bounds the route (its route model):
        # only these make a read "scoped" to the caller.
        self.scopes: set[str] = set() if scopes is None else scopes
        # kind (in the body, or outside it) -> {string id: where it was kept last}
        self._seen: dict[str, dict[str, str]] = {}

    def add(self, kind: str, where: str, value: Any, *, scopes: bool = False) -> None:
        """One id the request names; `scopes`: the engine bounds the route by it. 422 unless
        every id it holds is in canonical form (gateway/identity/canonical.py)."""
        if type(value) is str:
            part = f"{kind} outside" if where.startswith(_OUTSIDE_THE_BODY) else kind
            seen = self._seen.get(part)
            if seen is None:
                seen = self._seen[part] = {}
            first = seen.get(value)
            if first is not None and (not scopes or first in self.scopes):
                return  # checked already, and it bounds the route already if this one would
            if kind != FILTERS:
                check_id(value, where, owned=kind in OWNED)
            seen[value] = where
        elif kind != FILTERS:
            check_canonical(kind, where, value)
        self.ids.append((kind, where, value))
        if scopes:
            self.scopes.add(where)

    def of(self, *kinds: str) -> list[tuple[str, Any]]:
        return [(where, value) for kind, where, value in self.ids if kind in kinds]

    def only(self, *kinds: str) -> Named:
        return Named(self.app_id, self.project_id,
                     [entry for entry in self.ids if entry[0] in kinds], set(self.scopes))


def check_canonical(kind: str, where: str, value: Any) -> None:
    """Every string id `value` holds — itself, a list's items, an operator's operands — in
    canonical form (422 otherwise). Other values are left to the owner checks."""
    if isinstance(value, str):
        check_id(value, where, owned=kind in OWNED)
    elif isinstance(value, list):
        for one in value:
            check_canonical(kind, where, one)
    elif isinstance(value, Mapping):
        for one in value.values():
            check_canonical(kind, where, one)


def named_values(value: Any, operators: frozenset[str]) -> list[Any] | None:
    """The values a filter condition names exactly: a plain value, a list, or an object of
    `operators` only (eq / in, as the engine's dialect spells them); None when it reaches
    beyond them (ne, gt, contains, ...)."""
    if isinstance(value, Mapping):
        if not value or not set(value) <= operators:
            return None
        named: list[Any] = []
        for inner in value.values():
            named.extend(inner if isinstance(inner, list) else [inner])
        return named
    return list(value) if isinstance(value, list) else [value]
