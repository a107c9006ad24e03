"""A minimal, fast upstream for benchmarks: answers every request with a fixed JSON body.

Run: python bench/fast_upstream.py PORT [SEARCH_ANSWER_FILE]
Paths containing "search" or "/bench/page" get the search answer file (when given); every other
path gets a small add-style answer. `BENCH_UPSTREAM_DELAY_MS` in the environment: each answer
waits that long first (an engine's own latency).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import uvicorn

BODY = b'{"request_id":"bench","data":{"status":"accumulated","message_count":1}}'


def _headers(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]


DELAY_S = float(os.environ.get("BENCH_UPSTREAM_DELAY_MS") or 0) / 1000
SMALL = (BODY, _headers(BODY))
PAGE = SMALL
if len(sys.argv) > 2:
    page = Path(sys.argv[2]).read_bytes()
    PAGE = (page, _headers(page))


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    path = scope["path"]
    body, headers = PAGE if ("search" in path or path == "/bench/page") else SMALL
    if DELAY_S:
        await asyncio.sleep(DELAY_S)
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False, http="httptools", loop="uvloop", lifespan="off")
