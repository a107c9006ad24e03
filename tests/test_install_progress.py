"""scripts/progress: a long install prints where it is (never a silent minute) and its errors."""

from __future__ import annotations

import subprocess

import pytest

from tests.processes import ROOT

PIP_OUTPUT = """Obtaining file:///work/checkout
Requirement already satisfied: pip in ./.venv/lib/python3.11/site-packages
Collecting starlette>=0.37 (from memory-gateway==0.1.0)
  Using cached starlette-0.46.0-py3-none-any.whl (71 kB)
Building wheels for collected packages: memory-gateway
Building editable for memory-gateway (pyproject.toml): started
Installing collected packages: starlette, memory-gateway
ERROR: Could not find a version that satisfies the requirement nothing==9
Successfully installed memory-gateway-0.1.0 starlette-0.46.0
"""


@pytest.mark.processes
def test_progress_keeps_the_lines_that_say_where_the_install_is_and_every_error() -> None:
    result = subprocess.run([str(ROOT / "scripts" / "progress"), "setup-venv"],
                            input=PIP_OUTPUT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "setup-venv: Obtaining file:///work/checkout",
        "setup-venv: Collecting starlette>=0.37 (from memory-gateway==0.1.0)",
        "setup-venv: Building wheels for collected packages: memory-gateway",
        "setup-venv: Building editable for memory-gateway (pyproject.toml): started",
        "setup-venv: Installing collected packages: starlette, memory-gateway",
        "setup-venv: ERROR: Could not find a version that satisfies the requirement nothing==9",
        "setup-venv: Successfully installed memory-gateway-0.1.0 starlette-0.46.0",
    ]


def test_the_install_scripts_pipe_pip_through_it_and_say_what_they_set_up() -> None:
    venv = (ROOT / "scripts" / "setup-venv").read_text()
    everos = (ROOT / "scripts" / "setup-everos").read_text()
    assert "--quiet" not in venv and "| scripts/progress setup-venv" in venv
    assert "--quiet" not in everos and 'progress" setup-everos' in everos
    assert "installing $REQUIREMENT" in everos
    assert "installing $PACKAGE" in (ROOT / "scripts" / "setup-oidc-provider").read_text()
