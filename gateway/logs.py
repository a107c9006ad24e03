"""Log lines: one JSON object per line (time, level, logger, message, plus the record's extras).

`configure` sets up the root logger for `serve`; uvicorn's own loggers propagate to it. Lines are
written by a thread, so a slow log reader never blocks requests. The access log (one line per
request) is the logger `gateway.access`, written by gateway/app.py.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import deque
from contextvars import ContextVar
from typing import IO, Any

import orjson

ACCESS_LOGGER = "gateway.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUEUE_CAPACITY = 10_000  # log lines waiting for the writer thread before new ones are dropped
WRITE_INTERVAL_S = 0.05  # how often the writer thread writes what has gathered
# Attributes every LogRecord has; anything else on a record came from `extra=` (except uvicorn's
# ANSI-coloured copy of its message).
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__
) | {"message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record; cheap, as it runs for every request's access line."""

    _second = -1
    _prefix = ""
    # (millisecond, its stamp) of the latest line: at thousands of lines a second many share
    # one. One tuple, so a thread never pairs one line's millisecond with another's stamp.
    _latest: tuple[int, str] = (-1, "")

    def _time(self, created: float) -> str:
        millisecond = int(created * 1000)
        latest = self._latest
        if latest[0] == millisecond:
            return latest[1]
        second, fraction = divmod(millisecond, 1000)
        if second != self._second:  # most lines share their second with the previous one
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        stamp = f"{self._prefix}.{fraction:03d}Z"
        self._latest = (millisecond, stamp)
        return stamp

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

    Lines go into a deque (an append needs no lock and wakes nobody); the writer thread wakes
    every `WRITE_INTERVAL_S`, writes what has gathered in one call and flushes. At most
    `capacity` lines wait; beyond that lines are dropped and the count is logged once the writer
    catches up. `flush()` waits until the lines are written; `close()` (run by logging at exit)
    writes the rest and stops the thread.
    """

    def __init__(self, stream: IO[str], capacity: int = QUEUE_CAPACITY) -> None:
        super().__init__()
        self.stream = stream
        self.dropped = 0
        self.capacity = capacity
        self._lines: deque[str] = deque()
        self._stop = threading.Event()
        self._draining = threading.Lock()  # held while a batch is being written
        self._writer = threading.Thread(target=self._write, name="log-writer", daemon=True)
        self._writer.start()

    def handle(self, record: logging.LogRecord) -> bool:
        # No handler lock: formatting is per call and the deque append is atomic.
        if not self.filter(record):
            return False
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.append(line)

    def append(self, line: str) -> None:
        """Queue one formatted line (dropped and counted when the queue is full)."""
        if len(self._lines) >= self.capacity:
            self.dropped += 1
            return
        self._lines.append(line)

    def _drain(self) -> None:
        with self._draining:
            self._write_batch()

    def _write_batch(self) -> None:
        lines = self._lines
        batch: list[str] = []
        while lines:
            batch.append(lines.popleft())
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            batch.append(self.format(logging.makeLogRecord({
                "name": __name__, "levelno": logging.WARNING, "levelname": "WARNING",
                "msg": f"{dropped} log line(s) dropped: the log output is read too slowly",
            })))
        if not batch:
            return
        try:
            self.stream.write("\n".join(batch) + "\n")
            self.stream.flush()
        except Exception:  # a closed or broken stream: nothing better to do than go on
            pass

    def _write(self) -> None:
        while not self._stop.wait(WRITE_INTERVAL_S):
            self._drain()
        self._drain()

    def flush(self) -> None:
        if not self._writer.is_alive():
            self._drain()
            return
        while self._lines:
            time.sleep(WRITE_INTERVAL_S / 4)
        with self._draining:  # the last batch taken from the deque is written
            pass

    def close(self) -> None:
        if self._writer.is_alive():
            self._stop.set()
            self._writer.join(timeout=5)
        super().close()


class TextFormatter(logging.Formatter):
    """`log_format = "text"`: the line of TEXT_FORMAT, then the record's extras as `key=value`
    (an access line's request id, user, duration and upstream status; a dict as compact JSON)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [f"{key}={_text_value(value)}" for key, value in record.__dict__.items()
                  if key not in _STANDARD and not key.startswith("_") and value is not None]
        return f"{line} {' '.join(extras)}" if extras else line


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        return value if value and not any(c.isspace() or c in '"=' for c in value) \
            else json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class AccessLog:
    """The one line per request. When `configure` installed the JSON handler, the line is built
    and queued directly (about a third of the cost of a logging call, which matters at ~10,000
    lines a second); otherwise it goes through `logging` like any other line."""

    def __init__(self) -> None:
        self._logger = logging.getLogger(ACCESS_LOGGER)
        self._time = JsonFormatter()._time

    def enabled(self) -> bool:
        return self._logger.isEnabledFor(logging.INFO)

    def write(self, message: str, fields: dict[str, Any]) -> None:
        handler = _direct_json_handler
        logger = self._logger
        if handler is None or logger.handlers or logger.filters or not logger.propagate:
            logger.info("%s", message, extra=fields)
            return
        line = {"time": self._time(time.time()), "level": "info", "logger": ACCESS_LOGGER,
                "message": message, **fields}
        try:
            handler.append(orjson.dumps(line).decode())
        except TypeError:
            handler.append(json.dumps(line, ensure_ascii=False, default=str))


_direct_json_handler: BackgroundStreamHandler | None = None
# Which of the process's servers a uvicorn line comes from: `serve` runs the gateway and the dev
# engine side by side in one process, each in its own task (gateway/cli.py).
SERVER_NAME: ContextVar[str | None] = ContextVar("server_name", default=None)
DEV_ENGINE = "dev engine"
_ONCE_A_PROCESS = ("Started server process", "Finished server process")


class ServerNameFilter(logging.Filter):
    """Tags uvicorn's lines with the server they come from (`server=dev engine`) and drops the
    dev engine's copy of the lines about the process both share."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = SERVER_NAME.get()
        if name is None:
            return True
        if name == DEV_ENGINE and str(record.msg).startswith(_ONCE_A_PROCESS):
            return False
        record.server = name
        return True


_server_name_filter = ServerNameFilter()


def configure(level: str, fmt: str = "json", stream: IO[str] | None = None) -> None:
    """Send every log line to `stream` (stderr) as JSON or text, at `level` and above."""
    global _direct_json_handler
    handler = BackgroundStreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    _direct_json_handler = handler if fmt == "json" else None
    uvicorn_lines = logging.getLogger("uvicorn.error")
    if _server_name_filter not in uvicorn_lines.filters:
        uvicorn_lines.addFilter(_server_name_filter)
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
