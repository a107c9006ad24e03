"""Erase and export benchmark (SPEC §17): a user with 10,000 messages and 1,000 files.

Builds a temporary store (SQLite + disk; with `--database postgresql` a throw-away PostgreSQL
cluster started as the suite starts it), seeds the user with rows in every table that holds a
user's rows (tests/user_data_seed.py) plus a second user of the same size, then times, through
the whole ASGI app with an admin key:
  - the export zip, read to the end as `GET /admin/users/{id}/export` streams it (its size and
    the peak of Python memory while it streams printed with it), then the route once;
  - `DELETE /admin/users/{id}`.

    .venv/bin/python bench/user_data.py [--database sqlite|postgresql] [--messages N]
                                        [--files N] [--file-bytes N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import create_app  # noqa: E402
from gateway.config import Settings  # noqa: E402
from gateway.identity.auth import generate_key, hash_secret  # noqa: E402
from gateway.store.database import migrate  # noqa: E402
from gateway.store.ids import now_ms  # noqa: E402
from gateway.upstream.flavors import flavor_for  # noqa: E402
from gateway.userdata.export import export_archive  # noqa: E402
from tests import postgres_server  # noqa: E402
from tests.user_data_seed import seed_user  # noqa: E402


async def run(database: str, root: Path, messages: int, files: int, file_bytes: int) -> None:
    settings = Settings().with_values(
        upstream={"base_url": "http://127.0.0.1:9"},  # everos: the erasure sends it nothing
        storage={"root": str(root / "storage"), "database": database})
    migrate(database)
    app = create_app(settings)
    async with app.running():
        db = app.services.db
        started = time.perf_counter()
        for user in ("alice", "bob"):
            await seed_user(db, app.services.files, user, messages=messages,
                            stored_files=files, file_bytes=file_bytes)
        print(f"seeded 2 users x {messages} messages, {files} files of {file_bytes} bytes "
              f"in {time.perf_counter() - started:.1f} s")
        new = generate_key("ops")
        async with db.write() as tx:
            await tx.execute("INSERT INTO api_keys (id, user_id, secret_sha256, created_at_ms, "
                             "kind) VALUES (?, ?, ?, ?, 'admin')",
                             (new.key_id, new.user_id, hash_secret(new.secret), now_ms()))
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw.test",
                                     headers={"Authorization": f"Bearer {new.token}"},
                                     timeout=600) as admin:
            # The archive as the export route streams it, read chunk by chunk (an in-process
            # httpx transport would buffer the whole answer and hide what the gateway holds).
            tracemalloc.start()
            started = time.perf_counter()
            size = 0
            async for chunk in export_archive(db, app.services.files, app.services.upstream,
                                              flavor_for(settings), "alice"):
                size += len(chunk)
            export_s = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"export: {export_s:.2f} s, {size / 2**20:.1f} MiB zip, peak Python memory "
                  f"{peak / 2**20:.1f} MiB while streaming")
            started = time.perf_counter()
            async with admin.stream("GET", "/admin/users/alice/export") as response:
                assert response.status_code == 200, response.status_code
                async for _ in response.aiter_raw():
                    pass
            print(f"export through the route: {time.perf_counter() - started:.2f} s")
            started = time.perf_counter()
            response = await admin.delete("/admin/users/alice")
            erase_s = time.perf_counter() - started
            assert response.status_code == 200, response.text
            counts = response.json()["counts"]
            print(f"erase:  {erase_s:.2f} s, {sum(counts.values())} rows and files removed "
                  f"({counts['conversation_messages']} messages, {counts['files']} files)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--file-bytes", type=int, default=64 * 1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        if args.database == "postgresql":
            server = postgres_server.start()  # a throw-away cluster, stopped by PID below
            try:
                asyncio.run(run(server.create_database(), root, args.messages, args.files,
                                args.file_bytes))
            finally:
                server.stop()
        else:
            asyncio.run(run(str(root / "gw.db"), root, args.messages, args.files,
                            args.file_bytes))


if __name__ == "__main__":
    main()
