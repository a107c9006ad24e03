"""Identity: API keys (`mgw_<key id>_<secret>`), user-id validation, and the request check.

Keys are random; the database keeps only SHA-256 of the secret, compared in constant time.
A key's row says its kind (user, service, admin), scopes and expiry: the Principal made of it
carries them (gateway/identity/principal.py). A key's last use is noted in memory and written
in batches (`flush_usage`, every `auth.last_used_interval_s`), never on the request path.
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
from typing import TYPE_CHECKING

from gateway.errors import Unauthorized, ValidationFailed
from gateway.identity.principal import Principal
from gateway.store import Database, keys

if TYPE_CHECKING:
    from gateway.identity.jwt import JwtVerifier

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
    expires_at: float  # monotonic: the cache TTL
    generation: int  # of the "keys" topic when the key was read
    key_expires_at_ms: int | None  # wall clock: the key's own expiry


def principal_of(row: keys.ApiKey) -> Principal:
    """What a stored key authenticates as; a service key acts for no one until told."""
    scopes = frozenset(row.scopes)
    if row.kind == "service":
        return Principal("service", row.id, "", scopes, row.users_glob)
    if row.kind == "admin":
        return Principal("admin", row.id, row.user_id, scopes)
    return Principal("user", row.id, row.user_id, scopes)


class Authenticator:
    def __init__(self, db: Database, cache_ttl_s: float, jwt: JwtVerifier | None = None) -> None:
        self._db = db
        self._jwt = jwt
        self._ttl = cache_ttl_s
        self._cache: dict[str, _Cached] = {}
        self._used: dict[str, int] = {}  # key id -> last use (ms), not yet written

    async def user_for(self, authorization: str | None, api_key: str | None = None) -> str:
        """The user id of `principal_for`."""
        return (await self.principal_for(authorization, api_key)).user_id

    async def principal_for(
        self, authorization: str | None, api_key: str | None = None,
        jwt_audience: str | None = None,
    ) -> Principal:
        """Who sent `Authorization: Bearer|Token <key>` or `X-API-Key`, or Unauthorized.

        `Token` is the scheme mem0's and MemOS's clients send. Two different keys in one request
        are refused rather than one of them picked. `jwt_audience` replaces `auth.jwt.audience`
        for a JWT ("" = no JWT is accepted here: the MCP endpoint without an audience).
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
            if cached.key_expires_at_ms is None or cached.key_expires_at_ms > _now_ms():
                self._used[cached.principal.credential_id] = _now_ms()
                return cached.principal
            self._cache.pop(token, None)
        match = _KEY.fullmatch(token)
        if match is None:
            if self._jwt is not None and token.count(".") == 2:  # shaped like a JWT
                if jwt_audience == "":
                    raise Unauthorized("JWTs are not accepted here: set mcp.jwt_audience or "
                                       "server.public_url")
                return await self._jwt.verify(token, jwt_audience)
            raise Unauthorized("unknown API key")
        key_id, secret = match.groups()
        row = await keys.find_now(self._db, key_id)
        if row is None or row.revoked_at_ms is not None:
            self._cache.pop(token, None)
            raise Unauthorized("unknown or revoked API key")
        if not hmac.compare_digest(hash_secret(secret), row.secret_sha256):
            raise Unauthorized("unknown or revoked API key")
        if row.expired(_now_ms()):
            raise Unauthorized("expired API key")
        principal = principal_of(row)
        if self._ttl > 0:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[token] = _Cached(principal, now + self._ttl, generation,
                                         row.expires_at_ms)
        self._used[row.id] = _now_ms()
        return principal

    def forget(self) -> None:
        self._cache.clear()

    async def flush_usage(self) -> None:
        """Write the last-used times noted since the previous flush (one transaction)."""
        used, self._used = self._used, {}
        try:
            await keys.touch(self._db, used)
        except Exception:
            for key_id, at_ms in used.items():  # kept for the next flush
                self._used[key_id] = max(at_ms, self._used.get(key_id, 0))
            raise


def _now_ms() -> int:
    return int(time.time() * 1000)
