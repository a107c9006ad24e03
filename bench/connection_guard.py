"""Cost of the connection guard (gateway/serving/connections.py) per request, in one process.

Drives uvicorn's httptools protocol and the guarded one alike with keep-alive requests over an
in-memory transport, each answered by a minimal ASGI app on uvloop; rounds alternate, and so
does which of the two runs first. Prints each pair's requests per CPU second, the median ratio
guarded ÷ plain, and the ratio of the best rounds (the least disturbed by other processes).
The network and the gateway are left out on purpose: on a shared machine their noise is far
larger than what the guard adds, and this is the only code the guard changes.

    .venv/bin/python bench/connection_guard.py [--rounds 7] [--requests 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn  # noqa: E402
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # noqa: E402
from uvicorn.server import ServerState  # noqa: E402

from gateway.serving.connections import ConnectionCounts, guarded_protocol  # noqa: E402

REQUEST = (b"POST /api/v2/memory/get HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json"
           b"\r\nAuthorization: Bearer x\r\nContent-Length: 2\r\n\r\n{}")


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})


class MemoryTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.answered = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 8080)}.get(
            name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.answered += bytes(data).count(b"HTTP/1.1 200")

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...


async def requests_per_s(protocol_class: type[HttpToolsProtocol], count: int) -> float:
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
    config.load()
    protocol = protocol_class(config, ServerState(), {})
    transport = MemoryTransport()
    protocol.connection_made(transport)
    for _ in range(count // 10):  # warm-up
        protocol.data_received(REQUEST)
        while not protocol.cycle.response_complete:
            await asyncio.sleep(0)
    transport.answered = 0
    started = time.process_time()  # CPU time: other processes' load is not counted
    for _ in range(count):
        protocol.data_received(REQUEST)
        while not protocol.cycle.response_complete:
            await asyncio.sleep(0)
    elapsed = time.process_time() - started
    assert transport.answered == count, transport.answered
    protocol.connection_lost(None)
    return count / elapsed


def run(main: Any) -> float:
    """On uvloop, as `serve` runs."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return float(runner.run(main))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    guarded = guarded_protocol(10.0, ConnectionCounts(2048, 256), 65536)
    ratios, plains, guards = [], [], []
    for number in range(1, args.rounds + 1):
        if number % 2:  # which goes first alternates too
            plain = run(requests_per_s(HttpToolsProtocol, args.requests))
            guard = run(requests_per_s(guarded, args.requests))
        else:
            guard = run(requests_per_s(guarded, args.requests))
            plain = run(requests_per_s(HttpToolsProtocol, args.requests))
        ratios.append(guard / plain)
        plains.append(plain)
        guards.append(guard)
        print(f"round {number}: plain {plain:8.0f} req/s  guarded {guard:8.0f} req/s  "
              f"ratio {guard / plain:.3f}")
    print(f"median ratio guarded / plain {statistics.median(ratios):.3f}; best of each "
          f"{max(guards) / max(plains):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
