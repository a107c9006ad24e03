"""A raw-socket upstream that speaks deliberately wrong HTTP, for the upstream client's tests.

`HostileUpstream(answer)` serves on a free loopback port in the test's own event loop. For every
request it reads (head and Content-Length body), it writes what `answer(request)` returns: a list
of byte strings, each written and drained in turn, with `Pause(seconds)` between them where the
misbehaviour needs time (a drip, bytes that arrive once the connection is idle). It counts the
connections and requests it saw, and sets `finished` each time a script ran to its end.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

USER_HEADER = b"x-memory-user-id"


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass
class Request:
    index: int  # 0-based, over the whole server
    connection: int  # 0-based number of the connection it came on
    sequence: int  # 0-based number of the request on its connection
    method: str
    target: str
    headers: dict[bytes, bytes]  # lower-cased names; the last value wins
    body: bytes

    @property
    def user(self) -> str:
        return self.headers.get(USER_HEADER, b"").decode()


Script = Sequence[bytes | Pause]


def response(status: int = 200, body: bytes = b"", *headers: bytes, reason: bytes = b"OK") -> bytes:
    """A well-formed answer with a Content-Length (extra header lines as b"Name: value")."""
    lines = [b"HTTP/1.1 %d %s" % (status, reason), b"Content-Length: %d" % len(body), *headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class HostileUpstream:
    def __init__(self, answer: Callable[[Request], Script]) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[Request] = []
        self.finished = asyncio.Event()
        self.url = ""  # http://127.0.0.1:PORT once serving
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> HostileUpstream:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = self.connections
        self.connections += 1
        self._writers.add(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            for sequence in itertools.count():
                request = await self._read(reader, connection, sequence)
                if request is None:
                    return
                self.requests.append(request)
                for part in self.answer(request):
                    if isinstance(part, Pause):
                        await asyncio.sleep(part.seconds)
                    else:
                        writer.write(part)
                        await writer.drain()
                self.finished.set()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # stopped at the end of the test: a normal end, not an error to log
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()

    async def _read(
        self, reader: asyncio.StreamReader, connection: int, sequence: int
    ) -> Request | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        request_line, *lines = head[:-4].split(b"\r\n")
        method, target, _ = request_line.split(b" ", 2)
        headers: dict[bytes, bytes] = {}
        for line in lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get(b"content-length", b"0"))
        body = await reader.readexactly(length)
        return Request(len(self.requests), connection, sequence, method.decode(), target.decode(),
                       headers, body)


def naming(request: Request) -> bytes:
    """A JSON body naming whom and which request it answers."""
    return b'{"for": "%b", "request": %d}' % (request.user.encode(), request.index)
