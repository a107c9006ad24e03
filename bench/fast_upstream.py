"""A minimal, fast upstream for benchmarks: answers every request with a small JSON body.

Run: python bench/fast_upstream.py PORT
"""

from __future__ import annotations

import sys

import uvicorn

BODY = b'{"request_id":"bench","data":{"status":"accumulated","message_count":1}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):  # type: ignore[no-untyped-def]
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                access_log=False, http="httptools", loop="uvloop", lifespan="off")
