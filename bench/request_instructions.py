"""Instructions per proxied request, counted by valgrind: a figure a busy machine cannot blur.

The pass-through benchmarks (bench/passthrough.py, bench/passthrough_alt.py) time real processes
and swing by ±15 % between rounds on a shared 2-core host, so a change worth 1–3 % of a
request's CPU cannot be seen there. This one drives the whole serving stack in one process —
the protocol `serve` runs (gateway/connections.py, gateway/protocol.py) with an in-memory client
transport, the app, and the native upstream client with an upstream transport that answers at
once — and counts the instructions it executes under `valgrind --tool=callgrind`. Two runs of
different lengths are subtracted, so start-up cancels out:

    instructions per request = (I(n2) - I(n1)) / (n2 - n1)

What it leaves out is what no Python change moves: the kernel's side of the four socket calls
and the event loop's own C (docs/decisions.md, "Where a pass-through's CPU goes"). The same tree
gives the same count within about 1 % (the API key and timer firings differ between runs).

    .venv/bin/python bench/request_instructions.py [--trees . /tmp/base] [--n1 1000 --n2 2500]
        [--access-log]

With several `--trees`, each is counted in turn with this checkout's interpreter; a tree is a
checkout or `git archive` of the project (its C extension is not needed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BODY = b'{"user_id": "bench", "memory_type": "episode", "page_size": 5}'
ANSWER = b'{"request_id":"bench","data":{"memories":[],"total_count":0,"page":1},"user_id":"bench"}'
UPSTREAM_ANSWER = (b"HTTP/1.1 200 OK\r\ndate: Thu, 03 Dec 2026 14:00:00 GMT\r\nserver: uvicorn\r\n"
                   b"content-length: %d\r\ncontent-type: application/json\r\n\r\n%b"
                   % (len(ANSWER), ANSWER))
CONNECTIONS = 16
WARM_UP = 800


class _MemoryTransport:
    """What the protocols ask of a socket transport, in memory; `write` is each side's own."""

    closing = False
    extra: dict[str, Any] = {}

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def set_write_buffer_limits(self, *args: Any, **kwargs: Any) -> None: ...

    def get_write_buffer_size(self) -> int:
        return 0


class _UpstreamTransport(_MemoryTransport):
    """The engine's side of one upstream connection: every request is answered at once."""

    def __init__(self, protocol: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.protocol, self.loop = protocol, loop

    def write(self, data: bytes) -> None:
        self.loop.call_soon(self.protocol.data_received, UPSTREAM_ANSWER)


class _ClientTransport(_MemoryTransport):
    """A client connection to the gateway: what is written to it is the answer."""

    extra = {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}

    def __init__(self) -> None:
        self.answered: asyncio.Future[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self.answered is not None and not self.answered.done():
            self.answered.set_result(data)


async def serve_requests(total: int, access_log: bool) -> None:
    """Start a gateway in this process and answer `total` requests over 16 connections."""
    import uvicorn
    from uvicorn.server import ServerState

    from gateway import logs
    from gateway.app import create_app
    from gateway.config import Settings
    from gateway.connections import uvicorn_options
    from tests.conftest import create_key

    loop = asyncio.get_running_loop()

    async def connect(factory: Any, host: str, port: int, ssl: Any = None) -> Any:
        protocol = factory()
        transport = _UpstreamTransport(protocol, loop)
        protocol.connection_made(transport)
        return transport, protocol

    loop.create_connection = connect  # type: ignore[method-assign,assignment]
    with tempfile.TemporaryDirectory(prefix="mgw-instructions-") as tmp:
        settings = Settings().with_values(
            upstream={"base_url": "http://127.0.0.1:9"},
            storage={"root": f"{tmp}/storage", "database": f"{tmp}/gw.db"})
        key = create_key(settings, "bench")
        if access_log:
            logs.configure("info", stream=open(os.devnull, "w"))  # noqa: SIM115
        app = create_app(settings)
        await app.startup()
        request = (b"POST /api/v2/memory/get HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                   b"Content-Type: application/json\r\nAuthorization: Bearer %b\r\n"
                   b"Content-Length: %d\r\n\r\n%b" % (key.encode(), len(BODY), BODY))
        config = uvicorn.Config(app, access_log=False, log_config=None, lifespan="off",
                                proxy_headers=False, server_header=False,
                                **uvicorn_options(10.0, 0, 0))
        config.load()
        state = ServerState()
        connections = []
        for _ in range(CONNECTIONS):
            protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=state, app_state={})
            transport = _ClientTransport()
            protocol.connection_made(transport)  # type: ignore[arg-type]
            connections.append((protocol, transport))

        async def client(protocol: Any, transport: _ClientTransport, count: int) -> None:
            for _ in range(count):
                transport.answered = loop.create_future()
                protocol.data_received(request)
                answer = await transport.answered
                if not answer.startswith(b"HTTP/1.1 200 "):
                    raise RuntimeError(f"unexpected answer {answer[:200]!r}")

        try:
            for count in (WARM_UP, total):
                await asyncio.gather(*(client(protocol, transport, count // CONNECTIONS)
                                       for protocol, transport in connections))
        finally:
            await app.shutdown()


def run_child(total: int, access_log: bool) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve_requests(total, access_log))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve_requests(total, access_log))


def instructions(tree: Path, total: int, access_log: bool) -> int:
    """Instructions valgrind counts for the whole child process serving `total` requests."""
    with tempfile.TemporaryDirectory(prefix="mgw-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree),
               "MEMORY_GATEWAY_SERVER_LOG_LEVEL": "warning"}
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   sys.executable, str(Path(__file__).resolve()), "--child", str(total)]
        if access_log:
            command.append("--access-log")
        subprocess.run(command, env=env, cwd=tree, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError("callgrind wrote no total")
        return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--n1", type=int, default=1000)
    parser.add_argument("--n2", type=int, default=2500)
    parser.add_argument("--access-log", action="store_true",
                        help="write the access line of each request (to /dev/null)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        run_child(args.child, args.access_log)
        return 0
    if shutil.which("valgrind") is None:
        print("request_instructions: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    counts = []
    for tree in args.trees:
        per_request = (instructions(tree, args.n2, args.access_log)
                       - instructions(tree, args.n1, args.access_log)) / (args.n2 - args.n1)
        counts.append(per_request)
        ratio = f"  ({per_request / counts[0]:.3f}× the first)" if len(counts) > 1 else ""
        print(f"{tree}: {per_request:,.0f} instructions per request{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
