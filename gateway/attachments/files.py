"""The file store: one interface, an adapter per backend (local disk here, S3 in s3.py).

Files live in object folders `{user_id}/{kind}/{object_id}/{safe_name}`, under `storage.root` on
disk or under the prefix of `storage.files = "s3://bucket/prefix"`. Routes and domain code hold
only opaque *locations* (a disk path, or `s3://bucket/key`) and `internal_uri`s (`file://…` or
`s3://…`), and never know which adapter runs. On disk every file is written to a temporary name in
its target folder, fsynced and renamed, so a reader never sees half a file. Client-supplied names
pass through `safe_name` before they touch a path or a key.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import shutil
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aiofiles
import aiofiles.os

from gateway.config import ConfigError, StorageSettings
from gateway.errors import PayloadTooLarge
from gateway.identity.auth import USER_ID, validate_user_id

MAX_NAME_BYTES = 200
KINDS = ("resources", "memory_attachments")
OBJECT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
READ_CHUNK_BYTES = 256 * 1024
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
    # cut to 16 characters, then stripped again: the cut may end on a space inside it
    ext = ext.strip()[:16].rstrip()
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


def check_folder(user_id: str, kind: str, object_id: str) -> None:
    """Ids are validated before they become path components or key segments."""
    validate_user_id(user_id)
    if kind not in KINDS or not OBJECT_ID.fullmatch(object_id):
        raise ValueError(f"not a storage folder: {kind}/{object_id}")


def object_path(parts: tuple[str, ...] | list[str]) -> bool:
    """Whether `user/kind/id/name` is a file of an object folder (no `..`, no odd ids)."""
    user_id, kind, object_id, name = parts
    return (USER_ID.fullmatch(user_id) is not None and kind in KINDS
            and OBJECT_ID.fullmatch(object_id) is not None and name not in ("", ".", ".."))


# A name, or a function giving it: an upload learns its final name only once the form is read.
Name = str | Callable[[], str]


@dataclass(frozen=True)
class StoredFile:
    uri: str  # the internal_uri: file://… or s3://bucket/key
    folder: str  # the location of its object folder
    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Download:
    size: int
    chunks: AsyncIterator[bytes]


@dataclass(frozen=True)
class Entry:
    """One stored file, as `gc` sees it."""

    location: str
    modified_s: float


@dataclass(frozen=True)
class UserFile:
    """One file of a user's object folders, for an export or an erasure."""

    uri: str
    name: str  # `{kind}/{object_id}/{safe_name}`: its place under the user's folder
    folder: str  # the location of its object folder


@dataclass(frozen=True)
class Folder:
    """One object folder and what it holds, as `gc` sees it."""

    location: str
    modified_s: float
    files: tuple[Entry, ...]
    other_entries: bool = False  # sub-folders or odd entries: the folder is never removed


class FileStore(ABC):
    """Where uploaded and inline files live. Locations are opaque strings to callers."""

    @abstractmethod
    def folder(self, user_id: str, kind: str, object_id: str) -> str:
        """The location of `{user_id}/{kind}/{object_id}` (nothing is created yet)."""

    @abstractmethod
    def uri(self, folder: str, name: str) -> str:
        """The internal_uri of `name` inside `folder`."""

    @abstractmethod
    def location(self, uri: str) -> str | None:
        """Where `uri` lives when it is a file of this store's object folders, else None."""

    def folder_of(self, uri: str) -> str | None:
        """The object folder holding `uri`, when it is one of this store's files."""
        found = self.location(uri)
        return None if found is None else found.rpartition("/")[0]

    @abstractmethod
    async def write_stream(
        self, folder: str, name: Name, chunks: AsyncIterable[bytes], limit: int
    ) -> StoredFile:
        """Stream chunks into `folder/name`, hashing on the way; nothing half-written is ever
        visible. PayloadTooLarge as soon as more than `limit` bytes arrive, and then nothing is
        left behind."""

    async def write_bytes(self, folder: str, name: str, data: bytes) -> StoredFile:
        async def one() -> AsyncIterable[bytes]:
            yield data

        return await self.write_stream(folder, name, one(), len(data))

    @abstractmethod
    async def rename(self, stored: StoredFile, name: str) -> StoredFile:
        """Give a stored file another name inside the same folder."""

    @abstractmethod
    async def remove_folder(self, folder: str) -> None:
        """Remove an object folder and everything in it (missing is fine)."""

    @abstractmethod
    async def exists(self, uri: str) -> bool:
        """Whether the file `uri` names is stored (False for URIs outside this store)."""

    @abstractmethod
    async def open(self, uri: str) -> Download | None:
        """The file's bytes as a stream, or None when it is missing or not this store's."""

    @abstractmethod
    async def object_folders(self) -> list[Folder]:
        """Every object folder with its files; nothing else of the store (for `gc`)."""

    @abstractmethod
    async def remove_file(self, location: str) -> None:
        """Remove one file (gc); missing is fine."""

    async def remove_empty_folder(self, location: str) -> None:
        """Remove a folder gc found empty (object stores have no folders to remove)."""
        return None

    @abstractmethod
    def user_files(self, user_id: str) -> AsyncIterator[UserFile]:
        """Every file in the user's object folders, whatever rows name them (export, erase)."""

    async def remove_user_folder(self, user_id: str) -> None:
        """Remove what is left of the user's own folder once its object folders are gone."""
        return None

    async def shared_url(self, uri: str, name: str, content_type: str, expires_s: int
                         ) -> str | None:
        """A URL anyone may fetch the file from until it expires, when the store makes its own
        (S3 presigned URLs); None when the gateway must serve it (`/files/{token}`)."""
        return None

    async def presigned_post(self, uri: str, content_type: str, max_size: int, expires_s: int
                             ) -> tuple[str, dict[str, str]] | None:
        """(url, fields) of a form that uploads `uri` straight to the store, when the store
        signs its own (S3 presigned POST); None when the gateway serves the form."""
        return None

    async def stat(self, uri: str) -> tuple[int, str] | None:
        """(size, content type) of an object uploaded straight to the store, None when missing
        (stores without presigned forms learn of their uploads themselves)."""
        return None

    async def open_store(self) -> None:
        """Connect (S3) or create the root (disk) at start-up."""
        return None

    async def probe(self) -> None:
        """Write, read back and remove a probe file outside the object folders (`doctor`);
        StorageUnavailable (or OSError) when the store cannot be used."""
        return None

    async def close(self) -> None:
        """Release connections at shutdown."""
        return None


class DiskFileStore(FileStore):
    """Files under `storage.root` on the local disk, named by `file://` URIs."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def folder(self, user_id: str, kind: str, object_id: str) -> str:
        check_folder(user_id, kind, object_id)
        folder = (self.root / user_id / kind / object_id).resolve()
        if self.root not in folder.parents:
            raise ValueError("storage folder escapes the root")
        return str(folder)

    def uri(self, folder: str, name: str) -> str:
        return file_uri(Path(folder) / name)

    def location(self, uri: str) -> str | None:
        path = path_from_uri(uri)
        if path is None:
            return None
        relative = path.relative_to(self.root).parts if self.root in path.parents else ()
        if len(relative) != 4 or not object_path(relative):
            return None
        return str(path)

    def _inside(self, location: str) -> Path | None:
        path = Path(location)
        return path if self.root in path.resolve().parents else None

    async def open_store(self) -> None:
        await aiofiles.os.makedirs(self.root, exist_ok=True)

    async def write_stream(
        self, folder: str, name: Name, chunks: AsyncIterable[bytes], limit: int
    ) -> StoredFile:
        where = Path(folder)
        await aiofiles.os.makedirs(where, exist_ok=True)
        temp = where / f".part-{secrets.token_hex(8)}"
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
            final_name = name if isinstance(name, str) else name()
            await aiofiles.os.replace(temp, where / final_name)
        except BaseException:
            await self.remove_folder(folder)
            raise
        return StoredFile(self.uri(folder, final_name), folder, final_name, size,
                          digest.hexdigest())

    async def rename(self, stored: StoredFile, name: str) -> StoredFile:
        if name == stored.name:
            return stored
        await aiofiles.os.replace(Path(stored.folder) / stored.name, Path(stored.folder) / name)
        return StoredFile(self.uri(stored.folder, name), stored.folder, name, stored.size,
                          stored.sha256)

    async def remove_folder(self, folder: str) -> None:
        path = self._inside(folder)
        if path is not None:
            await asyncio.to_thread(shutil.rmtree, path, True)

    async def exists(self, uri: str) -> bool:
        path = path_from_uri(uri)
        return path is not None and await aiofiles.os.path.isfile(path)

    async def open(self, uri: str) -> Download | None:
        path = path_from_uri(uri)
        if path is None or self._inside(str(path)) is None:
            return None
        try:
            handle = await aiofiles.open(path, "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        size = os.fstat(handle.fileno()).st_size

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while chunk := await handle.read(READ_CHUNK_BYTES):
                    yield chunk
            finally:
                await handle.close()

        return Download(size, chunks())

    async def object_folders(self) -> list[Folder]:
        return await asyncio.to_thread(_disk_folders, self.root)

    async def remove_file(self, location: str) -> None:
        path = self._inside(location)
        if path is not None:
            path.unlink(missing_ok=True)

    async def remove_empty_folder(self, location: str) -> None:
        path = self._inside(location)
        if path is not None:
            try:
                path.rmdir()
            except (FileNotFoundError, OSError):
                pass  # gone, or something arrived meanwhile: left for the next run


    async def user_files(self, user_id: str) -> AsyncIterator[UserFile]:
        validate_user_id(user_id)
        found = await asyncio.to_thread(_disk_user_files, self.root / user_id)
        for path, name in found:
            yield UserFile(file_uri(path), name, str(path.parent))

    async def remove_user_folder(self, user_id: str) -> None:
        validate_user_id(user_id)
        user_dir = self.root / user_id
        for kind in KINDS:
            await asyncio.to_thread(_remove_if_empty, user_dir / kind)
        await asyncio.to_thread(_remove_if_empty, user_dir)


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass  # missing, or not empty (something arrived meanwhile): left as it is


def _disk_user_files(user_dir: Path) -> list[tuple[Path, str]]:
    """The user's object-folder files, sorted (symlinks never followed)."""
    found: list[tuple[Path, str]] = []
    for kind in KINDS:
        kind_dir = user_dir / kind
        if not kind_dir.is_dir() or kind_dir.is_symlink():
            continue
        for folder in sorted(kind_dir.iterdir()):
            if not folder.is_dir() or folder.is_symlink() or not OBJECT_ID.fullmatch(folder.name):
                continue
            for entry in sorted(folder.iterdir()):
                if entry.is_file() and not entry.is_symlink() \
                        and not entry.name.startswith(".part-"):
                    found.append((entry, f"{kind}/{folder.name}/{entry.name}"))
    return found


def _disk_entries(folder: Path) -> Folder:
    files: list[Entry] = []
    other = False
    with os.scandir(folder) as scan:
        for entry in scan:
            if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                files.append(Entry(entry.path, entry.stat(follow_symlinks=False).st_mtime))
            else:
                other = True
    return Folder(str(folder), folder.stat().st_mtime, tuple(files), other)


def _disk_folders(root: Path) -> list[Folder]:
    """Every `{root}/{user}/{kind}/{id}/` folder with its files; nothing else under the root."""
    found: list[Folder] = []
    if not root.is_dir():
        return found
    for user_dir in sorted(root.iterdir()):
        if USER_ID.fullmatch(user_dir.name) is None or not user_dir.is_dir() \
                or user_dir.is_symlink():
            continue
        for kind in KINDS:
            kind_dir = user_dir / kind
            if not kind_dir.is_dir() or kind_dir.is_symlink():
                continue
            for folder in sorted(kind_dir.iterdir()):
                if folder.is_dir() and not folder.is_symlink():
                    found.append(_disk_entries(folder))
    return found


def create_file_store(storage: StorageSettings) -> FileStore:
    """The adapter `storage.files` names: empty = local disk under `storage.root`."""
    if storage.files.startswith("s3://"):
        try:
            import aiobotocore  # noqa: F401 - only S3 deployments install the client
        except ImportError:
            raise ConfigError("storage.files = s3://… needs the S3 client: "
                              "pip install 'memory-gateway[s3]'") from None
        from gateway.attachments.s3 import S3FileStore

        return S3FileStore.from_settings(storage)
    return DiskFileStore(storage.root)
