"""The real EverOS engine (`everos` 1.5.1, installed by scripts/setup-everos into `.venv-everos/`)
with the deterministic stand-in model server (tests/standin_model.py), for end-to-end tests.

`everos_engine(folder)` starts the stand-in on a free loopback port, writes the engine's
configuration with `everos init` into its own memory root under `folder`, starts
`everos server start` on another free port with every model endpoint (chat, multimodal,
embeddings, rerank) pointed at the stand-in and no network beyond loopback, waits until
`/health` reports every capability, and stops both by PID at the end. The engine's log stays in
`folder/everos.log`. A missing install fails: the real engine is never skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.processes import ROOT, free_port, running, wait_until_serving

VENV = ROOT / ".venv-everos"
EVEROS = VENV / "bin" / "everos"
TOKENIZER_CACHE = VENV / "tiktoken-cache"
VERSION = "1.5.1"
STARTUP_TIMEOUT_S = 60.0
# How long the engine's keyword (BM25) search may miss an episode it has already indexed: it
# merges new rows into its full-text index with LanceDB's `optimize()`, at most once a minute
# per table (everos memory/cascade/worker.py, DEFAULT_OPTIMIZE_MIN_INTERVAL_SECONDS), and until
# then LanceDB's scan of the unmerged rows drops some of them (docs/engines.md, "A fresh episode
# can be missing from search for up to a minute").
INDEX_LAG_S = 60.0
# A poll for a search hit waits past that lag, whatever the shared engine wrote just before.
SEARCH_TIMEOUT_S = INDEX_LAG_S + 30.0
CAPABILITIES = ("llm", "embed", "rerank", "multimodal_llm", "parser")
# Variables of the suite's own processes that must not leak into the engine's.
FOREIGN_PREFIXES = ("MEMORY_GATEWAY_", "EVEROS_", "PYTHON", "VIRTUAL_ENV")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                   "all_proxy")

T = TypeVar("T")


@dataclass
class EverosEngine:
    url: str
    model_url: str  # the stand-in model server
    root: Path  # the engine's memory root
    log: Path

    def model_calls(self) -> list[dict[str, Any]]:
        """Every request the stand-in answered, in order: `{"kind", "prompt"?, "error"?}`."""
        calls: list[dict[str, Any]] = httpx.get(self.model_url + "/calls", timeout=10).json()
        return calls

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """A request straight to the engine, past any gateway."""
        return httpx.post(self.url + path, json=body, timeout=60)


def engine_env(root: Path, model_url: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(FOREIGN_PREFIXES) and k not in PROXY_VARIABLES}
    api = model_url + "/v1"
    env.update({
        "EVEROS_ROOT": str(root),
        "EVEROS_API__HOST": "127.0.0.1",
        "EVEROS_API__PORT": str(port),
        "EVEROS_LOG_LEVEL": "INFO",
        "EVEROS_LOG_FORMAT": "text",
        "EVEROS_RERANK__PROVIDER": "vllm",  # the `/rerank` cross-encoder API the stand-in speaks
        "TIKTOKEN_CACHE_DIR": str(TOKENIZER_CACHE),
        "HF_HUB_OFFLINE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    })
    for section in ("LLM", "MULTIMODAL", "EMBEDDING", "RERANK"):
        env[f"EVEROS_{section}__BASE_URL"] = api
        env[f"EVEROS_{section}__MODEL"] = "standin"
        env[f"EVEROS_{section}__API_KEY"] = "standin"
    return env


def _require_install() -> None:
    if not EVEROS.exists() or not (TOKENIZER_CACHE.is_dir() and any(TOKENIZER_CACHE.iterdir())):
        raise RuntimeError(f"the EverOS engine is not installed in {VENV}: "
                           "run scripts/setup-everos")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def everos_engine(folder: Path) -> Iterator[EverosEngine]:
    _require_install()
    folder.mkdir(parents=True, exist_ok=True)
    model_port = free_port()
    model_url = f"http://127.0.0.1:{model_port}"
    model_log = folder / "standin-model.log"
    with running([str(model_port)], dict(os.environ), model_url + "/health", log=model_log,
                 module="tests.standin_model"):
        root = folder / "everos-root"
        port = free_port()
        env = engine_env(root, model_url, port)
        subprocess.run([str(EVEROS), "init", "--root", str(root)], env=env, check=True,
                       capture_output=True, cwd=folder)
        log = folder / "everos.log"
        url = f"http://127.0.0.1:{port}"
        with open(log, "ab") as log_file:
            proc = subprocess.Popen([str(EVEROS), "server", "start", "--root", str(root)],
                                    env=env, cwd=folder, stdout=log_file, stderr=log_file)
        try:
            wait_until_serving(url + "/health", proc, timeout=STARTUP_TIMEOUT_S, log=log)
            engine = EverosEngine(url, model_url, root, log)
            health = httpx.get(url + "/health", timeout=10).json()
            missing = [c for c in CAPABILITIES if not health.get("capabilities", {}).get(c)]
            if missing or health.get("version") != VERSION:
                raise RuntimeError(f"EverOS {health.get('version')} is up without {missing}:\n"
                                   f"{engine.log_tail()}")
            yield engine
        finally:
            _stop(proc)


def eventually(probe: Callable[[], T | None], *, timeout: float = SEARCH_TIMEOUT_S,
               what: str = "the engine", interval: float = 0.2) -> T:
    """Poll `probe` until it returns something other than None (the engine indexes what it
    extracted in the background, so a search sees it a moment after the flush, and its keyword
    search may take up to INDEX_LAG_S more)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: nothing after {timeout}s")
        time.sleep(interval)
