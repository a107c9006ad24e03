"""The provider's keys (gateway/identity/jwks.py): discovery, bounded refetch, outages, limits.

The provider here is an httpx.MockTransport and the clock a counter, so intervals and outages
are exact; tests/test_jwt.py runs the same code against a real provider.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.config import JwtSettings, Settings
from gateway.errors import IdentityProviderUnavailable, Unauthorized
from gateway.identity.jwks import Jwks, signing_keys

ISSUER = "https://id.example"
JWKS_URL = "https://id.example/keys"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def public_jwk(kid: str) -> dict[str, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    entry: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**entry, "kid": kid, "alg": "RS256", "use": "sig"}


class Provider:
    """Discovery and a JWKS; `up = False` makes it unreachable; counts what it serves."""

    def __init__(self, kids: list[str]) -> None:
        self.keys = [public_jwk(kid) for kid in kids]
        self.up = True
        self.jwks_served = 0
        self.discovery: dict[str, Any] = {"issuer": ISSUER, "jwks_uri": JWKS_URL}
        self.jwks_body: bytes | None = None

    def handle(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("down", request=request)
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json=self.discovery)
        self.jwks_served += 1
        return httpx.Response(200, content=self.jwks_body or json.dumps({"keys": self.keys}))


def jwks_for(provider: Provider, clock: Clock, **keys: Any) -> Jwks:
    settings: JwtSettings = Settings().with_values(auth_jwt={
        "issuer": ISSUER, "audience": "gw", "jwks_refresh_s": 600,
        "jwks_refetch_interval_s": 30, "jwks_outage_s": 3600, **keys}).auth_jwt
    return Jwks(settings, transport=httpx.MockTransport(provider.handle), clock=clock)


async def test_keys_are_found_by_discovery_and_cached() -> None:
    provider, clock = Provider(["a", "b"]), Clock()
    jwks = jwks_for(provider, clock)
    assert (await jwks.key_for("a")).algorithm_name == "RS256"
    await jwks.key_for("b")
    clock.now += 599
    await jwks.key_for("a")
    assert provider.jwks_served == 1


async def test_keys_are_refreshed_after_jwks_refresh_s() -> None:
    provider, clock = Provider(["a"]), Clock()
    jwks = jwks_for(provider, clock)
    await jwks.key_for("a")
    clock.now += 600
    await jwks.key_for("a")
    assert provider.jwks_served == 2


async def test_unknown_kids_cause_at_most_one_fetch_per_interval() -> None:
    provider, clock = Provider(["a"]), Clock()
    jwks = jwks_for(provider, clock)
    await jwks.key_for("a")
    clock.now += 31
    for number in range(100):
        with pytest.raises(Unauthorized, match="does not publish"):
            await jwks.key_for(f"unknown-{number}")
    assert provider.jwks_served == 2
    clock.now += 30
    provider.keys.append(public_jwk("rotated"))
    await jwks.key_for("rotated")
    assert provider.jwks_served == 3


async def test_concurrent_unknown_kids_share_one_fetch() -> None:
    provider, clock = Provider(["a"]), Clock()
    jwks = jwks_for(provider, clock)
    results = await asyncio.gather(*(jwks.key_for(f"k{n}") for n in range(20)),
                                   return_exceptions=True)
    assert all(isinstance(r, Unauthorized) for r in results)
    assert provider.jwks_served == 1


async def test_keys_are_kept_through_an_outage_for_jwks_outage_s_then_dropped() -> None:
    provider, clock = Provider(["a"]), Clock()
    jwks = jwks_for(provider, clock)
    await jwks.key_for("a")
    provider.up = False
    clock.now += 600 + 3599
    await jwks.key_for("a")  # refresh fails, the cached key still serves
    clock.now += 1
    with pytest.raises(IdentityProviderUnavailable):
        await jwks.key_for("a")
    provider.up = True
    clock.now += 30
    await jwks.key_for("a")


async def test_provider_never_reached_is_503_not_401() -> None:
    provider, clock = Provider(["a"]), Clock()
    provider.up = False
    with pytest.raises(IdentityProviderUnavailable) as caught:
        await jwks_for(provider, clock).key_for("a")
    assert caught.value.status == 503


async def test_oversized_jwks_is_refused() -> None:
    provider, clock = Provider(["a"]), Clock()
    provider.jwks_body = json.dumps({"keys": provider.keys, "pad": "x" * 5000}).encode()
    with pytest.raises(IdentityProviderUnavailable):
        await jwks_for(provider, clock, max_document_bytes=4096).key_for("a")


async def test_a_slow_provider_is_given_up_on_after_fetch_timeout_s() -> None:
    async def stall(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, json={})

    settings = Settings().with_values(auth_jwt={
        "jwks_url": JWKS_URL, "audience": "gw", "fetch_timeout_s": 0.2}).auth_jwt
    jwks = Jwks(settings, transport=httpx.MockTransport(stall))
    started = asyncio.get_running_loop().time()
    with pytest.raises(IdentityProviderUnavailable):
        await jwks.key_for("a")
    assert asyncio.get_running_loop().time() - started < 3


async def test_discovery_naming_another_issuer_is_not_trusted() -> None:
    provider, clock = Provider(["a"]), Clock()
    provider.discovery["issuer"] = "https://evil.example"
    with pytest.raises(IdentityProviderUnavailable):
        await jwks_for(provider, clock).key_for("a")
    assert provider.jwks_served == 0


async def test_jwks_url_skips_discovery() -> None:
    provider, clock = Provider(["a"]), Clock()
    provider.discovery = {}
    jwks = jwks_for(provider, clock, issuer="", jwks_url=JWKS_URL)
    await jwks.key_for("a")


def test_jwks_keeps_only_signing_keys_that_are_not_hmac() -> None:
    document = {"keys": [
        {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
        {**public_jwk("enc"), "use": "enc"},
        {"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"},
        "not a key",
        public_jwk("good"),
    ]}
    assert list(signing_keys(document)) == ["good"]


async def test_token_without_kid_uses_the_only_key_and_is_refused_among_several() -> None:
    one = jwks_for(Provider(["a"]), Clock())
    await one.key_for(None)
    several = jwks_for(Provider(["a", "b"]), Clock())
    with pytest.raises(Unauthorized, match="names no key"):
        await several.key_for(None)
