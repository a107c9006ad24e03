"""`[auth.jwt]` (SPEC §17): what the settings refuse, and the static key sources (PEM, secret)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from gateway.config import ConfigError, Settings, load_settings
from gateway.errors import Unauthorized
from gateway.identity.jwt import JwtVerifier

SECRET = "a-shared-secret-of-at-least-32-bytes!"


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "bob", "aud": "gw", "iat": now, "exp": now + 300, **changes}


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def verifier(**keys: Any) -> JwtVerifier:
    return JwtVerifier(Settings().with_values(auth_jwt={"audience": "gw", **keys}).auth_jwt)


@pytest.mark.parametrize(("keys", "word"), [
    ({"issuer": "https://id.example"}, "audience"),
    ({"jwks_url": "https://id.example/k", "audience": "gw", "algorithms": ["none"]}, "none"),
    ({"jwks_url": "https://id.example/k", "audience": "gw", "algorithms": ["HS256"]}, "HS256"),
    ({"public_key": "x", "audience": "gw", "algorithms": ["HS512"]}, "HS512"),
    ({"secret": SECRET, "audience": "gw", "algorithms": ["RS256"]}, "RS256"),
    ({"secret": "short", "audience": "gw"}, "32 bytes"),
    ({"secret": SECRET, "jwks_url": "https://id.example/k", "audience": "gw"}, "one key source"),
    ({"issuer": "id.example", "audience": "gw"}, "http(s) URL"),
    ({"issuer": "https://id.example", "audience": "gw", "user_id_map": "loose"}, "strict"),
])
def test_settings_refuse_unsafe_or_incomplete_jwt_tables(keys: dict[str, Any], word: str) -> None:
    with pytest.raises(ConfigError, match="auth.jwt") as caught:
        Settings().with_values(auth_jwt=keys)
    assert word in str(caught.value)


def test_jwt_table_reads_from_toml_and_environment(tmp_path: Any) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[auth]\nkey_cache_ttl_s = 1\n[auth.jwt]\nissuer = "https://id.example"\n'
                    'audience = "gw"\n')
    loaded = load_settings(path, {"MEMORY_GATEWAY_AUTH_JWT_LEEWAY_S": "5",
                                  "MEMORY_GATEWAY_AUTH_JWT_ALGORITHMS": '["ES256"]'})
    assert loaded.auth_jwt.issuer == "https://id.example" and loaded.auth_jwt.leeway_s == 5.0
    assert loaded.auth_jwt.algorithms == ["ES256"] and loaded.auth_jwt.enabled


def test_public_key_that_is_not_pem_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="public_key"):
        verifier(public_key="-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----")


async def test_static_rsa_public_key_verifies_and_refuses_hs256_made_with_it() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    check = verifier(public_key=pem(key))
    assert (await check.verify(jwt.encode(claims(), key, "RS256"))).user_id == "bob"
    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256"}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(claims()).encode()).rstrip(b"=")
    signature = base64.urlsafe_b64encode(
        hmac.new(pem(key).encode(), head + b"." + body, hashlib.sha256).digest()).rstrip(b"=")
    with pytest.raises(Unauthorized, match="algorithm"):
        await check.verify((head + b"." + body + b"." + signature).decode())


async def test_static_ec_public_key_refuses_an_rsa_signed_token() -> None:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    check = verifier(public_key=pem(ec_key))
    assert (await check.verify(jwt.encode(claims(), ec_key, "ES256"))).user_id == "bob"
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(Unauthorized, match="algorithm"):
        await check.verify(jwt.encode(claims(), rsa_key, "RS256"))


async def test_shared_secret_verifies_hs256_and_refuses_another_secret() -> None:
    check = verifier(secret=SECRET)
    assert (await check.verify(jwt.encode(claims(), SECRET, "HS256"))).user_id == "bob"
    with pytest.raises(Unauthorized, match="signature"):
        await check.verify(jwt.encode(claims(), SECRET + "x", "HS256"))
    with pytest.raises(Unauthorized, match="algorithm"):
        await check.verify(jwt.encode(claims(), SECRET * 2, "HS512"))


async def test_leeway_admits_small_clock_skew_only() -> None:
    check = verifier(secret=SECRET, leeway_s=30)
    now = int(time.time())
    assert await check.verify(jwt.encode(claims(exp=now - 10), SECRET, "HS256"))
    with pytest.raises(Unauthorized, match="expired"):
        await check.verify(jwt.encode(claims(exp=now - 60), SECRET, "HS256"))


async def test_user_claim_names_the_claim_holding_the_user() -> None:
    check = verifier(secret=SECRET, user_claim="email")
    token = jwt.encode(claims(sub="auth0|abc", email="bob@example.com"), SECRET, "HS256")
    assert (await check.verify(token)).user_id == "bob@example.com"


async def test_issuer_is_checked_when_set_with_a_static_key() -> None:
    check = verifier(secret=SECRET, issuer="https://id.example")
    with pytest.raises(Unauthorized, match="iss"):
        await check.verify(jwt.encode(claims(iss="https://other.example"), SECRET, "HS256"))
    with pytest.raises(Unauthorized, match="iss"):
        await check.verify(jwt.encode(claims(), SECRET, "HS256"))  # no iss at all
