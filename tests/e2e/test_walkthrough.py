"""The README's walk-through, pasted as a user would: the shell blocks marked
`<!-- walk-through -->` run in order as one script (bash, curl, jq) against real processes that
the script starts itself (`scripts/run`). Only the ports and the checkout's paths are rewritten
(the suite must not take 8080, and the script runs from a temporary folder so that its files
stay out of the checkout), and `example.com`, the host of the walk-through's files on the web,
is listed in `upstream.fetchable_hosts` (tests/processes.py `WEB_HOSTS`): the machine running the
suite may have no DNS, and the fetch guard refuses a name that does not resolve. Every `# → …`
line in the blocks must match an output line, in order, `…` matching anything.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.processes import ROOT, WEB_HOSTS, free_port

pytestmark = pytest.mark.e2e
MARKER = "<!-- walk-through -->"


def walkthrough_blocks(readme: str) -> list[str]:
    blocks = []
    for part in readme.split(MARKER)[1:]:
        fence = re.match(r"\s*```sh\n(.*?)\n```", part, re.DOTALL)
        assert fence, f"{MARKER} is not followed by a ```sh block"
        blocks.append(fence.group(1))
    return blocks


def expected_lines(script: str) -> list[str]:
    """The `# → ` comments, continuation lines (`#   …`) joined to the line they continue."""
    found: list[str] = []
    continuing = False
    for line in script.splitlines():
        stripped = line.strip()
        if stripped.startswith("# → "):
            found.append(stripped[len("# → "):])
            continuing = True
        elif continuing and re.match(r"#\s{3,}\S", stripped):
            found[-1] += stripped[1:].strip()
        else:
            continuing = False
    return found


def pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(piece) for piece in expected.split("…")))


@pytest.mark.parametrize("engine", ["dev", "everos"])
def test_readme_walkthrough_runs_as_written(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    """On the built-in dev engine (what `scripts/run` starts) and on the real EverOS 1.5.1."""
    assert shutil.which("curl") and shutil.which("jq"), "the walk-through needs curl and jq"
    blocks = walkthrough_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) == 4
    script = "\n".join(blocks)
    port = free_port()
    script = (script.replace("localhost:8080", f"localhost:{port}")
              .replace("scripts/run", f"{ROOT}/scripts/run")
              .replace(".venv/bin/", f"{ROOT}/.venv/bin/"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    env.update({
        "MEMORY_GATEWAY_SERVER_PORT": str(port),
        "MEMORY_GATEWAY_DEV_ENGINE_PORT": str(free_port()),
        "MEMORY_GATEWAY_STORAGE_ROOT": str(tmp_path / "storage"),
        "MEMORY_GATEWAY_STORAGE_DATABASE": str(tmp_path / "storage" / "_gateway.db"),
        "MEMORY_GATEWAY_DEV_ENGINE_DATABASE": str(tmp_path / "storage" / "_dev_engine.db"),
        "MEMORY_GATEWAY_SERVER_LOG_LEVEL": "warning",
        "MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": WEB_HOSTS,
    })
    if engine == "everos":
        env["MEMORY_GATEWAY_UPSTREAM_BASE_URL"] = request.getfixturevalue("everos").url
    (tmp_path / "walkthrough.sh").write_text(script)
    # Files, not pipes: the gateway left running in the background holds them open.
    with open(tmp_path / "out", "w") as stdout, open(tmp_path / "err", "w") as stderr:
        proc = subprocess.Popen(["bash", "-eo", "pipefail", "walkthrough.sh"], cwd=tmp_path,
                                env=env, stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        proc.wait(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the gateway `scripts/run &` left
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()

    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    lines = out.splitlines()
    remaining = iter(lines)
    for expected in expected_lines("\n".join(blocks)):
        assert any(pattern(expected).fullmatch(line) for line in remaining), (
            f"no output line matches {expected!r} (in order) in:\n{out}")

    # What the answers say, beyond their shape: the upload is the file found by the search,
    # and the resolver picks the original photo, not the later edit.
    [found] = [line for line in lines if '"session_id":"resource:alice:' in line]
    uri = re.search(r'"internal_uri":"([^"]+)"', found)
    assert uri is not None
    stored = Path(unquote(urlsplit(uri.group(1)).path))
    pixel = re.search(r"^PIXEL=(\S+)$", script, re.MULTILINE)
    assert pixel is not None
    assert stored.read_bytes() == base64.b64decode(pixel.group(1))
    assert not (tmp_path / "photo.png").exists()  # the walk-through leaves nothing behind
    assert stored.is_relative_to(tmp_path / "storage")
    [ids] = [line for line in lines if line.startswith("photo ")]
    photo = re.fullmatch(r"photo (ast_\S+), edit (ast_\S+)", ids)
    assert photo is not None, ids
    assert f'"targetAssetIds":["{photo.group(1)}"]' in out
