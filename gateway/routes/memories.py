"""`POST /memories/add` and `POST /memories/search`: identity checks, then the engine's paths."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.context import request_id, services, user_id
from gateway.proxy import upstream_headers
from gateway.routes.common import body_bytes, parse_json, relayed


async def _forward_checked(request: Request, path: str) -> Response:
    svc = services(request)
    caller = user_id(request)
    raw = await body_bytes(request)
    await svc.rules.check_body(parse_json(raw), caller)
    headers = upstream_headers(request.scope, svc.settings, caller, request_id(request))
    status, out_headers, body = await svc.upstream.call("POST", path, headers, raw)
    return relayed(status, out_headers, body)


async def add(request: Request) -> Response:
    return await _forward_checked(request, services(request).settings.upstream.add_path)


async def search(request: Request) -> Response:
    return await _forward_checked(request, services(request).settings.upstream.search_path)


routes = [
    Route("/memories/add", add, methods=["POST"]),
    Route("/memories/search", search, methods=["POST"]),
]
