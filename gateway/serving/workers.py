"""`server.workers = N`: N gateway processes serving one listening socket (SPEC §15).

The supervisor binds the socket, forks the workers (and the built-in dev engine, when it runs
one) before any event loop or thread exists, restarts a worker that dies, and passes SIGTERM or
SIGINT on to all of them. Each worker is a whole gateway: its own database connections, caches
and intent lease; the database keeps them consistent (docs/scale-out.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gateway import logs
from gateway.config import Settings

log = logging.getLogger("gateway.workers")
RESTART_PAUSE_S = 0.5  # between a worker's death and its replacement (no tight crash loop)
BACKLOG = 2048


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def _fork(run: Callable[[], None]) -> int:
    pid = os.fork()
    if pid == 0:  # the child: run, then leave without the parent's cleanup
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        code = 0
        try:
            run()
        except BaseException:
            logging.getLogger("gateway").exception("worker failed")
            code = 1
        finally:
            logging.shutdown()
            os._exit(code)
    return pid


def serve(settings: Settings, uvicorn_server: Callable[..., Any],
          run_async: Callable[[Any], Any], gateway_app: Callable[[Settings], Any],
          dev_engine_app: Callable[[str], Any]) -> int:
    """Run `server.workers` gateway processes on one socket until SIGTERM/SIGINT.

    `gateway_app(settings)` and `dev_engine_app(database)` build the ASGI apps, each in the
    process that serves it (after the fork)."""
    logging.basicConfig(level=settings.server.log_level.upper(), format=logs.TEXT_FORMAT,
                        stream=sys.stderr)
    sock = _listen(settings.server.host, settings.server.port)
    jobs: dict[str, Callable[[], None]] = {}
    if not settings.upstream.base_url:
        port = settings.dev_engine.port

        def dev_engine() -> None:
            logs.configure(settings.server.log_level, settings.server.log_format)
            engine = dev_engine_app(settings.dev_engine.database)
            run_async(uvicorn_server(engine, "127.0.0.1", port,
                                     settings.server.log_level).serve())

        jobs["dev engine"] = dev_engine
        log.warning("upstream.base_url is empty: running the built-in dev engine at "
                    "http://127.0.0.1:%d (a development default, not a memory product)", port)
        settings = replace(settings, upstream=replace(
            settings.upstream, base_url=f"http://127.0.0.1:{port}"))

    def worker() -> None:
        logs.configure(settings.server.log_level, settings.server.log_format)
        server = uvicorn_server(gateway_app(settings), settings.server.host,
                                settings.server.port, settings.server.log_level,
                                settings.server)  # each worker counts its own connections
        run_async(server.serve(sockets=[sock]))

    for number in range(settings.server.workers):
        jobs[f"worker {number + 1}"] = worker
    running = {_fork(run): name for name, run in jobs.items()}
    log.info("memory-gateway listening on http://%s:%d with %d workers, upstream %s",
             settings.server.host, settings.server.port, settings.server.workers,
             settings.upstream.base_url)
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(running):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while running:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        name = running.pop(pid, None)
        if name is None or stopping:
            continue
        log.warning("%s (pid %d) exited (status %d); starting another", name, pid, status)
        time.sleep(RESTART_PAUSE_S)
        running[_fork(jobs[name])] = name
    sock.close()
    return 0
