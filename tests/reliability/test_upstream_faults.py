"""Upstream faults (SPEC §4, §7, §8, §13) against a real gateway process and a scripted engine:
the right status for each fault, and a failed add or upload leaves no file, no row, no intent.

The gateway runs with `upstream.timeout_s = 0.8`. That timeout applies to each read, so a body
that keeps arriving (a piece every 0.3 s) succeeds however long it takes in total, and one that
stalls for longer (1.5 s) is a 504.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.processes import GatewayProcess, free_port, gateway
from tests.reliability.scripted_engine import (
    ADD,
    EMPTY_SEARCH,
    FLUSH,
    SEARCH,
    Answer,
    Behaviour,
    Hang,
    Reset,
    ScriptedEngine,
    SlowBody,
    default_script,
)
from tests.reliability.support import PNG, assert_error_shape, auth, count, user_files

pytestmark = [pytest.mark.reliability, pytest.mark.both_databases]

READ_TIMEOUT_S = 0.8
ADD_ANSWER = Answer().body
SEARCH_ANSWER = json.dumps(EMPTY_SEARCH).encode()
ENGINE_ERROR = b'{"request_id": "fake", "error": {"code": "OVERLOADED", "message": "busy"}}'
_unique = itertools.count()


@dataclass
class Stack:
    tmp: Path
    engine: ScriptedEngine
    gw: GatewayProcess
    key: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("faults")
    with ScriptedEngine().serving() as engine, gateway(
        tmp, engine.url, MEMORY_GATEWAY_UPSTREAM_TIMEOUT_S=str(READ_TIMEOUT_S)
    ) as gw:
        yield Stack(tmp, engine, gw, gw.key("alice"))


def call(gw_url: str, key: str, operation: str) -> httpx.Response:
    n = next(_unique)
    headers = auth(key)
    if operation == "add":
        return httpx.post(gw_url + "/memories/add", headers=headers, timeout=20, json={
            "session_id": f"fault-{n}", "messages": [{
                "role": "user", "sender_id": "alice", "content": [
                    {"type": "text", "text": "fault"},
                    {"type": "image", "base64": base64.b64encode(PNG).decode(),
                     "name": f"f{n}.png"},
                    {"type": "image", "uri": f"https://cdn.example/{n}.jpg"}]}]})
    if operation == "upload":
        return httpx.post(gw_url + "/resources", headers=headers, timeout=20,
                          files={"file": (f"u{n}.png", PNG + str(n).encode(), "image/png")})
    return httpx.post(gw_url + "/memories/search", headers=headers, timeout=20,
                      json={"query": "fault", "user_id": "alice"})


def kept(stack: Stack) -> tuple[int, int, int, list[Path]]:
    """What a failed call must not change: rows, intents and files of the user."""
    tmp = stack.tmp
    return (count(tmp, "memory_attachments"), count(tmp, "resources"),
            count(tmp, "pending_intents"), user_files(tmp, "alice"))


FAULTS: dict[str, tuple[Behaviour, int, str | None]] = {
    "reset mid-response": (Reset(), 502, "upstream_unavailable"),
    "timeout": (Hang(), 504, "upstream_timeout"),
    "5xx": (Answer(503, ENGINE_ERROR), 503, None),  # the engine's answer passes through
    "body stalls past the read timeout": (SlowBody(ADD_ANSWER, pieces=2, gap_s=1.5), 504,
                                          "upstream_timeout"),
    # Every piece comes well within the timeout, the whole answer does not: one deadline.
    "body keeps coming past the deadline": (SlowBody(ADD_ANSWER, pieces=4, gap_s=0.3), 504,
                                            "upstream_timeout"),
}
CASES = [(op, fault) for op in ("add", "upload", "search") for fault in FAULTS] + [
    ("search", "non-JSON search answer")]


@pytest.mark.parametrize(("operation", "fault"), CASES)
def test_a_faulty_engine_gets_its_status_and_nothing_is_kept(
    stack: Stack, operation: str, fault: str
) -> None:
    if fault == "non-JSON search answer":
        behaviour: Behaviour = Answer(200, b"<html>busy</html>", "text/html")
        status, code = 502, "upstream_bad_response"
    else:
        behaviour, status, code = FAULTS[fault]
        if isinstance(behaviour, SlowBody) and operation == "search":
            behaviour = SlowBody(SEARCH_ANSWER, pieces=behaviour.pieces, gap_s=behaviour.gap_s)
    stack.engine.script = {**default_script(), SEARCH if operation == "search" else ADD: behaviour}
    before = kept(stack)
    response = call(stack.gw.url, stack.key, operation)
    if code is None:  # the engine's refusal, in the gateway's shape on its own routes (§4)
        refused(response, status)
    else:
        assert_error_shape(response, status, code)
    assert kept(stack) == before


def test_a_failed_flush_fails_the_upload_and_keeps_nothing(stack: Stack) -> None:
    stack.engine.script = {**default_script(), FLUSH: Answer(500, ENGINE_ERROR)}
    before = kept(stack)
    response = call(stack.gw.url, stack.key, "upload")
    refused(response, 500)
    assert kept(stack) == before


def refused(response: httpx.Response, status: int) -> None:
    """ENGINE_ERROR answered as SPEC §4 says for the gateway's own routes: its status and
    message, `upstream_error`, `upstream_status`, and the gateway's request id."""
    error = assert_error_shape(response, status, "upstream_error")
    assert error["message"] == "busy" and error["upstream_status"] == status
    assert error["request_id"] == response.headers["x-request-id"]


@pytest.mark.parametrize("operation", ["add", "upload", "search"])
def test_a_slow_body_within_the_deadline_is_not_a_timeout(stack: Stack, operation: str) -> None:
    body = SEARCH_ANSWER if operation == "search" else ADD_ANSWER
    slow = SlowBody(body, pieces=3, gap_s=0.1)  # 0.3 s in all, inside the 0.8 s deadline
    stack.engine.script = {**default_script(), SEARCH if operation == "search" else ADD: slow}
    mappings, resources, _, files = kept(stack)
    response = call(stack.gw.url, stack.key, operation)
    assert response.status_code == {"add": 200, "upload": 201, "search": 200}[operation]
    if operation == "add":
        assert response.content == ADD_ANSWER
    grown = {"add": (2, 0, 1), "upload": (1, 1, 1), "search": (0, 0, 0)}[operation]
    after = kept(stack)
    assert (after[0] - mappings, after[1] - resources, len(after[3]) - len(files)) == grown
    assert after[2] == 0


def test_a_refused_connection_is_502_and_nothing_is_kept(tmp_path: Path) -> None:
    with gateway(tmp_path, f"http://127.0.0.1:{free_port()}") as gw:
        key = gw.key("alice")
        for operation in ("add", "upload", "search"):
            response = call(gw.url, key, operation)
            assert_error_shape(response, 502, "upstream_unavailable")
        assert (count(tmp_path, "memory_attachments"), count(tmp_path, "resources"),
                count(tmp_path, "pending_intents")) == (0, 0, 0)
        assert user_files(tmp_path, "alice") == []
