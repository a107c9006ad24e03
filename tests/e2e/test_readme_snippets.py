"""The README's SDK snippets ("The engines' SDKs, pointed at the gateway"), each run as written,
each printing its last comment: the first against what `scripts/run` starts (the gateway with
its dev engine), the others against what their `<!-- sdk-setup: NAME -->` block says to start
(the suite's stand-in engine, the flavour, the engine key) with the SDK its block installs, in a
venv of its own (tests/e2e/client_venvs.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.client_venvs import client_python
from tests.fake_engines import fake_engine
from tests.processes import ROOT, free_port, gateway

pytestmark = pytest.mark.e2e
PNG = b"\x89PNG\r\n\x1a\n" + b"harbour-at-dawn" * 64
SNIPPET = re.compile(r"<!-- sdk-snippet: (?P<name>[\w.-]+) -->\n```python\n(?P<code>.*?)```",
                     re.DOTALL)
SETUP = re.compile(r"<!-- sdk-setup: (?P<name>[\w.-]+) -->\n```sh\n(?P<code>.*?)```", re.DOTALL)
# The snippets that run against `scripts/run` as it is, and the flavours they run under.
ON_THE_DEV_ENGINE = {"everos-cloud": ("everos", "everos-cloud")}
# The venv each of those runs in: None = the test venv (the test extra pins the SDK).
DEV_VENVS: dict[str, tuple[str, str] | None] = {"everos-cloud": None}


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def snippets() -> dict[str, str]:
    return {m.group("name"): m.group("code") for m in SNIPPET.finditer(readme())}


def setups() -> dict[str, str]:
    return {m.group("name"): m.group("code") for m in SETUP.finditer(readme())}


def setup_of(name: str) -> tuple[str, str, dict[str, str], str]:
    """(stand-in engine, flavour, upstream headers, pip requirement) its setup block names."""
    code = setups()[name]
    engine = re.search(r"-m tests\.fake_engines (\S+) 8082 &", code)
    flavor = re.search(r"MEMORY_GATEWAY_UPSTREAM_FLAVOR=(\S+)", code)
    headers = re.search(r"MEMORY_GATEWAY_UPSTREAM_HEADERS='([^']+)'", code)
    requirement = re.search(r"sdk/bin/pip install -q '([^']+)'", code)
    assert engine and flavor and headers and requirement, code
    assert "MEMORY_GATEWAY_UPSTREAM_BASE_URL=http://127.0.0.1:8082" in code
    return engine.group(1), flavor.group(1), json.loads(headers.group(1)), requirement.group(1)


def test_every_snippet_runs_on_the_dev_engine_or_says_what_it_needs() -> None:
    names = set(snippets())
    assert len(names) == 4
    assert names == set(ON_THE_DEV_ENGINE) | set(setups())
    assert not set(ON_THE_DEV_ENGINE) & set(setups())


def run_snippet(tmp_path: Path, name: str, python: str, gateway_url: str, key: str) -> str:
    code = snippets()[name]
    work = tmp_path / "work"
    work.mkdir()
    (work / "harbour.png").write_bytes(PNG)
    (work / "snippet.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMORY_GATEWAY_", "PYTHON", "VIRTUAL_ENV"))}
    result = subprocess.run(
        [python, "snippet.py"], cwd=work, capture_output=True, text=True, timeout=120,
        env={**env, "GATEWAY_URL": gateway_url, "GATEWAY_KEY": key, "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


def expected(name: str) -> str:
    printed: str = re.findall(r"^# → (.*)$", snippets()[name], re.MULTILINE)[-1]
    return printed


@pytest.mark.parametrize(("name", "flavor"), [(name, flavor) for name, flavors in
                                              sorted(ON_THE_DEV_ENGINE.items())
                                              for flavor in flavors])
def test_snippet_runs_against_scripts_run(tmp_path: Path, name: str, flavor: str) -> None:
    """The gateway with its dev engine, as `scripts/run` starts it (no upstream configured)."""
    venv = DEV_VENVS[name]
    python = str(client_python(*venv)) if venv else sys.executable
    with gateway(tmp_path, "", MEMORY_GATEWAY_UPSTREAM_FLAVOR=flavor,
                 MEMORY_GATEWAY_DEV_ENGINE_PORT=str(free_port())) as gw:
        printed = run_snippet(tmp_path, name, python, gw.url, gw.key("alice"))
    assert printed == expected(name)


@pytest.mark.parametrize("name", sorted(setups()))
def test_snippet_runs_as_its_setup_block_says(tmp_path: Path, name: str) -> None:
    engine, flavor, headers, requirement = setup_of(name)
    python = str(client_python(f"readme-{name}", requirement))
    with fake_engine(engine) as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR=flavor,
                    MEMORY_GATEWAY_UPSTREAM_HEADERS=json.dumps(headers)) as gw:
        printed = run_snippet(tmp_path, name, python, gw.url, gw.key("alice"))
    assert printed == expected(name)
