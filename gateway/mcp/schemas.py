"""Each tool's arguments and answer (SPEC §19): the models whose JSON Schemas `tools/list` shows.

Arguments are strict (no coercion: `"5"` is not a `top_k`) and closed (an unknown argument is an
error); an argument that breaks them is a JSON-RPC -32602 naming it (gateway/mcp/errors.py).
Answers mirror the REST twins' bodies; an engine's own answer is an open object.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SessionId = Field(min_length=1, max_length=128)


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Answer(BaseModel):
    pass


class OpenAnswer(Answer):
    """An engine's or a route's answer, passed on as it came."""

    model_config = ConfigDict(extra="allow")


# --- search_memory --------------------------------------------------------------------------

class SearchArgs(Arguments):
    query: str = Field(min_length=1, max_length=4096, description="what to look for")
    session_id: str | None = Field(None, min_length=1, max_length=128,
                                   description="only this session of yours")
    top_k: int = Field(10, ge=1, le=100, description="most results (1-100)")


class LinkedAttachment(Answer):
    type: str = Field(description="image, audio, video or file")
    name: str
    uri: str = Field(description="resource://<id> (an upload), attachment://<id> (a file kept "
                                 "at add time), else the URI the add named")
    url: str | None = Field(None, description="download URL (with your credential)")
    mime_type: str


# Not routes/search.py's SearchResult: no `raw`, and attachments as links an agent can read.
class SearchItem(Answer):
    id: str
    type: str
    content: str | None
    score: float | None
    session_id: str | None
    created_at: Any
    attachments: list[LinkedAttachment]


class SearchAnswer(Answer):
    results: list[SearchItem]


# --- add_memory -----------------------------------------------------------------------------

class InlineFile(Arguments):
    name: str = Field(min_length=1, max_length=255, description="file name, with its extension")
    base64: str = Field(min_length=1, description="the file's bytes, base64")


class LinkedFile(Arguments):
    resource_uri: str = Field(min_length=1, max_length=512,
                              description="resource://<id> or attachment://<id> of yours")


class AddArgs(Arguments):
    session_id: str | None = Field(None, min_length=1, max_length=128,
                                   description="default: mcp.default_session")
    text: str | None = Field(None, min_length=1)
    files: list[InlineFile | LinkedFile] | None = Field(None, max_length=32)
    role: Literal["user", "assistant"] = "user"
    agent_id: str | None = Field(None, min_length=1, max_length=128,
                                 description="one of your agents: the sender of an assistant "
                                             "message")

    @model_validator(mode="after")
    def _something(self) -> AddArgs:
        if self.text is None and not self.files:
            raise ValueError("text: a memory needs text or files")
        return self


class AddedFile(Answer):
    name: str
    uri: str
    mime_type: str


class AddAnswer(Answer):
    session_id: str
    message_count: int
    status: str | None
    attachments: list[AddedFile]


# --- flush_session, get_memories ------------------------------------------------------------

class FlushArgs(Arguments):
    session_id: str = Field(min_length=1, max_length=128)


AGENT_MEMORY = frozenset({"agent_case", "agent_skill"})


class GetArgs(Arguments):
    memory_type: Literal["episode", "profile", "agent_case", "agent_skill"]
    # Beyond §19's list: an agent's memories are the engine's under the agent's id, not the user's.
    agent_id: str | None = Field(None, min_length=1, max_length=128,
                                 description="one of your agents: whose agent_case or "
                                             "agent_skill memories (needed for those two, not "
                                             "taken for episode and profile)")
    page: int = Field(1, ge=1, le=10_000)
    page_size: int = Field(20, ge=1, le=100)

    @model_validator(mode="after")
    def _owner(self) -> GetArgs:
        if self.memory_type in AGENT_MEMORY and self.agent_id is None:
            raise ValueError(f"agent_id: {self.memory_type} memories belong to an agent; "
                             "name one of yours")
        if self.memory_type not in AGENT_MEMORY and self.agent_id is not None:
            raise ValueError(f"agent_id: {self.memory_type} memories are yours, not an agent's")
        return self


# --- upload_file ----------------------------------------------------------------------------

class UploadArgs(Arguments):
    name: str = Field(min_length=1, max_length=255, description="file name, with its extension")
    base64: str = Field(min_length=1, description="the file's bytes, base64")
    content_type: str | None = Field(None, min_length=3, max_length=255,
                                     pattern=r"^[\w.+-]+/[\w.+-]+$")


# Not routes/resources.py's ResourceOut: §19 names these fields only (no session, no time).
class UploadAnswer(Answer):
    id: str
    uri: str
    name: str
    content_type: str
    size: int
    sha256: str


# --- list_sessions --------------------------------------------------------------------------

class ListSessionsArgs(Arguments):
    cursor: str | None = Field(None, min_length=1, max_length=512)


class SessionItem(Answer):
    session_id: str
    created_at: int = Field(description="first add, ms since the epoch")


class SessionsAnswer(Answer):
    items: list[SessionItem]
    next_cursor: str | None


# --- resolve_image_reference ----------------------------------------------------------------

class ResolveArgs(Arguments):
    conversation_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")
    text: str = Field(min_length=1, max_length=8192,
                      description="the user's words naming an image (any language)")


def input_schema(model: type[Arguments]) -> dict[str, Any]:
    return model.model_json_schema()


def output_schema(model: type[Answer]) -> dict[str, Any]:
    return model.model_json_schema(mode="serialization")
