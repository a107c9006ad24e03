"""Log lines: one JSON object per line (time, level, logger, message, plus the record's extras).

`configure` sets up the root logger for `serve`; uvicorn's own loggers propagate to it. Lines are
written by a thread, so a slow log reader never blocks requests. The access log (one line per
request) is the logger `gateway.access`, written by gateway/app.py.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
import time
from typing import IO, Any

import orjson

ACCESS_LOGGER = "gateway.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUEUE_CAPACITY = 10_000  # log lines waiting for the writer thread before new ones are dropped
# Attributes every LogRecord has; anything else on a record came from `extra=` (except uvicorn's
# ANSI-coloured copy of its message).
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__
) | {"message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record; cheap, as it runs for every request's access line."""

    _second = -1
    _prefix = ""

    def _time(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # most lines share their second with the previous one
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._prefix}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self._time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        try:
            return orjson.dumps(line, default=str).decode()
        except TypeError:  # e.g. an integer beyond 64 bits
            return json.dumps(line, ensure_ascii=False, default=str)


class BackgroundStreamHandler(logging.Handler):
    """Formats in the caller, writes from a thread: a slow reader never stalls the event loop.

    At most `capacity` lines wait; beyond that lines are dropped, and the count is logged once
    the writer catches up. `flush()` waits for the queue; `close()` (run by logging at exit)
    drains it and stops the thread.
    """

    def __init__(self, stream: IO[str], capacity: int = QUEUE_CAPACITY) -> None:
        super().__init__()
        self.stream = stream
        self.dropped = 0
        self._lines: queue.Queue[str | None] = queue.Queue(capacity)
        self._writer = threading.Thread(target=self._write, name="log-writer", daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        try:
            self._lines.put_nowait(line)
        except queue.Full:
            self.dropped += 1

    def _write(self) -> None:
        while True:
            line = self._lines.get()
            try:
                if line is None:
                    return
                self.stream.write(line + "\n")
                if self.dropped:
                    dropped, self.dropped = self.dropped, 0
                    self.stream.write(self.format(logging.makeLogRecord({
                        "name": __name__, "levelno": logging.WARNING, "levelname": "WARNING",
                        "msg": f"{dropped} log line(s) dropped: the log output is read too slowly",
                    })) + "\n")
                if self._lines.empty():
                    self.stream.flush()
            except Exception:  # a closed or broken stream: nothing better to do than go on
                pass
            finally:
                self._lines.task_done()

    def flush(self) -> None:
        if self._writer.is_alive():
            self._lines.join()

    def close(self) -> None:
        if self._writer.is_alive():
            self._lines.put(None)
            self._writer.join(timeout=5)
        super().close()


def configure(level: str, fmt: str = "json", stream: IO[str] | None = None) -> None:
    """Send every log line to `stream` (stderr) as JSON or text, at `level` and above."""
    handler = BackgroundStreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
