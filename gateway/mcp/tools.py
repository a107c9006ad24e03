"""The tools of SPEC §19, each a call of the REST route it mirrors, as the caller.

A tool builds its twin's request from its arguments, runs it through `Gateway.call_as` (every
rule, limit, metric and log line of the route applies there, once) and turns the answer into a
tool result: `structuredContent` and a text rendering, or `isError` with the route's refusal.
What a tool reads of the store itself is lookups scoped to the caller (what a file it was given
or found is called), never a decision a route makes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import mcp_types as types
from mcp.shared.exceptions import MCPError
from starlette.types import Scope

from gateway.attachments.add_body import engine_type, guess_type
from gateway.errors import NotFound, ValidationFailed
from gateway.identity.principal import Principal
from gateway.mcp import errors, schemas
from gateway.mcp.schemas import (
    AddArgs,
    Arguments,
    FlushArgs,
    GetArgs,
    InlineFile,
    ListSessionsArgs,
    ResolveArgs,
    SearchArgs,
    UploadArgs,
)
from gateway.routes.resolve import ResolveOut
from gateway.search.answers import filtered_answer
from gateway.serving import jsonio
from gateway.serving.inprocess import Answer
from gateway.store import attachments, resources
from gateway.store.attachments import BASE64_SOURCE, RESOURCE_SOURCE
from gateway.store.cursors import decode_cursor, encode_cursor
from gateway.store.ids import now_ms
from gateway.upstream.flavors import flavor_for
from gateway.upstream.flavors.base import AddScope

if TYPE_CHECKING:
    from gateway.services import Host

OCTET_STREAM = "application/octet-stream"
RESOURCE_SCHEME = "resource://"
ATTACHMENT_SCHEME = "attachment://"
GET_PATH = "/api/v2/memory/get"  # the engine's get (EverOS), through the proxy's table
SESSIONS_PAGE = 50


@dataclass(frozen=True)
class Caller:
    """Who called a tool, and the door into the REST routes as them."""

    gateway: Host
    principal: Principal
    origin: Scope  # the /mcp request: its request id and client address carry over

    @property
    def user_id(self) -> str:
        return self.principal.user_id

    async def call(self, method: str, path: str, **options: Any) -> Answer:
        return await self.gateway.call_as(self.principal, method, path, origin=self.origin,
                                          **options)

    @property
    def request_id(self) -> str:
        return str(self.origin.get("request_id", ""))


# A tool result in its wire form (`content`, `structuredContent`, `isError`): the SDK checks it
# against the protocol's schema once as it sends it.
Result = dict[str, Any]
Run = Callable[[Caller, Any], Awaitable[Result]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[Arguments]
    output_schema: dict[str, Any]
    writes: bool  # needs the credential's `write` scope (else `read`)
    run: Run

    def tool(self) -> types.Tool:
        return types.Tool(
            name=self.name, description=self.description,
            input_schema=schemas.input_schema(self.arguments), output_schema=self.output_schema,
            annotations=types.ToolAnnotations(read_only_hint=not self.writes,
                                              destructive_hint=False, open_world_hint=False),
        )


def result(structured: dict[str, Any], text: str | None = None,
           links: Sequence[dict[str, Any]] = ()) -> Result:
    rendering = text if text is not None else jsonio.dumps(structured).decode()
    return {"content": [text_item(rendering), *links], "structuredContent": structured}


def text_item(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def link(uri: str, name: str, mime_type: str, size: int | None = None) -> dict[str, Any]:
    """A `resource_link` content item."""
    item: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name,
                            "mimeType": mime_type}
    if size is not None:
        item["size"] = size
    return item


# --- search_memory --------------------------------------------------------------------------

async def search_memory(caller: Caller, args: SearchArgs) -> Result:
    body: dict[str, Any] = {"query": args.query, "user_id": caller.user_id, "top_k": args.top_k}
    if args.session_id is not None:
        body["filters"] = {"session_id": args.session_id}
    answer = await caller.call("POST", "/memories/search", json=body)
    if not answer.ok:
        return errors.refusal(answer)
    found = answer.json().get("results") or []
    named = await _uris_of(caller, {(r["session_id"], a["internal_uri"])
                                    for r in found for a in r["attachments"]})
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    links: dict[str, dict[str, Any]] = {}
    for r in found:
        listed = []
        for a in r["attachments"]:
            uri, mime = named.get(a["internal_uri"], (a["internal_uri"], _mime_of(a["name"])))
            linked = {"type": a["type"], "name": a["name"], "uri": uri, "mime_type": mime}
            if a.get("url"):
                linked["url"] = a["url"]
            listed.append(linked)
            if uri not in links:
                links[uri] = link(uri, a["name"], mime)
        items.append({"id": r["id"], "type": r["type"], "content": r["content"],
                      "score": r["score"], "session_id": r["session_id"],
                      "created_at": r["created_at"], "attachments": listed})
        files = "".join(f"\n  file: {a['name']} {a['uri']}" for a in listed)
        texts.append(text_item(f"[{r['type']}] {r['content'] or ''} "
                               f"(session {r['session_id']}, score {r['score']}){files}"))
    if not texts:
        texts.append(text_item("no memories found"))
    return {"content": [*texts, *links.values()], "structuredContent": {"results": items}}


async def _uris_of(caller: Caller, found: set[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """(uri, MIME type) of each of the caller's files found in (session, internal URI):
    `resource://` for an upload, `attachment://` for a file kept at add time, else the URI the
    add named. The search's own lookup (kept by the attachment index) names the files the
    gateway stores; a session that named one of them by URI costs one query."""
    sessions = sorted({session for session, _ in found})
    _, matchers = await caller.gateway.services.attachment_index.lookup(
        caller.user_id, sessions, python=False)
    named: dict[str, tuple[str, str]] = {}
    unknown: list[str] = []
    for session, internal_uri in found:
        matcher = matchers.get(session)
        mapped = matcher.files.get(internal_uri) if matcher is not None else None
        if mapped is None:
            unknown.append(internal_uri)
        elif mapped.source == RESOURCE_SOURCE and mapped.resource_id:
            named[internal_uri] = (RESOURCE_SCHEME + mapped.resource_id, mapped.content_type)
        else:
            named[internal_uri] = (ATTACHMENT_SCHEME + mapped.id, mapped.content_type)
    if unknown:
        named.update(await _uris_by_query(caller, set(unknown) - set(named)))
    return named


async def _uris_by_query(caller: Caller, internal_uris: set[str]) -> dict[str, tuple[str, str]]:
    """The same, for files named by URI in an add: a stored file of the caller's (an upload
    named by its resource_uri) is still called by its own uri."""
    rows = await attachments.mappings_of_uris(caller.gateway.services.db, caller.user_id,
                                              sorted(internal_uris))
    rank = {RESOURCE_SOURCE: 0, BASE64_SOURCE: 1}
    best: dict[str, tuple[int, str, str]] = {}
    for row in rows:
        source = row["source"]
        if source == RESOURCE_SOURCE and row["resource_id"]:
            uri = RESOURCE_SCHEME + row["resource_id"]
        elif source == BASE64_SOURCE:
            uri = ATTACHMENT_SCHEME + row["id"]
        else:
            uri = row["internal_uri"]
        candidate = (rank.get(source, 2), uri, row["content_type"])
        known = best.get(row["internal_uri"])
        if known is None or candidate[0] < known[0]:
            best[row["internal_uri"]] = candidate
    return {internal: (uri, mime) for internal, (_, uri, mime) in best.items()}


def _mime_of(name: str) -> str:
    return guess_type(name) or OCTET_STREAM


# --- add_memory -----------------------------------------------------------------------------

async def add_memory(caller: Caller, args: AddArgs) -> Result:
    settings = caller.gateway.settings
    session_id = args.session_id or settings.mcp.default_session
    content: list[dict[str, Any]] = []
    if args.text is not None:
        content.append({"type": "text", "text": args.text})
    digests: list[tuple[str, str, str]] = []  # (sha256, name, MIME type) of inline files
    given: list[dict[str, str]] = []  # files named by uri
    for index, file in enumerate(args.files or []):
        if isinstance(file, InlineFile):
            mime = _mime_of(file.name)
            content.append({"type": engine_type(mime), "base64": file.base64, "name": file.name,
                            "ext": file.name.rpartition(".")[2] if "." in file.name else "bin"})
            digest = _digest(file.base64)
            if digest is not None:
                digests.append((digest, file.name, mime))
            continue
        linked = await linked_file(caller, file.resource_uri)
        if linked is None:
            return errors.gateway_failure(NotFound(
                f"files[{index}].resource_uri: no such file of yours", field=f"files.{index}"),
                caller.request_id)
        uri, internal_uri, name, mime = linked
        content.append({"type": engine_type(mime), "uri": internal_uri, "name": name})
        given.append({"name": name, "uri": uri, "mime_type": mime})
    sender = args.agent_id if args.role == "assistant" and args.agent_id else caller.user_id
    message = {"role": args.role, "sender_id": sender, "timestamp": now_ms(), "content": content}
    answer = await caller.call("POST", "/memories/add",
                               json={"session_id": session_id, "messages": [message]})
    if not answer.ok:
        return errors.refusal(answer)
    body = answer.json()
    data = body.get("data") if isinstance(body, dict) and isinstance(body.get("data"), dict) \
        else body
    status = data.get("status") if isinstance(data, dict) else None
    count = data.get("message_count") if isinstance(data, dict) else None
    files = [*await _kept_files(caller, session_id, digests), *given]
    structured = {"session_id": session_id,
                  "message_count": count if isinstance(count, int) else 1,
                  "status": status if isinstance(status, str) else None,
                  "attachments": files}
    named = "".join(f"\n  file: {a['name']} {a['uri']}" for a in files)
    return result(structured, f"added to session {session_id} ({structured['status']}){named}",
                  [link(a["uri"], a["name"], a["mime_type"]) for a in files])


def _digest(encoded: str) -> str | None:
    try:
        return hashlib.sha256(base64.b64decode(encoded, validate=True)).hexdigest()
    except (binascii.Error, ValueError):
        return None  # the route refuses it (422) before anything is kept


async def _kept_files(caller: Caller, session_id: str,
                      digests: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The `attachment://` uri of each inline file the add kept (newest mapping with its digest
    and name in the session)."""
    rows = await attachments.added_mappings(caller.gateway.services.db, caller.user_id,
                                            session_id, [d for d, _, _ in digests])
    kept = []
    for digest, name, mime in digests:
        row = next((r for r in rows if r["sha256"] == digest and r["name"] == name), None)
        if row is not None:
            kept.append({"name": name, "uri": ATTACHMENT_SCHEME + row["id"],
                         "mime_type": row["content_type"] or mime})
    return kept


async def linked_file(caller: Caller, uri: str) -> tuple[str, str, str, str] | None:
    """(uri, internal URI, name, MIME type) of a `resource://` or `attachment://` file of the
    caller's; None for anything else (another user's, unknown, deleted, another scheme)."""
    parsed = parse_file_uri(uri)
    if parsed is None:
        return None
    scheme, file_id = parsed
    db = caller.gateway.services.db
    if scheme == RESOURCE_SCHEME:
        resource = await resources.get(db, caller.user_id, file_id)
        if resource is None:
            return None
        return uri, resource.internal_uri, resource.name, resource.content_type
    mapping = await attachments.stored_mapping(db, caller.user_id, file_id)
    if mapping is None:
        return None
    return uri, mapping.internal_uri, mapping.name, mapping.content_type


def parse_file_uri(uri: str) -> tuple[str, str] | None:
    """(scheme, id) of `resource://<id>` or `attachment://<id>`; None for any other spelling."""
    for scheme in (RESOURCE_SCHEME, ATTACHMENT_SCHEME):
        if uri.startswith(scheme):
            parts = urlsplit(uri)
            file_id = parts.netloc
            if (file_id and file_id.replace("_", "").replace("-", "").isalnum()
                    and file_id.isascii() and len(file_id) <= 64 and parts.path in ("", "/")
                    and not parts.query and not parts.fragment):
                return scheme, file_id
            return None
    return None


# --- flush_session, get_memories ------------------------------------------------------------

async def flush_session(caller: Caller, args: FlushArgs) -> Result:
    settings = caller.gateway.settings
    flavor = flavor_for(settings)
    payload = flavor.dialect.flush_payload(AddScope("default", "default", args.session_id),
                                           caller.user_id)
    path = settings.upstream.flush_path
    if payload is None or not path:
        return errors.failure({"code": "not_supported", "status": 404,
                               "message": "this engine has no flush"})
    return _passed_on(await caller.call("POST", path, json=payload))


async def get_memories(caller: Caller, args: GetArgs) -> Result:
    """The engine's get through the proxy, for the caller or for one of the caller's agents
    (the route refuses another's, or an unknown one, alike: 403); its items get their files as
    a search's do (the search's own rule, gateway/search/answers.py), each with its `uri`."""
    owner = {"agent_id": args.agent_id} if args.agent_id is not None \
        else {"user_id": caller.user_id}
    answer = await caller.call("POST", GET_PATH, json={
        **owner, "memory_type": args.memory_type, "page": args.page,
        "page_size": args.page_size})
    if not answer.ok:
        return errors.refusal(answer)
    svc = caller.gateway.services
    dialect = flavor_for(caller.gateway.settings).dialect
    body = jsonio.loads(await filtered_answer(svc.attachment_index, caller.user_id,
                                              dialect.find_items, answer.body))
    found = [(item.session_id, a) for item in dialect.find_items(body)
             if isinstance(item.raw, dict) for a in item.raw.get("attachments") or ()]
    named = await _uris_of(caller, {(str(session), a["internal_uri"]) for session, a in found})
    for _, attachment in found:
        attachment["uri"], attachment["mime_type"] = named.get(
            attachment["internal_uri"],
            (attachment["internal_uri"], _mime_of(attachment["name"])))
    return result(body if isinstance(body, dict) else {"answer": body})


def _passed_on(answer: Answer) -> Result:
    if not answer.ok:
        return errors.refusal(answer)
    body = answer.json()
    return result(body if isinstance(body, dict) else {"answer": body})


# --- upload_file ----------------------------------------------------------------------------

async def upload_file(caller: Caller, args: UploadArgs) -> Result:
    try:
        data = base64.b64decode(args.base64, validate=True)
    except (binascii.Error, ValueError):
        raise MCPError(errors.INVALID_PARAMS, "base64: not valid base64",
                       {"field": "base64"}) from None
    mime = args.content_type or _mime_of(args.name)
    boundary = "mcp-" + secrets.token_hex(12)
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{_form_quoted(args.name)}"\r\nContent-Type: {mime}\r\n\r\n').encode() \
        + data + f"\r\n--{boundary}--\r\n".encode()
    answer = await caller.call("POST", "/resources", body=body,
                               content_type=f"multipart/form-data; boundary={boundary}")
    if not answer.ok:
        return errors.refusal(answer)
    up = answer.json()
    structured = {key: up[key] for key in ("id", "uri", "name", "content_type", "size", "sha256")}
    return result(structured, f"stored {structured['name']} as {structured['uri']} "
                              f"({structured['size']} bytes)",
                  [link(structured["uri"], structured["name"], structured["content_type"],
                        structured["size"])])


def _form_quoted(name: str) -> str:
    return name.replace("\\", "\\\\").replace('"', "%22").replace("\r", "").replace("\n", "")


# --- list_sessions --------------------------------------------------------------------------

async def list_sessions(caller: Caller, args: ListSessionsArgs) -> Result:
    try:
        before = decode_cursor(args.cursor, "cursor") if args.cursor else None
    except ValidationFailed as exc:
        raise MCPError(errors.INVALID_PARAMS, exc.message, {"field": "cursor"}) from None
    rows = await attachments.sessions_page(
        caller.gateway.services.db, caller.user_id, SESSIONS_PAGE + 1,
        None if before is None else (before.key, before.id))
    more = len(rows) > SESSIONS_PAGE
    rows = rows[:SESSIONS_PAGE]
    items = [{"session_id": r["session_id"], "created_at": int(r["created_at"])} for r in rows]
    next_cursor = encode_cursor(items[-1]["created_at"], items[-1]["session_id"]) \
        if more and items else None
    text = "\n".join(item["session_id"] for item in items) or "no sessions yet"
    return result({"items": items, "next_cursor": next_cursor}, text)


# --- resolve_image_reference ----------------------------------------------------------------

async def resolve_image_reference(caller: Caller, args: ResolveArgs) -> Result:
    path = f"/chats/{quote(args.conversation_id, safe='')}/resolve"
    return _passed_on(await caller.call("POST", path, json={"text": args.text}))


def _open(model: type[schemas.Answer]) -> dict[str, Any]:
    return schemas.output_schema(model)


def _engine_answer(description: str) -> dict[str, Any]:
    return {"type": "object", "description": description, "additionalProperties": True}


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search_memory",
             "Search your memories. Results carry their files as resource links "
             "(read them with resources/read).",
             SearchArgs, _open(schemas.SearchAnswer), False, search_memory),
    ToolSpec("add_memory",
             "Remember a message (text and files) in one of your sessions.",
             AddArgs, _open(schemas.AddAnswer), True, add_memory),
    ToolSpec("flush_session",
             "Have the engine extract memories from a session of yours now.",
             FlushArgs, _engine_answer("the engine's flush answer"), True, flush_session),
    ToolSpec("get_memories",
             "Page through your memories of one type, each with its files; an agent's "
             "(agent_case, agent_skill) with the agent_id of one of your agents.",
             GetArgs, _engine_answer("the engine's get answer"), False, get_memories),
    ToolSpec("upload_file",
             "Store a file (its memory is extracted too); answers its resource:// uri.",
             UploadArgs, _open(schemas.UploadAnswer), True, upload_file),
    ToolSpec("list_sessions",
             "Your sessions, newest first.",
             ListSessionsArgs, _open(schemas.SessionsAnswer), False, list_sessions),
    ToolSpec("resolve_image_reference",
             "Which image(s) of a conversation the user's words mean (\"the left one\", "
             "\"上一个结果\"): targets, the rule used, or a clarification to ask.",
             ResolveArgs, ResolveOut.model_json_schema(by_alias=True, mode="serialization"),
             True, resolve_image_reference),
)
BY_NAME: Mapping[str, ToolSpec] = {spec.name: spec for spec in TOOLS}
