"""What an engine adapter knows: its API's paths, how its bodies and answers read (SPEC §6).

A `Dialect` is one engine API: where a body names its session and scope, what it carries as
attachments, how the gateway's own EverOS-shaped `/memories/add|search` bodies become that API's
payloads, and where its search answers keep their items. A `Flavor` (the `upstream.flavor`
setting) is the engine the gateway fronts: the dialect its own routes speak, plus every
engine-native path it intercepts. Everything here is pure: no I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from gateway.attachments.add_body import (
    WHOLE_CONTENT,
    WHOLE_MESSAGE,
    AttachmentItem,
    attachment_items,
    engine_type,
)
from gateway.config import FLAVOR_PATHS, UpstreamSettings
from gateway.errors import ValidationFailed
from gateway.identity.named import CUBE, GROUP, Named
from gateway.search.items import FoundItem
from gateway.store.ids import now_ms
from gateway.upstream.models import RouteModel
from gateway.upstream.routes import EngineRoute, RouteTable

ADD = "add"
SEARCH = "search"
DEFAULT_SCOPE = "default"


def file_line(item: AttachmentItem) -> str:
    """The text naming a file where an engine keeps only text (SPEC §9 matches names in text),
    with the signed URL it can fetch the file from, when the gateway made one."""
    return f"Attached file: {item.name}" + (f" <{item.url}>" if item.url else "")


def text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def scope_value(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) and value else DEFAULT_SCOPE


def string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class AddScope:
    """Where an add lands: the session owned by the caller and the scope recorded on mappings."""

    app_id: str
    project_id: str
    session_id: str | None

    def key(self) -> tuple[str, str, str]:
        assert self.session_id is not None
        return self.app_id, self.project_id, self.session_id


def everos_scope(body: Mapping[str, Any]) -> AddScope:
    return AddScope(scope_value(body, "app_id"), scope_value(body, "project_id"),
                    string(body.get("session_id")))


def session_filter(body: Mapping[str, Any]) -> str | None:
    """The session an EverOS search body narrows to (`filters.session_id`, a plain value)."""
    filters = body.get("filters")
    return string(filters.get("session_id")) if isinstance(filters, Mapping) else None


def top_k(body: Mapping[str, Any]) -> int | None:
    value = body.get("top_k")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def name_files(body: Mapping[str, Any], items: list[AttachmentItem]) -> dict[str, Any]:
    """A copy of an add body where a text part naming each file comes right before it.

    For engines that turn files into generated descriptions: the name survives in text, so the
    gateway's filename matching still finds the file in what the engine remembers.
    """
    messages = list(body.get("messages") or [])
    by_message: dict[int, list[AttachmentItem]] = {}
    for item in items:
        by_message.setdefault(item.message, []).append(item)
    for index in sorted(by_message, reverse=True):  # from the end, so indices stay true
        found = sorted(by_message[index], key=lambda item: item.part, reverse=True)
        if found[0].part == WHOLE_MESSAGE:
            messages.insert(index, text_part(file_line(found[0])))
            continue
        message = dict(messages[index])  # copied, never the caller's own objects
        if found[0].part == WHOLE_CONTENT:
            message["content"] = [text_part(file_line(found[0])), message["content"]]
        else:
            content = list(message["content"])
            for item in found:
                content.insert(item.part, text_part(file_line(item)))
            message["content"] = content
        messages[index] = message
    return {**body, "messages": messages}


class Dialect(ABC):
    """One engine API. Defaults are EverOS v2's; other engines override what differs."""

    name: str = ""
    names_files = False  # the engine keeps files as generated text: add a line naming each
    session_keys: tuple[str, ...] = ("session_id",)  # body and result keys naming a session
    # Search answers read by gateway.search.items.find_items, so the C page scanner may answer them.
    page_scan = False
    # The engine's own sign route (EverOS Cloud): files named by object key go to the engine
    # through it, and the engine gets its own object key (SPEC §18); None = the engine reads
    # the gateway's file:// URI or a signed URL.
    sign_path: str | None = None
    # `/memories/search` bodies go to the engine as they came (`search_payload` is None for
    # every body), so the route never makes a whole mapping of one.
    searches_as_sent = False
    # The same for `/memories/add` (`add_payload` is None for every body and its files).
    adds_as_sent = False

    # --- engine-native bodies ---------------------------------------------------------------

    def add_scope(self, body: Mapping[str, Any]) -> AddScope:
        return everos_scope(body)

    def attachments(self, body: Mapping[str, Any]) -> list[AttachmentItem]:
        return attachment_items(body)

    def with_file_names(self, body: Mapping[str, Any], items: list[AttachmentItem]
                        ) -> dict[str, Any]:
        return name_files(body, items)

    # --- the gateway's own EverOS-shaped bodies -------------------------------------------------

    @abstractmethod
    def add_payload(self, body: Mapping[str, Any], caller: str,
                    items: list[AttachmentItem]) -> dict[str, Any] | None:
        """The engine's add payload for a `/memories/add` body; None = forward the bytes as sent."""

    @abstractmethod
    def search_payload(self, body: Mapping[str, Any], caller: str) -> dict[str, Any] | None:
        """The engine's search payload for a `/memories/search` body; None = bytes as sent."""

    def flush_payload(self, scope: AddScope, caller: str) -> dict[str, Any] | None:
        """The engine's flush payload for a session; None when the engine has no flush."""
        return None

    # --- the engine paths that speak it ----------------------------------------------------------

    def add_route(self, path: str, model: RouteModel, *, follows_config: bool = True
                  ) -> NativeRoute:
        """`path` intercepted as this API's add; `follows_config`: forwarded to
        `upstream.add_path`, else to `path` itself."""
        return NativeRoute(path, ADD, self, follows_config, model=model)

    def search_route(self, path: str, model: RouteModel, *, follows_config: bool = True
                     ) -> NativeRoute:
        """`path` intercepted as this API's search (forwarded as `add_route` says)."""
        return NativeRoute(path, SEARCH, self, follows_config, model=model)

    # --- answers --------------------------------------------------------------------------------

    @abstractmethod
    def find_items(self, answer: Any) -> list[FoundItem]:
        """The result items of a search answer (UpstreamBadResponse for an unknown shape)."""


@dataclass(frozen=True)
class NativeRoute:
    """An engine path the gateway intercepts, so that engine's own client works unchanged."""

    path: str
    kind: str  # ADD | SEARCH
    dialect: Dialect
    follows_config: bool  # forwarded to upstream.add_path/search_path, else to `path` itself
    # The answer can hold many users' items and is not filtered by session alone (the engine
    # scopes by user, not by the gateway's sessions): the body must name the caller.
    scoped: bool = False
    model: RouteModel | None = None  # how the engine parses it (gateway/upstream/models.py)

    @property
    def entry(self) -> EngineRoute:
        """This route as a table entry: the identity policy and docs/engines.md read it."""
        return EngineRoute("POST", self.path, scoped=self.scoped, claims=self.kind == ADD,
                           handled=self.kind, note=f"{self.dialect.name} API", model=self.model)


@dataclass(frozen=True)
class DataOwner:
    """Whose memories an erasure deletes or an export lists (SPEC §17): the user, their agents,
    the (app_id, project_id) scopes their sessions live in, and the ids they claimed in the
    default scope (their sessions there, and their groups: identity/ownership.py GROUP_SCOPE)."""

    user_id: str
    agent_ids: tuple[str, ...] = ()
    scopes: tuple[tuple[str, str], ...] = ((DEFAULT_SCOPE, DEFAULT_SCOPE),)
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineCall:
    """One call the gateway makes on its own to the engine for an erasure or an export."""

    method: str
    path: str  # origin-form, query included
    body: dict[str, Any] | None = None
    # Why a 2xx answer still says the call failed (MemOS answers failures with 200), else None.
    refusal: Callable[[Any], str | None] | None = None


OwnerCalls = Callable[[DataOwner], list[EngineCall]]


@dataclass(frozen=True)
class Flavor:
    name: str
    dialect: Dialect  # what `/memories/add|search` and resource ingestion speak
    native: tuple[NativeRoute, ...]
    # Every other engine route the gateway forwards (SPEC §5); anything else is refused.
    table: tuple[EngineRoute, ...] = ()
    # The engine reads `file://` URIs from the gateway's disk (a local engine): uploads are
    # ingested with their file item; other engines get the file's name in text only.
    reads_local_files: bool = False
    # The engine's own routes that delete every memory of a user (None: the engine serves no
    # delete, and an erasure lists the sessions that stay upstream), and that list them (export).
    erase_calls: OwnerCalls | None = None
    export_calls: OwnerCalls | None = None
    # Its SDKs sign their files before an add (EverOS's and EverOS Cloud's): the gateway serves
    # the sign routes and the upload forms (gateway/routes/uploads.py, SPEC §18).
    signs_files: bool = False

    @cached_property
    def routes(self) -> RouteTable:
        """The intercepted routes first, then the pass-through table."""
        return RouteTable((*(route.entry for route in self.native), *self.table))

    def written(self, path: str, payload: Any) -> Named:
        """The groups and cubes an add payload the gateway made will write into, read by the
        engine's own model of `path` (MemOS writes a user's own-name cube when none is named).

        Empty when the route has no model or the payload is not one the model reads."""
        segments = tuple(part for part in path.split("/") if part)
        found = self.routes.find("POST", segments)
        model = found[0].model if found is not None else None
        if model is None:
            return Named()
        try:
            return model.read(payload, {}, {}).only(GROUP, CUBE)
        except ValidationFailed:
            return Named()

    @property
    def session_keys(self) -> tuple[str, ...]:
        keys = {key for route in self.native for key in route.dialect.session_keys}
        return ("session_id", *sorted(keys - {"session_id"}))

    @property
    def default_paths(self) -> tuple[str, str, str]:
        return FLAVOR_PATHS[self.name]

    def ingest_calls(
        self, upstream: UpstreamSettings, user_id: str, scope: AddScope, *, name: str,
        content_type: str, engine_uri: str | None, flush: bool,
    ) -> list[tuple[str, dict[str, Any]]]:
        """(path, payload) of the engine calls that ingest an uploaded file (SPEC §7).

        One user message naming the file, with the file's own item when the engine can read it:
        `engine_uri` is its file:// (or s3://) URI for an engine on the gateway's storage, a
        signed URL for one elsewhere, None when the engine gets the name only. Then the
        session's flush, when asked for and the engine has one.
        """
        content: list[dict[str, Any]] = [text_part(f"Uploaded file: {name}")]
        if engine_uri is not None:
            item: dict[str, Any] = {"type": engine_type(content_type), "uri": engine_uri,
                                    "name": name}
            if "." in name:
                item["ext"] = name.rpartition(".")[2]
            content.append(item)
        message = {"role": "user", "sender_id": user_id, "timestamp": now_ms(),
                   "content": content}
        body = {"app_id": scope.app_id, "project_id": scope.project_id,
                "session_id": scope.session_id, "messages": [message]}
        # A signed URL travels as each engine takes files: its item, or a line of text with it.
        signed = engine_uri is not None and engine_uri.startswith(("http://", "https://"))
        items = [replace(found, url=engine_uri) for found in attachment_items(body)] \
            if signed else []
        calls = [(upstream.add_path, self.dialect.add_payload(body, user_id, items) or body)]
        flushed = self.dialect.flush_payload(scope, user_id) if flush else None
        if flushed is not None and upstream.flush_path:
            calls.append((upstream.flush_path, flushed))
        return calls
