"""`memory-gateway serve` with one thing changed, for bench/passthrough_alt.py.

    python bench/serve_variant.py twowrites|asyncio|granian

- twowrites: uvicorn's own httptools protocol (a response's head and body in two writes);
- asyncio: the asyncio event loop instead of uvloop;
- granian: the gateway app on granian's ASGI server (one worker, uvloop), when granian is
  importable (e.g. PYTHONPATH pointing at a `pip install --target` folder).
Settings come from the environment, as for `serve`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway import cli, logs  # noqa: E402
from gateway.config import load_settings  # noqa: E402


def granian_app() -> Any:
    """The app factory granian calls in its worker."""
    from gateway.app import create_app

    settings = load_settings()
    logs.configure(settings.server.log_level, settings.server.log_format)
    return create_app(settings)


def main(which: str) -> int:
    if which == "twowrites":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        import gateway.serving.protocol

        gateway.serving.protocol.OneWriteProtocol = HttpToolsProtocol  # type: ignore[misc,assignment]
    elif which == "asyncio":
        cli._run_async = asyncio.run
    elif which == "granian":
        settings = load_settings()
        os.execv(sys.executable, [
            sys.executable, "-m", "granian", "--interface", "asgi", "--factory",
            "--host", settings.server.host, "--port", str(settings.server.port),
            "--workers", "1", "--runtime-threads", "1", "--loop", "uvloop", "--http", "1",
            "--no-ws", "--no-access-log",
            "--working-dir", str(Path(__file__).resolve().parent), "serve_variant:granian_app",
        ])
    else:
        raise SystemExit(f"unknown variant {which!r}")
    return cli.main(["serve"])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
