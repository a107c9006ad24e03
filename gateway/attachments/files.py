"""The file store: user folders under `storage.root`, safe names, atomic writes, `file://` URIs.

Every file is written to a temporary name in its target folder, fsynced and renamed, so a reader
never sees half a file. Client-supplied names pass through `safe_name` before they touch a path.
An object store would implement the same methods (see SPEC §15).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import shutil
import unicodedata
from collections.abc import AsyncIterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aiofiles
import aiofiles.os

from gateway.errors import PayloadTooLarge
from gateway.identity.auth import validate_user_id

MAX_NAME_BYTES = 200
_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"/\\|?*]')
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
)


def last_segment(name: str) -> str:
    """`../x/photo.png` and `C:\\a\\photo.png` both count as `photo.png`."""
    return re.split(r"[/\\]", name)[-1]


def safe_name(name: str | None, fallback: str = "file") -> str:
    """A file name that never escapes its folder, is never empty, and keeps the extension."""
    # Lone surrogates cannot be file names on any filesystem: they become "?" and then "_".
    base = (name or "").encode("utf-8", "replace").decode("utf-8")
    base = _UNSAFE.sub("_", unicodedata.normalize("NFC", last_segment(base)))
    # Trailing dots and spaces go first (as Windows drops them), so that what is left splits the
    # same way again: safe_name(safe_name(x)) == safe_name(x).
    base = base.rstrip(" .")
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    ext = ext.strip()[:16]
    stem = stem.strip(" .")
    if not stem or stem.lower().split(".")[0] in _WINDOWS_RESERVED:
        stem = f"{fallback}_{stem}" if stem else fallback
    suffix = f".{ext}" if ext else ""
    budget = MAX_NAME_BYTES - len(suffix.encode())
    stem = stem.encode()[:budget].decode("utf-8", errors="ignore").strip(" .") or fallback
    return stem + suffix


def file_uri(path: Path) -> str:
    return path.resolve().as_uri()


def path_from_uri(uri: str) -> Path | None:
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    return Path(unquote(parts.path))


@dataclass(frozen=True)
class StoredFile:
    path: Path
    size: int
    sha256: str

    @property
    def uri(self) -> str:
        return file_uri(self.path)


class FileStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def folder(self, user_id: str, kind: str, object_id: str) -> Path:
        """`{root}/{user_id}/{kind}/{object_id}`; ids are validated before they become paths."""
        validate_user_id(user_id)
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", object_id) or kind not in (
            "resources",
            "memory_attachments",
        ):
            raise ValueError(f"not a storage folder: {kind}/{object_id}")
        folder = (self.root / user_id / kind / object_id).resolve()
        if self.root not in folder.parents:
            raise ValueError("storage folder escapes the root")
        return folder

    async def write_stream(
        self, folder: Path, name: str, chunks: AsyncIterable[bytes], limit: int
    ) -> StoredFile:
        """Stream chunks to `folder/name` (temp name, fsync, rename), hashing on the way.

        PayloadTooLarge as soon as more than `limit` bytes arrive; then nothing is left behind.
        """
        await aiofiles.os.makedirs(folder, exist_ok=True)
        temp = folder / f".part-{secrets.token_hex(8)}"
        digest = hashlib.sha256()
        size = 0
        try:
            async with aiofiles.open(temp, "wb") as fh:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise PayloadTooLarge(f"file exceeds the limit of {limit} bytes")
                    digest.update(chunk)
                    await fh.write(chunk)
                await fh.flush()
                os.fsync(fh.fileno())
            final = folder / name
            await aiofiles.os.replace(temp, final)
        except BaseException:
            await self.remove_folder(folder)
            raise
        return StoredFile(final, size, digest.hexdigest())

    async def rename(self, stored: StoredFile, name: str) -> StoredFile:
        """Give a stored file its final name inside the same folder."""
        final = stored.path.parent / name
        await aiofiles.os.replace(stored.path, final)
        return StoredFile(final, stored.size, stored.sha256)

    async def write_bytes(self, folder: Path, name: str, data: bytes) -> StoredFile:
        async def one() -> AsyncIterable[bytes]:
            yield data

        return await self.write_stream(folder, name, one(), len(data))

    async def remove_folder(self, folder: Path) -> None:
        """Remove an object's folder and everything in it (missing is fine)."""
        if self.root in folder.resolve().parents:
            await asyncio.to_thread(shutil.rmtree, folder, True)
