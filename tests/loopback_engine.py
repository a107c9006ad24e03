"""The respx-faked engine served over real HTTP/1.1 on a loopback port, so that route tests run
through the production upstream clients and real sockets, not only through an httpx transport.

Each request read off the socket (h11) is rebuilt as an `httpx.Request` for `ENGINE + target`, so
routes match as they do over a transport and `route.calls` shows what crossed the wire (the Host
header included); the router's answer is written back byte for byte. A side effect that raises
`httpx.TimeoutException` never answers (the client's deadline ends the exchange); any other
`httpx.TransportError` resets the connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import httpx
import respx

READ_SIZE = 64 * 1024


class LoopbackEngine:
    def __init__(self, router: respx.MockRouter, base_url: str) -> None:
        self.router = router
        self.base_url = base_url.rstrip("/")
        self.url = ""  # http://127.0.0.1:PORT once serving
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self.url

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, reader)
                if request is None:
                    return
                try:
                    answer = await self.router.async_handler(request)
                except httpx.TimeoutException:
                    await asyncio.Event().wait()  # an engine that never answers
                    return
                except httpx.TransportError:
                    writer.transport.abort()  # an engine that went away mid-request
                    return
                except Exception as exc:  # no route matched, or a side effect failed
                    answer = httpx.Response(500, text=f"loopback engine: {exc!r}")
                await self._write_response(conn, writer, answer, request.method)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.RemoteProtocolError):
            return
        except asyncio.CancelledError:
            return  # stopped at the end of the test: a normal end, not an error to log
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader
    ) -> httpx.Request | None:
        head: h11.Request | None = None
        body: list[bytes] = []
        while True:
            event: Any = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(READ_SIZE))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return httpx.Request(
                    head.method.decode(),
                    self.base_url + head.target.decode("ascii"),
                    headers=[(name, value) for name, value in head.headers],
                    content=b"".join(body),
                )
            else:  # ConnectionClosed, or PAUSED on a client that sent past its request
                return None

    async def _write_response(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, answer: httpx.Response,
        method: str,
    ) -> None:
        if answer.is_stream_consumed and isinstance(answer.stream, httpx.AsyncByteStream):
            # Built in memory and already read: the stream still holds the bytes as given
            # (`.content` would be decompressed).
            body = b"".join([chunk async for chunk in answer.stream])
        else:
            body = b"".join([chunk async for chunk in answer.aiter_raw()])
        writer.write(conn.send(h11.Response(
            status_code=answer.status_code, headers=answer.headers.raw,
            reason=answer.reason_phrase.encode())))
        if body and method != "HEAD" and answer.status_code not in (204, 304):
            writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
