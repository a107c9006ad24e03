"""Shared benchmark plumbing: free ports, processes, a gateway with a key, and load generation.

The gateway runs at `BENCH_LOG_LEVEL` (default `info`, the shipped default: one JSON access
line per request, written to /dev/null). Load comes from `wrk` when it is installed (it costs
the least CPU on a 2-core machine), else from a small asyncio keep-alive client written here.
Both send the same request repeatedly over a fixed number of connections and report requests/s.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on port {port} after {timeout}s")


@contextmanager
def process(
    args: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`args` running until the block ends; its log (stderr) is written to `log`, else dropped
    (written, not read)."""
    with open(log, "ab") if log is not None else open(os.devnull, "wb") as stderr:
        proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=stderr)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def gateway(
    upstream_url: str, extra_env: Mapping[str, str | None] | None = None,
    serve: list[str] | None = None,
) -> Iterator[tuple[str, str]]:
    """A gateway process in front of `upstream_url`; yields (base URL, API key).

    `serve` replaces the command after the interpreter (default `-m gateway serve`); a None
    in `extra_env` leaves that variable out (an older tree refuses settings it does not know)."""
    with gateway_process(upstream_url, extra_env, serve) as (url, key, _):
        yield url, key


@contextmanager
def gateway_process(
    upstream_url: str, extra_env: Mapping[str, str | None] | None = None,
    serve: list[str] | None = None, log: Path | None = None,
) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """Like `gateway`, also yielding the process (for memory measurements); its log is
    written to `log` when given."""
    with tempfile.TemporaryDirectory(prefix="mgw-bench-") as tmp:
        port = free_port()
        settings: dict[str, str | None] = {
            **os.environ,
            "MEMORY_GATEWAY_UPSTREAM_BASE_URL": upstream_url,
            "MEMORY_GATEWAY_STORAGE_ROOT": f"{tmp}/storage",
            "MEMORY_GATEWAY_STORAGE_DATABASE": f"{tmp}/gw.db",
            "MEMORY_GATEWAY_SERVER_PORT": str(port),
            "MEMORY_GATEWAY_SERVER_LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "info"),
            # the search benchmarks' pass-through side (bench/fast_upstream.py), opened as an
            # operator would open an engine route outside the flavour's table
            "MEMORY_GATEWAY_UPSTREAM_ALLOW_PATHS": '["POST /bench/page"]',
            # the host of the search benchmark's client URIs, which resolves nowhere: listed,
            # the fetch guard passes it without a lookup, as an operator's file server would
            "MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": '["cdn.example"]',
            **(extra_env or {}),
        }
        env = {name: value for name, value in settings.items() if value is not None}
        created = subprocess.run(
            [PYTHON, "-m", "gateway", "keys", "create", "--user", "bench"],
            env=env, cwd=ROOT, capture_output=True, text=True, check=True,
        )
        key = created.stdout.strip().splitlines()[-1]
        with process([PYTHON, *(serve or ["-m", "gateway", "serve"])], env=env,
                     log=log) as proc:
            wait_for_port(port)
            yield f"http://127.0.0.1:{port}", key, proc


@contextmanager
def fast_upstream(search_answer: Path | None = None) -> Iterator[str]:
    port = free_port()
    extra = [str(search_answer)] if search_answer else []
    with process([PYTHON, str(ROOT / "bench" / "fast_upstream.py"), str(port), *extra]):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"


@contextmanager
def starlette_upstream() -> Iterator[str]:
    """The pass-through benchmark's engine: a Starlette app (bench/starlette_upstream.py)."""
    port = free_port()
    with process([PYTHON, str(ROOT / "bench" / "starlette_upstream.py"), str(port)]):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(url: str, body: bytes, headers: dict[str, str], connections: int, seconds: float) -> float:
    """Requests/s of POST url with body over `connections` keep-alive connections."""
    if shutil.which("wrk"):
        return _wrk(url, body, headers, connections, seconds)
    _warn_python_load()
    return asyncio.run(_python_load(url, body, headers, connections, seconds))


@functools.cache
def _warn_python_load() -> None:
    """Said once per run: this generator takes much of the host's CPU itself, so its ratios are
    not comparable with wrk's (docs/decisions.md, "The load generator")."""
    print("harness: wrk is not installed; using the Python load generator, whose ratios are not "
          "comparable with wrk's (apt-get install wrk)", file=sys.stderr)


def _wrk(url: str, body: bytes, headers: dict[str, str], connections: int, seconds: float) -> float:
    lua_headers = "".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in headers.items())
    script = f'wrk.method = "POST"\nwrk.body = [==[{body.decode()}]==]\n{lua_headers}'
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(script)
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "-s", fh.name, url],
            capture_output=True, text=True, check=True,
        ).stdout
    finally:
        os.unlink(fh.name)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise RuntimeError(f"{non2xx.group(1)} failed responses from {url}:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


async def _python_load(
    url: str, body: bytes, headers: dict[str, str], connections: int, seconds: float
) -> float:
    host_port, _, path = url.removeprefix("http://").partition("/")
    host, _, port = host_port.partition(":")
    head = f"POST /{path} HTTP/1.1\r\nHost: {host_port}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = head.encode() + b"\r\n" + body
    done = 0
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, int(port))
        while time.monotonic() < deadline:
            writer.write(request)
            status = await reader.readline()
            if b" 200 " not in status:
                raise RuntimeError(f"unexpected status {status!r}")
            length = 0
            while (line := await reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            done += 1
        writer.close()

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return done / (time.monotonic() - started)


def median(values: list[float]) -> float:
    return statistics.median(values)


def paired_ratios(
    rounds: int, base: Callable[[], float], measured: Callable[[], float], labels: tuple[str, str]
) -> float:
    """Run `base` and `measured` `rounds` times each, in pairs; print each pair; the median ratio.

    The pair's order alternates (base first in odd rounds, measured first in even ones), so
    whatever the first run of a pair leaves the second, whatever its cause, is charged to each
    side equally often."""
    ratios = []
    for round_no in range(1, rounds + 1):
        if round_no % 2:
            first = base()
            second = measured()
        else:
            second = measured()
            first = base()
        ratios.append(second / first)
        print(f"round {round_no}: {labels[0]} {first:8.0f} req/s  {labels[1]} {second:8.0f} "
              f"req/s  ratio {second / first:.3f}")
    return median(ratios)
