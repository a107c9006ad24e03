"""The identity provider's signing keys: a JWKS found by OpenID discovery or named directly.

Keys are fetched on first use and refreshed after `jwks_refresh_s`; a token naming a `kid` the
cached set lacks causes a refetch, but fetches (of any cause) are at most one per
`jwks_refetch_interval_s`, so a flood of made-up kids costs the provider one request per interval.
While the provider cannot be reached the cached keys stay in use for `jwks_outage_s` past their
refresh time. Fetches are time-limited (`fetch_timeout_s`) and size-limited
(`max_document_bytes`), follow no redirects, and accept only signing keys that are not HMAC.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from gateway.config import JwtSettings
from gateway.errors import IdentityProviderUnavailable, Unauthorized

log = logging.getLogger("gateway.identity.jwks")
DISCOVERY_PATH = "/.well-known/openid-configuration"


class FetchFailed(Exception):
    """A discovery or JWKS document could not be read; the message says why (no secrets)."""


@dataclass
class _KeySet:
    keys: dict[str, jwt.PyJWK] = field(default_factory=dict)
    fetched_at: float | None = None  # monotonic time of the last successful fetch


class Jwks:
    def __init__(self, settings: JwtSettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._transport = transport
        self._clock = clock
        self._set = _KeySet()
        self._last_attempt: float | None = None
        self._lock = asyncio.Lock()
        self._jwks_url = settings.jwks_url
        self.fetches = 0  # attempts, for tests and benchmarks

    async def key_for(self, kid: str | None) -> jwt.PyJWK:
        """The published key a token names; Unauthorized, or IdentityProviderUnavailable."""
        now = self._clock()
        if self._stale(now):
            await self._refresh(now)
        found = self._find(kid)
        if found is None and kid is not None:
            await self._refresh(now)  # an unknown kid: the provider may have rotated its keys
            found = self._find(kid)
        if found is not None:
            return found
        if not self._set.keys:
            raise IdentityProviderUnavailable("the identity provider's keys cannot be fetched")
        if kid is None:
            raise Unauthorized("JWT names no key (kid) and the provider publishes several")
        raise Unauthorized("JWT is signed by a key the identity provider does not publish")

    def _stale(self, now: float) -> bool:
        fetched = self._set.fetched_at
        return fetched is None or now - fetched >= self._settings.jwks_refresh_s

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            only = list(self._set.keys.values())
            return only[0] if len(only) == 1 else None
        return self._set.keys.get(kid)

    async def _refresh(self, now: float) -> None:
        async with self._lock:
            last = self._last_attempt
            if last is not None and self._clock() - last < self._settings.jwks_refetch_interval_s:
                self._expire(now)
                return
            self._last_attempt = self._clock()
            self.fetches += 1
            try:
                keys = await self._fetch()
            except FetchFailed as exc:
                log.warning("identity provider keys not refreshed: %s", exc)
                self._expire(now)
                return
            self._set = _KeySet(keys, self._clock())

    def _expire(self, now: float) -> None:
        """Drop the cached keys once the outage allowance past their refresh time is spent."""
        fetched = self._set.fetched_at
        limit = self._settings.jwks_refresh_s + self._settings.jwks_outage_s
        if fetched is not None and now - fetched >= limit:
            self._set = _KeySet()

    async def _fetch(self) -> dict[str, jwt.PyJWK]:
        timeout = httpx.Timeout(self._settings.fetch_timeout_s)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout,
                                     follow_redirects=False, verify=_tls()) as client:
            if not self._jwks_url:
                discovery = await self._document(client, self._settings.issuer.rstrip("/")
                                                 + DISCOVERY_PATH)
                if discovery.get("issuer") != self._settings.issuer:
                    raise FetchFailed("discovery document names another issuer")
                uri = discovery.get("jwks_uri")
                if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
                    raise FetchFailed("discovery document has no http(s) jwks_uri")
                self._jwks_url = uri
            return signing_keys(await self._document(client, self._jwks_url))

    async def _document(self, client: httpx.AsyncClient, url: str) -> Mapping[str, Any]:
        limit = self._settings.max_document_bytes
        try:
            async with asyncio.timeout(self._settings.fetch_timeout_s):
                async with client.stream("GET", url, headers={"Accept": "application/json"}) as r:
                    if r.status_code != 200:
                        raise FetchFailed(f"{url} answered {r.status_code}")
                    body = bytearray()
                    async for chunk in r.aiter_bytes():
                        body += chunk
                        if len(body) > limit:
                            raise FetchFailed(f"{url} sent more than {limit} bytes")
        except TimeoutError:
            raise FetchFailed(f"{url} did not answer within the fetch timeout") from None
        except httpx.HTTPError as exc:
            raise FetchFailed(f"{url} unreachable: {type(exc).__name__}") from None
        try:
            document = json.loads(body)
        except ValueError:
            raise FetchFailed(f"{url} sent no JSON") from None
        if not isinstance(document, dict):
            raise FetchFailed(f"{url} sent no JSON object")
        return document


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context (system CAs, verified) for every fetch: a client building its own costs
    about 100 ms, which a request meeting a rotated key would wait for."""
    return ssl.create_default_context()


def signing_keys(document: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    """A JWKS's usable signing keys by kid; HMAC (`oct`), encryption and unparsable keys left out.

    A key without a kid is kept under "" (it serves only tokens that name no kid)."""
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise FetchFailed("JWKS has no keys list")
    keys: dict[str, jwt.PyJWK] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") == "oct":
            continue
        if entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError, TypeError, ValueError):
            continue
        kid = entry.get("kid", "")
        keys[kid if isinstance(kid, str) else ""] = key
    return keys
