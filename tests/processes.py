"""Real processes for end-to-end tests: the gateway and the dev engine under uvicorn."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import httpx

from gateway.cli import build_parser, keys_command
from gateway.config import config_file, load_settings

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_serving(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0,
                       log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            detail = proc.stderr.read() if proc.stderr else b""
            if log is not None:
                detail = log.read_bytes()
            raise RuntimeError(f"process exited with {proc.returncode}: {detail!r}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} not serving after {timeout}s")


@contextmanager
def running(args: list[str], env: dict[str, str], probe: str,
            log: Path | None = None, module: str = "gateway") -> Iterator[subprocess.Popen[bytes]]:
    """Run `python -m MODULE ARGS` until the block ends; its stderr goes to `log` when given."""
    with open(log, "ab") if log is not None else nullcontext() as log_file:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL,
                                stderr=log_file if log_file is not None else subprocess.PIPE)
    try:
        wait_until_serving(probe, proc, log=log)
        yield proc
    finally:
        stop(proc)
        if proc.stderr:
            proc.stderr.close()


@dataclass
class GatewayProcess:
    url: str
    env: dict[str, str]
    proc: subprocess.Popen[bytes]

    def key(self, user_id: str) -> str:
        """A user key made by `memory-gateway keys create --user USER_ID`'s own code (the
        same row and audit entry, on this gateway's configuration), run in this process: a
        Python start per key cost 1-4 s. The command as a process is tests/test_auth.py's and
        tests/test_cli.py's."""
        path, _ = config_file(None, self.env)
        settings = load_settings(path, self.env)
        args = build_parser().parse_args(["keys", "create", "--user", user_id])
        args.config = path
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(io.StringIO()) as err:
            code = keys_command(settings, args)
        assert code == 0, err.getvalue()
        return out.getvalue().strip().splitlines()[-1]


# The hosts these tests name for files on the web resolve nowhere (and the machine may have no
# DNS), so the fetch guard would refuse them: they are listed as an operator lists a file server.
WEB_HOSTS = '["cdn.example", "example.com"]'


def gateway_env(tmp: Path, port: int, upstream_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    env.update({
        "MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": WEB_HOSTS,
        "MEMORY_GATEWAY_SERVER_PORT": str(port),
        "MEMORY_GATEWAY_UPSTREAM_BASE_URL": upstream_url,
        "MEMORY_GATEWAY_STORAGE_ROOT": str(tmp / "storage"),
        "MEMORY_GATEWAY_STORAGE_DATABASE": str(tmp / "storage" / "_gateway.db"),
        "MEMORY_GATEWAY_DEV_ENGINE_DATABASE": str(tmp / "not-yet-created" / "engine.db"),
        "MEMORY_GATEWAY_SERVER_LOG_LEVEL": "warning",
        **extra,
    })
    return env


@contextmanager
def dev_engine(tmp: Path) -> Iterator[str]:
    port = free_port()
    env = gateway_env(tmp, free_port(), "")
    url = f"http://127.0.0.1:{port}"
    with running(["dev-upstream", "--port", str(port), "--database", str(tmp / "engine.db")],
                 env, url + "/health"):
        yield url


@contextmanager
def gateway(tmp: Path, upstream_url: str, *, log: Path | None = None, port: int | None = None,
            **extra: str) -> Iterator[GatewayProcess]:
    """A gateway on a free port (or `port`); `extra`: MEMORY_GATEWAY_* variables and others for
    its environment; `log`: its stderr file."""
    port = port or free_port()
    env = gateway_env(tmp, port, upstream_url, **extra)
    url = f"http://127.0.0.1:{port}"
    with running(["serve"], env, url + "/healthz", log=log) as proc:
        yield GatewayProcess(url, env, proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End a server the suite started: SIGTERM, then SIGKILL when it lingers past 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
