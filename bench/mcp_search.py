"""MCP search benchmark (SPEC §14, §19): `search_memory` on `/mcp` against the REST search it
mirrors, same engine, same run.

One gateway process (bench/harness.py: its shipped log level, a user key) in front of each engine
named by `--engine`: `dev` (the dev engine, whose answers take a few ms: the gateway's own cost
dominates, the worst case for the ratio) and `everos` (EverOS 1.5.1 with the stand-in model
server, started as bench/engine_latency.py starts it: where SPEC §14 puts the bar). One user
with a few sessions, each holding an image, so every search finds episodes with attachments
(resource links on the MCP side). The same query is sent alternately as
`POST /memories/search` and as a `tools/call` of `search_memory`, one request at a time over one
keep-alive connection each, in the 2026-07-28 per-request envelope (what the SDK's client sends
by default) and in the stateless handshake era (`MCP-Protocol-Version: 2025-06-18`). Two
figures per kind: the median latency and the ratio of the medians (bar: ≤ 1.3×), and the
gateway process's CPU time per request (from /proc, over alternated blocks of requests): what a
call costs the gateway, the figure that moves least when other processes share the machine.

    .venv/bin/python bench/mcp_search.py [--engine dev,everos] [--requests 300]
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import (  # noqa: E402
    PYTHON,
    cpu_seconds,
    free_port,
    gateway_process,
    process,
    wait_for_port,
)

from tests import everos_engine as engine_process  # noqa: E402
from tests.e2e.real_engine_helpers import png  # noqa: E402
from tests.everos_engine import eventually, everos_engine  # noqa: E402

BLOCK = 50  # requests per CPU-time block

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
QUERY = "lighthouse"


USER = "bench"  # the harness's key is this user's
SEARCH = {"query": QUERY, "user_id": USER, "top_k": 10}


def _seed(rest: httpx.Client) -> None:
    """Five sessions with an image each, extracted and searchable (the real engine indexes in
    the background: its search finds them a moment after the flush)."""
    for n in range(5):
        session = f"trip-{n}"
        added = rest.post("/memories/add", json={"session_id": session, "messages": [{
            "role": "user", "sender_id": USER, "timestamp": 1_780_000_000_000 + n,
            "content": [{"type": "text", "text": f"the {QUERY} at dusk, day {n}, photo{n}.png"},
                        {"type": "image",  # a PNG the real engine's parser opens
                         "base64": base64.b64encode(png(4, 1, shade=90 + n)).decode(),
                         "name": f"photo{n}.png", "ext": "png"}]}]})
        added.raise_for_status()
        rest.post("/api/v2/memory/flush", json={"session_id": session}).raise_for_status()

    def found() -> bool | None:
        answer = rest.post("/memories/search", json=SEARCH)
        answer.raise_for_status()
        results = answer.json()["results"]
        return True if results and results[0]["attachments"] else None

    eventually(found, timeout=120, what="the seeded episodes with their images")


def _mcp_request(version: str, request_id: int) -> tuple[dict[str, Any], dict[str, str]]:
    params: dict[str, Any] = {"name": "search_memory", "arguments": {"query": QUERY}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version}
    if version == MODERN:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "search_memory"}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}, headers


def _timed(call: Any) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


@contextmanager
def dev_engine(folder: Path) -> Iterator[str]:
    port = free_port()
    with process([PYTHON, "-m", "gateway", "dev-upstream", "--port", str(port),
                  "--database", str(folder / "engine.db")]):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"


@contextmanager
def real_engine(folder: Path) -> Iterator[str]:
    engine_process.STARTUP_TIMEOUT_S = 240.0  # the suite's 60 s is short on a loaded host
    with everos_engine(folder) as engine:
        yield engine.url


ENGINES: dict[str, Callable[[Path], Any]] = {"dev": dev_engine, "everos": real_engine}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="dev,everos",
                        help="engines to measure, in this order: dev, everos")
    parser.add_argument("--requests", type=int, default=300, help="of each kind (after warm-up)")
    args = parser.parse_args()
    engines = [name for name in args.engine.split(",") if name]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"no engine named {', '.join(sorted(unknown))} (dev, everos)")
    reports = []
    for name in engines:
        with tempfile.TemporaryDirectory(prefix="mgw-bench-mcp-") as folder, \
                ENGINES[name](Path(folder)) as engine_url, \
                gateway_process(engine_url) as (url, key, gateway):
            reports.append((name, _run(url, key, args.requests, gateway.pid)))
    for name, lines in reports:
        print(f"engine {name}: " + "\n".join(lines))


def _run(base: str, token: str, count: int, pid: int) -> list[str]:
    """Report lines: medians and CPU per request of each kind, and their ratios to REST."""
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as rest, \
            httpx.Client(base_url=base, headers=auth, timeout=30) as mcp:
        _seed(rest)

        def rest_call() -> None:
            answer = rest.post("/memories/search", json=SEARCH)
            assert answer.status_code == 200 and answer.json()["results"][0]["attachments"]

        def mcp_call(version: str) -> Any:
            def call() -> None:
                body, headers = _mcp_request(version, 1)
                answer = mcp.post("/mcp", json=body, headers=headers)
                assert answer.status_code == 200, answer.text
                result = answer.json()["result"]
                assert not result.get("isError") and result["structuredContent"]["results"]
                assert any(c["type"] == "resource_link" for c in result["content"])
            return call

        kinds = {"rest": rest_call, "mcp (2026-07-28)": mcp_call(MODERN),
                 "mcp (2025-06-18)": mcp_call(LEGACY)}
        for call in kinds.values():  # warm-up
            for _ in range(20):
                call()
        times: dict[str, list[float]] = {name: [] for name in kinds}
        cpu: dict[str, list[float]] = {name: [] for name in kinds}
        for _ in range(max(1, count // BLOCK)):
            for name, call in kinds.items():
                began = cpu_seconds(pid)
                for _ in range(BLOCK):
                    times[name].append(_timed(call))
                cpu[name].append((cpu_seconds(pid) - began) / BLOCK)
    rest_median = statistics.median(times["rest"])
    rest_cpu = statistics.fmean(cpu["rest"])
    lines = [f"{len(times['rest'])} requests of each kind, in alternated blocks of {BLOCK}, "
             "one at a time"]
    for name, values in times.items():
        median = statistics.median(values)
        cost = statistics.fmean(cpu[name])  # CPU ticks are 10 ms: the mean of all blocks
        lines.append(f"  {name:18s} median {median * 1000:7.2f} ms (x{median / rest_median:4.2f})"
                     f"   gateway CPU {cost * 1000:5.2f} ms/request (x{cost / rest_cpu:4.2f})")
    print("\n".join(lines), flush=True)
    return lines


if __name__ == "__main__":
    main()
