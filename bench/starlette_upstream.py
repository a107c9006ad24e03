"""A Starlette engine stand-in for the pass-through benchmark (SPEC §14's "Starlette upstream").

Run: python bench/starlette_upstream.py PORT

`POST /api/v2/memory/get` (and its v1 alias) parses the JSON body and answers a small EverOS-shaped
page through `JSONResponse`, the way a Starlette/FastAPI engine answers; served by uvicorn with
httptools and uvloop, as the gateway itself is.
"""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

ANSWER = {"request_id": "bench", "data": {"memories": [], "total_count": 0, "page": 1}}


async def get_memories(request: Request) -> JSONResponse:
    payload = await request.json()
    return JSONResponse({**ANSWER, "user_id": payload.get("user_id")})


app = Starlette(routes=[
    Route("/api/v2/memory/get", get_memories, methods=["POST"]),
    Route("/api/v1/memory/get", get_memories, methods=["POST"]),
])


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False, http="httptools", loop="uvloop", lifespan="off")
