"""The README's walk-through, pasted as a user would: the shell blocks marked
`<!-- walk-through -->` run in order as one script (bash, curl, jq) against real processes that
the script starts itself (`scripts/run`). Only the ports and the checkout's paths are rewritten
(the suite must not take 8080, and the script runs from a temporary folder so that its files
stay out of the checkout). The walk-through sets what it needs itself (its scratch
`storage.root`, `example.com` in `upstream.fetchable_hosts`: the machine running the suite may
have no DNS), so nothing of the kind is set here. Every `# → …` line in the blocks must match an
output line, in order, `…` matching anything; it must end by itself, in bounded time, with
nothing left running and its scratch folder gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.processes import ROOT, free_port

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


@dataclass
class Run:
    returncode: int
    out: str
    err: str
    left_running: bool
    scratch: Path
    seconds: float


def run_walkthrough(tmp_path: Path, script: str, port: int, upstream: str = "") -> Run:
    """The script as `bash -e` runs it, pasted: the gateway on `port`, `mktemp` in tmp_path."""
    script = (script.replace("localhost:8080", f"localhost:{port}")
              .replace("scripts/run", f"{ROOT}/scripts/run")
              .replace(".venv/bin/", f"{ROOT}/.venv/bin/"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_GATEWAY_")}
    scratch = tmp_path / "tmp"  # where the walk-through's `mktemp -d` lands
    scratch.mkdir()
    env.update({
        "MEMORY_GATEWAY_SERVER_PORT": str(port),
        "MEMORY_GATEWAY_DEV_ENGINE_PORT": str(free_port()),
        "MEMORY_GATEWAY_SERVER_LOG_LEVEL": "warning",
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(ROOT),  # the checkout's code, whatever the venv's install points at
    })
    if upstream:
        env["MEMORY_GATEWAY_UPSTREAM_BASE_URL"] = upstream
    (tmp_path / "walkthrough.sh").write_text(script)
    began = time.monotonic()
    # Files, not pipes: a gateway left running in the background would hold them open.
    with open(tmp_path / "out", "w") as stdout, open(tmp_path / "err", "w") as stderr:
        proc = subprocess.Popen(["bash", "-e", "walkthrough.sh"], cwd=tmp_path,
                                env=env, stdout=stdout, stderr=stderr, start_new_session=True)
    left_running = True
    try:
        proc.wait(timeout=300)
        seconds = time.monotonic() - began
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            left_running = False
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever the walk-through left
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    return Run(proc.returncode, (tmp_path / "out").read_text(), (tmp_path / "err").read_text(),
               left_running, scratch, seconds)


def readme_script() -> tuple[list[str], str]:
    blocks = walkthrough_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) == 4
    return blocks, "\n".join(blocks)


@pytest.mark.parametrize("engine", ["dev", "everos"])
def test_readme_walkthrough_runs_as_written(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    """On the built-in dev engine (what `scripts/run` starts) and on the real EverOS 1.5.1."""
    assert shutil.which("curl") and shutil.which("jq"), "the walk-through needs curl and jq"
    blocks, script = readme_script()
    upstream = request.getfixturevalue("everos").url if engine == "everos" else ""
    run = run_walkthrough(tmp_path, script, free_port(), upstream)
    out, err, scratch = run.out, run.err, run.scratch

    assert run.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert not run.left_running, "the walk-through left a process running"
    assert list(scratch.iterdir()) == []  # its scratch folder, data included, is gone
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
    assert stored.is_relative_to(scratch)  # stored in the scratch folder, removed since
    assert not (tmp_path / "photo.png").exists()
    [ids] = [line for line in lines if line.startswith("photo ")]
    photo = re.fullmatch(r"photo (ast_\S+), edit (ast_\S+)", ids)
    assert photo is not None, ids
    assert f'"targetAssetIds":["{photo.group(1)}"]' in out


def test_a_failing_step_stops_the_walkthrough_loudly_and_leaves_nothing(tmp_path: Path) -> None:
    """A refused step (here an unknown tool) stops the script at once, its answer on stderr."""
    _, script = readme_script()
    assert script.count('\\"edit_image\\"') == 1
    script = script.replace('\\"edit_image\\"', '\\"no_such_tool\\"')

    run = run_walkthrough(tmp_path, script, free_port())

    assert run.returncode != 0
    assert "422 from curl" in run.err and "walk-through stopped" in run.err, run.err
    assert "djob_" not in run.out and "walk-through done" not in run.out  # nothing after it
    assert not run.left_running and list(run.scratch.iterdir()) == []
    assert run.seconds < 120


def test_a_server_already_on_the_port_is_named_and_not_used(tmp_path: Path) -> None:
    _, script = readme_script()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        answering = threading.Thread(target=answer_once, args=(holder,), daemon=True)
        answering.start()
        run = run_walkthrough(tmp_path, script, port)

    assert run.returncode != 0
    assert f"something already answers on localhost:{port}: stop it first" in run.err, run.err
    assert run.out == "" and not run.left_running and list(run.scratch.iterdir()) == []


def answer_once(sock: socket.socket) -> None:
    conn, _ = sock.accept()
    with conn:
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
