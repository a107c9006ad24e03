"""The dev engine's request bodies and their validation: the subset of the EverOS v2 request
contract it accepts (scope and sender ids, message items, add, flush, search and get)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    field_validator,
    model_validator,
)

from gateway.devengine.store import TEXT_ITEM_TYPES

MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def _scope_id(value: str) -> str:
    if value in (".", ".."):
        raise ValueError("'.' and '..' are not valid scope ids")
    return value


ID_PATTERN = r"^[A-Za-z0-9_.@+-]+$"  # the reference's scope / sender id charset
ScopeId = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN),
                    AfterValidator(_scope_id)]
SenderId = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)]
SessionId = Annotated[str, Field(min_length=1, max_length=128)]
OwnerId = Annotated[str, Field(min_length=1)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")
    app_id: ScopeId = "default"
    project_id: ScopeId = "default"


class MessageItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sender_id: SenderId | None = None
    sender_name: str | None = None
    role: Literal["user", "assistant", "tool"]
    timestamp: Annotated[StrictInt, Field(gt=0)] | None = None
    content: str | list[dict[str, Any]]
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    message_id: Annotated[str, Field(min_length=1, max_length=128)] | None = None

    @field_validator("timestamp")
    @classmethod
    def _as_ms(cls, value: int | None) -> int | None:
        if value is not None and value < 10**12:  # seconds, auto-detected like the reference
            value *= 1000
        if value is not None and value > MAX_TIMESTAMP_MS:
            raise ValueError("timestamp is out of range")
        return value

    @field_validator("content")
    @classmethod
    def _items(cls, content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        for item in [] if isinstance(content, str) else content:
            kind = item.get("type")
            if not isinstance(kind, str) or not kind:
                raise ValueError("every content item needs a string type")
            if kind in TEXT_ITEM_TYPES and not isinstance(item.get("text"), str):
                raise ValueError(f"a {kind} item needs a string text")
        return content

    @model_validator(mode="after")
    def _tool_rows_name_their_call(self) -> MessageItem:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        return self


class AddRequest(_Body):
    session_id: SessionId
    messages: Annotated[list[MessageItem], Field(min_length=1, max_length=500)]
    defer_extraction: bool = False


class FlushRequest(_Body):
    session_id: SessionId


class OwnerBody(_Body):
    user_id: OwnerId | None = None
    agent_id: OwnerId | None = None
    filters: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_owner(self) -> OwnerBody:
        if self.user_id is not None and self.agent_id is not None:
            raise ValueError("at most one of user_id / agent_id may be provided")
        return self


class SearchRequest(OwnerBody):
    query: str = ""
    method: Literal["keyword", "vector", "hybrid", "agentic"] = "hybrid"
    top_k: StrictInt = -1
    limit: Annotated[StrictInt, Field(ge=1, le=100)] | None = None
    radius: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    min_score: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    include_profile: bool = False
    enable_llm_rerank: bool = False

    @field_validator("top_k")
    @classmethod
    def _top_k(cls, value: int) -> int:
        if value != -1 and not 1 <= value <= 100:
            raise ValueError("top_k must be -1 or between 1 and 100")
        return value


class GetRequest(OwnerBody):
    memory_type: Literal["episode", "profile", "agent_case", "agent_skill"] = "episode"
    page: Annotated[StrictInt, Field(ge=1)] = 1
    page_size: Annotated[StrictInt, Field(ge=1, le=100)] = 20
    sort_by: Literal["timestamp", "updated_at"] = "timestamp"
    sort_order: Literal["asc", "desc"] = "desc"

    @model_validator(mode="after")
    def _owner_matches_type(self) -> GetRequest:
        agent_kind = self.memory_type in ("agent_case", "agent_skill")
        if (agent_kind and self.user_id) or (not agent_kind and self.agent_id):
            raise ValueError(f"memory_type {self.memory_type} does not match the owner kind")
        return self
