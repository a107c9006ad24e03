"""Links to stored files for those who cannot read the gateway's disk (SPEC §9, §15).

- Search attachments carry `url` = `server.public_url` + `/attachments/{id}/content`: the owner
  downloads with their own key.
- The engine, when it is not on the gateway's disk (`upstream.file_access`), gets a signed,
  expiring URL per file: an S3 presigned URL when files live on S3, else
  `server.public_url` + `/files/{token}`, where the token is the file's URI, name, content type
  and expiry, HMAC-signed with `server.file_url_secret` (or a secret generated once and kept in
  `storage.root`, so every process on that root signs alike). Nothing else is needed to fetch it:
  whoever holds the URL may read that one file until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from gateway.attachments.files import FileStore
from gateway.config import ConfigError, Settings
from gateway.errors import Forbidden, NotFound

SECRET_FILE = "_file_url_secret"  # a user id cannot start with "_": no user folder collides
TOKEN_CONTEXT = b"memory-gateway files v1\n"
FETCHABLE = ("http://", "https://")


class LinkExpired(Forbidden):
    code = "file_link_expired"
    default_message = "this file link has expired"


@dataclass(frozen=True)
class FileGrant:
    """What a valid `/files/{token}` lets its holder read."""

    uri: str
    name: str
    content_type: str
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def stored_secret(root: str | Path) -> bytes:
    """The signing secret kept in the storage root, created once (first writer wins)."""
    path = Path(root) / SECRET_FILE
    if not path.exists():
        os.makedirs(path.parent, exist_ok=True)
        temp = path.with_name(f".{SECRET_FILE}-{secrets.token_hex(8)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # atomic and never overwrites: concurrent starters agree
        except FileExistsError:
            pass
        finally:
            os.unlink(temp)
    secret = path.read_bytes().strip()
    if len(secret) < 32:
        raise ConfigError(f"{path}: the file URL secret is too short; remove the file to "
                          "have a new one generated")
    return secret


class FileLinks:
    def __init__(self, settings: Settings, files: FileStore, engine_reads_local_files: bool
                 ) -> None:
        self.public_url = settings.server.public_url.rstrip("/")
        self.ttl_s = settings.server.file_url_ttl_s
        self._configured = settings.server.file_url_secret.encode()
        self._root = settings.storage.root
        self._secret: bytes | None = None
        self.files = files
        self.object_store = bool(settings.storage.files)
        # How the engine gets stored files: path, url or name (engine_file_access below).
        self.access = engine_file_access(settings, engine_reads_local_files, self.can_share)

    @property
    def can_share(self) -> bool:
        """Whether files can be handed out as URLs at all (a store that presigns, or a public
        URL for /files/{token})."""
        return self.object_store or bool(self.public_url)

    def _key(self) -> bytes:
        if self._secret is None:
            self._secret = self._configured or stored_secret(self._root)
        return self._secret

    def secret(self) -> bytes:
        """The signing secret, also for the upload forms (gateway/attachments/objects.py)."""
        return self._key()

    def _signature(self, payload: str) -> str:
        return _b64(hmac.new(self._key(), TOKEN_CONTEXT + payload.encode(), hashlib.sha256)
                    .digest())

    # --- /files/{token} ---------------------------------------------------------------------------

    def token(self, uri: str, name: str, content_type: str, expires_at: int) -> str:
        payload = _b64(json.dumps([uri, name, content_type, expires_at],
                                  separators=(",", ":")).encode())
        return f"{payload}.{self._signature(payload)}"

    def verify(self, token: str, now_s: float | None = None) -> FileGrant:
        """The grant a token carries: 404 when it is not one of ours, 403 once expired."""
        payload, dot, signature = token.partition(".")
        # Bytes: compare_digest refuses str holding non-ASCII, and a token is the client's text.
        expected = self._signature(payload).encode()
        if not dot or not hmac.compare_digest(signature.encode(), expected):
            raise NotFound("no such file")
        try:
            uri, name, content_type, expires_at = json.loads(_unb64(payload))
        except (ValueError, TypeError):
            raise NotFound("no such file") from None
        if (now_s if now_s is not None else time.time()) >= expires_at:
            raise LinkExpired()
        return FileGrant(uri, name, content_type, int(expires_at))

    # --- links handed out -------------------------------------------------------------------------

    async def for_engine(self, uri: str, name: str, content_type: str) -> str | None:
        """What the engine is handed for a stored file: its URI (path), a signed URL (url), or
        None (the engine gets its name only)."""
        if self.access == PATH_ACCESS:
            return uri
        if self.access == URL_ACCESS:
            return await self.signed_url(uri, name, content_type)
        return None

    async def signed_url(self, uri: str, name: str, content_type: str) -> str:
        """A signed URL the engine can fetch the stored file from until it expires."""
        shared = await self.files.shared_url(uri, name, content_type, self.ttl_s)
        if shared is not None:
            return shared
        if not self.public_url:
            raise ConfigError("server.public_url is needed to hand files to the engine as URLs")
        expires_at = int(time.time()) + self.ttl_s
        return f"{self.public_url}/files/{self.token(uri, name, content_type, expires_at)}"

    def download_url(self, attachment_id: str) -> str | None:
        """Where the owner downloads an attachment, or None without a public URL."""
        if not self.public_url:
            return None
        return f"{self.public_url}/attachments/{attachment_id}/content"


PATH_ACCESS, URL_ACCESS, NAME_ACCESS = "path", "url", "name"


def engine_file_access(settings: Settings, reads_local_files: bool, can_share: bool) -> str:
    """How the engine gets stored files: `path` (their file:// or s3:// URI, for an engine that
    reads the gateway's storage), `url` (signed URLs), or `name` (only the file's name, when
    `auto` finds no way to make URLs: no S3 store and no server.public_url)."""
    mode = settings.upstream.file_access
    if mode == "auto":
        if reads_local_files and not settings.storage.files:
            return PATH_ACCESS
        return URL_ACCESS if can_share else NAME_ACCESS
    if mode == URL_ACCESS and not can_share:
        raise ConfigError("upstream.file_access = url needs server.public_url (or files on S3)")
    return mode
