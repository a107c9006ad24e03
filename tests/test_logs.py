"""Structured logs: one JSON object per line, and one access line per request with its fields."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import respx

from gateway import logs
from gateway.config import UpstreamSettings
from gateway.upstream.client import ENGINE_CALLS, EngineCalls, create_upstream
from tests.attachment_helpers import answer_search, episodes

ACCESS_FIELDS = {
    "request_id", "user_id", "method", "route", "path", "status", "duration_ms", "upstream_status",
    "upstream_ms",
}


@pytest.fixture
def access(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=logs.ACCESS_LOGGER)
    return caplog


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, restored after the test reconfigures it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def access_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logs.ACCESS_LOGGER]


async def test_one_access_line_per_request_with_its_fields(
    alice: httpx.AsyncClient, access: pytest.LogCaptureFixture
) -> None:
    response = await alice.post("/agents", json={"name": "Ada"})
    assert response.status_code == 201
    [line] = access_lines(access)
    assert ACCESS_FIELDS <= set(line.__dict__)
    assert line.request_id == response.headers["x-request-id"]
    assert (line.user_id, line.method, line.route, line.path) == (
        "alice", "POST", "/agents", "/agents"
    )
    assert line.status == 201
    assert isinstance(line.duration_ms, float) and line.duration_ms >= 0
    assert line.upstream_status is None  # never reached the engine
    assert line.levelno == logging.INFO


async def test_route_is_the_template_and_path_the_request_path(
    alice: httpx.AsyncClient, access: pytest.LogCaptureFixture
) -> None:
    await alice.get("/agents/agt_missing")
    [line] = access_lines(access)
    assert (line.route, line.path) == ("/agents/{agent_id}", "/agents/agt_missing")
    assert line.status == 404


async def test_proxied_request_logs_the_upstream_status(
    alice: httpx.AsyncClient, engine: respx.MockRouter, access: pytest.LogCaptureFixture
) -> None:
    engine.get("/health").mock(return_value=httpx.Response(207))
    await alice.get("/health")
    [line] = access_lines(access)
    assert (line.route, line.status, line.upstream_status) == ("proxy", 207, 207)


async def test_intercepted_search_logs_the_upstream_status(
    alice: httpx.AsyncClient, engine: respx.MockRouter, access: pytest.LogCaptureFixture
) -> None:
    answer_search(engine, episodes())
    await alice.post("/memories/search", json={"query": "x", "user_id": "alice"})
    [line] = access_lines(access)
    assert (line.route, line.status, line.upstream_status) == ("/memories/search", 200, 200)


async def test_upstream_status_does_not_leak_into_the_next_request(
    alice: httpx.AsyncClient, engine: respx.MockRouter, access: pytest.LogCaptureFixture
) -> None:
    engine.get("/health").mock(return_value=httpx.Response(200))
    await alice.get("/health")
    await alice.get("/agents")
    assert [line.upstream_status for line in access_lines(access)] == [200, None]


async def test_the_access_line_says_how_long_the_engine_took_beside_the_whole(
    alice: httpx.AsyncClient, engine: respx.MockRouter, access: pytest.LogCaptureFixture
) -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.05)
        return httpx.Response(200)

    engine.get("/health").mock(side_effect=slow)
    await alice.get("/health")
    await alice.get("/agents")  # never reaches the engine
    proxied, own = access_lines(access)
    assert 50 <= proxied.upstream_ms <= proxied.duration_ms  # type: ignore[attr-defined]
    assert own.upstream_ms == 0  # type: ignore[attr-defined]


async def test_a_request_without_a_key_logs_no_user(
    anonymous: httpx.AsyncClient, access: pytest.LogCaptureFixture
) -> None:
    assert (await anonymous.get("/agents")).status_code == 401
    [line] = access_lines(access)
    assert (line.user_id, line.route, line.status) == (None, "unmatched", 401)


async def test_no_access_line_when_the_level_filters_it_out(
    alice: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=logs.ACCESS_LOGGER)
    await alice.get("/agents")
    assert access_lines(caplog) == []


def test_json_formatter_writes_one_object_per_line_with_the_extras() -> None:
    record = logging.LogRecord("gateway.access", logging.INFO, __file__, 1, "GET %s %d",
                               ("/agents", 200), None)
    record.__dict__.update({"request_id": "r1", "user_id": None, "status": 200})
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "GET /agents 200"
    assert (parsed["level"], parsed["logger"]) == ("info", "gateway.access")
    assert parsed["time"].endswith("Z")
    assert (parsed["request_id"], parsed["user_id"], parsed["status"]) == ("r1", None, 200)
    assert "args" not in parsed and "msg" not in parsed


def test_configure_sends_json_lines_at_the_configured_level(root_logger: logging.Logger) -> None:
    stream = io.StringIO()
    logs.configure("warning", "json", stream)
    logging.getLogger("gateway.test").info("hidden")
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        logging.getLogger("gateway.test").exception("failed %s", "here")
    root_logger.handlers[0].flush()
    [line] = stream.getvalue().splitlines()
    parsed = json.loads(line)
    assert (parsed["level"], parsed["message"]) == ("error", "failed here")
    assert "ValueError: boom" in parsed["exception"]


def test_text_format_is_available_for_development(root_logger: logging.Logger) -> None:
    stream = io.StringIO()
    logs.configure("info", "text", stream)
    logging.getLogger("gateway.test").info("plain")
    root_logger.handlers[0].flush()
    assert stream.getvalue().rstrip().endswith("INFO gateway.test: plain")


async def test_text_access_lines_carry_request_id_user_duration_and_upstream_status(
    root_logger: logging.Logger, alice: httpx.AsyncClient
) -> None:
    stream = io.StringIO()
    logs.configure("info", "text", stream)
    response = await alice.get("/agents")
    root_logger.handlers[0].flush()
    [line] = [x for x in stream.getvalue().splitlines() if "gateway.access" in x]
    assert "INFO gateway.access: GET /agents 200 " in line
    assert f"request_id={response.headers['x-request-id']} user_id=alice " in line
    assert re.search(r" duration_ms=\d+(\.\d+)? upstream_ms=\d+(\.\d+)?$", line)
    assert " route=/agents " in line
    assert "upstream_status" not in line  # None: no engine call


def test_text_lines_write_a_dict_extra_as_compact_json() -> None:
    record = logging.LogRecord("gateway.resolution", logging.INFO, __file__, 1, "resolved",
                               (), None)
    record.__dict__["resolution"] = {"chatId": "c 1", "needsClarification": False}
    line = logs.TextFormatter().format(record)
    assert line.endswith('resolved resolution={"chatId":"c 1","needsClarification":false}')


def test_json_lines_hold_a_dict_extra_as_an_object() -> None:
    record = logging.LogRecord("gateway.resolution", logging.INFO, __file__, 1, "resolved",
                               (), None)
    record.__dict__["resolution"] = {"chatId": "c1"}
    assert json.loads(logs.JsonFormatter().format(record))["resolution"] == {"chatId": "c1"}


class StalledStream(io.StringIO):
    """A log reader that stops reading until released."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def write(self, text: str) -> int:
        self.released.wait(timeout=10)
        return super().write(text)


def test_a_stalled_log_reader_drops_lines_instead_of_blocking() -> None:
    stream = StalledStream()
    handler = logs.BackgroundStreamHandler(stream, capacity=5)
    handler.setFormatter(logs.JsonFormatter())
    log = logging.Logger("gateway.stalled")
    log.addHandler(handler)
    began = time.monotonic()
    for n in range(50):
        log.warning("line %d", n)
    assert time.monotonic() - began < 1.0  # never waited for the reader
    assert handler.dropped >= 40
    stream.released.set()
    handler.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["message"] == "line 0"
    assert any("dropped" in line["message"] for line in lines)
    assert len(lines) <= 8


def test_line_times_are_utc_to_the_millisecond_also_when_lines_share_one() -> None:
    from gateway.logs import JsonFormatter

    stamp = JsonFormatter()._time
    moments = [1764770400.0, 1764770400.0004, 1764770400.0012, 1764770400.9995, 1764770401.25,
               1764770401.2501, 1764770399.5]
    for created in moments:
        expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(created)))
        assert stamp(created) == f"{expected}.{int(created * 1000) % 1000:03d}Z"
    assert stamp(1764770400.0004) == stamp(1764770400.0001)  # one millisecond, one stamp
    assert stamp(1764770400.0012) != stamp(1764770400.0004)


async def test_engine_calls_in_tasks_the_request_starts_count_in_its_line() -> None:
    """The request's record is shared, not copied: calls a handler gathers add their time and
    set the status the line reads (a context variable set in a task would be lost)."""
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.03)
        return httpx.Response(203)

    client = create_upstream(UpstreamSettings(base_url="http://engine.test"),
                             httpx.MockTransport(slow))
    calls = EngineCalls()
    token = ENGINE_CALLS.set(calls)
    try:
        await asyncio.gather(*(client.call("GET", "/health", [], None) for _ in range(2)))
    finally:
        ENGINE_CALLS.reset(token)
        await client.aclose()
    assert calls.status == 203
    assert calls.seconds >= 0.06  # both calls' waits, summed
