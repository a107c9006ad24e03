"""Which attachment URIs an add may carry (SPEC §8): a local engine reads `file://` from disk.

A `file://` URI must point inside the caller's own storage folder (`{storage.root}/{user_id}/`,
their uploads and inline attachments), after decoding, resolving `..` and symbolic links, as the
engine reads it; other users' files, the gateway's database and the rest of the disk → 422
`uri_not_allowed`. Remote schemes the engine fetches over the network (`http`, `https`, `s3`)
pass here (fetch_guard.py holds `http(s)` hosts to public ones), and so does the gateway's own
`resource://{id}`; any other scheme, and a bare path, may reach the disk and is refused too.
With files on S3 (`storage.files = "s3://bucket/prefix"`), an `s3://` URI anywhere in the
gateway's own bucket is held to the same rule: only the caller's own `{prefix}/{user_id}/…`
objects, judged on the key as decoded, with any spelling that could read as another key
refused. Pure, but for resolving the path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from gateway.attachments.add_body import AttachmentItem
from gateway.config import StorageSettings
from gateway.errors import UriNotAllowed

REMOTE_SCHEMES = frozenset({"http", "https", "s3"})
_RESOURCE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
# Escapes a reader may or may not decode into a separator or NUL, and the same escapes (or a
# dot) still there after one decoding, for a reader that decodes twice. The gateway's own URIs
# hold none: safe names have no `/` or `\`.
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c|00)", re.IGNORECASE)
_STILL_ENCODED = re.compile(r"%(2f|5c|2e|00)", re.IGNORECASE)


def uri_allowed(uri: str, user_id: str, storage: StorageSettings) -> bool:
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    if scheme == "s3":
        if not _BUCKET.fullmatch(parts.netloc):
            return False  # userinfo, a port or escapes: another reader may see another bucket
        if storage.files:
            owned = _own_object(parts.netloc, parts.path, user_id, storage.files)
            if owned is not None:
                return owned
        return True
    if scheme in REMOTE_SCHEMES:
        return bool(parts.netloc)
    if scheme == "resource":
        # An opaque id the gateway issued; nothing reads a path, query or escape in it.
        return (_RESOURCE_ID.fullmatch(parts.netloc) is not None
                and parts.path in ("", "/") and not parts.query and not parts.fragment)
    if scheme != "file" or parts.netloc not in ("", "localhost"):
        return False
    # EverOS reads the path only (urlparse, then url2pathname); a reader that takes everything
    # after `file://` as the path would read `x.png?/../../alice/…` elsewhere. The gateway's own
    # file URIs never hold a `?` or `#` (they are escaped).
    if "?" in uri or "#" in uri:
        return False
    path = decoded_path(parts.path)
    if path is None or not path.startswith("/"):
        return False
    own = os.path.realpath(os.path.join(storage.root, user_id))
    return os.path.realpath(path).startswith(own + os.sep)


def decoded_path(path: str) -> str | None:
    """A URI's path decoded once, whole, as the engine reads it; None when a reader that
    decodes it never, or twice, or takes `\\` for `/`, could see other segments: an encoded
    `/`, `\\` or NUL, a backslash or NUL, an encoded separator or dot left after decoding
    (`%252F`, `%252e`)."""
    if _ENCODED_SEPARATOR.search(path):
        return None
    decoded = unquote(path)
    if "\\" in decoded or "\x00" in decoded or _STILL_ENCODED.search(decoded):
        return None
    return decoded


def object_key(path: str) -> list[str] | None:
    """The segments of an `s3://` URI's key (its path decoded first), or None when a reader
    could take it for another key: `decoded_path`'s refusals, an empty, `.` or `..` segment
    (a store or a proxy may normalise them)."""
    key = decoded_path(path)
    if key is None:
        return None
    segments = key.split("/")[1:]
    if not segments or any(segment in ("", ".", "..") for segment in segments):
        return None
    return segments


def _own_object(bucket: str, path: str, user_id: str, files: str) -> bool | None:
    """None when `s3://bucket/path` is in another bucket than the gateway's file store (`files`,
    an `s3://bucket/prefix` URL); else whether it is one of `user_id`'s objects in it."""
    store_bucket, _, prefix = files.removeprefix("s3://").partition("/")
    if bucket.lower() != store_bucket.lower():
        return None
    # Within the gateway's bucket nothing but the caller's own objects: another spelling of the
    # prefix (`./prefix`, `prefix//`) may name the same key to a server that normalises paths,
    # and the key is judged whole, decoded first, so `bob/x%2F..%2F..%2Falice` is not bob's.
    segments = object_key(path)
    if segments is None:
        return False
    for segment in prefix.strip("/").split("/") if prefix.strip("/") else []:
        if not segments or segments[0] != segment:
            return False
        segments = segments[1:]
    return len(segments) > 1 and segments[0] == user_id


def check_uris(items: Iterable[AttachmentItem], user_id: str, storage: StorageSettings) -> None:
    """UriNotAllowed naming the first item whose URI the caller may not hand the engine."""
    for item in items:
        if item.uri is not None and not uri_allowed(item.uri, user_id, storage):
            raise UriNotAllowed(
                "attachment URIs must be http(s), s3, resource:// or file:// inside your own "
                "storage", field=item.field)
