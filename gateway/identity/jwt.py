"""JWTs from the product's identity provider (`[auth.jwt]`, SPEC §17): verified into a Principal.

PyJWT checks the signature and the registered claims (`exp` required, `nbf`, `iat`, `aud`, `iss`,
with `leeway_s`); the key comes from the provider's JWKS (gateway/identity/jwks.py), a static
PEM public key or an HS256 secret, and the header's `alg` must be on the allowlist and match the
key. A verified token is remembered by its SHA-256 for `token_cache_s`, never past its `exp`.
Every refusal is a 401 whose message names the failed check and nothing of the token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from gateway.config import ConfigError, JwtSettings, jwt_algorithms
from gateway.errors import Unauthorized
from gateway.identity.jwks import Jwks
from gateway.identity.principal import READ, WRITE, Principal
from gateway.identity.subjects import encode_subject, is_user_id

_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_CACHE_LIMIT = 10_000
SCOPE_OF = {"memory:read": READ, "memory:write": WRITE}

# Most specific first: each PyJWT failure and the sentence a client sees for it.
_REFUSALS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "JWT has expired"),
    (jwt.ImmatureSignatureError, "JWT is not valid yet (nbf or iat in the future)"),
    (jwt.InvalidAudienceError, "JWT is not meant for this gateway (aud)"),
    (jwt.InvalidIssuerError, "JWT comes from another issuer (iss)"),
    (jwt.InvalidSignatureError, "JWT signature does not verify"),
    (jwt.InvalidAlgorithmError, "JWT algorithm is not allowed for this key"),
    (jwt.InvalidKeyError, "JWT algorithm is not allowed for this key"),
)


@dataclass(frozen=True)
class _Verified:
    principal: Principal
    until: float  # monotonic


class JwtVerifier:
    def __init__(self, settings: JwtSettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        self._settings = settings
        self._algorithms = jwt_algorithms(settings)
        self._clock = clock
        self._wall_clock = wall_clock
        self._static: Any = None
        self.jwks: Jwks | None = None
        if settings.secret:
            self._static = settings.secret.encode()
        elif settings.public_key:
            try:
                self._static = load_pem_public_key(settings.public_key.encode())
            except (ValueError, TypeError, UnsupportedAlgorithm):
                raise ConfigError("auth.jwt.public_key: not a PEM public key") from None
        else:
            self.jwks = Jwks(settings, transport=transport, clock=clock)
        self._cache: dict[bytes, _Verified] = {}

    async def verify(self, token: str, audience: str | None = None) -> Principal:
        """The Principal a valid token names, or Unauthorized (IdentityProviderUnavailable when the
        provider's keys cannot be had at all). `audience` replaces `auth.jwt.audience` as the
        `aud` the token must carry (the MCP endpoint's, SPEC §19)."""
        if len(token) > self._settings.max_token_bytes:
            raise Unauthorized(f"JWT longer than {self._settings.max_token_bytes} bytes")
        audience = self._settings.audience if audience is None else audience
        digest = hashlib.sha256(token.encode() + b"\n" + audience.encode()).digest()
        now = self._clock()
        cached = self._cache.get(digest)  # only verified tokens are there
        if cached is not None:
            if cached.until > now:
                return cached.principal
            del self._cache[digest]
        if _SHAPE.fullmatch(token) is None:
            raise Unauthorized("malformed JWT")
        header = _header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise Unauthorized("JWT algorithm is not allowed")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise Unauthorized("malformed JWT")
        key = self._static if self.jwks is None else await self.jwks.key_for(kid)
        claims = self._decode(token, key, audience)
        principal = self._principal(claims)
        remaining = float(claims["exp"]) - self._wall_clock()
        ttl = min(self._settings.token_cache_s, remaining)
        if ttl > 0:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[digest] = _Verified(principal, now + ttl)
        return principal

    def _decode(self, token: str, key: Any, audience: str) -> dict[str, Any]:
        settings = self._settings
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=self._algorithms, audience=audience,
                issuer=settings.issuer or None, leeway=settings.leeway_s,
                options={"require": ["exp"], "verify_signature": True},
            )
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthorized(f"JWT lacks the {exc.claim} claim") from None
        except jwt.PyJWTError as exc:
            for failure, message in _REFUSALS:
                if isinstance(exc, failure):
                    raise Unauthorized(message) from None
            raise Unauthorized("malformed JWT") from None
        except (TypeError, ValueError):  # a static key of another type than the header's alg
            raise Unauthorized("JWT algorithm is not allowed for this key") from None
        if not isinstance(claims.get("exp"), int | float):
            raise Unauthorized("JWT exp is not a number")
        return claims

    def _principal(self, claims: dict[str, Any]) -> Principal:
        settings = self._settings
        subject = claims.get(settings.user_claim)
        if not isinstance(subject, str) or not subject:
            raise Unauthorized(f"JWT has no {settings.user_claim} naming a user")
        if settings.user_id_map == "encode":
            user_id = encode_subject(subject)
        elif is_user_id(subject):
            user_id = subject
        else:
            raise Unauthorized(f"JWT {settings.user_claim} is not a valid user id "
                               "(auth.jwt.user_id_map = strict)")
        issuer = claims.get("iss") if isinstance(claims.get("iss"), str) else settings.issuer
        return Principal("jwt", credential_id(str(issuer or ""), subject), user_id,
                         token_scopes(claims, settings.scopes_claim))

    def forget(self) -> None:
        self._cache.clear()


def _header(token: str) -> dict[str, Any]:
    """The header, read only to pick the key (PyJWT checks it again against that key).

    Read here rather than by PyJWT, which would decode and scan all three segments twice."""
    segment = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        raise Unauthorized("malformed JWT") from None
    if not isinstance(header, dict):
        raise Unauthorized("malformed JWT")
    return header


def credential_id(issuer: str, subject: str) -> str:
    """One id per (issuer, subject): what rate limits and logs key a JWT caller on."""
    return "jwt:" + hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:32]


def token_scopes(claims: dict[str, Any], claim: str) -> frozenset[str]:
    """read for memory:read, write for memory:write; both when the token carries no such claim."""
    if claim not in claims:
        return frozenset({READ, WRITE})
    value = claims[claim]
    if isinstance(value, str):
        names = value.split()
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        names = value
    else:
        raise Unauthorized(f"JWT {claim} claim is neither a string nor a list of strings")
    return frozenset(SCOPE_OF[name] for name in names if name in SCOPE_OF)

