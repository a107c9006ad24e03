"""JWTs from the identity provider (SPEC §17): a real OpenID provider's tokens in, forgeries out.

The provider is oidc-provider on node (tests/oidc_server.py), found by OpenID discovery; every
forged token is refused with 401 in the one error shape and nothing reaches the engine.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import jwt
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.errors import Unauthorized
from gateway.identity.jwt import JwtVerifier, credential_id
from gateway.identity.principal import READ, WRITE
from gateway.store.database import migrate
from tests.conftest import client_for, create_key, jwt_values
from tests.oidc_server import OidcProvider
from tests.processes import free_port


def b64(value: bytes | dict[str, Any]) -> str:
    raw = json.dumps(value).encode() if isinstance(value, dict) else value
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def own_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def current_kid(oidc: OidcProvider) -> str:
    return str(oidc.jwks()["keys"][0]["kid"])


@asynccontextmanager
async def jwt_gateway(settings: Settings, engine: respx.MockRouter, oidc: OidcProvider,
                      **jwt_keys: Any) -> AsyncIterator[Gateway]:
    migrate(settings.storage.database)
    engine.get("/health").mock(return_value=httpx.Response(200, json={"status": "ok"}))
    app = create_app(settings.with_values(auth_jwt=jwt_values(oidc, **jwt_keys)),
                     upstream_transport=httpx.MockTransport(engine.async_handler))
    async with app.running():
        yield app


async def as_user(app: Gateway, engine: respx.MockRouter, token: str) -> str:
    """The user id the engine is told a request with `token` comes from (asserts 200)."""
    async with client_for(app, token) as client:
        answer = await client.get("/health")
    assert answer.status_code == 200, answer.text
    return str(engine.routes[0].calls.last.request.headers["x-memory-user-id"])


async def refused(app: Gateway, engine: respx.MockRouter, token: str) -> str:
    """The message of the 401 a request with `token` gets; asserts nothing was forwarded."""
    before = engine.routes[0].call_count
    async with client_for(app, token) as client:
        answer = await client.get("/health")
    assert answer.status_code == 401, answer.text
    error = answer.json()["error"]
    assert error["code"] == "unauthorized" and error["status"] == 401
    assert engine.routes[0].call_count == before
    return str(error["message"])


async def test_provider_token_for_bob_reaches_the_engine_as_bob(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    async with jwt_gateway(settings, engine, oidc) as app:
        assert await as_user(app, engine, oidc.mint("bob")) == "bob"
        assert await as_user(app, engine, oidc.mint("alice@example.com")) == "alice@example.com"


async def test_token_endpoint_client_credentials_token_authenticates_its_client(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    async with jwt_gateway(settings, engine, oidc) as app:
        token = oidc.client_credentials("memory:read")
        assert await as_user(app, engine, token) == "svc-reporter"


async def test_api_keys_keep_working_beside_jwts(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    async with jwt_gateway(settings, engine, oidc) as app:
        assert await as_user(app, engine, create_key(settings, "carol")) == "carol"


@pytest.mark.parametrize(("scope", "expected"), [
    ("memory:read", {READ}),
    ("memory:write", {WRITE}),
    ("memory:read memory:write", {READ, WRITE}),
    ("openid profile", set()),
    (["memory:write", "memory:read"], {READ, WRITE}),
    (None, {READ, WRITE}),  # no scope claim at all: both
])
async def test_scope_claim_gives_read_and_write(
    oidc: OidcProvider, scope: str | list[str] | None, expected: set[str]
) -> None:
    verifier = JwtVerifier(Settings().with_values(auth_jwt=jwt_values(oidc)).auth_jwt)
    claims = oidc.claims("bob", scope=scope)  # None drops the claim
    principal = await verifier.verify(oidc.sign(claims))
    assert principal.kind == "jwt" and principal.user_id == "bob"
    assert principal.scopes == frozenset(expected)


async def test_minted_scopes_and_credential_id(oidc: OidcProvider) -> None:
    verifier = JwtVerifier(Settings().with_values(auth_jwt=jwt_values(oidc)).auth_jwt)
    reader = await verifier.verify(oidc.mint("bob", scope="memory:read"))
    assert reader.scopes == {READ}
    again = await verifier.verify(oidc.mint("bob"))
    other = await verifier.verify(oidc.mint("alice"))
    assert reader.credential_id == again.credential_id == credential_id(oidc.issuer, "bob")
    assert reader.credential_id.startswith("jwt:") and other.credential_id != again.credential_id


async def test_scope_claim_of_another_type_is_refused(oidc: OidcProvider) -> None:
    verifier = JwtVerifier(Settings().with_values(auth_jwt=jwt_values(oidc)).auth_jwt)
    with pytest.raises(Unauthorized, match="scope claim"):
        await verifier.verify(oidc.sign(oidc.claims("bob", scope=7)))


def forgeries(oidc: OidcProvider) -> dict[str, tuple[str, str]]:
    """Each forged token and a word its 401 message must hold."""
    now = int(time.time())
    kid = current_kid(oidc)
    good = oidc.claims("bob")
    stranger = own_key()
    public_pem = jwt.PyJWK(oidc.jwks()["keys"][0]).key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    head = {"alg": "HS256", "typ": "JWT", "kid": kid}
    signing_input = f"{b64(head)}.{b64(good)}"
    hs256_with_public_key = signing_input + "." + b64(
        hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())
    return {
        "wrong signature": (jwt.encode(good, stranger, "RS256", headers={"kid": kid}),
                            "signature"),
        "tampered claims": (_swap_claims(oidc.mint("bob"), oidc.claims("alice")), "signature"),
        "expired": (oidc.sign(oidc.claims("bob", iat=now - 7200, exp=now - 3600)), "expired"),
        "not yet valid": (oidc.sign(oidc.claims("bob", nbf=now + 3600)), "not valid yet"),
        "wrong audience": (oidc.sign(oidc.claims("bob", aud="https://other.example")), "aud"),
        "wrong issuer": (oidc.sign(oidc.claims("bob", iss="https://evil.example")), "iss"),
        "alg none": (f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(good)}.", "algorithm"),
        "HS256 with the public key as secret": (hs256_with_public_key, "algorithm"),
        "unknown kid": (jwt.encode(good, stranger, "RS256", headers={"kid": "made-up"}),
                        "does not publish"),
        "missing exp": (oidc.sign(oidc.claims("bob", exp=None)), "exp"),
        "sub not a user id": (oidc.sign(oidc.claims("auth0|abc")), "not a valid user id"),
        "no sub": (oidc.sign(oidc.claims("bob", sub=None)), "sub"),
        "oversized header": (oidc.sign(good, x5u="x" * 9000), "longer than"),
        "oversized claims": (oidc.sign({**good, "pad": "y" * 9000}), "longer than"),
        "not a JWT at all": ("abc.def.ghi", "malformed"),
    }


def _swap_claims(token: str, claims: dict[str, Any]) -> str:
    header, _, signature = token.split(".")
    return f"{header}.{b64(claims)}.{signature}"


async def test_forged_tokens_are_each_refused_with_401(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    async with jwt_gateway(settings, engine, oidc) as app:
        assert await as_user(app, engine, oidc.mint("bob")) == "bob"
        for name, (token, word) in forgeries(oidc).items():
            message = await refused(app, engine, token)
            assert word in message, (name, message)
            assert token not in message and "bob" not in message, name


async def test_encode_maps_a_provider_subject_to_its_documented_user_id(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    async with jwt_gateway(settings, engine, oidc, user_id_map="encode") as app:
        assert await as_user(app, engine, oidc.mint("auth0|abc")) == "x_auth0_7Cabc"
        assert await as_user(app, engine, oidc.mint("google-oauth2|123")) == \
            "x_google-oauth2_7C123"
        assert await as_user(app, engine, oidc.mint("bob")) == "bob"
        assert await as_user(app, engine, oidc.mint("x_auth0_7Cabc")) == "x_x_5Fauth0_5F7Cabc"


async def test_rotated_key_is_picked_up_and_old_kid_tokens_still_pass(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    async with jwt_gateway(settings, engine, oidc, token_cache_s=0,
                           jwks_refetch_interval_s=0) as app:
        old = oidc.mint("bob")
        assert await as_user(app, engine, old) == "bob"
        fetches = oidc.jwks_fetches()
        new_kid = oidc.rotate()
        new = oidc.mint("bob")
        assert jwt.get_unverified_header(new)["kid"] == new_kid != jwt.get_unverified_header(
            old)["kid"]
        assert await as_user(app, engine, new) == "bob"
        assert oidc.jwks_fetches() == fetches + 1  # the unknown kid, once
        assert await as_user(app, engine, old) == "bob"  # still published, still cached
        assert await as_user(app, engine, new) == "bob"
        assert oidc.jwks_fetches() == fetches + 1
        oidc.retire()


async def test_unknown_kid_refetches_once_then_refuses_and_a_flood_costs_one_fetch(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    stranger = own_key()
    async with jwt_gateway(settings, engine, oidc, jwks_refetch_interval_s=3600) as app:
        assert await as_user(app, engine, oidc.mint("bob")) == "bob"
        fetches = oidc.jwks_fetches()
        for _ in range(40):
            token = jwt.encode(oidc.claims("bob"), stranger, "RS256",
                               headers={"kid": secrets.token_hex(8)})
            assert "does not publish" in await refused(app, engine, token)
        assert oidc.jwks_fetches() <= fetches + 1
        assert await as_user(app, engine, oidc.mint("bob")) == "bob"


async def test_cached_token_is_not_trusted_past_its_exp(oidc: OidcProvider) -> None:
    verifier = JwtVerifier(Settings().with_values(
        auth_jwt=jwt_values(oidc, leeway_s=0, token_cache_s=60)).auth_jwt)
    now = int(time.time())
    token = oidc.sign(oidc.claims("bob", iat=now, exp=now + 2))
    assert (await verifier.verify(token)).user_id == "bob"
    await anyio.sleep(max(0.0, now + 2.2 - time.time()))
    with pytest.raises(Unauthorized, match="expired"):
        await verifier.verify(token)


async def test_unreachable_provider_with_no_cached_keys_answers_503(
    settings: Settings, engine: respx.MockRouter, oidc: OidcProvider
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/jwks"
    async with jwt_gateway(settings, engine, oidc, jwks_url=dead, fetch_timeout_s=1) as app:
        async with client_for(app, oidc.mint("bob")) as client:
            answer = await client.get("/health")
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "identity_provider_unavailable" and dead not in error["message"]
    assert engine.routes[0].call_count == 0
