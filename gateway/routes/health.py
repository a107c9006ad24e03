"""Liveness and readiness; no key needed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import GatewayError
from gateway.routes.common import api, json_response
from gateway.services import services

READY_PROBE_PATH = "/health"


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]  # database, upstream: "ok" or "error: ..."


@api(summary="Liveness: the process answers", response=Liveness, tag="operations")
async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


@api(summary="Readiness: database and upstream reachable (503 when not)", response=Readiness,
     also=(503,), tag="operations")
async def readyz(request: Request) -> Response:
    svc = services(request)
    checks: dict[str, str] = {}
    try:
        await svc.db.ping()
        checks["database"] = "ok"
    except Exception as exc:  # any database failure means "not ready"
        checks["database"] = f"error: {exc}"
    try:
        status, _, _ = await svc.upstream.call("GET", READY_PROBE_PATH, [], None)
        checks["upstream"] = "ok" if status < 500 else f"error: status {status}"
    except GatewayError as exc:
        checks["upstream"] = f"error: {exc.message}"
    ready = all(value == "ok" for value in checks.values())
    return json_response(
        {"status": "ready" if ready else "not_ready", "checks": checks}, 200 if ready else 503
    )


PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})

routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
