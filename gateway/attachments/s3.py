"""The S3 adapter of the file store: any S3-compatible object store (`storage.files = "s3://…"`).

Object keys mirror the disk layout under the prefix: `{prefix}/{user_id}/{kind}/{id}/{safe_name}`;
a file's location and internal_uri are both `s3://bucket/key`. Uploads stream as multipart
uploads of `PART_BYTES` parts (one part in memory at a time), small files as one PUT; an upload
that fails or is cut off is aborted, so no half-written object ever becomes visible. The client
is aiobotocore (docs/decisions.md); credentials come from the standard AWS_* environment
variables (or any source botocore reads).
"""

from __future__ import annotations

import hashlib
import io
import secrets
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any
from urllib.parse import quote

from gateway.attachments.files import (
    KINDS,
    OBJECT_ID,
    READ_CHUNK_BYTES,
    Download,
    Entry,
    FileStore,
    Folder,
    Name,
    StoredFile,
    UserFile,
    check_folder,
    object_path,
)
from gateway.config import StorageSettings
from gateway.errors import NotFound, PayloadTooLarge, StorageUnavailable
from gateway.identity.auth import USER_ID, validate_user_id

PART_BYTES = 5 * 1024 * 1024  # S3's smallest multipart part: the most an upload holds in memory
DELETE_BATCH = 1000  # DeleteObjects takes at most this many keys
DEFAULT_REGION = "us-east-1"


def split_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix/` → ("bucket", "some/prefix")."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """The client's failures, as the gateway's own error (503 storage_unavailable)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        raise StorageUnavailable(f"file store refused {what}: {code or exc}") from exc
    except (BotoCoreError, OSError) as exc:
        raise StorageUnavailable(f"file store unreachable ({what}): {exc}") from exc


def _missing(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("404", "NoSuchKey", "NotFound") or status == 404


class S3FileStore(FileStore):
    def __init__(self, bucket: str, prefix: str, endpoint_url: str = "", region: str = "") -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url or None
        self.region = region or None
        self._client: Any = None
        self._stack: AsyncExitStack | None = None

    @classmethod
    def from_settings(cls, storage: StorageSettings) -> S3FileStore:
        bucket, prefix = split_s3_url(storage.files)
        return cls(bucket, prefix, storage.s3_endpoint_url, storage.s3_region)

    # --- connection ---------------------------------------------------------------------------

    async def open_store(self) -> None:
        if self._client is not None:
            return
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        session = get_session()
        region = self.region or session.get_config_variable("region") or DEFAULT_REGION
        config = AioConfig(
            signature_version="s3v4",
            # Self-hosted stores (SeaweedFS, MinIO...) answer on one host: path-style keys.
            s3={"addressing_style": "path" if self.endpoint_url else "auto"},
            retries={"mode": "standard", "max_attempts": 3},
        )
        stack = AsyncExitStack()
        self._client = await stack.enter_async_context(session.create_client(
            "s3", endpoint_url=self.endpoint_url, region_name=region, config=config))
        self._stack = stack

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack, self._client = None, None

    @property
    def client(self) -> Any:
        if self._client is None:
            raise StorageUnavailable("the S3 file store is not open")
        return self._client

    # --- naming -------------------------------------------------------------------------------

    def _key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def _s3(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def _key_of(self, location: str) -> str | None:
        """The key of a location inside this store's prefix, else None."""
        head = f"s3://{self.bucket}/"
        if not location.startswith(head):
            return None
        key = location[len(head):]
        if self.prefix and not key.startswith(self.prefix + "/"):
            return None
        return key

    def _relative(self, key: str) -> list[str]:
        return (key[len(self.prefix) + 1:] if self.prefix else key).split("/")

    def folder(self, user_id: str, kind: str, object_id: str) -> str:
        check_folder(user_id, kind, object_id)
        return self._s3(self._key(f"{user_id}/{kind}/{object_id}"))

    def uri(self, folder: str, name: str) -> str:
        return f"{folder}/{name}"

    def location(self, uri: str) -> str | None:
        key = self._key_of(uri)
        if key is None:
            return None
        parts = self._relative(key)
        return uri if len(parts) == 4 and object_path(parts) else None

    def _folder_key(self, folder: str) -> str:
        key = self._key_of(folder)
        if key is None or len(self._relative(key)) != 3 or not _object_folder(self._relative(key)):
            raise ValueError(f"not an object folder of this store: {folder}")
        return key

    # --- writing ------------------------------------------------------------------------------

    async def write_stream(
        self, folder: str, name: Name, chunks: AsyncIterable[bytes], limit: int
    ) -> StoredFile:
        folder_key = self._folder_key(folder)
        digest = hashlib.sha256()
        size = 0
        # The part being filled; a file-like body is sent without another copy of it.
        buffer = io.BytesIO()
        key: str | None = None
        upload_id: str | None = None
        parts: list[dict[str, Any]] = []
        final_name = ""

        def resolve() -> str:
            nonlocal key, final_name
            if key is None:
                final_name = name if isinstance(name, str) else name()
                key = f"{folder_key}/{final_name}"
            return key

        async def send_part() -> None:
            nonlocal upload_id, buffer
            with _translated("an upload"):
                if upload_id is None:
                    started = await self.client.create_multipart_upload(
                        Bucket=self.bucket, Key=resolve())
                    upload_id = started["UploadId"]
                number = len(parts) + 1
                buffer.seek(0)
                sent = await self.client.upload_part(
                    Bucket=self.bucket, Key=resolve(), UploadId=upload_id, PartNumber=number,
                    Body=buffer)
            parts.append({"ETag": sent["ETag"], "PartNumber": number})
            buffer = io.BytesIO()  # the part sent is dropped: one part in memory at a time

        try:
            async for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(f"file exceeds the limit of {limit} bytes")
                digest.update(chunk)
                buffer.write(chunk)
                if buffer.tell() >= PART_BYTES:
                    await send_part()
            if upload_id is None:
                buffer.seek(0)
                with _translated("an upload"):
                    await self.client.put_object(Bucket=self.bucket, Key=resolve(), Body=buffer)
            else:
                if buffer.tell():
                    await send_part()
                with _translated("an upload"):
                    await self.client.complete_multipart_upload(
                        Bucket=self.bucket, Key=resolve(), UploadId=upload_id,
                        MultipartUpload={"Parts": parts})
        except BaseException:
            if upload_id is not None:
                try:
                    await self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=resolve(), UploadId=upload_id)
                except Exception:  # best effort: an S3 lifecycle rule reaps the rest
                    pass
            raise
        return StoredFile(self._s3(resolve()), folder, final_name, size, digest.hexdigest())

    async def rename(self, stored: StoredFile, name: str) -> StoredFile:
        if name == stored.name:
            return stored
        source = self._key_of(stored.uri)
        target = f"{self._folder_key(stored.folder)}/{name}"
        with _translated("a rename"):
            await self.client.copy_object(
                Bucket=self.bucket, Key=target,
                CopySource={"Bucket": self.bucket, "Key": source})
            await self.client.delete_object(Bucket=self.bucket, Key=source)
        return StoredFile(self._s3(target), stored.folder, name, stored.size, stored.sha256)

    async def remove_folder(self, folder: str) -> None:
        try:
            key = self._folder_key(folder)
        except ValueError:
            return
        keys = [item["Key"] async for item in self._list(key + "/")]
        await self._delete(keys)

    async def _delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": key} for key in keys[start:start + DELETE_BATCH]]
            with _translated("a delete"):
                await self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    # --- reading ------------------------------------------------------------------------------

    async def exists(self, uri: str) -> bool:
        key = self._key_of(uri)
        if key is None:
            return False
        try:
            with _translated("a lookup"):
                await self.client.head_object(Bucket=self.bucket, Key=key)
        except StorageUnavailable as exc:
            if _missing(exc.__cause__ or exc):
                return False
            raise
        return True

    async def open(self, uri: str) -> Download | None:
        if self.location(uri) is None:
            return None
        key = self._key_of(uri)
        try:
            with _translated("a download"):
                found = await self.client.get_object(Bucket=self.bucket, Key=key)
        except StorageUnavailable as exc:
            if _missing(exc.__cause__ or exc):
                return None
            raise
        body = found["Body"]

        async def chunks() -> AsyncIterator[bytes]:
            try:
                while chunk := await body.read(READ_CHUNK_BYTES):
                    yield chunk
            finally:
                body.close()

        return Download(int(found["ContentLength"]), chunks())

    async def shared_url(self, uri: str, name: str, content_type: str, expires_s: int
                         ) -> str | None:
        key = self._key_of(uri)
        if key is None:
            raise NotFound("not a file of this store")
        params = {"Bucket": self.bucket, "Key": key, "ResponseContentType": content_type,
                  "ResponseContentDisposition": f"inline; filename*=UTF-8''{quote(name)}"}
        url: str = await self.client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=expires_s)
        return url

    async def presigned_post(self, uri: str, content_type: str, max_size: int, expires_s: int
                             ) -> tuple[str, dict[str, str]] | None:
        key = self._key_of(uri)
        if key is None or self.location(uri) is None:
            raise NotFound("not a file of this store")
        with _translated("a presigned POST"):
            signed = await self.client.generate_presigned_post(
                Bucket=self.bucket, Key=key, Fields={"Content-Type": content_type},
                Conditions=[{"Content-Type": content_type},
                            ["content-length-range", 0, max_size]],
                ExpiresIn=expires_s)
        return str(signed["url"]), {k: str(v) for k, v in signed["fields"].items()}

    async def stat(self, uri: str) -> tuple[int, str] | None:
        key = self._key_of(uri)
        if key is None:
            return None
        try:
            found = await self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _missing(exc):
                return None
            with _translated("a head request"):
                raise
        return int(found["ContentLength"]), str(found.get("ContentType") or "")

    async def probe(self) -> None:
        key = self._key(f"_doctor-probe-{secrets.token_hex(8)}")  # no user folder: gc skips it
        with _translated("a probe"):
            await self.client.put_object(Bucket=self.bucket, Key=key, Body=b"probe")
            found = await self.client.get_object(Bucket=self.bucket, Key=key)
            async with found["Body"] as body:
                if await body.read() != b"probe":
                    raise StorageUnavailable("the probe object read back differently")
            await self.client.delete_object(Bucket=self.bucket, Key=key)

    # --- gc -----------------------------------------------------------------------------------

    async def _list(self, prefix: str) -> AsyncIterator[dict[str, Any]]:
        with _translated("a listing"):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix)
            async for page in pages:
                for item in page.get("Contents", []):
                    yield item

    async def object_folders(self) -> list[Folder]:
        files: dict[str, list[Entry]] = {}
        other: set[str] = set()
        async for item in self._list(self._key("") if self.prefix else ""):
            parts = self._relative(item["Key"])
            if len(parts) < 4 or not _object_folder(parts[:3]):
                continue
            folder = self._s3(self._key("/".join(parts[:3])))
            if len(parts) > 4:
                other.add(folder)
                files.setdefault(folder, [])
                continue
            files.setdefault(folder, []).append(
                Entry(self._s3(item["Key"]), item["LastModified"].timestamp()))
        return [
            # S3 has no folders: one exists while it holds a key, as old as its newest file.
            Folder(folder, max((e.modified_s for e in entries), default=0.0), tuple(entries),
                   folder in other)
            for folder, entries in sorted(files.items())
        ]

    async def user_files(self, user_id: str) -> AsyncIterator[UserFile]:
        validate_user_id(user_id)
        async for item in self._list(self._key(f"{user_id}/")):
            parts = self._relative(item["Key"])
            if len(parts) == 4 and object_path(parts):
                uri = self._s3(item["Key"])
                yield UserFile(uri, "/".join(parts[1:]), uri.rpartition("/")[0])

    async def remove_file(self, location: str) -> None:
        key = self._key_of(location)
        if key is not None:
            await self._delete([key])


def _object_folder(parts: list[str]) -> bool:
    user_id, kind, object_id = parts
    return (USER_ID.fullmatch(user_id) is not None and kind in KINDS
            and OBJECT_ID.fullmatch(object_id) is not None)
