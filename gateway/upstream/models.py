"""Route models: how an engine parses one route's request, and which of its fields are ids (§5).

A model is written from the engine's own source (the file is named in `source`, and printed in
docs/engines.md). It says what the engine reads and where (body, query, path), with the engine's
defaults and refusals: `body` and `query` are pydantic models shaped like the engine's own, so a
request the engine would refuse (a missing required field, an unknown field where the engine
forbids them, a wrong type) is the gateway's 422 and is never forwarded. Ids are then read from
the *validated* request, so a field is checked exactly where, and with the precedence and
default, the engine gives it: a `session_id` in the query string of a route whose engine reads
only the body is not an id at all, and the body's default `app_id` is the scope checked.

`ids` names, per field, what it is (USER, AGENT, SESSION, GROUP, CUBE, FILTERS, or SENDERS for a
message list whose senders own what is extracted) and whether it *scopes* the route: a read or a
bulk write counts as bounded to the caller only through the field the engine filters by. Pure:
no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from gateway.errors import ValidationFailed
from gateway.identity.named import FILTERS, KINDS, Named

BODY = "body"
QUERY = "query"
PATH = "path"

# A message list: each message's sender is checked by its role (`senders` of the model).
SENDERS = "senders"

# A filter dialect: (tree, where) -> the ids it names as (kind, where, value, pins), where
# `pins` is True when the condition is part of a conjunction that pins that id (eq / in of
# exactly the values named, reached through ANDs only). Raises ValidationFailed for what the
# engine refuses and for conditions that reach beyond the values named on owner fields.
FilterIds = Callable[[Any, str], list[tuple[str, str, Any, bool]]]


@dataclass(frozen=True)
class Id:
    """One field of a validated request that names an identity."""

    kind: str  # a KINDS value, FILTERS or SENDERS
    key: str  # the field's name in the validated model ("user_id", "filters", "messages")
    where: str = BODY
    scopes: bool = False  # the engine bounds the route to what this field names

    def __post_init__(self) -> None:
        assert self.kind in (*KINDS, SENDERS), self.kind
        assert self.where in (BODY, QUERY, PATH), self.where

    @property
    def label(self) -> str:
        return self.key if self.where == BODY else f"{self.where}.{self.key}"


@dataclass(frozen=True)
class RouteModel:
    """What the engine reads on one route (SPEC §5), from `source` in the engine's code."""

    source: str
    body: type[BaseModel] | None = None  # the engine's body model; None = it reads no body
    query: type[BaseModel] | None = None  # the engine's query parameters; None = none read
    path: tuple[str, ...] = ()  # path parameters the engine reads, by name
    ids: tuple[Id, ...] = ()
    # What each message role's `sender_id` must be: USER (the caller) or AGENT (one of the
    # caller's agents, where the engine makes that sender the owner of what it extracts).
    senders: Mapping[str, str] = field(default_factory=dict)
    sender_key: str = "sender_id"
    filters: FilterIds | None = None
    # The body, when the engine reads one, is required (FastAPI: a missing body is a 422).
    body_required: bool = True
    # Ids the engine scopes its session namespace by, read from the validated body.
    scope_keys: tuple[str, str] = ("app_id", "project_id")
    notes: tuple[str, ...] = ()  # what the engine ignores or forbids, for docs/engines.md

    def read(self, body: Any, query: Mapping[str, list[str]], params: Mapping[str, str]
             ) -> Named:
        """Validate the request as the engine would, then every id it names (422 on refusal)."""
        named = Named()
        values: dict[str, Any] = {}  # each part's validated model (path: a dict)
        given: dict[str, Any] = {}  # each part as given, before validation
        if self.body is not None:
            if body is None and not self.body_required:
                body = {}
            values[BODY], given[BODY] = _validated(self.body, body, BODY), body
        if self.query is not None:
            # A repeated parameter is a list, which no scalar field accepts: a 422.
            flat = {key: vals[-1] if len(vals) == 1 else vals for key, vals in query.items()}
            values[QUERY], given[QUERY] = _validated(self.query, flat, QUERY), flat
        scope = values.get(BODY, values.get(QUERY))
        app_key, project_key = self.scope_keys
        named.app_id = _scope(_field(scope, app_key))
        named.project_id = _scope(_field(scope, project_key))
        values[PATH] = dict(params)
        for one in self.ids:
            value = _field(values.get(one.where), one.key)
            if value is None:
                continue
            label = one.label
            if one.kind == SENDERS:
                self._senders(value, label, named)
            elif one.kind == FILTERS:
                if self.filters is None:
                    continue
                tree = _filter_tree(value, given.get(one.where), one.key)
                for kind, where, found, pins in self.filters(tree, label):
                    named.ids.append((kind, where, found))
                    if pins and one.scopes:
                        named.scopes.add(where)
            else:
                named.ids.append((one.kind, label, value))
                if one.scopes:
                    named.scopes.add(label)
        return named

    def _senders(self, messages: Any, label: str, named: Named) -> None:
        if not isinstance(messages, list):
            return
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping | BaseModel):
                continue
            kind = self.senders.get(_field(message, "role"))
            sender = _field(message, self.sender_key)
            if kind is not None and sender is not None:
                named.ids.append((kind, f"{label}[{index}].{self.sender_key}", sender))

    @property
    def scoped(self) -> bool:
        """The route must be bounded to the caller by one of its scoping fields."""
        return any(one.scopes for one in self.ids)


def _scope(value: Any) -> str:
    return value if isinstance(value, str) and value else "default"


def _field(part: Any, key: str) -> Any:
    """One field of a validated part (declared or extra), or of a plain mapping; None if absent.

    Fields are read off the model rather than from `model_dump()`: a dump would copy the whole
    validated body once more, and a body of many small objects is many times its size as
    Python objects already (SPEC §13, bench/body_memory.py)."""
    if isinstance(part, BaseModel):
        if key in type(part).model_fields:
            return getattr(part, key)
        return (part.__pydantic_extra__ or {}).get(key)
    if isinstance(part, Mapping):
        return part.get(key)
    return None


def _filter_tree(value: Any, given: Any, key: str) -> Any:
    """The filter tree to walk: as given, when the model validated it into a model of the same
    shape (a `FilterNode`: the same keys and values, only its unset `AND` / `OR` would be
    added, and walking skips those), else the validated value; a dump would copy the tree."""
    if not isinstance(value, BaseModel):
        return value
    raw = given.get(key) if isinstance(given, Mapping) else None
    return raw if isinstance(raw, Mapping) else value.model_dump()


def _validated(model: type[BaseModel], data: Any, where: str) -> BaseModel:
    """The request part as the engine's model reads it (defaults applied), or a 422."""
    if data is None:
        raise ValidationFailed(f"the request {where} is required", field=where)
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        location = ".".join(str(part) for part in first["loc"]) or where
        if where != BODY:
            location = f"{where}.{location}"
        raise ValidationFailed(f"{location}: {first['msg']}", field=location) from None
    return parsed
