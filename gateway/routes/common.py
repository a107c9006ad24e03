"""Request parsing and replies shared by the owned route modules."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.attachments.files import Download
from gateway.errors import ValidationFailed, body_not_json
from gateway.services import services, user_id
from gateway.serving.asgi import read_body
from gateway.upstream.headers import response_headers

Model = TypeVar("Model", bound=BaseModel)
Handler = TypeVar("Handler", bound=Callable[[Request], Awaitable[Response]])

# A request body nested deeper than this is refused (422) before any handler sees it. The
# application models refuse stored JSON fields deeper than schema.MAX_JSON_DEPTH (32) as well.
MAX_BODY_DEPTH = 64


async def body_bytes(request: Request, limit: int | None = None) -> bytes:
    """The whole body; 413 as soon as it passes `limit` (default `limits.max_body_bytes`)."""
    if limit is None:
        limit = services(request).settings.limits.max_body_bytes
    return await read_body(request.scope, request.receive, limit)


def _too_deep() -> ValidationFailed:
    return ValidationFailed(
        f"request body is nested deeper than {MAX_BODY_DEPTH} levels", field="body"
    )


def nesting_exceeds(value: Any, limit: int) -> bool:
    """True when `value` holds more than `limit` nested arrays/objects; iterative, stops early."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return False


def parse_json(raw: bytes) -> Any:
    """A JSON body: 422 naming `body` when it is not JSON or is nested too deep."""
    try:
        value = json.loads(raw)
    except RecursionError:  # deeper than the decoder can go: far past the limit
        raise _too_deep() from None
    except ValueError as exc:
        raise body_not_json(exc) from None
    if nesting_exceeds(value, MAX_BODY_DEPTH):
        raise _too_deep()
    return value


def validate(model: type[Model], payload: Any) -> Model:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise validation_failed(exc) from None


def validation_failed(exc: ValidationError) -> ValidationFailed:
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "body"
    return ValidationFailed(f"{location}: {first['msg']}", field=location)


async def json_body(request: Request, model: type[Model]) -> Model:
    """An application route's body: at most `limits.max_json_body_bytes` (413), then validated."""
    return validate(model, parse_json(await app_body_bytes(request)))


async def app_body_bytes(request: Request) -> bytes:
    return await body_bytes(request, services(request).settings.limits.max_json_body_bytes)


def json_response(payload: Any, status: int = 200) -> Response:
    if isinstance(payload, BaseModel):
        body = payload.model_dump_json(by_alias=True).encode()
    else:
        body = json.dumps(payload, ensure_ascii=False).encode()
    return Response(body, status_code=status, media_type="application/json")


def relayed_headers(headers: list[tuple[bytes, bytes]], body: bytes) -> list[tuple[bytes, bytes]]:
    """An upstream answer's headers as passed back: hop-by-hop ones dropped, length recomputed."""
    kept = [(k, v) for k, v in response_headers(headers) if k != b"content-length"]
    return [(b"content-length", str(len(body)).encode()), *kept]


def relayed(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> Response:
    """An upstream answer passed back unchanged, as a response."""
    response = Response(body, status_code=status)
    response.raw_headers = relayed_headers(headers, body)
    return response


@dataclass(frozen=True, kw_only=True)
class ApiDoc:
    """What a handler takes and returns, read by the OpenAPI generator (gateway/openapi.py).

    `content_type` is the request body's type when there is a `request` model (e.g.
    multipart/form-data), else the response's (e.g. a file's bytes). `also` lists other success
    statuses answered with the same body (201 created / 200 already there); `errors` the error
    statuses beyond those implied (401 with a key, 404 with a path id, 413/422 with input).
    Used as a decorator (`api`), it attaches itself to the handler and keeps the handler's type.
    """

    summary: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    status: int = 200
    tag: str = ""
    content_type: str | None = None
    also: tuple[int, ...] = ()
    errors: tuple[int, ...] = ()

    def __call__(self, handler: Handler) -> Handler:
        handler.__api__ = self  # type: ignore[attr-defined]  # read back by gateway/openapi.py
        return handler


# `@api(summary=..., request=M, status=201)` on a handler.
api = ApiDoc


def query_params(request: Request, model: type[Model]) -> Model:
    """Validate the query string against a model (422 naming the parameter)."""
    return validate(model, dict(request.query_params))


STORED_FILE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
}


def stream_file(found: Download, content_type: str, name: str) -> Response:
    """A stored file's bytes, streamed from whichever store holds it."""
    disposition = f"inline; filename*=UTF-8''{quote(name)}"
    # The type is the uploader's word: an HTML or SVG file must not run as the gateway's page.
    return StreamingResponse(found.chunks, media_type=content_type, headers={
        "Content-Length": str(found.size), "Content-Disposition": disposition,
        **STORED_FILE_HEADERS})


def mine(request: Request, *path_params: str) -> tuple[Any, ...]:
    """(the database, the caller, the ids the path names): the leading arguments of every store
    call an owned resource's route makes about the caller's items, in the store's order."""
    return (services(request).db, user_id(request),
            *(request.path_params[name] for name in path_params))


def no_content() -> Response:
    return Response(status_code=204)


Endpoint = Callable[[Request], Awaitable[Response]]


def item_routes(collection: str, item: str, *, create: Endpoint, listing: Endpoint,
                get: Endpoint, update: Endpoint, delete: Endpoint) -> list[Route]:
    """An owned resource's five routes: create and list on the collection; read, edit and
    delete one item."""
    return [
        Route(collection, create, methods=["POST"]),
        Route(collection, listing, methods=["GET"]),
        Route(item, get, methods=["GET"]),
        Route(item, update, methods=["PATCH"]),
        Route(item, delete, methods=["DELETE"]),
    ]
