"""Which attachment URIs an add may carry (SPEC §8): a local engine reads `file://` from disk.

A `file://` URI must point inside the caller's own storage folder (`{storage.root}/{user_id}/`,
their uploads and inline attachments), after resolving `..` and symbolic links; other users'
files, the gateway's database and the rest of the disk → 422 `uri_not_allowed`. Remote schemes
the engine fetches over the network (`http`, `https`, `s3`) and the gateway's own `resource://`
pass; any other scheme, and a bare path, may reach the disk and is refused too. Pure, but for
resolving the path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from gateway.attachments.add_body import AttachmentItem
from gateway.errors import UriNotAllowed

REMOTE_SCHEMES = frozenset({"http", "https", "s3", "resource"})


def uri_allowed(uri: str, user_id: str, storage_root: str) -> bool:
    parts = urlsplit(uri.strip())
    scheme = parts.scheme.lower()
    if scheme in REMOTE_SCHEMES:
        return bool(parts.netloc)
    if scheme != "file" or parts.netloc not in ("", "localhost"):
        return False
    path = unquote(parts.path)
    if "\x00" in path or not path.startswith("/"):
        return False
    own = os.path.realpath(os.path.join(storage_root, user_id))
    return os.path.realpath(path).startswith(own + os.sep)


def check_uris(items: Iterable[AttachmentItem], user_id: str, storage_root: str) -> None:
    """UriNotAllowed naming the first item whose URI the caller may not hand the engine."""
    for item in items:
        if item.uri is not None and not uri_allowed(item.uri, user_id, storage_root):
            raise UriNotAllowed(
                "attachment URIs must be http(s), s3, resource:// or file:// inside your own "
                "storage", field=item.field)
