"""Operator endpoints, no key needed: the OpenAPI document and Prometheus metrics."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import NotFound
from gateway.metrics import CONTENT_TYPE
from gateway.routes.common import api
from gateway.services import services

OPENAPI_KEY = "openapi_document"


@api(summary="This OpenAPI document (the gateway's own endpoints)", tag="operations")
async def openapi_document(request: Request) -> Response:
    # Imported here: the document reads every route module, this one included.
    from gateway.openapi import document_bytes
    from gateway.routes import PUBLIC_PATHS, all_routes

    svc = services(request)
    body = svc.extras.get(OPENAPI_KEY)
    if body is None:  # built once per app: its routes follow its settings (upstream.flavor)
        body = svc.extras[OPENAPI_KEY] = document_bytes(all_routes(svc.settings), PUBLIC_PATHS)
    return Response(body, media_type="application/json")


@api(summary="Prometheus metrics (text exposition format); firewall it from the public",
     tag="operations", content_type="text/plain", errors=(404,))
async def metrics(request: Request) -> Response:
    svc = services(request)
    if not svc.settings.metrics.enabled:
        raise NotFound("metrics are disabled (metrics.enabled = false)")
    return Response(svc.metrics.exposition(), headers={"content-type": CONTENT_TYPE})


PUBLIC_PATHS = frozenset({"/openapi.json", "/metrics"})

routes = [
    Route("/openapi.json", openapi_document, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
