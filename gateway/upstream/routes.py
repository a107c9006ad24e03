"""The engine routes a flavour opens, as data (SPEC §5): method, path, where each id sits.

A route not in its flavour's table (nor in `upstream.allow_paths`) is never forwarded. Each entry
names where the request carries a user, agent, session, group or cube (body, query, filters,
path); `GENERIC_FIELDS` are checked on every entry as well, so one identity policy covers them
all (gateway/identity/ownership.py). Matching is on the normalised path (gateway/upstream/
target.py); the path sent upstream is rendered from the entry's own spelling, so the engine sees
exactly the route that was checked. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

# What a field names, and every id a request names (re-exported for the tables).
from gateway.identity.named import (
    AGENT,
    CUBE,
    FILTERS,
    GROUP,
    KINDS,
    SENDER,
    SESSION,
    USER,
    Named,
    check_canonical,
)
from gateway.upstream.json_body import JsonBody, json_object, starts_an_object

if TYPE_CHECKING:
    from gateway.upstream.models import RouteModel

__all__ = ["AGENT", "CUBE", "FILTERS", "GROUP", "KINDS", "SENDER", "SESSION", "USER", "Named"]

# Where it sits.
BODY = "body"
QUERY = "query"
PATH = "path"

# What an owned handler does with an intercepted route (gateway/routes/memories.py).
ADD = "add"
SEARCH = "search"
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Field:
    kind: str
    where: str
    key: str  # a body key path: "user_id", "info.user_id", "messages[].sender_id"

    def __str__(self) -> str:
        return f"{self.where}.{self.key}"


def fields(kind: str, *places: str) -> tuple[Field, ...]:
    """`fields(USER, "body.user_id", "query.user_id")`."""
    out = []
    for place in places:
        where, _, key = place.partition(".")
        assert kind in KINDS and where in (BODY, QUERY, PATH) and key, place
        out.append(Field(kind, where, key))
    return tuple(out)


# Checked on every route of every flavour, wherever the table says nothing more.
GENERIC_FIELDS: tuple[Field, ...] = (
    *fields(USER, "body.user_id", "query.user_id", "body.sender_id", "query.sender_id",
            "body.sender", "query.sender"),
    *fields(SENDER, "body.messages[].sender_id"),
    *fields(AGENT, "body.agent_id", "query.agent_id"),
    *fields(SESSION, "body.session_id", "query.session_id", "body.run_id", "query.run_id"),
    *fields(GROUP, "body.group_id", "query.group_id"),
    *fields(CUBE, "body.mem_cube_id", "query.mem_cube_id", "body.readable_cube_ids",
            "body.writable_cube_ids", "query.cube_id", "body.cube_id"),
    *fields(FILTERS, "body.filters"),
)


@dataclass(frozen=True)
class EngineRoute:
    method: str
    pattern: str  # "/api/v2/memory/get", "/memories/{memory_id}", "/v1/memories/{memory_id}/"
    fields: tuple[Field, ...] = ()
    # The route can return or touch many users' items: it must name the caller, one of the
    # caller's agents, or a session/group/cube the caller owns (else 422 user_id_required).
    scoped: bool = False
    # An add: the sessions, groups and cubes it names become the caller's.
    claims: bool = False
    # Addressed by an engine id the gateway does not own: this GET route (same path parameters)
    # is asked first, and its answer's `user_id` must be the caller (else 404).
    owner_probe: str | None = None
    handled: str = ""  # ADD | SEARCH: answered by the gateway's own handler
    # A POST (or other unsafe method) by which the engine only reads (get, list, search by
    # filters): rate-limited as an engine read, not a write (gateway/limits/classes.py).
    reads: bool = False
    note: str = ""
    # How the engine parses this route (gateway/upstream/models.py): when given, it alone says
    # which fields are ids and which scope the route; GENERIC_FIELDS are for unmodelled
    # entries (`upstream.allow_paths`) only.
    model: RouteModel | None = None
    # A read whose answer the gateway filters like a search (SPEC §9): the items it holds.
    answer_items: Callable[[Any], list[Any]] | None = None
    segments: tuple[str | None, ...] = field(init=False, repr=False, compare=False)
    wildcard: bool = field(init=False, repr=False, compare=False)
    # What `named_in` reads, by place: top-level body keys and query names → their kinds, then
    # nested body paths and path parameters (kind, key).
    body_keys: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    body_paths: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    query_keys: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    path_keys: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    # Whether the engine only reads by this route: the `read` scope suffices (SPEC §17) and it
    # counts as an engine read (gateway/limits/classes.py): safe methods, searches, and the
    # POSTs the table marks `reads`.
    read_only: bool = field(init=False, repr=False, compare=False)
    # The query names forwarded: a modelled route's engine reads only those its model
    # declares (none when it reads no query string); None = all (an unmodelled entry).
    forwarded_query: frozenset[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        assert self.pattern.startswith("/"), self.pattern
        if self.model is not None and self.model.scoped:
            object.__setattr__(self, "scoped", True)
        parts = [part for part in self.pattern.split("/") if part]
        wildcard = bool(parts) and parts[-1] == "*"
        if wildcard:
            parts.pop()
        object.__setattr__(self, "wildcard", wildcard)
        object.__setattr__(self, "segments", tuple(
            None if part.startswith("{") and part.endswith("}") else part for part in parts))
        body_keys: dict[str, tuple[str, ...]] = {}
        query_keys: dict[str, tuple[str, ...]] = {}
        body_paths, path_keys = [], []
        for f in self.checked_fields():
            if f.where == BODY and ("." in f.key or "[]" in f.key):
                body_paths.append((f.kind, f.key))
            elif f.where == BODY:
                body_keys[f.key] = (*body_keys.get(f.key, ()), f.kind)
            elif f.where == QUERY:
                query_keys[f.key] = (*query_keys.get(f.key, ()), f.kind)
            else:
                path_keys.append((f.kind, f.key))
        object.__setattr__(self, "body_keys", body_keys)
        object.__setattr__(self, "body_paths", tuple(body_paths))
        object.__setattr__(self, "query_keys", query_keys)
        object.__setattr__(self, "path_keys", tuple(path_keys))
        object.__setattr__(self, "read_only", self.method in _READ_METHODS
                           or self.handled == SEARCH or self.reads)
        model = self.model
        object.__setattr__(self, "forwarded_query", None if model is None else frozenset(
            model.query.model_fields if model.query is not None else ()))

    @property
    def literal(self) -> bool:
        return not self.wildcard and None not in self.segments

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(part[1:-1] for part in self.pattern.split("/")
                     if part.startswith("{") and part.endswith("}"))

    def match(self, segments: Sequence[str]) -> dict[str, str] | None:
        """The path parameters when `segments` (a normalised path) is this route, else None."""
        own = self.segments
        if len(segments) < len(own) or (len(segments) > len(own) and not self.wildcard):
            return None
        params: dict[str, str] = {}
        names = iter(self.names)
        for want, got in zip(own, segments, strict=False):
            if want is None:
                params[next(names)] = got
            elif want != got:
                return None
        if self.wildcard:
            params["*"] = "/".join(segments[len(own):])
        return params

    def render(self, params: Mapping[str, str]) -> str:
        """The upstream path: the pattern's spelling, each parameter percent-encoded whole."""
        if not params and self.literal:
            return self.pattern
        out = []
        for part in self.pattern.split("/"):
            if part.startswith("{") and part.endswith("}"):
                out.append(quote(params[part[1:-1]], safe=""))
            elif part == "*":
                out.append("/".join(quote(seg, safe="") for seg in params["*"].split("/")))
            else:
                out.append(part)
        path = "/".join(out)
        return path.rstrip("/") if self.wildcard and not params.get("*") else path

    def checked_fields(self) -> tuple[Field, ...]:
        """The table's fields first, then every generic one it does not already name."""
        if self.model is not None:
            return self.fields
        own = {(f.where, f.key) for f in self.fields}
        return self.fields + tuple(f for f in GENERIC_FIELDS if (f.where, f.key) not in own)


def route(request: str, model: RouteModel, note: str, *, reads: bool = False,
          claims: bool = False, owner_probe: str | None = None,
          answer_items: Callable[[Any], list[Any]] | None = None) -> EngineRoute:
    """One entry of a flavour's table: `route("POST /api/v2/memory/get", models.V2_GET,
    "pages of one owner's memories", reads=True)` — the request as `upstream.allow_paths`
    spells it, how the engine parses it, and what it is (docs/engines.md)."""
    method, _, pattern = request.partition(" ")
    return EngineRoute(method, pattern, model=model, note=note, reads=reads, claims=claims,
                       owner_probe=owner_probe, answer_items=answer_items)

class RouteTable:
    """A flavour's routes, with exact paths found by one dictionary lookup."""

    def __init__(self, routes: Iterable[EngineRoute]) -> None:
        self.routes = tuple(routes)
        self._exact: dict[tuple[str, tuple[str | None, ...]], EngineRoute] = {}
        self._patterned: list[EngineRoute] = []
        for route in self.routes:
            if route.literal:
                self._exact.setdefault((route.method, route.segments), route)
            else:
                self._patterned.append(route)

    def find(self, method: str, segments: tuple[str, ...]
             ) -> tuple[EngineRoute, dict[str, str]] | None:
        wanted = "GET" if method == "HEAD" else method
        route = self._exact.get((wanted, segments))
        if route is not None:
            return route, {}
        for route in self._patterned:
            if route.method == wanted and (params := route.match(segments)) is not None:
                return route, params
        return None

    def with_routes(self, extra: Iterable[EngineRoute]) -> RouteTable:
        return RouteTable((*self.routes, *extra))


def parse_allowed(entry: str) -> EngineRoute:
    """An `upstream.allow_paths` entry, "METHOD /path" with `{name}` or a final `*`."""
    method, _, pattern = entry.strip().partition(" ")
    pattern = pattern.strip()
    if not method.isalpha() or not method.isupper() or not pattern.startswith("/"):
        raise ValueError(f"expected \"METHOD /path\", got {entry!r}")
    parts = [part for part in pattern.split("/") if part]
    if "*" in parts[:-1] or any("*" in part and part != "*" for part in parts):
        raise ValueError(f"'*' may only be the last segment: {entry!r}")
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"no dot segments: {entry!r}")
    return EngineRoute(method, pattern, note="opened by upstream.allow_paths")


# --- what a request names -----------------------------------------------------------------------


def _walk(node: Any, keys: list[str], where: str, found: list[tuple[str, str, Any]],
          kind: str) -> None:
    if not keys:
        if node is not None:
            found.append((kind, where, node))
        return
    key, rest = keys[0], keys[1:]
    if key.endswith("[]"):
        where = f"{where}." if where else ""
        items = node.get(key[:-2]) if isinstance(node, Mapping) else None
        if isinstance(items, list):
            for index, item in enumerate(items):
                if kind == SENDER and not (isinstance(item, Mapping)
                                           and item.get("role") == "user"):
                    continue
                _walk(item, rest, f"{where}{key[:-2]}[{index}]", found, kind)
        return
    where = f"{where}." if where else ""
    if isinstance(node, Mapping) and key in node:
        _walk(node[key], rest, f"{where}{key}", found, kind)


def _scope_value(body: Any, query: Mapping[str, list[str]], key: str) -> str:
    value = body.get(key) if isinstance(body, Mapping) else None
    if value is None and query.get(key):
        value = query[key][-1]
    return value if isinstance(value, str) and value else "default"


def named_in(route: EngineRoute, body: Any, query: Mapping[str, list[str]],
             params: Mapping[str, str]) -> Named:
    """What `route` names in a parsed body, a decoded query (every value) and path parameters.

    A modelled route is validated as its engine parses it first (422 on what it refuses).
    """
    if route.model is not None:
        return route.model.read(body, query, params)
    named = Named()
    ids = named.ids
    if isinstance(body, dict):
        body_keys = route.body_keys
        for key, value in body.items():
            kinds = body_keys.get(key)
            if kinds is not None and value is not None:
                for kind in kinds:
                    ids.append((kind, key, value))
        for kind, key in route.body_paths:
            if key.partition(".")[0].removesuffix("[]") in body:
                _walk(body, key.split("."), "", ids, kind)
    if query:
        for key, values in query.items():
            for kind in route.query_keys.get(key, ()):
                ids.extend((kind, f"query.{key}", value) for value in values)
    if params:
        for kind, key in route.path_keys:
            if key in params:
                ids.append((kind, f"path.{key}", params[key]))
    if any(entry[0] == SESSION for entry in ids):  # sessions are scoped by app and project
        named.app_id = _scope_value(body, query, "app_id")
        named.project_id = _scope_value(body, query, "project_id")
    for kind, where, value in ids:  # as `Named.add` does for a model's ids
        if kind != FILTERS:
            check_canonical(kind, where, value)
    # Unmodelled: no model says which field the engine filters by, so any id may bound it.
    named.scopes.update(where for _, where, _ in ids)
    return named


def named_in_json(route: EngineRoute, body: bytes | None, query: Mapping[str, list[str]],
                  params: Mapping[str, str]) -> tuple[Named, JsonBody | None]:
    """`named_in` for a body still in bytes, checked (json_body.json_bytes), and the body as
    the gateway reads it.

    A route model with a lean body model validates the bytes themselves: the body never
    becomes a dict (SPEC §13). Bytes pydantic's JSON reader cannot read as the engine's parser
    does (`RouteModel.validated_json`), and every other route, are parsed first."""
    model = route.model
    if body is not None and model is not None and model.lean is not None \
            and starts_an_object(body):
        validated = model.validated_json(body)
        if validated is not None:
            fields = validated.__dict__  # its declared fields, by name
            if validated.__pydantic_extra__:
                fields = {**fields, **validated.__pydantic_extra__}
            return model.read_validated(validated, query, params), JsonBody(body, fields,
                                                                            lean=True)
    if body is None:
        return named_in(route, None, query, params), None
    payload = json_object(body)
    return named_in(route, payload, query, params), JsonBody(body, payload)
