"""Which attachment URIs an add may carry (SPEC §8): a local engine reads `file://` from disk.

A `file://` URI must point inside the caller's own storage folder (`{storage.root}/{user_id}/`,
their uploads and inline attachments), after resolving `..` and symbolic links; other users'
files, the gateway's database and the rest of the disk → 422 `uri_not_allowed`. Remote schemes
the engine fetches over the network (`http`, `https`, `s3`) and the gateway's own `resource://`
pass; any other scheme, and a bare path, may reach the disk and is refused too. With files on S3
(`storage.files = "s3://bucket/prefix"`), an `s3://` URI anywhere in the gateway's own bucket
is held to the same rule: only the caller's own `{prefix}/{user_id}/…` objects. Pure, but for
resolving the path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from gateway.attachments.add_body import AttachmentItem
from gateway.config import StorageSettings
from gateway.errors import UriNotAllowed

REMOTE_SCHEMES = frozenset({"http", "https", "s3", "resource"})


def uri_allowed(uri: str, user_id: str, storage: StorageSettings) -> bool:
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    if scheme == "s3" and storage.files:
        owned = _own_object(parts.netloc, parts.path, user_id, storage.files)
        if owned is not None:
            return owned
    if scheme in REMOTE_SCHEMES:
        return bool(parts.netloc)
    if scheme != "file" or parts.netloc not in ("", "localhost"):
        return False
    path = unquote(parts.path)
    if "\x00" in path or not path.startswith("/"):
        return False
    own = os.path.realpath(os.path.join(storage.root, user_id))
    return os.path.realpath(path).startswith(own + os.sep)


def _own_object(bucket: str, path: str, user_id: str, files: str) -> bool | None:
    """None when `s3://bucket/path` is in another bucket than the gateway's file store (`files`,
    an `s3://bucket/prefix` URL); else whether it is one of `user_id`'s objects in it."""
    store_bucket, _, prefix = files.removeprefix("s3://").partition("/")
    if bucket.lower() != store_bucket.lower():
        return None
    # Within the gateway's bucket nothing but the caller's own objects: another spelling of the
    # prefix (`./prefix`, `prefix//`) may name the same key to a server that normalises paths.
    segments = [unquote(segment) for segment in path.split("/")[1:]]
    for segment in prefix.strip("/").split("/") if prefix.strip("/") else []:
        if not segments or segments[0] != segment:
            return False
        segments = segments[1:]
    return (len(segments) > 1 and segments[0] == user_id
            and all(segment not in ("", ".", "..") and "\x00" not in segment
                    for segment in segments))


def check_uris(items: Iterable[AttachmentItem], user_id: str, storage: StorageSettings) -> None:
    """UriNotAllowed naming the first item whose URI the caller may not hand the engine."""
    for item in items:
        if item.uri is not None and not uri_allowed(item.uri, user_id, storage):
            raise UriNotAllowed(
                "attachment URIs must be http(s), s3, resource:// or file:// inside your own "
                "storage", field=item.field)
