"""A small job service for tests, speaking the contract of SPEC §16 (docs/tool-calls.md).

`python -m tests.fake_job_service PORT` serves `POST /jobs` (deduplicated by `Idempotency-Key`)
and `GET /jobs/{id}`, plus test controls under `/control`: set a job's status and result, make
the next N job reads fail with 503, and read counters (every submission, every read).
Kept in memory only: it stands for a job service that outlives gateway restarts.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.processes import free_port, running


def job_service_app() -> Starlette:
    jobs: dict[str, dict[str, Any]] = {}
    by_key: dict[str, str] = {}
    counters = {"submissions": 0, "reads": 0, "fail_reads": 0}
    submitted: list[dict[str, Any]] = []
    numbers = itertools.count(1)

    async def submit(request: Request) -> JSONResponse:
        counters["submissions"] += 1
        key = request.headers.get("idempotency-key")
        if not key:
            return JSONResponse({"error": "Idempotency-Key is required"}, 400)
        body = await request.json()
        if key in by_key:
            job = jobs[by_key[key]]
            return JSONResponse({"id": job["id"], "status": job["status"]}, 200)
        job_id = f"job-{next(numbers)}"
        jobs[job_id] = {"id": job_id, "status": "queued", "key": key, **body}
        by_key[key] = job_id
        submitted.append({"key": key, **body})
        return JSONResponse({"id": job_id, "status": "queued"}, 201)

    async def read(request: Request) -> JSONResponse:
        counters["reads"] += 1
        if counters["fail_reads"] > 0:
            counters["fail_reads"] -= 1
            return JSONResponse({"error": "temporarily unavailable"}, 503)
        job = jobs.get(request.path_params["job_id"])
        if job is None:
            return JSONResponse({"error": "no such job"}, 404)
        shown = {"id": job["id"], "status": job["status"]}
        for key in ("result", "error"):
            if key in job:
                shown[key] = job[key]
        return JSONResponse(shown)

    async def control_job(request: Request) -> JSONResponse:
        job = jobs[request.path_params["job_id"]]
        job.update(await request.json())
        return JSONResponse(job)

    async def control_fail_reads(request: Request) -> JSONResponse:
        counters["fail_reads"] = int((await request.json())["count"])
        return JSONResponse(counters)

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse({**counters, "jobs": len(jobs), "submitted": submitted})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/jobs", submit, methods=["POST"]),
        Route("/jobs/{job_id}", read, methods=["GET"]),
        Route("/control/jobs/{job_id}", control_job, methods=["POST"]),
        Route("/control/fail-reads", control_fail_reads, methods=["POST"]),
        Route("/control/stats", stats, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ])


@contextmanager
def fake_job_service() -> Iterator[str]:
    """Run `python -m tests.fake_job_service PORT` until the block ends; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running([str(port)], dict(os.environ), url + "/health", module="tests.fake_job_service"):
        yield url


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(job_service_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
