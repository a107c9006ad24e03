"""Instructions per proxied request, counted by valgrind: a figure a busy machine cannot blur.

The pass-through benchmarks (bench/passthrough.py, `--variants` side by side) time real
processes and swing by ±15 % between rounds on a shared 2-core host, so a change worth 1–3 % of a
request's CPU cannot be seen there. This one drives the whole serving stack in one process —
the protocol `serve` runs (gateway/serving/connections.py, gateway/serving/protocol.py) with an
in-memory client transport, the app, and the native upstream client with an upstream transport
that answers at once — and counts the instructions it executes under `valgrind --tool=callgrind`.
Two runs of different lengths are subtracted, so start-up cancels out:

    instructions per request = (I(n2) - I(n1)) / (n2 - n1)

What it leaves out is what no Python change moves: the kernel's side of the four socket calls
and the event loop's own C (docs/decisions.md, "Instructions counted"). The same tree
gives the same count within about 1 % (the API key and timer firings differ between runs).

    .venv/bin/python bench/request_instructions.py [--trees . /tmp/base] [--n1 1000 --n2 2500]
        [--access-log] [--route get|page|search] [--limits] [--profile]
        [--tracing off|off-passed|unsampled|sampled|ratio]

`--route` picks the request: `get` (default) a small `/api/v2/memory/get` pass-through; `page`
the search benchmark's page of 50 episodes (bench/search_cost.py) passed through unchanged
(`POST /bench/page`, opened by `upstream.allow_paths`); `search` the same page answered by
`/memories/search` (scanned, matched against 10 sessions of 200 attachments, re-written).
`search` ÷ `page` is the search's cost over the pass-through of the same page without the
kernel's share. `--limits` serves with every rate limit and the engine-call cap on, set so high
that nothing is refused: with and without it, the limiter's own instructions, which the served
benchmark (bench/passthrough.py --limits) can only see through ±10 % of noise. `--profile` runs
the requests once under cProfile instead (no valgrind) and prints the 30 functions with the
most time of their own. `--tracing` serves with tracing on (bench/tracing_cost.py: the spans
encoded as the OTLP exporter does, counted in its thread too), the client's `traceparent` saying
`sampled` or `unsampled`, or none (`ratio`: the shipped `tracing.sample_ratio` decides);
`off-passed` is tracing off with the `unsampled` request's traceparent (the same bytes sent).

With several `--trees`, each is counted in turn with this checkout's interpreter; a tree is a
checkout or `git archive` of the project (its C extension is not needed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


def upstream_answer(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ndate: Thu, 03 Dec 2026 14:00:00 GMT\r\nserver: uvicorn\r\n"
            b"content-length: %d\r\ncontent-type: application/json\r\n\r\n%b"
            % (len(body), body))


UPSTREAM_ANSWER = upstream_answer(ANSWER)
SEARCH_BODY = b'{"query": "trip", "user_id": "bench"}'
ROUTES = {"get": b"/api/v2/memory/get", "page": b"/bench/page", "search": b"/memories/search"}
CONNECTIONS = 16
WARM_UP = 800
# `--limits`: every rate limit and the engine-call cap on, set so high that nothing is refused
# (each request still draws from its bucket and takes an engine slot), as
# bench/passthrough.py --limits sets them; read by the child from its environment.
LIMITS_ENV = "MGW_BENCH_LIMITS"
LIMITS_ON = {"requests_per_s": 1_000_000, "burst": 1_000_000, "engine_concurrency_per_user": 1000}
# `--tracing KIND`: tracing on (spans encoded as OTLP/HTTP does, then dropped, as in
# bench/tracing_cost.py) and a client traceparent saying sampled or not, or none (`ratio`: the
# shipped sample_ratio decides).
TRACING_ENV = "MGW_BENCH_TRACING"
TRACEPARENTS = {"unsampled": b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
                "sampled": b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "ratio": None}
# `off-passed`: tracing off, the client's unsampled traceparent sent all the same (the same
# request as `unsampled`: their difference is tracing's own work, not the header's bytes).
TRACED = set(TRACEPARENTS)  # the kinds served with tracing on
TRACEPARENTS["off-passed"] = TRACEPARENTS["unsampled"]


class _MemoryTransport:
    """What the protocols ask of a socket transport, in memory; `write` is each side's own."""

    closing = False
    extra: dict[str, Any] = {}

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def writelines(self, pieces: Any) -> None:
        self.write(b"".join(pieces))

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

    page = UPSTREAM_ANSWER  # the answer to a search or /bench/page (the search page)

    def __init__(self, protocol: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.protocol, self.loop = protocol, loop

    def write(self, data: bytes) -> None:
        line = data[:data.find(b"\r\n")]
        answer = self.page if b"search" in line or b"/bench/page" in line else UPSTREAM_ANSWER
        self.loop.call_soon(self.protocol.data_received, answer)


class _ClientTransport(_MemoryTransport):
    """A client connection to the gateway: what is written to it is the answer."""

    extra = {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}

    def __init__(self) -> None:
        self.answered: asyncio.Future[bytes] | None = None
        self.head = b""  # the answer's head so far
        self.left: int | None = None  # its body bytes still to come, once the head is whole

    def write(self, data: bytes) -> None:
        """Counts an answer's bytes without keeping its body (a copy would be counted too);
        the whole answer, by its content-length, settles `answered` with its head."""
        if self.left is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.left = _content_length(self.head[:end]) - (len(self.head) - end - 4)
            self.head = self.head[:end]
        else:
            self.left -= len(data)
        if self.left <= 0 and self.answered is not None and not self.answered.done():
            self.answered.set_result(self.head)
            self.head, self.left = b"", None

    def writelines(self, pieces: Any) -> None:
        for piece in pieces:
            self.write(piece)


def _content_length(head: bytes) -> int:
    """The Content-Length a response head declares (0 without one), found by a byte search:
    a regular expression's cost would grow with every header the gateway adds, and be counted
    as the gateway's."""
    lowered = head.lower()
    at = lowered.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    value = lowered[at + 17:]
    stop = value.find(b"\r\n")
    return int(value if stop < 0 else value[:stop])


def seed_search(key: str) -> list[bytes]:
    """The search benchmark's page as the engine's answer, and the adds that own its files."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import search_cost

    _UpstreamTransport.page = upstream_answer(search_cost.page_bytes())
    adds = []
    for session in range(search_cost.SESSIONS):
        body = json.dumps({"session_id": f"bench-session-{session}", "messages": [{
            "role": "user", "sender_id": "bench", "content": [
                {"type": "image", "uri": f"https://cdn.example/{search_cost.filename(session, i)}"}
                for i in range(search_cost.ATTACHMENTS)]}]}).encode()
        adds.append(request_bytes(b"/memories/add", key, body))
    return adds


def request_bytes(path: bytes, key: str, body: bytes) -> bytes:
    traceparent = TRACEPARENTS.get(os.environ.get(TRACING_ENV, ""))
    trace = b"traceparent: %b\r\n" % traceparent if traceparent else b""
    return (b"POST %b HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
            b"Content-Type: application/json\r\nAuthorization: Bearer %b\r\n%b"
            b"Content-Length: %d\r\n\r\n%b" % (path, key.encode(), trace, len(body), body))


async def serve_requests(total: int, access_log: bool, route: str = "get") -> None:
    """Start a gateway in this process and answer `total` requests over 16 connections."""
    import uvicorn
    from uvicorn.server import ServerState

    from gateway import logs
    from gateway.app import create_app
    from gateway.attachments import recovery
    from gateway.config import Settings
    from gateway.serving.connections import uvicorn_options
    from tests.conftest import create_key

    # Work on a wall clock (the key cache's expiry, start-up recovery's ticks) would grow with
    # how long a run takes under valgrind on a busy host, and be counted per request: pushed
    # past any run's length, so the count is the requests' own.
    recovery.RECOVERY_INTERVAL_S = 3600.0
    loop = asyncio.get_running_loop()

    async def connect(factory: Any, host: str, port: int, ssl: Any = None) -> Any:
        protocol = factory()
        transport = _UpstreamTransport(protocol, loop)
        protocol.connection_made(transport)
        return transport, protocol

    loop.create_connection = connect  # type: ignore[method-assign,assignment]
    with tempfile.TemporaryDirectory(prefix="mgw-instructions-") as tmp:
        settings = Settings().with_values(
            upstream={"base_url": "http://127.0.0.1:9", "allow_paths": ["POST /bench/page"],
                      "fetchable_hosts": ["cdn.example"]},
            storage={"root": f"{tmp}/storage", "database": f"{tmp}/gw.db"},
            auth={"key_cache_ttl_s": 3600.0},
            **({"rate_limits": LIMITS_ON} if os.environ.get(LIMITS_ENV) else {}))
        key = create_key(settings, "bench")
        if access_log:
            logs.configure("info", stream=open(os.devnull, "w"))  # noqa: SIM115
        app = create_app(settings)
        if os.environ.get(TRACING_ENV) in TRACED:
            from tracing_cost import EncodeExporter

            from gateway.tracing import Tracing

            # the spans left in its queue are encoded at shutdown, inside the count
            app.tracing = Tracing(settings.tracing, EncodeExporter(), batched=True)
        await app.startup()
        request = request_bytes(ROUTES[route], key, BODY if route == "get" else SEARCH_BODY)
        adds = seed_search(key) if route != "get" else []
        config = uvicorn.Config(app, access_log=False, log_config=None, lifespan="off",
                                proxy_headers=False, server_header=False,
                                **uvicorn_options(10.0, 0, 0, 65536))
        config.load()
        state = ServerState()
        connections = []
        for _ in range(CONNECTIONS):
            protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=state, app_state={})
            transport = _ClientTransport()
            protocol.connection_made(transport)  # type: ignore[arg-type]
            connections.append((protocol, transport))

        async def client(protocol: Any, transport: _ClientTransport, count: int,
                         requests: list[bytes] | None = None) -> None:
            for sent in requests or [request] * count:
                transport.answered = loop.create_future()
                protocol.data_received(sent)
                answer = await transport.answered
                if not answer.startswith(b"HTTP/1.1 200 "):
                    raise RuntimeError(f"unexpected answer {answer[:300]!r}")

        try:
            await client(*connections[0], 0, adds)
            for count in (WARM_UP, total):
                await asyncio.gather(*(client(protocol, transport, count // CONNECTIONS)
                                       for protocol, transport in connections))
        finally:
            await app.shutdown()


def run_child(total: int, access_log: bool, route: str) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve_requests(total, access_log, route))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve_requests(total, access_log, route))


def instructions(tree: Path, total: int, access_log: bool, route: str) -> int:
    """Instructions valgrind counts for the whole child process serving `total` requests."""
    with tempfile.TemporaryDirectory(prefix="mgw-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(tree),
               "MEMORY_GATEWAY_SERVER_LOG_LEVEL": "warning"}
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   sys.executable, str(Path(__file__).resolve()), "--child", str(total),
                   "--route", route]
        if access_log:
            command.append("--access-log")
        subprocess.run(command, env=env, cwd=tree, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError("callgrind wrote no total")
        return int(found.group(1))


def profile(total: int, access_log: bool, route: str) -> None:
    """The requests once under cProfile, in this process: where a request's Python time goes."""
    import cProfile
    import pstats

    sys.path.insert(0, str(ROOT))  # tests.conftest, as the child's PYTHONPATH gives it
    profiler = cProfile.Profile()
    profiler.runcall(run_child, total, access_log, route)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--n1", type=int, default=1000)
    parser.add_argument("--n2", type=int, default=2500)
    parser.add_argument("--access-log", action="store_true",
                        help="write the access line of each request (to /dev/null)")
    parser.add_argument("--route", nargs="+", choices=sorted(ROUTES), default=["get"],
                        help="the requests counted (several: each in turn, ratios to the first)")
    parser.add_argument("--limits", action="store_true",
                        help="with every rate limit and the engine-call cap on (never refusing)")
    parser.add_argument("--tracing", choices=["off", *TRACEPARENTS], default="off",
                        help="tracing on, the client's traceparent sampled, unsampled or none")
    parser.add_argument("--profile", action="store_true",
                        help="profile --n2 requests of the first route with cProfile instead")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.limits:
        os.environ[LIMITS_ENV] = "1"  # the children's and this process's own serving
    if args.child is None:
        os.environ[TRACING_ENV] = args.tracing  # the children's
    if args.child is not None:
        run_child(args.child, args.access_log, args.route[0])
        return 0
    if args.profile:
        profile(args.n2, args.access_log, args.route[0])
        return 0
    if shutil.which("valgrind") is None:
        print("request_instructions: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    counts = []
    for tree in args.trees:
        for route in args.route:
            per_request = (instructions(tree, args.n2, args.access_log, route)
                           - instructions(tree, args.n1, args.access_log, route)
                           ) / (args.n2 - args.n1)
            counts.append(per_request)
            ratio = f"  ({per_request / counts[0]:.3f}× the first)" if len(counts) > 1 else ""
            print(f"{tree} {route}: {per_request:,.0f} instructions per request{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
