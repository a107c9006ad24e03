"""`--fast` (docs/testing.md): which tests the edit loop collects, and which it leaves out."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _collected(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.processes
def test_the_fast_loop_keeps_sqlite_and_disk_and_leaves_out_servers_and_processes() -> None:
    files = ["tests/test_assets.py", "tests/test_cli.py", "tests/test_jwt.py",
             "tests/e2e/test_e2e_proxy.py"]
    full, quick = _collected(*files), _collected("--fast", *files)
    assert set(quick) < set(full)
    assert not [test for test in quick if re.search(r"[\[-](postgresql|s3)[\]-]", test)]
    assert any("sqlite" in test or "disk" in test for test in quick)
    assert not [test for test in quick if test.startswith("tests/e2e/")]
    assert not [test for test in quick  # the command's tests run `memory-gateway` itself
                if test.startswith("tests/test_cli.py") and re.search(r"_serve(_|\[|$)", test)]
