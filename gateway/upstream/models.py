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

A model may name a `lean` twin of its body model: the same fields, validators and refusals, but
validated from the body's bytes and keeping only what the gateway reads (content items without
a file dropped, filter trees folded as they are read), so a large body never becomes the whole
tree of Python objects a parsed dict and the engine's instances would be (SPEC §13).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from pydantic import BaseModel, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, PydanticKnownError, core_schema

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
FilterIds = Callable[[Any, str], Iterable[tuple[str, str, Any, bool]]]


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

    @cached_property
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
    # `body` as the gateway validates it (module docstring): accepts and refuses exactly what
    # `body` does, keeps only what the gateway reads; None = `body` itself, from a parsed body.
    lean: type[BaseModel] | None = None

    def read(self, body: Any, query: Mapping[str, list[str]], params: Mapping[str, str]
             ) -> Named:
        """Validate the request as the engine would, then every id it names (422 on refusal).
        `body` is parsed; the lean model, where there is one, validates it."""
        validated = None
        if self.body is not None:
            if body is None and not self.body_required:
                body = {}
            validated = _validated(self.lean or self.body, body, BODY)
        return self.read_validated(validated, query, params, given_body=body)

    def validated_json(self, raw: bytes) -> BaseModel | None:
        """The body validated by the lean model straight from its bytes (422 on refusal), or
        None when pydantic's JSON reader cannot read them the way the engine's parser does (a
        lone surrogate, nesting past its limit: the caller parses those, gateway/upstream/
        routes.py). `raw` holds a JSON object (json_body.starts_an_object)."""
        assert self.lean is not None
        try:
            return self.lean.__pydantic_validator__.validate_json(  # type: ignore[no-any-return]
                raw, context={})
        except ValidationError as exc:
            if exc.errors(include_url=False, include_input=False)[0]["type"] == "json_invalid":
                return None
            raise _refusal(exc, BODY) from None

    def read_validated(self, body: BaseModel | None, query: Mapping[str, list[str]],
                       params: Mapping[str, str], given_body: Any = None) -> Named:
        """`read` past the body's validation: the query's, then every id named. `given_body`:
        the body as parsed, where there is one."""
        named = Named()
        # each part's validated fields (declared and extra) by name; path: the mapping
        parts: dict[str, Mapping[str, Any]] = {PATH: params}
        given: dict[str, Any] = {}  # each part as given, before validation
        if body is not None:
            parts[BODY], given[BODY] = _fields_of(body), given_body
        if self.query is not None:
            # A repeated parameter is a list, which no scalar field accepts: a 422.
            flat = {key: vals[-1] if len(vals) == 1 else vals for key, vals in query.items()}
            parts[QUERY] = _fields_of(_validated(self.query, flat, QUERY))
            given[QUERY] = flat
        scope = parts.get(BODY, parts.get(QUERY))
        if scope is not None:
            app_key, project_key = self.scope_keys
            named.app_id = _scope(scope.get(app_key))
            named.project_id = _scope(scope.get(project_key))
        for one in self.ids:
            part = parts.get(one.where)
            value = None if part is None else part.get(one.key)
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
                    named.add(kind, where, found, scopes=pins and one.scopes)
            else:
                named.add(one.kind, label, value, scopes=one.scopes)
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
                named.add(kind, f"{label}[{index}].{self.sender_key}", sender)

    @property
    def scoped(self) -> bool:
        """The route must be bounded to the caller by one of its scoping fields."""
        return any(one.scopes for one in self.ids)


def _scope(value: Any) -> str:
    return value if isinstance(value, str) and value else "default"


def _fields_of(model: BaseModel) -> Mapping[str, Any]:
    """A validated part's fields by name, declared and extra (the declared ones where both name
    a key), read once rather than field by field (`_field`)."""
    fields: dict[str, Any] = model.__dict__  # a model's declared fields, by name
    extra = model.__pydantic_extra__
    return {**extra, **fields} if extra else fields


def _field(part: Any, key: str) -> Any:
    """One field of a validated part (declared or extra), or of a plain mapping; None if absent.

    Fields are read off the model rather than from `model_dump()`: a dump would copy the whole
    validated body once more, and a body of many small objects is many times its size as
    Python objects already (SPEC §13, bench/body_memory.py)."""
    if isinstance(part, BaseModel):
        fields = part.__dict__  # a model's declared fields, by name
        if key in fields:
            return fields[key]
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
        parsed = model.model_validate(data, context={})
    except ValidationError as exc:
        raise _refusal(exc, where) from None
    return parsed


def _refusal(exc: ValidationError, where: str) -> ValidationFailed:
    """The 422 of a refused request part: its first error, as the engine's model orders them,
    in the words of a parsed body's validation by the engine's model: validated from bytes,
    pydantic says "a valid array" where it says "a valid list" of a parsed one, and a lean
    model's errors name the engine's model."""
    errors = exc.errors(include_url=False, include_input=False)
    first = _engine_first(errors)
    location = ".".join(str(part) for part in first["loc"]) or where
    if where != BODY:
        location = f"{where}.{location}"
    context = first.get("ctx")
    if context is not None and context.get("class_name") in _ENGINE_NAMES:
        context = {**context, "class_name": _ENGINE_NAMES[context["class_name"]]}
    try:
        message = PydanticKnownError(first["type"], context).message()
    except (KeyError, TypeError, ValueError):  # not one of pydantic's own errors
        message = first["msg"]
    return ValidationFailed(f"{location}: {message}", field=location)


M = TypeVar("M", bound=BaseModel)

# A lean model's class name -> its engine model's: pydantic writes class names into errors
# ("a valid dictionary or instance of FilterNode"), and a refusal reads as the engine's.
_ENGINE_NAMES: dict[str, str] = {}


def lean_of(engine: type[BaseModel]) -> Callable[[type[M]], type[M]]:
    """The class decorator of a lean model: its errors name the engine's model."""

    def named(model: type[M]) -> type[M]:
        _ENGINE_NAMES[model.__name__] = engine.__name__
        return model

    return named


# --- unions a lean model tries in another order ----------------------------------------------

# The label of the member a lean union tries first -> the label of the engine's first member.
_ENGINE_FIRST: dict[str, str] = {}


def _engine_first(errors: list[Any]) -> Any:
    """The error the engine's model would list first. A lean union tries its list member
    first (`ItemsOrText`); when every member fails, the engine lists its text member's error
    first, and the lean union's errors hold that error too."""
    first = errors[0]
    loc = first["loc"]
    for index, part in enumerate(loc):
        engine = _ENGINE_FIRST.get(part) if isinstance(part, str) else None
        if engine is not None:
            prefix = (*loc[:index], engine)
            return next((one for one in errors if one["loc"][:index + 1] == prefix), first)
    return first


@dataclass(frozen=True)
class ItemsOrText:
    """`Annotated[Any, ItemsOrText(Item, kept, text)]` validates what the engine's `str |
    list[Item]` does, keeping `kept(item)` of each item and `text(value)` of a string.

    The list is tried first: a member that fails makes pydantic copy the input into its
    error, and the engine's order (text first, `smart` mode) would copy every list of items.
    Errors are reported as the engine orders them (`_engine_first`)."""

    item: type[BaseModel]
    kept: Callable[[BaseModel], Any]
    text: Callable[[str], Any]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> CoreSchema:
        items = core_schema.list_schema(core_schema.no_info_after_validator_function(
            self.kept, handler.generate_schema(self.item)))
        text = core_schema.no_info_after_validator_function(self.text,
                                                            handler.generate_schema(str))
        label = f"list[{self.item.__name__}]"
        _ENGINE_FIRST[label] = "str"  # the engine's labels, so its errors read the same
        return core_schema.union_schema([(items, label), (text, "str")], mode="left_to_right")


@dataclass(frozen=True)
class KeptOfAny:
    """`Annotated[Any, KeptOfAny(kept)]` accepts any value, as an untyped field does, keeping
    `kept(item)` of each item of a list (read one at a time: the list never becomes its items'
    Python objects all at once) and `kept(value)` of anything else."""

    kept: Callable[[Any], Any]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> CoreSchema:
        each = core_schema.no_info_after_validator_function(self.kept, core_schema.any_schema())
        return core_schema.union_schema([(core_schema.list_schema(each), "list"), (each, "any")],
                                        mode="left_to_right")
