"""Liveness and readiness; no key needed, so they name no address and no error (SPEC §13).

Why a check failed goes to the log (and `memory-gateway doctor` says it in full)."""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import GatewayError
from gateway.routes.common import api, json_response
from gateway.services import services

log = logging.getLogger("gateway.health")
READY_PROBE_PATH = "/health"
UNREACHABLE = "unreachable"


class Liveness(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, Literal["ok", "unreachable"]]  # database, upstream


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
        log.warning("readiness: the database is unreachable: %s", exc)
        checks["database"] = UNREACHABLE
    try:
        status, _, _ = await svc.upstream.call("GET", READY_PROBE_PATH, [], None)
    except GatewayError as exc:
        log.warning("readiness: the upstream is unreachable: %s", exc.message)
        checks["upstream"] = UNREACHABLE
    else:
        if status >= 500:
            log.warning("readiness: the upstream's %s answered %d", READY_PROBE_PATH, status)
        checks["upstream"] = "ok" if status < 500 else UNREACHABLE
    ready = all(value == "ok" for value in checks.values())
    return json_response(
        {"status": "ready" if ready else "not_ready", "checks": checks}, 200 if ready else 503
    )


PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})

routes = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
