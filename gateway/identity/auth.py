"""Identity: API keys (`mgw_<key id>_<secret>`), user-id validation, and the request check.

Keys are random; the database keeps only SHA-256 of the secret, compared in constant time.
A verified key is kept in memory until the database's "keys" generation moves (a key revoked
or deleted by any process: gateway/store/database.py) or `auth.key_cache_ttl_s` seconds pass,
whichever comes first; so a revocation takes effect on the next request (on PostgreSQL, once the
change notification has reached the process). A TTL of 0 reads the database on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from gateway.errors import Unauthorized, ValidationFailed
from gateway.identity.principal import Principal
from gateway.store import Database, keys

USER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_KEY = re.compile(r"mgw_([0-9a-f]{16})_([A-Za-z0-9_-]{20,100})")
_CACHE_LIMIT = 10_000
_SCHEMES = ("bearer", "token")


def validate_user_id(user_id: str) -> str:
    """The id unchanged if it may become a path component; ValidationFailed otherwise."""
    if not isinstance(user_id, str) or USER_ID.fullmatch(user_id) is None:
        raise ValidationFailed(
            "user id must match [A-Za-z0-9][A-Za-z0-9._@-]{0,127}", field="user_id"
        )
    return user_id


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class NewKey:
    key_id: str
    user_id: str
    secret: str

    @property
    def token(self) -> str:
        return f"mgw_{self.key_id}_{self.secret}"


def generate_key(user_id: str) -> NewKey:
    return NewKey(secrets.token_hex(8), validate_user_id(user_id), secrets.token_urlsafe(32))


@dataclass
class _Cached:
    principal: Principal
    expires_at: float
    generation: int  # of the "keys" topic when the key was read


class Authenticator:
    def __init__(self, db: Database, cache_ttl_s: float) -> None:
        self._db = db
        self._ttl = cache_ttl_s
        self._cache: dict[str, _Cached] = {}

    async def user_for(self, authorization: str | None, api_key: str | None = None) -> str:
        """The user id of `principal_for`."""
        return (await self.principal_for(authorization, api_key)).user_id

    async def principal_for(
        self, authorization: str | None, api_key: str | None = None
    ) -> Principal:
        """Who sent `Authorization: Bearer|Token <key>` or `X-API-Key`, or Unauthorized.

        `Token` is the scheme mem0's and MemOS's clients send. Two different keys in one request
        are refused rather than one of them picked.
        """
        token = ""
        if authorization:
            scheme, _, token = authorization.strip().partition(" ")
            token = token.strip()
            if scheme.lower() not in _SCHEMES or not token:
                raise Unauthorized("expected Authorization: Bearer <key> (or Token <key>)")
        if api_key and api_key.strip():
            if token and token != api_key.strip():
                raise Unauthorized("two different API keys in one request")
            token = api_key.strip()
        if not token:
            raise Unauthorized("missing Authorization: Bearer <key> (or X-API-Key)")
        now = time.monotonic()
        generation = self._db.generation("keys")  # before the read: a revocation meanwhile counts
        cached = self._cache.get(token)
        if cached is not None and cached.expires_at > now and cached.generation == generation:
            return cached.principal
        match = _KEY.fullmatch(token)
        if match is None:
            raise Unauthorized("unknown API key")
        key_id, secret = match.groups()
        row = await keys.find(self._db, key_id)
        if row is None or row.revoked_at_ms is not None:
            self._cache.pop(token, None)
            raise Unauthorized("unknown or revoked API key")
        if not hmac.compare_digest(hash_secret(secret), row.secret_sha256):
            raise Unauthorized("unknown or revoked API key")
        principal = Principal("admin" if row.kind == "admin" else "user", row.id, row.user_id)
        if self._ttl > 0:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[token] = _Cached(principal, now + self._ttl, generation)
        return principal

    def forget(self) -> None:
        self._cache.clear()
