"""Operator endpoints, no key needed: the OpenAPI document, a page listing its operations
(`/docs`: what the public document says, nothing more), and Prometheus metrics."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
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


DOCS_KEY = "docs_page"


@api(summary="The API's operations as a page (the OpenAPI document, readable)",
     tag="operations", content_type="text/html")
async def docs_page(request: Request) -> Response:
    svc = services(request)
    page = svc.extras.get(DOCS_KEY)
    if page is None:
        document = json.loads(bytes((await openapi_document(request)).body))
        page = svc.extras[DOCS_KEY] = _page(document)
    return HTMLResponse(page)


def _page(document: dict[str, Any]) -> str:
    """One table row per operation: method, path, summary; no script, nothing fetched."""
    rows = []
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            if isinstance(operation, dict):
                rows.append(f"<tr><td>{escape(method.upper())}</td><td><code>{escape(path)}"
                            f"</code></td><td>{escape(operation.get('summary', ''))}</td></tr>")
    info = document.get("info", {})
    title = escape(f"{info.get('title', 'memory-gateway')} {info.get('version', '')}".strip())
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>"
            f"<body><h1>{title}</h1><p>Every operation of this gateway; request and answer "
            f"bodies in <a href=\"/openapi.json\">/openapi.json</a>. Every operation but "
            f"this page, /openapi.json, /metrics and the health checks needs a key.</p>"
            f"<table><tr><th>method</th><th>path</th><th>summary</th></tr>{''.join(rows)}"
            f"</table></body></html>")


@api(summary="Prometheus metrics (text exposition format); firewall it from the public",
     tag="operations", content_type="text/plain", errors=(404,))
async def metrics(request: Request) -> Response:
    svc = services(request)
    if not svc.settings.metrics.enabled:
        raise NotFound("metrics are disabled (metrics.enabled = false)")
    return Response(svc.metrics.exposition(), headers={"content-type": CONTENT_TYPE})


PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/metrics"})

routes = [
    Route("/openapi.json", openapi_document, methods=["GET"]),
    Route("/docs", docs_page, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
