"""MemOS's request models, as its server parses them (SPEC §5).

Written from MemOS's source (github.com/MemTensor/MemOS): the request models in
`src/memos/api/product_models.py` (`APIADDRequest`, `APISearchRequest`,
`GetMemoryPlaygroundRequest`, `GetMemoryRequest`, `DeleteMemoryRequest`,
`APIChatCompleteRequest`, `ChatRequest`, `SuggestionRequest`) and what the handlers do with them
(`src/memos/api/routers/server_router.py`, `src/memos/api/handlers/{add,search,chat,memory}_
handler.py`).

What the engine does with what: a cube is the scope of everything (the graph store keeps each
cube's memories apart by `user_name` = cube id); a request without cube ids reads and writes
the cube named like its `user_id`, and the deprecated `mem_cube_id` stands in for the cube list
where the new list is missing. So the cubes a request reaches are what bounds it, and each one
must be the caller's (claimed by their add); `user_id` itself bounds nothing but that default.
`session_id`, `project_id` and `manager_user_id` are tags stored on memories: sessions are
global (no project scopes them), so they are owned in the default scope whatever `project_id`
says; `manager_user_id` names a user and must be the caller.

The engine builds parts of its graph queries as text (filter keys in Cypher, cube ids and filter
values in PolarDB's SQL), so cube and session ids must be plain names, filter keys plain field
names, and filter strings free of quotes and backslashes (422 otherwise).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, model_validator

from gateway.errors import Forbidden, ValidationFailed
from gateway.identity.named import CUBE, FILTERS, SESSION, USER
from gateway.upstream.flavors.filter_trees import conditions, owner_ids
from gateway.upstream.models import Id, RouteModel

SOURCE_MODELS = "src/memos/api/product_models.py"
SOURCE_ADD = f"{SOURCE_MODELS}, src/memos/api/handlers/add_handler.py"
SOURCE_SEARCH = f"{SOURCE_MODELS}, src/memos/api/handlers/search_handler.py"
SOURCE_MEMORY = f"{SOURCE_MODELS}, src/memos/api/handlers/memory_handler.py"
SOURCE_CHAT = f"{SOURCE_MODELS}, src/memos/api/handlers/chat_handler.py"
SOURCE_ROUTER = f"{SOURCE_MODELS}, src/memos/api/routers/server_router.py"

# MemOS sessions are global: they are owned in the default scope, whatever project_id says.
UNSCOPED = ("", "")

PlainId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")]
SearchMode = Literal["fast", "fine", "mixture"]

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_UNSAFE = ("'", '"', "\\")


# --- filters -----------------------------------------------------------------------------------

_OWNERS = {"user_id": USER, "manager_user_id": USER, "user_name": CUBE, "session_id": SESSION}


def filter_ids(tree: Any, where: str) -> list[tuple[str, str, Any, bool]]:
    """The users, cubes and sessions a MemOS `filter` names (`and` / `or`); none bounds the
    request (the cubes do). Refuses keys that are not field names and quoted strings."""
    for condition in conditions(tree, where, every=("and",), some=("or",)):
        if not _FIELD.match(condition.key):
            raise ValidationFailed(f"{condition.where}: not a field name", field=condition.where)
        for value in _strings(condition.value):
            if any(mark in value for mark in _UNSAFE):
                raise ValidationFailed(f"{condition.where}: quotes and backslashes are not "
                                       "allowed in filter values", field=condition.where)
    return [(kind, at, value, False)
            for kind, at, value, _ in owner_ids(tree, where, _OWNERS, every=("and",),
                                                some=("or",))]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [one for one in value if isinstance(one, str)]
    return []


def _cubes(named: list[str] | None, deprecated: str | None, user_id: str | None
           ) -> list[str] | None:
    """The cubes a handler reaches: the list, else the deprecated single cube (the request
    model's own conversion), else the cube named like the user (the handler's fallback)."""
    if named:
        return list(named)
    if deprecated is not None:
        return [deprecated]
    return [user_id] if user_id is not None else None


# --- the request models ------------------------------------------------------------------------

class AddRequest(BaseModel):
    user_id: str | None = None
    session_id: PlainId | None = None
    task_id: str | None = None
    manager_user_id: str | None = None
    project_id: str | None = None
    writable_cube_ids: list[PlainId] | None = None
    async_mode: Literal["async", "sync"] = "async"
    mode: Literal["fast", "fine"] | None = None
    custom_tags: list[str] | None = None
    info: dict[str, Any] | None = None
    messages: str | list[Any] | None = None
    chat_history: list[Any] | None = None
    is_feedback: bool = False
    is_upload_skill: bool = False
    mem_cube_id: PlainId | None = None
    memory_content: str | None = None
    doc_path: str | None = None
    source: str | None = None
    operation: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        if self.doc_path is not None:
            raise ValueError("doc_path names a file on the engine's own disk")
        # APIADDRequest: a truthy mem_cube_id stands in for a missing list; AddHandler: else
        # the user's own cube.
        self.writable_cube_ids = _cubes(self.writable_cube_ids, self.mem_cube_id or None,
                                        self.user_id)
        if self.writable_cube_ids is None:
            raise ValueError("user_id or writable_cube_ids is required")
        return self


class SearchRequest(BaseModel):
    query: str
    user_id: str
    readable_cube_ids: list[PlainId] | None = None
    mode: SearchMode = "fast"
    session_id: PlainId | None = None
    top_k: int = Field(default=10, ge=1)
    relativity: float = Field(default=0.45, ge=0)
    dedup: Literal["no", "sim", "mmr"] | None = "mmr"
    rerank: bool = True
    pref_top_k: int = Field(default=6, ge=0)
    include_preference: bool = True
    search_tool_memory: bool = True
    tool_mem_top_k: int = Field(default=6, ge=0)
    include_skill_memory: bool = True
    skill_mem_top_k: int = Field(default=3, ge=0)
    context_format: str = "memory"
    filter: dict[str, Any] | None = None
    internet_search: bool = False
    threshold: float | None = None
    search_memory_type: str = "All"
    reference_time: str | None = None
    chat_history: list[Any] | None = None
    mem_cube_id: PlainId | None = None
    moscube: bool = False
    operation: list[dict[str, Any]] | None = None
    source: str | None = None
    neighbor_discovery: bool = False

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        # APISearchRequest: mem_cube_id stands in for a missing list; SearchHandler: else the
        # user's own cube.
        self.readable_cube_ids = _cubes(self.readable_cube_ids, self.mem_cube_id, self.user_id)
        return self


class GetAllRequest(BaseModel):
    user_id: str
    memory_type: Literal["text_mem", "act_mem", "param_mem", "para_mem"]
    mem_cube_ids: list[PlainId] | None = None
    search_query: str | None = None
    search_type: Literal["embedding", "fulltext"] = "fulltext"

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        # get_all_memories reads mem_cube_ids[0], else the user's own cube: every cube named
        # must be the caller's, the first is the one read.
        self.mem_cube_ids = _cubes(self.mem_cube_ids, None, self.user_id)
        return self


class GetMemoryRequest(BaseModel):
    mem_cube_id: PlainId
    user_id: str | None = None
    include_preference: bool = True
    include_tool_memory: bool = True
    include_skill_memory: bool = True
    filter: dict[str, Any] | None = None
    page: int | None = None
    page_size: int | None = None


class DeleteMemoryRequest(BaseModel):
    writable_cube_ids: list[PlainId] | None = None
    memory_ids: list[str] | None = None
    file_ids: list[str] | None = None
    filter: dict[str, Any] | None = None
    user_id: str | None = None
    session_id: PlainId | None = None
    conversation_id: PlainId | None = None
    auto_cleanup_working: bool | None = False

    @model_validator(mode="after")
    def _one_checked_mode(self) -> Self:
        if self.conversation_id and self.session_id and self.conversation_id != self.session_id:
            raise ValueError("conversation_id and session_id must be the same when both are set")
        if self.session_id is None and self.conversation_id is not None:
            self.session_id = self.conversation_id
        by_filter = bool(self.filter) or self.user_id is not None or self.session_id is not None
        modes = [self.memory_ids is not None, self.file_ids is not None, by_filter]
        if sum(modes) != 1:
            raise ValueError("Exactly one delete mode must be provided: memory_ids, file_ids, "
                             "or filter/user_id/session_id.")
        if self.memory_ids is not None:
            # delete_by_memory_ids deletes in every cube: the gateway cannot tell whose they are.
            raise Forbidden("deleting by memory_ids cannot be checked for their owner; delete "
                            "by filter with your user_id, or by file_ids in your cubes",
                            field="memory_ids")
        if self.file_ids is not None and not self.writable_cube_ids:
            raise ValueError("writable_cube_ids is required with file_ids (without it every "
                             "cube is searched)")
        if by_filter and self.user_id is None:
            raise ValueError("user_id is required to delete by filter (preference memories are "
                             "deleted by the filter alone, in every cube)")
        return self


class _ChatFields(BaseModel):
    """What MemOS's chat requests share (`ChatRequest`)."""

    user_id: str
    query: str
    readable_cube_ids: list[PlainId] | None = None
    writable_cube_ids: list[PlainId] | None = None
    history: list[Any] | None = None
    mode: SearchMode = "fast"
    system_prompt: str | None = None
    top_k: int = 10
    session_id: PlainId | None = None
    include_preference: bool = True
    pref_top_k: int = 6
    model_name_or_path: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    add_message_on_answer: bool = True
    manager_user_id: str | None = None
    project_id: str | None = None
    relativity: float = Field(default=0.45, ge=0)
    filter: dict[str, Any] | None = None
    internet_search: bool = False
    threshold: float = 0.5
    moscube: bool = False


class ChatCompleteRequest(_ChatFields):
    mem_cube_id: str | None = None  # declared, never read by handle_chat_complete

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        # handle_chat_complete: each list, else the user's own cube (mem_cube_id is not read).
        self.readable_cube_ids = _cubes(self.readable_cube_ids, None, self.user_id)
        self.writable_cube_ids = _cubes(self.writable_cube_ids, None, self.user_id)
        return self


class ChatStreamRequest(_ChatFields):
    mem_cube_id: PlainId | None = None

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        # ChatRequest: mem_cube_id stands in for missing lists; handle_chat_stream: else the
        # user's own cube.
        self.readable_cube_ids = _cubes(self.readable_cube_ids, self.mem_cube_id, self.user_id)
        self.writable_cube_ids = _cubes(self.writable_cube_ids, self.mem_cube_id, self.user_id)
        return self


class SuggestionRequest(BaseModel):
    user_id: str
    mem_cube_id: PlainId
    language: Literal["zh", "en"] = "zh"
    message: str | list[Any] | None = None


# --- the route models --------------------------------------------------------------------------

_USER = Id(USER, "user_id")
_MANAGER = Id(USER, "manager_user_id")
_SESSION = Id(SESSION, "session_id")
_FILTER = Id(FILTERS, "filter")

ADD = RouteModel(
    source=SOURCE_ADD, body=AddRequest, scope_keys=UNSCOPED,
    ids=(_USER, _MANAGER, _SESSION, Id(CUBE, "writable_cube_ids")),
    notes=("writes the cubes named (writable_cube_ids, else mem_cube_id, else the cube named "
           "like user_id): an add claims them", "doc_path refused (the engine's own disk)"),
)
SEARCH = RouteModel(
    source=SOURCE_SEARCH, body=SearchRequest, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_USER, _SESSION, Id(CUBE, "readable_cube_ids", scopes=True), _FILTER),
    notes=("reads readable_cube_ids, else mem_cube_id, else the cube named like user_id",),
)
GET_ALL = RouteModel(
    source=SOURCE_ROUTER, body=GetAllRequest, scope_keys=UNSCOPED,
    ids=(_USER, Id(CUBE, "mem_cube_ids", scopes=True)),
    notes=("reads mem_cube_ids[0], else the cube named like user_id",),
)
GET_MEMORY = RouteModel(
    source=SOURCE_MEMORY, body=GetMemoryRequest, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_USER, Id(CUBE, "mem_cube_id", scopes=True), _FILTER),
)
DELETE = RouteModel(
    source=SOURCE_MEMORY, body=DeleteMemoryRequest, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(Id(USER, "user_id", scopes=True), Id(CUBE, "writable_cube_ids", scopes=True),
         _SESSION, _FILTER),
    notes=("by filter: user_id required (preference memories are deleted in every cube); by "
           "file_ids: writable_cube_ids required; by memory_ids: refused (no owner check)",),
)
CHAT_COMPLETE = RouteModel(
    source=SOURCE_CHAT, body=ChatCompleteRequest, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_USER, _MANAGER, _SESSION, Id(CUBE, "readable_cube_ids", scopes=True),
         Id(CUBE, "writable_cube_ids"), _FILTER),
    notes=("reads readable_cube_ids and writes the answer to writable_cube_ids, each else the "
           "cube named like user_id; mem_cube_id is not read",),
)
CHAT_STREAM = RouteModel(
    source=SOURCE_CHAT, body=ChatStreamRequest, scope_keys=UNSCOPED, filters=filter_ids,
    ids=(_USER, _MANAGER, _SESSION, Id(CUBE, "readable_cube_ids", scopes=True),
         Id(CUBE, "writable_cube_ids"), _FILTER),
    notes=("as chat/complete, with mem_cube_id standing in for missing cube lists; an SSE "
           "stream",),
)
SUGGESTIONS = RouteModel(
    source=SOURCE_ROUTER, body=SuggestionRequest, scope_keys=UNSCOPED,
    ids=(_USER, Id(CUBE, "mem_cube_id", scopes=True)),
)
