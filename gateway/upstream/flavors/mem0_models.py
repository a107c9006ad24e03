"""mem0's request models, as its open-source server and its hosted platform parse them (SPEC §5).

Written from mem0's source (github.com/mem0ai/mem0):
- the open-source REST server, `server/main.py`: `MemoryCreate` and `Message` (string content
  only), `MemoryUpdate`, `SearchRequest`, and the query parameters of `GET` / `DELETE /memories`;
  the filters it hands to `Memory.search`, `mem0/memory/main.py` (`_process_metadata_filters`:
  `AND` conditions are merged into the top level, `OR` / `NOT` passed to the vector store, and
  `$or` / `$not` keys reach the vector store as they are);
- the hosted platform, whose server is not public: its client `mem0/client/main.py`
  (`MemoryClient`, what each method sends in the body and in the query string) and
  `mem0/client/types.py`, and the platform's own API document `docs/openapi.json` (required
  fields, query parameters, the filter DSL: `AND` / `OR` / `NOT`, `in`, `gte`, `lte`, `gt`,
  `lt`, `ne`, `contains`, `icontains`, and the `*` wildcard).

What the engine does with what: a memory belongs to the `user_id`, `agent_id` and `run_id` it
was added with; reads are bounded by the same three, as filters. `run_id` is a session the
caller owns (mem0's runs are global: no app or project scopes them). Memory ids carry no owner
(the routes by id read the memory first, see mem0.py).
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.errors import Forbidden
from gateway.identity.named import AGENT, FILTERS, SESSION, USER
from gateway.upstream.flavors.filter_trees import owner_ids
from gateway.upstream.models import PATH, QUERY, Id, RouteModel

SOURCE_SERVER = "server/main.py"
SOURCE_SEARCH = "server/main.py, mem0/memory/main.py"
SOURCE_PLATFORM = "mem0/client/main.py, docs/openapi.json"

# mem0 scopes nothing by app or project: sessions (runs) are owned in the default scope.
UNSCOPED = ("", "")
ENTITY_IDS = ("user_id", "agent_id", "app_id", "run_id")
WILDCARD = "*"


# --- filters -----------------------------------------------------------------------------------

_OWNERS = {"user_id": USER, "agent_id": AGENT, "run_id": SESSION}


def filter_ids(tree: Any, where: str) -> list[tuple[str, str, Any, bool]]:
    """The users, agents and runs a mem0 filter tree names; AND chains pin, OR / NOT never.

    `$and` / `$or` / `$not` are read as their plain spellings: the open-source server hands
    such keys to the vector store unchanged, which reads them as the combinators they name.
    """
    return owner_ids(tree, where, _OWNERS, every=("AND", "$and"), some=("OR", "$or"),
                     negate=("NOT", "$not"), wildcard=WILDCARD)


def _no_top_level_entities(extra: dict[str, Any] | None) -> None:
    named = sorted(set(extra or {}) & set(ENTITY_IDS))
    if named:
        raise ValueError(f"top-level entity ids are rejected: pass {', '.join(named)} inside "
                         "filters")


# --- the open-source server --------------------------------------------------------------------

class Message(BaseModel):
    role: str
    content: str  # the server's `Message.content` is a string: file parts are a 422


class MemoryCreate(BaseModel):
    messages: list[Message]
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    expiration_date: str | None = None
    infer: bool | None = None
    memory_type: str | None = None
    prompt: str | None = None

    @model_validator(mode="after")
    def _one_id(self) -> Self:
        if not any((self.user_id, self.agent_id, self.run_id)):
            raise ValueError("At least one identifier (user_id, agent_id, run_id) is required.")
        return self


class MemoryUpdate(BaseModel):
    text: str | None = None
    metadata: dict[str, Any] | None = None
    expiration_date: str | None = None


class SearchRequest(BaseModel):
    query: str
    user_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    filters: dict[str, Any] | None = None
    top_k: int | None = None
    threshold: float | None = None
    explain: bool | None = None
    show_expired: bool | None = None

    @model_validator(mode="after")
    def _one_id(self) -> Self:
        # search_memories copies truthy top-level ids into filters; Memory.search then needs
        # one of them at the top of the filters (AND lists are merged only afterwards).
        filters = self.filters or {}
        if not any((self.user_id, self.agent_id, self.run_id)) and not any(
                key in filters for key in ("user_id", "agent_id", "run_id")):
            raise ValueError("filters must contain at least one of: user_id, agent_id, run_id")
        return self


class ListQuery(BaseModel):
    user_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    top_k: int | None = Field(default=None, ge=0, le=1000)
    show_expired: bool = False


class DeleteAllQuery(BaseModel):
    user_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None


# --- the platform ------------------------------------------------------------------------------

class PlatformMessage(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str | dict[str, Any] | list[Any]  # text, or the platform's multimodal parts


class PlatformAdd(BaseModel):
    model_config = ConfigDict(extra="allow")

    messages: list[PlatformMessage]
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    app_id: str | None = None
    metadata: dict[str, Any] | None = None
    filters: dict[str, Any] | None = None
    infer: bool | None = None
    expiration_date: str | None = None

    @model_validator(mode="after")
    def _one_entity(self) -> Self:
        if not any((self.user_id, self.agent_id, self.run_id, self.app_id)):
            raise ValueError("at least one entity id (user_id, agent_id, app_id, run_id) is "
                             "required")
        if not any((self.user_id, self.agent_id, self.run_id)):
            # The platform accepts an app alone; an app is no one's: the memory would have
            # no owner the gateway checks (and every caller naming the app would read it).
            raise ValueError("user_id, agent_id or run_id is required: an app_id names no "
                             "owner")
        return self


class PlatformList(BaseModel):
    model_config = ConfigDict(extra="allow")

    filters: dict[str, Any]
    show_expired: bool = False
    start_date: str | None = None
    end_date: str | None = None
    categories: list[str] | None = None
    fields: list[str] | None = None
    keywords: str | None = None
    page: int | None = Field(default=None, ge=1)
    page_size: int | None = Field(default=None, ge=1, le=200)

    @model_validator(mode="after")
    def _entities_in_filters(self) -> Self:
        _no_top_level_entities(self.__pydantic_extra__)
        return self


class PageQuery(BaseModel):
    # The query's page / page_size win over the body's. Nothing else is read there, and what
    # is not read is not forwarded as if it were: other names are refused.
    model_config = ConfigDict(extra="forbid")

    page: int | None = Field(default=None, ge=1)
    page_size: int | None = Field(default=None, ge=1, le=200)


class PlatformSearch(BaseModel):
    model_config = ConfigDict(extra="allow")

    query: str = Field(min_length=1)
    filters: dict[str, Any]
    top_k: int | None = Field(default=None, ge=1, le=1000)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    rerank: bool | None = None
    show_expired: bool | None = None
    reference_date: int | float | str | None = None
    fields: list[str] | None = None
    categories: list[str] | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _entities_in_filters(self) -> Self:
        _no_top_level_entities(self.__pydantic_extra__)
        return self


class PlatformDeleteAll(BaseModel):
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    metadata: str | None = None
    org_id: str | None = None
    project_id: str | None = None


class PlatformUpdate(BaseModel):
    text: str | None = None
    metadata: dict[str, Any] | None = None
    timestamp: int | float | str | None = None
    expiration_date: str | None = None


class DeleteQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")  # the platform reads delete_linked only

    delete_linked: bool = False


class ExportCreate(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_: dict[str, Any] = Field(alias="schema")
    filters: dict[str, Any] | None = None
    org_id: str | None = None
    project_id: str | None = None

    @field_validator("filters")
    @classmethod
    def _structured(cls, tree: dict[str, Any] | None) -> dict[str, Any] | None:
        if tree is not None and not (tree and set(tree) <= {"AND", "OR"}):
            raise ValueError("filters must be structured ({\"AND\": [...]} or {\"OR\": "
                             "[...]}); flat filter objects are rejected")
        return tree


class ExportGet(BaseModel):
    model_config = ConfigDict(extra="allow")

    memory_export_id: str | None = None
    filters: dict[str, Any] | None = None
    org_id: str | None = None
    project_id: str | None = None

    @model_validator(mode="after")
    def _by_filters(self) -> Self:
        if self.memory_export_id is not None:
            # An export id says nothing of whose export it is: fetch by filters naming you.
            raise Forbidden("memory_export_id cannot be checked for its owner; fetch the "
                            "export by filters naming you", field="memory_export_id")
        return self


class Summary(BaseModel):
    filters: dict[str, Any]


# --- the route models --------------------------------------------------------------------------

_FILTERS = Id(FILTERS, "filters", scopes=True)
_BY_ID = ("memory_id",)

ADD = RouteModel(
    source=SOURCE_SERVER, body=MemoryCreate, scope_keys=UNSCOPED,
    ids=(Id(USER, "user_id"), Id(AGENT, "agent_id"), Id(SESSION, "run_id")),
    notes=("one of user_id, agent_id, run_id required", "content must be a string",
           "query string ignored"),
)
SEARCH = RouteModel(
    source=SOURCE_SEARCH, body=SearchRequest, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(Id(USER, "user_id", scopes=True), Id(AGENT, "agent_id", scopes=True),
         Id(SESSION, "run_id", scopes=True), _FILTERS),
    notes=("a truthy top-level user_id / agent_id / run_id replaces the one in filters, and an "
           "AND condition replaces both: every one must be yours",),
)
LIST = RouteModel(
    source=SOURCE_SERVER, query=ListQuery, scope_keys=UNSCOPED,
    ids=(Id(USER, "user_id", where=QUERY, scopes=True),
         Id(AGENT, "agent_id", where=QUERY, scopes=True),
         Id(SESSION, "run_id", where=QUERY, scopes=True)),
    notes=("query only; without an id the server lists every user's memories",),
)
DELETE_ALL = RouteModel(
    source=SOURCE_SERVER, query=DeleteAllQuery, scope_keys=UNSCOPED,
    ids=LIST.ids, notes=("query only; the server asks for its admin role",),
)
ONE = RouteModel(source=SOURCE_SERVER, path=_BY_ID)
UPDATE = RouteModel(source=SOURCE_SERVER, path=_BY_ID, body=MemoryUpdate)

PLATFORM_ADD = RouteModel(
    source=SOURCE_PLATFORM, body=PlatformAdd, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(Id(USER, "user_id"), Id(AGENT, "agent_id"), Id(SESSION, "run_id"),
         Id(FILTERS, "filters")),
    notes=("one of user_id, agent_id, run_id required at the top level (an app_id alone "
           "names no owner: refused)",),
)
PLATFORM_SEARCH = RouteModel(
    source=SOURCE_PLATFORM, body=PlatformSearch, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_FILTERS,), notes=("entity ids only inside filters (top level: 400)",),
)
PLATFORM_LIST = RouteModel(
    source=SOURCE_PLATFORM, body=PlatformList, query=PageQuery, scope_keys=UNSCOPED,
    filters=filter_ids, ids=(_FILTERS,),
    notes=("entity ids only inside filters (top level: 400); the query reads page, page_size "
           "only (other names refused)",),
)
PLATFORM_DELETE_ALL = RouteModel(
    source=SOURCE_PLATFORM, query=PlatformDeleteAll, scope_keys=UNSCOPED,
    ids=(Id(USER, "user_id", where=QUERY, scopes=True),
         Id(AGENT, "agent_id", where=QUERY, scopes=True),
         Id(SESSION, "run_id", where=QUERY, scopes=True)),
    notes=("query only; `*` in any id deletes for every user, agent or run (refused, 422)",),
)
PLATFORM_ONE = RouteModel(source=SOURCE_PLATFORM, path=_BY_ID)
PLATFORM_UPDATE = RouteModel(source=SOURCE_PLATFORM, path=_BY_ID, body=PlatformUpdate)
PLATFORM_DELETE = RouteModel(source=SOURCE_PLATFORM, path=_BY_ID, query=DeleteQuery)
EXPORT = RouteModel(
    source=SOURCE_PLATFORM, body=ExportCreate, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_FILTERS,), notes=("filters must be structured (AND / OR)",),
)
EXPORT_GET = RouteModel(
    source=SOURCE_PLATFORM, body=ExportGet, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_FILTERS,), notes=("by memory_export_id: refused (an export id has no owner we know)",),
)
SUMMARY = RouteModel(
    source=SOURCE_PLATFORM, body=Summary, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_FILTERS,),
)
PING = RouteModel(source=SOURCE_PLATFORM)
ENTITY = {
    kind: RouteModel(source=SOURCE_PLATFORM, path=("entity_id",), scope_keys=UNSCOPED,
                     ids=(Id(kind, "entity_id", where=PATH, scopes=True),))
    for kind in (USER, AGENT, SESSION)
}
