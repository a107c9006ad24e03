"""`/mcp` with an OAuth login through the real identity provider (SPEC §19, RFC 9728, RFC 8707).

The official SDK's client is given nothing but the endpoint's URL: it gets the 401, reads the
protected-resource metadata, discovers the provider (tests/oidc_provider.mjs), registers itself,
and logs alice in with the authorization-code flow and PKCE, naming the endpoint as the resource;
the provider's login and consent pages are filled in as a person would. Then it adds a memory with
an image, finds it and reads the image's bytes back. A token the same provider issued for the
REST audience is refused on `/mcp`; one it granted `memory:read` only reads there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tests.e2e.real_engine_helpers import png
from tests.mcp_helpers import MODES, RPC_HEADERS, b64, blob, links, rpc
from tests.oidc_server import OidcProvider
from tests.processes import dev_engine, free_port, gateway

pytestmark = [pytest.mark.e2e, pytest.mark.processes, pytest.mark.anyio]

REDIRECT = "http://127.0.0.1:1/callback"  # never served: the login stops at its Location
KITE = png(3, 2, shade=140)
_FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*method="post"', re.I)


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def log_in(authorization_url: str, login: str) -> tuple[dict[str, str], list[str]]:
    """What a person does in the browser: open the authorization URL, sign in, consent. The
    query the provider redirects to REDIRECT with (code, state, iss), and the pages filled in."""
    filled: list[str] = []
    async with httpx.AsyncClient(timeout=20, follow_redirects=False) as browser:
        url = authorization_url
        for _ in range(12):
            if url.startswith(REDIRECT):
                return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}, filled
            answer = await browser.get(url)
            if not answer.is_redirect:
                assert answer.status_code == 200, answer.text
                form = _FORM.search(answer.text)
                assert form is not None, answer.text
                prompt = "login" if 'name="login"' in answer.text else "consent"
                fields = {"prompt": prompt, **({"login": login, "password": "any"}
                                               if prompt == "login" else {})}
                filled.append(prompt)
                answer = await browser.post(urljoin(url, unescape(form.group(1))), data=fields)
                assert answer.is_redirect, answer.text
            url = urljoin(url, answer.headers["location"])
    raise AssertionError("the login did not reach the redirect URI")


class Login:
    """The redirect and callback handlers of the SDK's OAuthClientProvider, signing `user` in."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.redirected: list[str] = []
        self.filled: list[str] = []
        self._answer: dict[str, str] = {}

    async def redirect(self, authorization_url: str) -> None:
        self.redirected.append(authorization_url)
        self._answer, filled = await log_in(authorization_url, self.user)
        self.filled += filled

    async def callback(self) -> AuthorizationCodeResult:
        answer = self._answer
        assert "code" in answer, answer
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"),
                                       iss=answer.get("iss"))


@asynccontextmanager
async def oauth_client(url: str, login: Login, storage: Memory, mode: str
                       ) -> AsyncIterator[Client]:
    """The SDK's client of `url` with nothing but its OAuth support: no credential given."""
    auth = OAuthClientProvider(
        server_url=url, storage=storage, redirect_handler=login.redirect,
        callback_handler=login.callback,
        client_metadata=OAuthClientMetadata(client_name="memory-gateway e2e",
                                            redirect_uris=[AnyUrl(REDIRECT)],
                                            token_endpoint_auth_method="none"))
    http = httpx2.AsyncClient(auth=auth, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode,
                            cache=None) as client:
        yield client


def claims_of(token: str) -> dict[str, object]:
    """A JWT's claims, unverified (the gateway verifies; the test reads what it was given)."""
    payload = token.split(".")[1]
    claims: dict[str, object] = json.loads(base64.urlsafe_b64decode(
        payload + "=" * (-len(payload) % 4)))
    return claims


async def token_for(oidc: OidcProvider, client_id: str, resource: str, user: str,
                    scope: str = "memory:read memory:write") -> str:
    """An access token from the provider's authorization-code flow for `resource`."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()
                                         ).decode().rstrip("=")
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
             "state": secrets.token_urlsafe(8), "code_challenge": challenge,
             "code_challenge_method": "S256", "scope": scope,
             "resource": resource}
    answer, _ = await log_in(f"{oidc.issuer}/auth?{urlencode(query)}", user)
    async with httpx.AsyncClient(timeout=20) as http:
        token = await http.post(oidc.issuer + "/token", data={
            "grant_type": "authorization_code", "code": answer["code"],
            "redirect_uri": REDIRECT, "client_id": client_id, "code_verifier": verifier,
            "resource": resource})
    assert token.status_code == 200, token.text
    return str(token.json()["access_token"])


@pytest.mark.parametrize("mode", MODES)  # the 2026-07-28 envelope, and the handshake era
async def test_an_oauth_login_through_the_provider_adds_and_finds_an_image(
        tmp_path: Path, oidc: OidcProvider, mode: str) -> None:
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    with dev_engine(tmp_path) as engine_url, gateway(
            tmp_path, engine_url, port=port, MEMORY_GATEWAY_SERVER_PUBLIC_URL=public,
            **oidc.gateway_env()) as gw:
        login, storage = Login("alice"), Memory()
        async with oauth_client(gw.url + "/mcp", login, storage, mode) as client:
            added = await client.call_tool("add_memory", {
                "session_id": "kites", "text": "the red kite over the dunes, kite.png",
                "files": [{"name": "kite.png", "base64": b64(KITE)}]})
            assert not added.is_error, added
            assert not (await client.call_tool("flush_session",
                                               {"session_id": "kites"})).is_error
            found = await client.call_tool("search_memory", {"query": "red kite dunes"})
            [link] = {link.uri: link for link in links(found)}.values()
            assert link.name == "kite.png"
            assert blob(await client.read_resource(link.uri)) == (KITE, "image/png")

        # one login, through the provider the metadata named, for the endpoint as the resource
        [authorization_url] = login.redirected
        assert login.filled == ["login", "consent"]  # alice signed in and consented, once
        asked = parse_qs(urlsplit(authorization_url).query)
        assert authorization_url.startswith(oidc.issuer + "/auth?")
        assert asked["resource"] == [public + "/mcp"]
        assert asked["code_challenge_method"] == ["S256"]
        # the metadata's scopes, and offline_access the provider offers (refresh tokens)
        assert asked["scope"] == ["memory:read memory:write offline_access"]
        assert storage.tokens is not None and storage.client is not None
        claims = claims_of(storage.tokens.access_token)
        assert claims["sub"] == "alice" and claims["aud"] == public + "/mcp"
        assert claims["iss"] == oidc.issuer and claims["scope"] == "memory:read memory:write"
        assert storage.tokens.refresh_token

        # what alice added is hers: the REST surface, with a key of bob's, finds none of it
        with httpx.Client(base_url=gw.url, timeout=20) as rest:
            bob = rest.post("/memories/search", json={"query": "red kite", "user_id": "bob"},
                            headers={"Authorization": f"Bearer {gw.key('bob')}"})
            assert bob.status_code == 200, bob.text
            assert "kite" not in bob.text

        # the same provider's token for the REST audience is refused on /mcp, taken on REST
        rest_token = await token_for(oidc, storage.client.client_id, oidc.audience, "alice")
        assert claims_of(rest_token)["aud"] == oidc.audience
        with httpx.Client(base_url=gw.url, timeout=20) as raw:
            refused = raw.post("/mcp", json=rpc("tools/list"), headers={
                **RPC_HEADERS, "Authorization": f"Bearer {rest_token}"})
            assert refused.status_code == 401
            assert refused.json()["error"]["message"] == "JWT is not meant for this gateway (aud)"
            assert refused.headers["www-authenticate"] == (
                f'Bearer resource_metadata="{public}/.well-known/oauth-protected-resource/mcp", '
                'error="invalid_token"')
            taken = raw.post("/memories/search", json={"query": "red kite", "user_id": "alice"},
                             headers={"Authorization": f"Bearer {rest_token}"})
            assert taken.status_code == 200 and "kite.png" in taken.text, taken.text

        # a login granted memory:read only reads: a write tool is 403 insufficient_scope
        reader = await token_for(oidc, storage.client.client_id, public + "/mcp", "alice",
                                 scope="memory:read")
        assert claims_of(reader)["scope"] == "memory:read"
        with httpx.Client(base_url=gw.url, timeout=20,
                          headers={**RPC_HEADERS, "Authorization": f"Bearer {reader}"}) as raw:
            read = raw.post("/mcp", json=rpc("tools/call", {
                "name": "search_memory", "arguments": {"query": "red kite"}}))
            assert read.status_code == 200 and "kite.png" in read.text, read.text
            write = raw.post("/mcp", json=rpc("tools/call", {
                "name": "add_memory", "arguments": {"text": "a second kite"}}))
            assert write.status_code == 403
            assert write.headers["www-authenticate"].startswith(
                'Bearer error="insufficient_scope", scope="memory:write"')
