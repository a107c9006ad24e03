"""A scripted fake engine on 127.0.0.1 for fault tests: each path gets a behaviour.

It runs an asyncio server in a background thread and speaks just enough HTTP/1.1 (keep-alive,
Content-Length bodies) to answer, hang, reset the connection mid-response or dribble a body.
Every request is recorded whole, so a test can replay it into a real engine afterwards.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ADD = "/api/v2/memory/add"
FLUSH = "/api/v2/memory/flush"
SEARCH = "/api/v2/memory/search"


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Answer:
    status: int = 200
    body: bytes = b'{"request_id": "fake", "data": {"status": "accumulated"}}'
    content_type: str = "application/json"

    async def run(self, engine: ScriptedEngine, writer: asyncio.StreamWriter,
                  reader: asyncio.StreamReader) -> bool:
        writer.write(_head(self.status, {"Content-Type": self.content_type,
                                         "Content-Length": str(len(self.body))}) + self.body)
        await writer.drain()
        return True  # the connection may be reused


def answer_json(payload: Any, status: int = 200) -> Answer:
    return Answer(status, json.dumps(payload).encode())


@dataclass
class Hang:
    """Take the request, tell the test, never answer (until the caller gives up or dies)."""

    async def run(self, engine: ScriptedEngine, writer: asyncio.StreamWriter,
                  reader: asyncio.StreamReader) -> bool:
        engine.hung.set()
        while await reader.read(65536):
            pass
        return False


@dataclass
class Reset:
    """Start a 200 answer, then reset the connection (RST) before the body is complete."""

    async def run(self, engine: ScriptedEngine, writer: asyncio.StreamWriter,
                  reader: asyncio.StreamReader) -> bool:
        writer.write(_head(200, {"Content-Type": "application/json", "Content-Length": "100"})
                     + b'{"request_id": "par')
        await writer.drain()
        await asyncio.sleep(0.05)
        sock: socket.socket = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return False


@dataclass
class SlowBody:
    """Headers at once, then the body in `pieces` parts `gap_s` apart."""

    body: bytes
    pieces: int = 4
    gap_s: float = 0.3
    status: int = 200

    async def run(self, engine: ScriptedEngine, writer: asyncio.StreamWriter,
                  reader: asyncio.StreamReader) -> bool:
        writer.write(_head(self.status, {"Content-Type": "application/json",
                                         "Content-Length": str(len(self.body))}))
        await writer.drain()
        size = -(-len(self.body) // self.pieces)
        for start in range(0, len(self.body), size):
            await asyncio.sleep(self.gap_s)
            writer.write(self.body[start:start + size])
            await writer.drain()
        return True


Behaviour = Answer | Hang | Reset | SlowBody

EMPTY_SEARCH = {"request_id": "fake", "data": {
    "episodes": [], "profiles": [], "agent_cases": [], "agent_skills": [],
    "unprocessed_messages": []}}


def default_script() -> dict[str, Behaviour]:
    return {
        ADD: Answer(),
        FLUSH: answer_json({"request_id": "fake", "data": {"status": "extracted"}}),
        SEARCH: answer_json(EMPTY_SEARCH),
        "/health": answer_json({"status": "ok"}),
    }


@dataclass
class ScriptedEngine:
    script: dict[str, Behaviour] = field(default_factory=default_script)
    received: list[Received] = field(default_factory=list)
    hung: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def requests_to(self, path: str) -> list[Received]:
        return [r for r in list(self.received) if r.path == path]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, target, _ = request_line.split(" ", 2)
                headers = {}
                for line in header_lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path = target.split("?", 1)[0]
                self.received.append(Received(method, path, headers, body))
                behaviour = self.script.get(path, Answer(404, b'{"error": "no such path"}'))
                if not await behaviour.run(self, writer, reader):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    @contextmanager
    def serving(self) -> Iterator[ScriptedEngine]:
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            async def stop() -> None:
                server.close()
                handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in handlers:
                    task.cancel()
                await asyncio.gather(*handlers, return_exceptions=True)
                await server.wait_closed()

            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
