"""Where upstream requests go: the configured origin, parsed once, and origin-form targets only.

An upstream URL is never a string join of `upstream.base_url` and a request target (`*@host:80/x`
joined onto `http://engine` turns the engine's host into userinfo and connects elsewhere). Both
clients connect to the origin's own host and port and send `prefix + target` on the request line,
where `target` has passed `origin_form`: a normalised absolute path with an optional query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.errors import BadRequest

# The path in RFC 3986 characters (pchar and "/"); the query in any visible ASCII but "#"
# (browsers send `[]{}|^` unescaped there, and nothing in a query can move the authority).
# "%" must start a %XX escape, checked apart so that the common case stays a single scan.
_ORIGIN_FORM = re.compile(r"/(?!/)[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*(?:\?[!-\"$-~]*)?")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
# A "." or ".." segment, also percent-encoded: servers resolve them, so a check on the spelled
# path would not be a check on the path served.
_DOT_SEGMENT = re.compile(r"/(?:\.|%2e){1,2}(?:/|$)", re.IGNORECASE)


def is_origin_form(target: str) -> bool:
    """Whether `target` is a normalised origin-form request target (`/path?query`).

    Not: anything that does not start with exactly one `/` (`*`, `*@host/…`, `//host/…`,
    `http://…`), dot segments, characters outside RFC 3986 in the path, fragments, spaces,
    controls, non-ASCII, or a `%` that does not start an escape.
    """
    path = target.partition("?")[0]
    return not (
        _ORIGIN_FORM.fullmatch(target) is None
        or ("%" in target and _BAD_ESCAPE.search(target) is not None)
        or (("." in path or "%" in path) and _DOT_SEGMENT.search(path) is not None)
    )


def origin_form(target: str) -> str:
    """`target` when `is_origin_form(target)`, else 400 `invalid_request_target`."""
    if not is_origin_form(target):
        raise BadRequest(
            "the request target must be an origin-form path (/path?query)",
            code="invalid_request_target",
        )
    return target


@dataclass(frozen=True)
class UpstreamOrigin:
    """`upstream.base_url` taken apart once: whom to connect to, and the path prefix to keep."""

    scheme: str
    host: str  # to connect to (an IPv6 address without brackets)
    port: int
    authority: str  # the Host header: host[:port] as configured
    prefix: str  # base_url's path without its trailing "/", often ""

    @classmethod
    def parse(cls, base_url: str) -> UpstreamOrigin:
        """The origin of an `http(s)://host[:port][/prefix]` URL; ValueError for anything else."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"expected an http(s) URL, got {base_url!r}")
        if "@" in parts.netloc:
            raise ValueError("must not carry user information (user:password@)")
        if parts.query or parts.fragment or "?" in base_url or "#" in base_url:
            raise ValueError("must not carry a query or a fragment")
        if not parts.hostname:
            raise ValueError(f"names no host: {base_url!r}")
        port = parts.port  # ValueError when out of range or not a number
        prefix = parts.path.rstrip("/")
        if prefix and not is_origin_form(prefix):
            raise ValueError(f"path {parts.path!r} is not a plain absolute path")
        default = 443 if parts.scheme == "https" else 80
        return cls(parts.scheme, parts.hostname, port or default, parts.netloc, prefix)

    def target(self, target: str) -> str:
        """The request line's target for an origin-form `target` (400 for anything else)."""
        return self.prefix + origin_form(target)
