"""Search interception (SPEC §9): forward, then drop other users' sessions and attach the
caller's files whose names occur in each result.

`/memories/search` answers the normalised `{"results", "total"}`; an engine's own search paths
keep the engine's shape with an `attachments` list added to each item. Served as raw ASGI, like
the pass-through (gateway/upstream/proxy.py): a search costs its page's reading and matching,
not a framework's request and response objects (docs/decisions.md, "Search as raw ASGI").
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from starlette.types import Receive, Scope, Send

from gateway import tracing
from gateway.errors import UpstreamBadResponse, UpstreamRefused
from gateway.routes.common import ApiDoc
from gateway.routes.engine_call import checked_json, forward, send_json, send_relayed
from gateway.search import page_scan
from gateway.search.answers import (
    PYTHON_INLINE_BYTES,
    SCANNER_INLINE_BYTES,
    off_loop,
    python_answer,
    render_scanned,
    session_ids,
)
from gateway.services import Services
from gateway.serving import jsonio
from gateway.serving.asgi import read_body
from gateway.upstream.flavors import Dialect
from gateway.upstream.flavors import everos_models as models
from gateway.upstream.routes import EngineRoute


# These document the answer the search path writes straight to bytes (gateway/search/items.py's
# `result`, or the C page scanner): no model is built per request, for speed.
class Attachment(BaseModel):
    type: str
    name: str
    internal_uri: str
    # GET /attachments/{id}/content under server.public_url; absent for a client's own URIs
    # and when no public URL is configured.
    url: str | None = None


class SearchResult(BaseModel):
    id: str
    type: str
    content: str | None
    score: float | None
    session_id: str | None
    created_at: Any
    raw: Any
    attachments: list[Attachment]


class SearchResponse(BaseModel):
    results: list[SearchResult]
    total: int


class SearchEndpoint:
    """One search path as an ASGI app: `native` bodies and answers are the engine's own, else
    the gateway's EverOS-shaped ones (`path` None: `upstream.search_path`)."""

    def __init__(self, dialect: Dialect, native: bool, path: str | None, entry: EngineRoute,
                 doc: ApiDoc) -> None:
        self.dialect, self.native, self.path, self.entry = dialect, native, path, entry
        self.__api__ = doc  # read by gateway/openapi.py, as @api sets it on a handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        svc: Services = scope["gateway"]
        dialect, native = self.dialect, self.native
        # The body is parsed and held until the answer (the parsing budget, SPEC §13).
        with svc.proxy.parsing.held(scope):
            raw = await read_body(scope, receive, svc.settings.limits.max_body_bytes)
            caller, read, _ = await checked_json(svc, scope, raw, self.entry)
            outgoing = (None if native or dialect.searches_as_sent
                        else dialect.search_payload(read.whole(), caller))
            path = self.path or svc.settings.upstream.search_path
            answer = await forward(scope, svc, caller, path, raw, outgoing)
            status, _, body = answer
            if not 200 <= status < 300:
                if not native:  # the gateway's own route answers in its own shape (SPEC §4)
                    raise UpstreamRefused.of(status, answer[2])
                await send_relayed(send, answer)
                return
            try:
                with tracing.span("matching"):
                    out, matched = await _answer(svc, caller, dialect, native, body, status)
            except (UnicodeEncodeError, TypeError) as exc:  # a lone surrogate cannot be encoded
                raise UpstreamBadResponse(
                    f"upstream search answer cannot be re-encoded: {exc}") from None
        svc.metrics.attachments_matched(matched)
        await send_json(send, status, out)


async def _answer(svc: Services, caller: str, dialect: Dialect, native: bool, body: bytes,
                  status: int) -> tuple[bytes, int]:
    """The answer's bytes with other users' sessions dropped and attachments added (SPEC §9)."""
    # The scanner leaves items whose content is derived (profiles, agent cases) to Python.
    scanner = dialect.page_scan and svc.settings.server.native_search
    size = len(body)
    if scanner:
        # the common page is read, looked up and answered without a wait (and a big one off
        # the loop): each step costs as little as the C work it wraps
        inline = size < SCANNER_INLINE_BYTES
        page = (page_scan.scan(body, native) if inline
                else await asyncio.to_thread(page_scan.scan, body, native))
        if page is not None:  # the C scanner read it: the same answer, without Python objects
            index, sessions = svc.attachment_index, sorted(page.sessions)
            found = index.kept(caller, sessions, python=False)
            if found is None:
                found = await index.lookup(caller, sessions, python=False)
            if inline:
                return render_scanned(page, found[0], found.natives)
            return await asyncio.to_thread(render_scanned, page, found[0], found.natives)
    try:
        answer = await off_loop(size, PYTHON_INLINE_BYTES, jsonio.loads, body)
    except ValueError:
        raise UpstreamBadResponse(
            f"upstream search answer is not JSON (status {status}, {len(body)} bytes)"
        ) from None
    items = dialect.find_items(answer)
    foreign, matchers = await svc.attachment_index.lookup(caller, session_ids(items))
    return await off_loop(size, PYTHON_INLINE_BYTES, python_answer, answer, items, native,
                          foreign, matchers)


def search_endpoint(dialect: Dialect, native: bool, path: str | None,
                    entry: EngineRoute, summary: str) -> SearchEndpoint:
    """A search endpoint with its OpenAPI doc: the gateway's own shape unless `native`."""
    if native:
        doc = ApiDoc(summary=summary, errors=(403, 502, 503, 504), tag="memories")
    else:
        doc = ApiDoc(summary=summary, request=models.OwnSearchBody, response=SearchResponse,
                     errors=(403, 502, 503, 504), tag="memories")
    return SearchEndpoint(dialect, native, path, entry, doc)
