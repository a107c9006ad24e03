"""A request target read once, the way the engine will read it (SPEC §5). Pure.

Origin-form only (`/path?query`): `*`, `*@host/...`, absolute URLs → 400. The path is what a
Starlette/uvicorn engine routes on (percent-decoded), with empty segments dropped and no `.` or
`..` segment, so `/api/v2//memory/%61dd/` is `/api/v2/memory/add` for interception and routing
alike. Queries are percent-decoded with every value of a repeated name kept.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode

from gateway.errors import BadRequest

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(slots=True, frozen=True)
class Target:
    """A parsed target; shared by every request with the same one (never to be changed)."""

    path: str  # normalised: "/" + the segments joined by "/"
    segments: tuple[str, ...]
    query: dict[str, list[str]]
    pairs: list[tuple[str, str]]

    def upstream_query(self, keep: Container[str] | None = None) -> str:
        """The query as checked, re-encoded: the engine decodes exactly these pairs (only the
        names in `keep`, when given: what the route's engine reads)."""
        pairs = self.pairs if keep is None else [pair for pair in self.pairs if pair[0] in keep]
        return urlencode(pairs, quote_via=quote) if pairs else ""


# Recent targets: clients call a few paths over and over, and a Target is never changed once
# made, so the one made for the same three values is the answer (cleared when full).
_RECENT: dict[tuple[str, bytes | None, bytes], Target] = {}
_RECENT_LIMIT = 1024


def parse_target(path: str, raw_path: bytes | None, query_string: bytes) -> Target:
    """`scope["path"]` (decoded), `scope["raw_path"]` and `scope["query_string"]` → Target."""
    key = (path, raw_path, query_string)
    found = _RECENT.get(key)
    if found is None:
        found = _parse(path, raw_path, query_string)
        if len(_RECENT) >= _RECENT_LIMIT:
            _RECENT.clear()
        _RECENT[key] = found
    return found


def _parse(path: str, raw_path: bytes | None, query_string: bytes) -> Target:
    if not path.startswith("/") or (raw_path is not None and not raw_path.startswith(b"/")):
        raise BadRequest("the request target must be a path (origin-form: /path?query)",
                         field="target")
    if not path.isprintable() and _CONTROL.search(path):
        raise BadRequest("control characters in the request path", field="target")
    segments = tuple([part for part in path.split("/") if part])
    if "." in path and any(part in (".", "..") for part in segments):
        raise BadRequest("dot segments ('.', '..') are not allowed in the request path",
                         field="target")
    query: dict[str, list[str]] = {}
    pairs: list[tuple[str, str]] = []
    if query_string:
        try:
            text = query_string.decode("ascii")
        except UnicodeDecodeError:
            raise BadRequest("the query string must be ASCII (percent-encode the rest)",
                             field="query") from None
        try:
            pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=False,
                              encoding="utf-8", errors="strict")
        except UnicodeDecodeError:
            raise BadRequest("the query string must be UTF-8 once decoded", field="query") from None
        for key, value in pairs:
            query.setdefault(key, []).append(value)
    plain = "//" not in path and (len(path) == 1 or not path.endswith("/"))
    return Target(path if plain else "/" + "/".join(segments), segments, query, pairs)
