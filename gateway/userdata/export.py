"""A user's data as one streamed zip (SPEC §17): `<table>.jsonl` per table, the files under
`files/{kind}/{object_id}/{name}`, the engine's memories in `engine.jsonl` where the flavour
can list them, and `manifest.json` last (counts per table, size and SHA-256 per file).

Rows are read a page at a time and files a chunk at a time; each is handed on as soon as the zip
writer has produced it, so memory stays bounded whatever the user holds.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import AsyncIterator
from typing import IO, Any

from gateway.attachments.files import FileStore
from gateway.identity.auth import validate_user_id
from gateway.store import Database, user_rows
from gateway.store.ids import now_ms
from gateway.store.user_rows import USER_TABLES
from gateway.upstream.client import UpstreamClient
from gateway.upstream.flavors.base import Flavor
from gateway.userdata.engine import data_owner, export_upstream

FLUSH_BYTES = 256 * 1024


class _Sink:
    """The zip writer's output: bytes kept until the stream takes them (never seekable, so
    zipfile writes data descriptors and needs no going back)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def take(self) -> bytes:
        found = b"".join(self.parts)
        self.parts, self.size = [], 0
        return found


class _Hashed:
    """A file's chunks, hashed and counted on the way into the archive."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.digest = hashlib.sha256()
        self.size = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        async for data in self._chunks:
            self.digest.update(data)
            self.size += len(data)
            yield data


def _line(row: dict[str, Any]) -> bytes:
    return json.dumps(row, ensure_ascii=False, sort_keys=True, default=str).encode() + b"\n"


async def export_archive(db: Database, files: FileStore, upstream: UpstreamClient,
                         flavor: Flavor, user_id: str) -> AsyncIterator[bytes]:
    """The zip's bytes, produced as they are read. The first chunk comes once the engine's part
    is in (see `primed`)."""
    validate_user_id(user_id)
    sink = _Sink()
    archive = zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
    counts: dict[str, int] = {}
    listed: list[dict[str, Any]] = []

    async def entry(name: str, lines: AsyncIterator[bytes], compress: bool) -> AsyncIterator[bytes]:
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        writer: IO[bytes] = archive.open(info, "w", force_zip64=True)
        try:
            async for data in lines:
                writer.write(data)
                if sink.size >= FLUSH_BYTES:
                    yield sink.take()
        finally:
            writer.close()
        yield sink.take()

    # The engine first, read whole before any byte is produced (its answers are capped by
    # limits.max_upstream_answer_bytes): a failed listing is then an error answer, not a cut zip.
    if flavor.export_calls is not None:
        owner = await data_owner(db, user_id)
        records = [_line(record) async for record in export_upstream(upstream, flavor, owner)]
        counts["engine"] = len(records)

        async def engine_lines() -> AsyncIterator[bytes]:
            for line in records:
                yield line

        async for chunk in entry("engine.jsonl", engine_lines(), compress=True):
            yield chunk

    for table in USER_TABLES:
        counts[table.name] = 0

        async def rows(table: user_rows.UserTable = table) -> AsyncIterator[bytes]:
            async for row in user_rows.user_rows(db, table, user_id):
                counts[table.name] += 1
                yield _line(row)

        async for chunk in entry(f"{table.name}.jsonl", rows(), compress=True):
            yield chunk

    async for stored in files.user_files(user_id):
        download = await files.open(stored.uri)
        if download is None:  # removed meanwhile (gc, an erasure): not part of the export
            continue
        hashed = _Hashed(download.chunks)
        async for chunk in entry(f"files/{stored.name}", hashed.chunks(), compress=False):
            yield chunk
        listed.append({"path": f"files/{stored.name}", "size": hashed.size,
                       "sha256": hashed.digest.hexdigest()})

    manifest = {
        "userId": user_id,
        "exportedAtMs": now_ms(),
        "counts": counts,
        "files": listed,
        "engine": {"listed": flavor.export_calls is not None},
    }
    archive.writestr(zipfile.ZipInfo("manifest.json", date_time=(1980, 1, 1, 0, 0, 0)),
                     json.dumps(manifest, indent=2, sort_keys=True).encode(),
                     compress_type=zipfile.ZIP_DEFLATED)
    archive.close()
    yield sink.take()


async def primed(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The archive with its first chunk already produced, so that what can fail before any byte
    is sent (a bad id, the engine's listing) fails while an error can still be answered."""
    first = await anext(chunks)

    async def rest() -> AsyncIterator[bytes]:
        yield first
        async for chunk in chunks:
            yield chunk

    return rest()
