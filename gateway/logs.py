"""Log lines: one JSON object per line (time, level, logger, message, plus the record's extras).

`configure` sets up the root logger for `serve`; uvicorn's own loggers propagate to it. The
access log (one line per request) is the logger `gateway.access`, written by gateway/app.py.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

ACCESS_LOGGER = "gateway.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__
) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
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
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: str, fmt: str = "json", stream: IO[str] | None = None) -> None:
    """Send every log line to `stream` (stderr) as JSON or text, at `level` and above."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
