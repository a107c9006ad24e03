"""MCP search benchmark (SPEC §19): `search_memory` on `/mcp` against the REST search it mirrors.

One gateway process in front of the dev engine (a real engine process, not a fake answer); one
user with a few sessions, each holding an image, so every search finds episodes with
attachments (resource links on the MCP side). The same query is sent alternately as
`POST /memories/search` and as a `tools/call` of `search_memory`, one request at a time over one
keep-alive connection each, in the 2026-07-28 per-request envelope (what the SDK's client sends
by default) and in the stateless handshake era (`MCP-Protocol-Version: 2025-06-18`). Two
figures per kind: the median latency and the ratio of the medians (bar: ≤ 1.3×), and the
gateway process's CPU time per request (from /proc, over alternated blocks of requests): what a
call costs the gateway, the figure that moves least when other processes share the machine.

    .venv/bin/python bench/mcp_search.py [--requests 300]
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import PYTHON, ROOT, cpu_seconds, free_port, process, wait_for_port  # noqa: E402

BLOCK = 50  # requests per CPU-time block

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
PNG = b"\x89PNG\r\n\x1a\n" + b"lighthouse" * 50
QUERY = "lighthouse"


def _env(tmp: Path, port: int, engine_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    env.update({
        "MEMORY_GATEWAY_SERVER_PORT": str(port),
        "MEMORY_GATEWAY_UPSTREAM_BASE_URL": engine_url,
        "MEMORY_GATEWAY_STORAGE_ROOT": str(tmp / "storage"),
        "MEMORY_GATEWAY_STORAGE_DATABASE": str(tmp / "storage" / "gw.db"),
        "MEMORY_GATEWAY_SERVER_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "MEMORY_GATEWAY_SERVER_LOG_LEVEL": "warning",
    })
    return env


def _key(env: dict[str, str], user: str) -> str:
    out = subprocess.run([PYTHON, "-m", "gateway", "keys", "create", "--user", user], env=env,
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def _seed(rest: httpx.Client) -> None:
    for n in range(5):
        session = f"trip-{n}"
        added = rest.post("/memories/add", json={"session_id": session, "messages": [{
            "role": "user", "sender_id": "alice", "timestamp": 1_780_000_000_000 + n,
            "content": [{"type": "text", "text": f"the {QUERY} at dusk, day {n}, photo{n}.png"},
                        {"type": "image", "base64": base64.b64encode(PNG).decode(),
                         "name": f"photo{n}.png", "ext": "png"}]}]})
        added.raise_for_status()
        rest.post("/api/v2/memory/flush", json={"session_id": session}).raise_for_status()


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="of each kind (after warm-up)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        engine_port, port = free_port(), free_port()
        env = _env(tmp, port, f"http://127.0.0.1:{engine_port}")
        with process([PYTHON, "-m", "gateway", "dev-upstream", "--port", str(engine_port),
                      "--database", str(tmp / "engine.db")], env):
            wait_for_port(engine_port)
            with process([PYTHON, "-m", "gateway", "serve"], env) as gateway:
                wait_for_port(port)
                _run(env, port, args.requests, gateway.pid)


def _run(env: dict[str, str], port: int, count: int, pid: int) -> None:
    token = _key(env, "alice")
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=auth, timeout=30) as rest, \
            httpx.Client(base_url=base, headers=auth, timeout=30) as mcp:
        _seed(rest)
        search = {"query": QUERY, "user_id": "alice", "top_k": 10}

        def rest_call() -> None:
            answer = rest.post("/memories/search", json=search)
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
    print(f"{len(times['rest'])} requests of each kind, in alternated blocks of {BLOCK}, "
          "one at a time")
    for name, values in times.items():
        median = statistics.median(values)
        cost = statistics.fmean(cpu[name])  # CPU ticks are 10 ms: the mean of all blocks
        print(f"  {name:18s} median {median * 1000:6.2f} ms (x{median / rest_median:4.2f})   "
              f"gateway CPU {cost * 1000:5.2f} ms/request (x{cost / rest_cpu:4.2f})")


if __name__ == "__main__":
    main()
