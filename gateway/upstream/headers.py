"""Which headers cross the gateway (SPEC §5): to the engine, and back to the client.

One policy for the pass-through proxy and the owned routes that call the engine.
"""

from __future__ import annotations

from functools import lru_cache

from starlette.types import Scope

from gateway import tracing
from gateway.config import Settings

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
# Request headers the gateway replaces rather than forwards.
_REPLACED = frozenset(
    {b"authorization", b"host", b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"}
)
_NOT_FORWARDED = HOP_BY_HOP | _REPLACED | {b"x-request-id"}


def _connection_named(headers: list[tuple[bytes, bytes]]) -> set[bytes]:
    named: set[bytes] = set()
    for key, value in headers:
        if key.lower() == b"connection":
            named.update(token.strip().lower() for token in value.split(b","))
    return named


@lru_cache(maxsize=8)
def _not_taken(user_header: str, configured: tuple[str, ...]) -> frozenset[bytes]:
    """Header names never taken from the client: hop-by-hop ones, those the gateway replaces,
    and ours in every spelling (case, `_` for `-`)."""
    names = {user_header, *configured, "authorization", "x-api-key", "x-memory-gateway-user"}
    return _NOT_FORWARDED | {name.lower().replace("_", "-").encode() for name in names}


# The client's forwarded headers by the headers it sent (a client sends the same few sets
# again and again); bounded, cleared when full. Values as sent: `_passed` is pure.
_PASSED: dict[tuple[tuple[tuple[bytes, bytes], ...], frozenset[bytes]],
              tuple[list[tuple[str, str]], str]] = {}
_PASSED_LIMIT = 512


def _passed(raw: tuple[tuple[bytes, bytes], ...], dropped: frozenset[bytes]
            ) -> tuple[list[tuple[str, str]], str]:
    """The client's headers that are forwarded, decoded, and the Host it named."""
    out: list[tuple[str, str]] = []
    host = ""
    named: set[bytes] | None = None
    for key, value in raw:
        if b"_" in key:
            key = key.replace(b"_", b"-")  # WSGI engines read `X_User` as `X-User`
        if key in dropped:
            if key == b"host":
                host = value.decode("latin-1")
            elif key == b"connection":
                named = _connection_named(list(raw))
            continue
        out.append((key.decode("latin-1"), value.decode("latin-1")))
    if named:  # the headers `Connection` names are hop-by-hop too
        out = [(key, value) for key, value in out if key.encode("latin-1") not in named]
    return out, host


def upstream_headers(
    scope: Scope, settings: Settings, user_id: str, request_id: str
) -> list[tuple[str, str]]:
    """The client's headers minus hop-by-hop, credentials and ours, plus ours (SPEC §5)."""
    upstream = settings.upstream
    dropped = _not_taken(upstream.user_header, tuple(upstream.headers))
    key = (tuple(scope["headers"]), dropped)
    found = _PASSED.get(key)
    if found is None:
        found = _passed(*key)
        if len(_PASSED) >= _PASSED_LIMIT:
            _PASSED.clear()
        _PASSED[key] = found
    passed, host = found
    out = list(passed)
    client = scope.get("client")
    if client:
        out.append(("X-Forwarded-For", client[0]))
    out.append(("X-Forwarded-Proto", scope.get("scheme", "http")))
    if host:
        out.append(("X-Forwarded-Host", host))
    out.append((upstream.user_header, user_id))
    out.append(("X-Request-Id", request_id))
    out.extend(upstream.headers.items())
    return tracing.engine_headers(out)  # the continued traceparent, when tracing is on


def response_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An upstream answer's headers minus hop-by-hop ones (and those Connection names)."""
    kept = []
    for key, value in headers:
        key = key.lower()
        if key in HOP_BY_HOP:
            if key == b"connection":  # rare: the headers it names are hop-by-hop too
                dropped = HOP_BY_HOP | _connection_named(headers)
                return [(key, value) for key, value in ((k.lower(), v) for k, v in headers)
                        if key not in dropped]
            continue
        kept.append((key, value))
    return kept
