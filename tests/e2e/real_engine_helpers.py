"""What the real-engine tests share: messages as the engine takes them, a small valid PNG, an
agent trajectory the engine learns from, and a loopback web page that records its visitors."""

from __future__ import annotations

import struct
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def new_session(prefix: str) -> str:
    """A session id no other test of the shared engine uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def message(role: str, sender_id: str, content: str | list[dict[str, Any]], at_ms: int,
            **extra: Any) -> dict[str, Any]:
    """A message as the real engine requires it: `sender_id` and `timestamp` (ms) on every one
    (everos entrypoints/api/routes/memorize.py, MessageItemDTO)."""
    return {"role": role, "sender_id": sender_id, "timestamp": at_ms, "content": content,
            **extra}


def png(width: int, height: int, shade: int = 0) -> bytes:
    """A valid RGB PNG of one colour (the engine's image parser opens it with Pillow)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = b"".join(b"\x00" + bytes((shade, 255 - shade, 128)) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def agent_trajectory(user_id: str, agent_id: str, at_ms: int) -> list[dict[str, Any]]:
    """A user's request, three tool-call rounds by the agent and its closing answer: the shape
    the engine turns into an agent case (everalgo agent_memory/case.py: at least three rounds,
    closed by an assistant message), owned by the assistant's `sender_id`."""
    messages = [message("user", user_id, "Find the cheapest flight from Paris to Oslo on Friday",
                        at_ms)]
    rounds = [("search_flights", '{"from": "CDG", "to": "OSL"}', "AF95 95 EUR; SK12 120 EUR"),
              ("check_baggage", '{"flight": "AF95"}', "AF95: one cabin bag"),
              ("book_flight", '{"flight": "AF95"}', "booked AF95, seat 12C")]
    for number, (name, arguments, result) in enumerate(rounds):
        call_id = f"call_{number}"
        messages.append(message("assistant", agent_id, "", at_ms + 2 * number + 1, tool_calls=[
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": arguments}}]))
        messages.append(message("tool", agent_id, result, at_ms + 2 * number + 2,
                                tool_call_id=call_id))
    messages.append(message("assistant", agent_id,
                            "Booked AF95 to Oslo for 95 EUR, seat 12C, one cabin bag.",
                            at_ms + 10))
    return messages


@dataclass
class LoopbackPage:
    url: str
    requests: list[str] = field(default_factory=list)


@contextmanager
def loopback_page(body: str) -> Iterator[LoopbackPage]:
    """An HTML page on a free loopback port that records every path requested of it."""
    page = LoopbackPage("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            page.requests.append(self.path)
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    page.url = f"http://127.0.0.1:{server.server_address[1]}/page.html"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield page
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
