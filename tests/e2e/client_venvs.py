"""Engine SDKs that cannot share the test venv, each in its own cached venv (`.venv-clients/`).

`everos-cloud` 0.4.x has the same distribution name as the 1.x SDK the test extra pins, and
`mem0ai` brings a vector store, an LLM client and telemetry the suite has no use for. The venv is
made (and the pinned requirement installed from the package index) on first use and reused while
the requirement stays the same; the client scripts in `tests/e2e/clients/` run inside it.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

from tests.processes import ROOT

VENVS = ROOT / ".venv-clients"
SCRIPTS = Path(__file__).resolve().parent / "clients"


def python_at_least(minor: int) -> str:
    """A Python 3.`minor` or newer on this machine (as scripts/setup-everos looks for one)."""
    candidates = [os.environ.get("EVEROS_PYTHON", ""), sys.executable,
                  *(f"python3.{m}" for m in range(13, minor - 1, -1)),
                  *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.*/bin/python3")))]
    for candidate in filter(None, candidates):
        try:
            done = subprocess.run([candidate, "-c", f"import sys, venv; "
                                   f"sys.exit(sys.version_info < (3, {minor}))"],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return candidate
    raise RuntimeError(f"no Python >= 3.{minor} found (set EVEROS_PYTHON to one)")


def client_python(name: str, requirement: str, base: str | None = None) -> Path:
    """The python of `.venv-clients/<name>` with `requirement` installed (made once, cached);
    `base`: the Python the venv is made with (the test's own by default)."""
    venv = VENVS / name
    python = venv / "bin" / "python"
    stamp = venv / ".requirement"
    if not python.exists() or not stamp.exists() or stamp.read_text() != requirement:
        subprocess.run([base or sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", requirement], check=True)
        stamp.write_text(requirement)
    return python


def run_client(python: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `tests/e2e/clients/<script>` in that venv; its assertions decide its exit code."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("MEMORY_GATEWAY_", "PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run([str(python), str(SCRIPTS / script)], env={**clean, **env},
                          capture_output=True, text=True, timeout=300)
