"""The HTTP/1.1 protocol `serve` runs: uvicorn's httptools protocol, one write per small answer.

uvicorn writes a response's status line and headers when the app sends `http.response.start`
and the body when it sends `http.response.body`: two `send()` calls on the socket for every
answer, each a full trip through the kernel's TCP stack (and, on loopback, a wake-up of the
reader). On the pass-through that second write was the largest single cost of the gateway
(docs/decisions.md, "One write per answer"). `OneWriteProtocol` keeps everything else of
uvicorn's protocol and holds the head of a response that declares its `Content-Length` until
the first body message, then writes both at once (a large body beside it, in one `writelines`,
not copied behind it). A chunked (unknown-length) answer's head is written at once, as before,
so a client of a slow stream sees the head without waiting for the first chunk. A held head is
written before the connection closes, and after the body message even when that wrote nothing
(an answer to HEAD).
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from gateway.errors import RequestHeadTooLarge, RequestTimeout, error_bytes
from gateway.serving.asgi import BODY_TIMED_OUT, new_request_id
from gateway.serving.header_names import remember

# A body from this many bytes on goes out beside its held head in one `writelines` (one writev
# on uvloop) rather than copied behind it: a 94 KB search answer's copy cost about 2 µs and, for
# the moment of the write, a second body's worth of memory. Below, joining is the cheaper.
JOIN_BELOW = 16 * 1024

# Response header names seen, lowered, by spelling (gateway/serving/header_names.py), each free of
# the characters uvicorn refuses in a name: a gateway's answers carry names from a small set (its
# own, its engine's), so most heads take every name from here, unchecked.
_NAMES: dict[bytes, bytes] = {}
_FRAMING = (b"transfer-encoding", b"connection")  # besides Content-Length


class OneWriteCycle(RequestResponseCycle):
    """uvicorn's request/response cycle, writing a declared-length head with the first body.

    `send` is uvicorn's own (0.54), rewritten to hold the head and to validate the response's
    header names and values with one regular-expression search each rather than two per
    header: it runs twice on every request. It writes, refuses and completes exactly as
    uvicorn's does; tests/test_protocol.py compares the two on generated answers."""

    _held: bytes | None = None  # the response head not yet written

    async def send(self, message: Any) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self.response_started = True
            self.waiting_for_100_continue = False
            head = self._head(message["status"],
                              self.default_headers + list(message.get("headers", [])))
            if self.chunked_encoding is False:
                self._held = head
            else:
                self.transport.write(head)
            return
        if self.response_complete:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already "
                               "completed.")
        if kind != "http.response.body":
            raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
        body = message.get("body", b"")
        more_body = message.get("more_body", False)
        if self.scope["method"] == "HEAD":
            self.expected_content_length = 0
            data = b""
        elif self.chunked_encoding:
            data = b"%x\r\n%b\r\n" % (len(body), body) if body else b""
            if not more_body:
                data += b"0\r\n\r\n"
        else:
            if len(body) > self.expected_content_length:
                raise RuntimeError("Response content longer than Content-Length")
            self.expected_content_length -= len(body)
            data = body
        held, self._held = self._held, None
        if held is not None:
            if len(data) < JOIN_BELOW:
                data = held + data
            else:  # one writev beside the head: the body is not copied to join it
                self.transport.writelines((held, data))
                data = b""
        if data:
            self.transport.write(data)
        if not more_body:
            if self.expected_content_length != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self.response_complete = True
            self.message_event.set()
            if not self.keep_alive:
                self.transport.close()
            self.on_response()

    def _head(self, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
        """The status line and headers, with uvicorn's checks and framing decisions."""
        if self.access_log:
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(self.scope),
                                    self.scope["method"], get_path_with_query_string(self.scope),
                                    self.scope["http_version"], status)
        framing = (self.expected_content_length, self.chunked_encoding, self.keep_alive)
        head = self._usual_head(status, headers)
        if head is None:  # something to refuse: uvicorn's own steps, for uvicorn's own error
            self.expected_content_length, self.chunked_encoding, self.keep_alive = framing
            head = self._checked_head(status, headers)
        return head

    def _usual_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> bytes | None:
        """The head in one pass, or None at the first thing uvicorn would refuse: a name known
        from an earlier head is taken lowered from `_NAMES` (no check, no lower), the values
        are checked once joined, and a Content-Length that is not a number gives up too."""
        content = [STATUS_LINE[status]]
        values = []
        has_connection_close = False
        for name, value in headers:
            lowered = _NAMES.get(name)
            if lowered is None:
                if HEADER_RE.search(name):
                    return None
                lowered = name.lower()
                remember(_NAMES, name, lowered)
            values.append(value)
            if lowered == b"content-length":
                if self.chunked_encoding is None:
                    try:
                        self.expected_content_length = int(value.decode())
                    except ValueError:
                        return None
                    self.chunked_encoding = False
            elif lowered in _FRAMING:
                has_connection_close |= self._framing(lowered, value)
            content += (lowered, b": ", value, b"\r\n")
        if HEADER_VALUE_RE.search(b"\t".join(values)):
            return None
        return self._head_end(status, content, has_connection_close)

    def _checked_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
        """uvicorn's own steps (0.54): each header checked in order, the first bad one refused."""
        content = [STATUS_LINE[status]]
        has_connection_close = False
        for name, value in headers:
            if HEADER_RE.search(name):
                raise RuntimeError("Invalid HTTP header name.")
            if HEADER_VALUE_RE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length" and self.chunked_encoding is None:
                self.expected_content_length = int(value.decode())
                self.chunked_encoding = False
            elif name in _FRAMING:
                has_connection_close |= self._framing(name, value)
            content.extend([name, b": ", value, b"\r\n"])
        return self._head_end(status, content, has_connection_close)

    def _framing(self, name: bytes, value: bytes) -> bool:
        """A Transfer-Encoding or Connection header (`name` lowered) as uvicorn reads it;
        whether it asks to close the connection."""
        if name == b"transfer-encoding":
            if value.lower() == b"chunked":
                self.expected_content_length = 0
                self.chunked_encoding = True
            return False
        if b"close" in [token.lower().strip() for token in value.split(b",")]:
            self.keep_alive = False
            return True
        return False

    def _head_end(self, status: int, content: list[bytes], has_connection_close: bool) -> bytes:
        if not self.keep_alive and not has_connection_close:
            content.append(b"connection: close\r\n")
        if (self.chunked_encoding is None and self.scope["method"] != "HEAD"
                and status not in (204, 304)):
            self.chunked_encoding = True
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        return b"".join(content)


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose requests are answered by `OneWriteCycle`, with the
    keep-alive timer armed once per idle stretch rather than once per answer.

    uvicorn arms a `call_later(timeout_keep_alive)` after every answer and cancels it when the
    next request's bytes arrive: on uvloop a timer made and cancelled costs about 2 µs, on
    every request of a keep-alive connection. Here an answer only notes when the connection
    went idle; the timer is made when none is pending and, when it fires, closes the connection
    if it has been idle for the whole timeout since then, else waits for the rest of it. An
    idle connection is closed `timeout_keep_alive` after its last answer, as uvicorn closes it.
    """

    _idle_since: float | None = None  # loop time of the last answer, while no bytes came since
    # server.max_head_bytes (0: no cap), set on the subclass `serve` makes
    # (gateway/serving/connections.py)
    max_head_bytes = 0
    _in_head = False  # a request head has begun and is not complete
    _in_body = False  # a request's head is complete and its body is not
    _head_bytes = 0  # bytes received while the head being read was incomplete
    _head_refused = False  # a head was refused: the connection is closing
    _body_bytes = 0  # bytes received while the current request's body was incomplete

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True

    def on_message_complete(self) -> None:
        self._in_body = False
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        """uvicorn's, with the head's size held to `max_head_bytes` (uvicorn has no limit, and
        httptools keeps a header until it is whole). A chunk that could take a head past it
        is looked at before it is parsed: one that does is refused unparsed."""
        cap = self.max_head_bytes
        if cap and not self._in_body and self._head_bytes + len(data) > cap:
            if self._head_refused:
                return  # bytes that were on their way: nothing more is parsed
            end = data.find(b"\r\n\r\n")
            if self._head_bytes + (end + 4 if end >= 0 else len(data)) > cap:
                self._refuse_head()
                return
        super().data_received(data)
        if cap and self._in_head:  # still incomplete: all of it was head
            self._head_bytes += len(data)
        elif self._in_body:  # the body clock's progress (gateway/serving/connections.py)
            self._body_bytes += len(data)

    def _refuse_head(self) -> None:
        """431 in the gateway's error shape, and the connection closed: nothing of the
        request reached the app."""
        self._in_head = self._in_body = False
        self._head_refused = True
        self._head_bytes = self.max_head_bytes  # whatever still arrives is past the cap
        request_id = new_request_id()
        body = error_bytes(RequestHeadTooLarge(
            f"the request line and headers exceed server.max_head_bytes "
            f"({self.max_head_bytes} bytes)"), request_id)
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nx-request-id: %b\r\nconnection: close\r\n\r\n%b"
            % (len(body), request_id.encode(), body))
        self.transport.close()

    def _refuse_body(self) -> None:
        """408 in the gateway's error shape (when no answer has begun), and the connection
        closed: the app's read of the body ends as a client that left, and its access line
        says 408 (gateway/app.py reads BODY_TIMED_OUT)."""

        self._in_body = False
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and not cycle.disconnected:
            scope: dict[str, Any] = cycle.scope  # type: ignore[assignment]  # the app's own keys
            scope[BODY_TIMED_OUT] = True
            cycle.disconnected = True  # whatever the app sends from now on goes nowhere
            cycle.message_event.set()
            request_id = str(scope.get("request_id") or new_request_id())
            body = error_bytes(RequestTimeout(
                "the request body did not arrive in time (server.body_timeout_s, "
                "server.min_body_rate)"), request_id)
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nx-request-id: %b\r\nconnection: close\r\n\r\n%b"
                % (len(body), request_id.encode(), body))
        self.transport.close()

    def _unset_keepalive_if_required(self) -> None:
        # uvicorn calls this when bytes arrive, when an answer completes and when the connection
        # is lost: the connection is not idle (any pending timer finds that when it fires).
        self._idle_since = None

    def on_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # a pipelined request waits (its bytes left the connection busy)
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle_since = now = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_at(
                now + self.timeout_keep_alive, self._keep_alive_due)

    def _keep_alive_due(self) -> None:
        self.timeout_keep_alive_task = None
        idle_since = self._idle_since
        if idle_since is None or self.transport.is_closing():
            return  # busy: the next answer arms it again
        due = idle_since + self.timeout_keep_alive
        if self.loop.time() >= due:
            self.timeout_keep_alive_handler()
        else:  # idle since a later answer: the rest of its timeout
            self.timeout_keep_alive_task = self.loop.call_at(due, self._keep_alive_due)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._in_head, self._in_body, self._head_bytes, self._body_bytes = False, True, 0, 0
        super().on_headers_complete()
        # uvicorn has just built this request's cycle and scheduled (not started) its task, or
        # queued it behind a pipelined one: it answers through OneWriteCycle.send from its first
        # message on. (An upgrade builds no cycle: the previous one, if any, is left alone.)
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:
            cycle.__class__ = OneWriteCycle
