"""The README's SDK snippets ("The engines' SDKs, pointed at the gateway"), each run as written
against a gateway process with the fake engine of its flavour; each prints its last comment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.client_venvs import client_python
from tests.fake_engines import ENGINE_KEY, fake_engine
from tests.processes import ROOT, gateway

pytestmark = pytest.mark.e2e
PNG = b"\x89PNG\r\n\x1a\n" + b"harbour-at-dawn" * 64
SNIPPET = re.compile(r"<!-- sdk-snippet: (?P<name>[\w.-]+) -->\n```python\n(?P<code>.*?)```",
                     re.DOTALL)
# snippet -> (fake engine, flavour, the venv it runs in: None = the test venv)
RUNS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    "everos-cloud": ("everos-cloud", "everos-cloud", None),
    "everos-0.4": ("everos-cloud-v1", "everos-cloud-v1",
                   ("everos-cloud-0.4", "everos-cloud==0.4.1")),
    "evermemos": ("evermemos-v0", "everos-cloud", None),
    "mem0": ("mem0-platform", "mem0", ("mem0ai", "mem0ai==2.2.1")),
}


def snippets() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return {m.group("name"): m.group("code") for m in SNIPPET.finditer(text)}


def test_the_readme_has_a_snippet_per_sdk() -> None:
    assert sorted(snippets()) == sorted(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_readme_snippet_runs_and_prints_what_it_says(tmp_path: Path, name: str) -> None:
    code = snippets()[name]
    expected = re.findall(r"^# → (.*)$", code, re.MULTILINE)[-1]
    engine, flavor, venv = RUNS[name]
    python = str(client_python(*venv)) if venv else sys.executable
    work = tmp_path / "work"
    work.mkdir()
    (work / "harbour.png").write_bytes(PNG)
    (work / "snippet.py").write_text(code, encoding="utf-8")
    with fake_engine(engine) as engine_url, \
            gateway(tmp_path, engine_url, MEMORY_GATEWAY_UPSTREAM_FLAVOR=flavor,
                    MEMORY_GATEWAY_UPSTREAM_HEADERS=f'{{"Authorization": "Bearer {ENGINE_KEY}"}}'
                    ) as gw:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MEMORY_GATEWAY_", "PYTHON", "VIRTUAL_ENV"))}
        result = subprocess.run(
            [python, "snippet.py"], cwd=work, capture_output=True, text=True, timeout=300,
            env={**env, "GATEWAY_URL": gw.url, "GATEWAY_KEY": gw.key("alice"),
                 "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == expected
