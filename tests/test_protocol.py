"""`serve`'s HTTP protocol writes a declared-length answer's head and body in one write
(gateway/serving/protocol.py), and otherwise answers exactly as uvicorn's own protocol does."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from gateway.serving import header_names
from gateway.serving import protocol as protocol_module
from gateway.serving.protocol import JOIN_BELOW, OneWriteCycle

JSON_HEAD = [(b"content-type", b"application/json"), (b"content-length", b"11")]


class RecordingTransport:
    """What uvicorn's cycle writes, one entry per `write` call, and when it closes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.lines: list[tuple[bytes, ...]] = []  # the pieces of each `writelines`
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, pieces: Any) -> None:
        """One write of several pieces (a writev on uvloop), recorded as their bytes."""
        pieces = tuple(pieces)
        self.lines.append(pieces)
        self.writes.append(b"".join(pieces))

    def close(self) -> None:
        self.writes.append(b"<close>")
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def cycle(transport: RecordingTransport, *, method: str = "POST",
          keep_alive: bool = True) -> OneWriteCycle:
    built = RequestResponseCycle(
        scope={"type": "http", "method": method, "path": "/x", "http_version": "1.1",
               "headers": [], "query_string": b""},  # type: ignore[typeddict-item]
        transport=transport,  # type: ignore[arg-type]
        flow=FlowControl(transport),  # type: ignore[arg-type]
        logger=logging.getLogger("test"),
        access_logger=logging.getLogger("test.access"),
        access_log=False,
        default_headers=[],
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=keep_alive,
        on_response=lambda: None,
    )
    built.__class__ = OneWriteCycle
    assert isinstance(built, OneWriteCycle)
    return built


async def answer(target: OneWriteCycle, *messages: dict[str, Any]) -> None:
    for message in messages:
        await target.send(message)  # type: ignore[arg-type]


def start(headers: list[tuple[bytes, bytes]], status: int = 200) -> dict[str, Any]:
    return {"type": "http.response.start", "status": status, "headers": headers}


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.response.body", "body": data, "more_body": more}


HEAD_BYTES = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
              b"content-length: 11\r\n\r\n")


async def test_small_answer_is_one_write_of_head_and_body() -> None:
    transport = RecordingTransport()
    await answer(cycle(transport), start(JSON_HEAD), body(b'{"ok":true}'))
    assert transport.writes == [HEAD_BYTES + b'{"ok":true}']


async def test_large_answer_is_one_write_of_head_beside_the_body_not_copied() -> None:
    transport = RecordingTransport()
    large = b"x" * JOIN_BELOW
    head = [(b"content-type", b"application/json"),
            (b"content-length", str(len(large)).encode())]
    await answer(cycle(transport), start(head), body(large))
    assert len(transport.writes) == 1 and len(transport.lines) == 1
    written_head, written_body = transport.lines[0]
    assert written_head.startswith(b"HTTP/1.1 200 OK\r\n") and written_head.endswith(b"\r\n\r\n")
    assert written_body is large  # the body object itself, not a copy joined to the head


async def test_answer_just_below_the_join_limit_is_joined_to_its_head() -> None:
    transport = RecordingTransport()
    small = b"x" * (JOIN_BELOW - 1)
    head = [(b"content-length", str(len(small)).encode())]
    await answer(cycle(transport), start(head), body(small))
    assert transport.lines == [] and len(transport.writes) == 1
    assert transport.writes[0].endswith(b"\r\n\r\n" + small)


async def test_streamed_declared_length_answer_writes_head_with_first_chunk() -> None:
    transport = RecordingTransport()
    await answer(cycle(transport), start(JSON_HEAD), body(b'{"ok":', more=True),
                 body(b"true}", more=True), body(b""))
    assert transport.writes[0] == HEAD_BYTES + b'{"ok":'
    assert b"".join(transport.writes) == HEAD_BYTES + b'{"ok":true}'


async def test_chunked_answer_head_is_written_before_any_chunk() -> None:
    transport = RecordingTransport()
    target = cycle(transport)
    await answer(target, start([(b"content-type", b"text/event-stream")]))
    assert transport.writes == [
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n"]
    await answer(target, body(b"data: 1\n\n"))
    assert transport.writes[1] == b"9\r\ndata: 1\n\n\r\n0\r\n\r\n"


async def test_answer_to_head_writes_the_head() -> None:
    transport = RecordingTransport()
    await answer(cycle(transport, method="HEAD"), start(JSON_HEAD), body(b""))
    assert transport.writes == [HEAD_BYTES]


async def test_head_and_body_are_written_before_a_closing_connection_closes() -> None:
    transport = RecordingTransport()
    await answer(cycle(transport, keep_alive=False), start(JSON_HEAD), body(b'{"ok":true}'))
    assert transport.writes == [
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n"
        b"connection: close\r\n\r\n" + b'{"ok":true}', b"<close>"]


async def test_answer_to_head_on_a_closing_connection_writes_head_then_closes() -> None:
    transport = RecordingTransport()
    await answer(cycle(transport, method="HEAD", keep_alive=False), start(JSON_HEAD), body(b""))
    assert transport.writes[-1] == b"<close>"
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.writes[0].endswith(b"connection: close\r\n\r\n")


async def test_nothing_is_written_after_the_client_left() -> None:
    transport = RecordingTransport()
    target = cycle(transport)
    await answer(target, start(JSON_HEAD))
    target.disconnected = True
    await answer(target, body(b'{"ok":true}'))
    assert transport.writes == []


async def test_body_longer_than_declared_is_refused_as_uvicorn_refuses_it() -> None:
    transport = RecordingTransport()
    target = cycle(transport)
    await answer(target, start(JSON_HEAD))
    with pytest.raises(RuntimeError, match="longer than Content-Length"):
        await answer(target, body(b'{"ok":true, "more": 1}'))
    assert transport.writes == []
    assert target.transport is transport  # the stand-in is gone: uvicorn closes the real one


class ServedTransport(RecordingTransport):
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default)


async def test_serve_answers_two_keep_alive_requests_with_one_write_each() -> None:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from gateway.cli import _uvicorn_server
    from gateway.serving.protocol import OneWriteProtocol

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send(start(JSON_HEAD))
        await send(body(b'{"ok":true}'))

    server = _uvicorn_server(app, "127.0.0.1", 0, "warning")
    assert server.config.http is OneWriteProtocol
    config = Config(app, http=OneWriteProtocol, lifespan="off", date_header=False,
                    server_header=False, log_config=None)
    config.load()
    protocol = OneWriteProtocol(config, ServerState(), app_state={})
    transport = ServedTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    request = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
    for _ in range(2):
        protocol.data_received(request)
        while protocol.tasks:  # the request task was started by data_received
            await asyncio.sleep(0)
    assert transport.writes == [HEAD_BYTES + b'{"ok":true}'] * 2


@pytest.mark.parametrize("loop_factory", ["asyncio", "uvloop"])
def test_large_answer_arrives_whole_over_a_real_socket(loop_factory: str) -> None:
    """The head and a large body written with one `writelines` reach a client intact, on
    both event loops `serve` may run (a socket, not a recording transport)."""
    import threading

    import httpx

    from gateway.cli import _uvicorn_server
    from tests.processes import free_port

    if loop_factory == "uvloop":
        pytest.importorskip("uvloop")  # not installed where `serve` runs on asyncio's loop
    large = bytes(range(256)) * (4 * JOIN_BELOW // 256) + b"end"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(start([(b"content-type", b"application/octet-stream"),
                          (b"content-length", str(len(large)).encode())]))
        await send(body(large))

    port = free_port()
    server = _uvicorn_server(app, "127.0.0.1", port, "warning")
    server.config.lifespan = "off"

    def run() -> None:
        if loop_factory == "uvloop":
            import uvloop

            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(server.serve())
        else:
            asyncio.run(server.serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        for _ in range(1500):  # up to 30 s on a loaded machine
            if server.started or not thread.is_alive():
                break
            threading.Event().wait(0.02)
        assert server.started, "the server did not start"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(3):  # keep-alive: each answer framed as declared
                answer = client.get("/")
                assert answer.status_code == 200
                assert answer.content == large
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        gc.unfreeze()  # a started server froze this process's objects (gateway/cli.py)


# --- the same answers as uvicorn's own cycle ----------------------------------------------------

_NAMES = [b"content-type", b"Content-Length", b"content-length", b"transfer-encoding",
          b"connection", b"x-request-id", b"bad name", b"bad\x00", b"x-a"]
_VALUES = [b"application/json", b"11", b"0", b"5", b"abc", b"chunked", b"close",
           b"keep-alive, Close", b"v\tw", b"bad\r\nvalue", b"\x7f", str(JOIN_BELOW).encode()]
# bodies written beside their head (serving/protocol.py's JOIN_BELOW) as well as joined to it
_BODIES = st.one_of(st.binary(max_size=12), st.just(b"y" * JOIN_BELOW))


@st.composite
def _answers(draw: st.DrawFn) -> tuple[str, bool, list[dict[str, Any]]]:
    headers = draw(st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)),
                            max_size=5))
    if draw(st.integers(0, 3)) == 0:  # often enough, a length a large body may match
        headers.insert(0, (b"content-length", str(JOIN_BELOW).encode()))
    status = draw(st.sampled_from([200, 201, 204, 304, 404, 500]))
    messages: list[dict[str, Any]] = [start(headers, status)]
    for chunk in draw(st.lists(_BODIES, max_size=3)):
        messages.append(body(chunk, more=True))
    if draw(st.booleans()):
        messages.append(body(draw(_BODIES)))
    if draw(st.booleans()):  # a message after the answer, or a second start
        messages.append(draw(st.sampled_from([body(b"late"), start(JSON_HEAD)])))
    return (draw(st.sampled_from(["GET", "POST", "HEAD"])), draw(st.booleans()), messages)


async def _outcome(target: RequestResponseCycle, transport: RecordingTransport,
                   messages: list[dict[str, Any]]) -> tuple[bytes, bool, str | None]:
    error = None
    try:
        for message in messages:
            await target.send(message)  # type: ignore[arg-type]
    except (RuntimeError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    written = b"".join(w for w in transport.writes if w != b"<close>")
    # A declared-length head waits for the first body message (the one difference by design):
    # counted as written, since it goes out with whatever body comes next.
    held = getattr(target, "_held", None) or b""
    return written + held, transport.closed, error


@settings(max_examples=400, deadline=None)
@given(_answers())
def test_every_answer_is_written_and_refused_as_uvicorns_own_cycle_does(
    case: tuple[str, bool, list[dict[str, Any]]],
) -> None:
    method, keep_alive, messages = case

    async def both() -> None:
        theirs, ours = RecordingTransport(), RecordingTransport()
        reference = cycle(theirs, method=method, keep_alive=keep_alive)
        reference.__class__ = RequestResponseCycle
        expected = await _outcome(reference, theirs, messages)
        assert await _outcome(cycle(ours, method=method, keep_alive=keep_alive), ours,
                              messages) == expected

    asyncio.run(both())


async def test_header_names_kept_lowered_are_bounded_and_long_ones_never_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protocol_module, "_NAMES", {})
    monkeypatch.setattr(header_names, "KEPT", 8)
    long_name = b"X-" + b"a" * header_names.LONGEST
    for n in range(20):  # an engine making up names: the table starts again when full
        transport = RecordingTransport()
        await answer(cycle(transport), start([(b"X-Made-Up-%d" % n, b"1"), (long_name, b"v"),
                                              (b"Content-Length", b"2")]), body(b"{}"))
        head = b"".join(transport.writes)
        assert b"x-made-up-%d: 1\r\n" % n in head and long_name.lower() + b": v" in head
        assert head.endswith(b"content-length: 2\r\n\r\n{}")
    assert 0 < len(protocol_module._NAMES) <= 8
    assert b"X-Made-Up-19" in protocol_module._NAMES and long_name not in protocol_module._NAMES
    # a kept name is still refused with a value no header may hold
    transport = RecordingTransport()
    with pytest.raises(RuntimeError, match="Invalid HTTP header value"):
        await answer(cycle(transport), start([(b"X-Made-Up-1", b"bad\r\nvalue")]))


# --- keep-alive: one timer per idle stretch ------------------------------------------------------

KEEP_ALIVE_S = 0.3


async def _served(timeout_keep_alive: float = KEEP_ALIVE_S) -> tuple[Any, ServedTransport]:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from gateway.serving.protocol import OneWriteProtocol

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send(start(JSON_HEAD))
        await send(body(b'{"ok":true}'))

    config = Config(app, http=OneWriteProtocol, lifespan="off", date_header=False,
                    server_header=False, log_config=None, timeout_keep_alive=timeout_keep_alive)
    config.load()
    protocol = OneWriteProtocol(config, ServerState(), app_state={})
    transport = ServedTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


async def _request(protocol: Any) -> None:
    protocol.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}")
    while protocol.tasks:
        await asyncio.sleep(0)


async def test_an_idle_keep_alive_connection_closes_after_its_timeout() -> None:
    loop = asyncio.get_running_loop()
    protocol, transport = await _served()
    await _request(protocol)
    answered = loop.time()
    await asyncio.sleep(KEEP_ALIVE_S * 0.6)
    assert not transport.closed
    while not transport.closed and loop.time() - answered < KEEP_ALIVE_S * 5:
        await asyncio.sleep(0.01)
    assert transport.closed
    assert loop.time() - answered >= KEEP_ALIVE_S - 0.01
    assert transport.writes[-2:] == [HEAD_BYTES + b'{"ok":true}', b"<close>"]


async def test_a_connection_in_use_outlives_the_timeout_and_closes_a_timeout_after_its_last_answer(
) -> None:
    """The first answer's timer fires while later requests keep the connection busy or only
    briefly idle: it waits for the rest of the latest idle stretch instead of closing."""
    loop = asyncio.get_running_loop()
    protocol, transport = await _served()
    began = loop.time()
    while loop.time() - began < KEEP_ALIVE_S * 2.5:  # a request every third of the timeout
        await _request(protocol)
        assert not transport.closed
        await asyncio.sleep(KEEP_ALIVE_S / 3)
    await _request(protocol)
    last = loop.time()
    while not transport.closed and loop.time() - last < KEEP_ALIVE_S * 5:
        await asyncio.sleep(0.01)
    assert transport.closed
    assert loop.time() - last >= KEEP_ALIVE_S - 0.01
    assert transport.writes.count(b"<close>") == 1


async def test_a_lost_connection_leaves_no_keep_alive_timer() -> None:
    protocol, transport = await _served()
    await _request(protocol)
    assert protocol.timeout_keep_alive_task is not None
    protocol.connection_lost(None)
    assert protocol.timeout_keep_alive_task is None


# --- the request head's size: server.max_head_bytes ---------------------------------------------

HEAD_CAP = 2048


async def _capped() -> tuple[Any, ServedTransport, list[dict[str, Any]]]:
    """A served connection whose heads are held to HEAD_CAP; the scopes the app was called with."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from gateway.serving.connections import ConnectionCounts, guarded_protocol

    called: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope)
        while (await receive()).get("more_body"):
            pass
        await send(start(JSON_HEAD))
        await send(body(b'{"ok":true}'))

    protocol_class = guarded_protocol(10.0, ConnectionCounts(0, 0), HEAD_CAP)
    config = Config(app, http=protocol_class, lifespan="off", date_header=False,
                    server_header=False, log_config=None)
    config.load()
    protocol = protocol_class(config, ServerState(), app_state={})  # type: ignore[call-arg]
    transport = ServedTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport, called


async def _feed(protocol: Any, *chunks: bytes) -> None:
    for chunk in chunks:
        protocol.data_received(chunk)
        for _ in range(5):  # the request task, if one was started
            await asyncio.sleep(0)


def _head(extra: int) -> bytes:
    return (b"POST /x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"v" * extra
            + b"\r\nContent-Length: 2\r\n\r\n")


def _refused(transport: ServedTransport) -> dict[str, Any]:
    import json

    assert transport.closed and transport.writes[-1] == b"<close>"
    answer = transport.writes[-2]
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert b"connection: close" in head and b"x-request-id: " in head
    error = json.loads(payload)["error"]
    assert error["code"] == "request_head_too_large" and error["status"] == 431
    assert str(HEAD_CAP) in error["message"]
    return error  # type: ignore[no-any-return]


@pytest.mark.parametrize("split", [None, 100, 1000])
async def test_a_head_past_the_cap_is_refused_with_431_and_never_reaches_the_app(
        split: int | None) -> None:
    protocol, transport, called = await _capped()
    head = _head(HEAD_CAP)
    chunks = [head + b"{}"] if split is None else [head[i:i + split]
                                                  for i in range(0, len(head), split)]
    await _feed(protocol, *chunks)
    _refused(transport)
    assert called == []


async def test_a_head_under_the_cap_is_served_whatever_the_size_of_its_body() -> None:
    protocol, transport, called = await _capped()
    large = b"x" * (8 * HEAD_CAP)
    head = (b"POST /x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"v" * (HEAD_CAP // 2)
            + b"\r\nContent-Length: %d\r\n\r\n" % len(large))
    # the head and a body larger than the cap in one chunk, then more body, then a second
    # request on the same connection
    await _feed(protocol, head + large[:HEAD_CAP * 3], large[HEAD_CAP * 3:])
    await _feed(protocol, _head(HEAD_CAP // 2) + b"{}")
    assert len(called) == 2 and not transport.closed
    assert [w.split(b"\r\n", 1)[0] for w in transport.writes] == [b"HTTP/1.1 200 OK"] * 2


async def test_a_second_head_past_the_cap_on_a_kept_alive_connection_is_refused() -> None:
    protocol, transport, called = await _capped()
    await _feed(protocol, _head(10) + b"{}")
    assert len(called) == 1
    head = _head(HEAD_CAP * 2)
    await _feed(protocol, head[:500], head[500:1500], head[1500:])
    _refused(transport)
    assert len(called) == 1


async def test_without_a_cap_a_large_head_is_served() -> None:
    protocol, transport = await _served()
    protocol.data_received(_head(64 * HEAD_CAP) + b"{}")
    while protocol.tasks:
        await asyncio.sleep(0)
    assert transport.writes[0].startswith(b"HTTP/1.1 200 ")
