"""A real OpenID provider for the JWT tests: `oidc-provider` on node (tests/oidc_provider.mjs).

Installed by scripts/setup-oidc-provider into `.node-oidc/`; started by the suite on a free
loopback port and stopped by PID. `mint(user_id)` gives a JWT access token for any user, issued
by the provider's own token model and signed with its current key: the credential the isolation
tests can run under as they run under API keys. It also serves a real login: dynamic client
registration, the authorization-code flow with PKCE, and its own login and consent pages
(tests/e2e/test_e2e_mcp_oauth.py).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.processes import ROOT, free_port, stop, wait_until_serving

FOLDER = ROOT / ".node-oidc"
SCRIPT = ROOT / "tests" / "oidc_provider.mjs"
AUDIENCE = "https://memory-gateway.test"
CLIENT_ID, CLIENT_SECRET = "svc-reporter", "reporter-secret"  # its pre-registered client


@dataclass
class OidcProvider:
    issuer: str
    log: Path
    audience: str = AUDIENCE

    def _post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = httpx.post(self.issuer + path, json=body or {}, timeout=10)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def mint(self, user_id: str, *, scope: str | None = None, ttl_s: int = 600) -> str:
        """An access token (JWT) whose `sub` is `user_id`; `scope` None = memory:read and write."""
        body: dict[str, Any] = {"sub": user_id, "ttl": ttl_s}
        if scope is not None:
            body["scope"] = scope
        return str(self._post("/_test/mint", body)["token"])

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        """`claims` exactly as given, signed RS256 with the provider's current key (`header`
        fields override alg, typ and kid)."""
        return str(self._post("/_test/sign", {"header": header, "claims": claims})["token"])

    def claims(self, user_id: str, **changes: Any) -> dict[str, Any]:
        """The claims the provider's own access tokens carry, for `sign`; None values dropped."""
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": user_id, "aud": self.audience, "iat": now,
                  "exp": now + 600, "scope": "memory:read memory:write", **changes}
        return {name: value for name, value in claims.items() if value is not None}

    def client_credentials(self, scope: str) -> str:
        """A token from the standard token endpoint (client_credentials, a resource indicator)."""
        answer = httpx.post(self.issuer + "/token", auth=(CLIENT_ID, CLIENT_SECRET), timeout=10,
                            data={"grant_type": "client_credentials", "scope": scope,
                                  "resource": self.audience})
        answer.raise_for_status()
        return str(answer.json()["access_token"])

    def rotate(self) -> str:
        """A new signing key, published first; the old ones stay published. Its kid."""
        return str(self._post("/_test/rotate")["kid"])

    def retire(self) -> None:
        """Only the newest key stays published."""
        self._post("/_test/retire")

    def jwks_fetches(self) -> int:
        return int(httpx.get(self.issuer + "/_test/stats", timeout=10).json()["jwksFetches"])

    def jwks(self) -> dict[str, Any]:
        result: dict[str, Any] = httpx.get(self.issuer + "/jwks", timeout=10).json()
        return result

    def gateway_env(self, **keys: str) -> dict[str, str]:
        """The MEMORY_GATEWAY_AUTH_JWT_* variables of a gateway process trusting this provider."""
        values = {"issuer": self.issuer, "audience": self.audience, **keys}
        return {f"MEMORY_GATEWAY_AUTH_JWT_{name.upper()}": value
                for name, value in values.items()}

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]


@contextmanager
def oidc_provider(folder: Path) -> Iterator[OidcProvider]:
    node = shutil.which("node")
    if node is None or not (FOLDER / "node_modules" / "oidc-provider").is_dir():
        raise RuntimeError("the OpenID provider is not installed: run scripts/setup-oidc-provider")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = folder / "oidc-provider.log"
    issuer = f"http://127.0.0.1:{port}"
    with open(log, "ab") as log_file:
        proc = subprocess.Popen([node, str(SCRIPT), str(port), AUDIENCE, str(FOLDER)],
                                cwd=folder, stdout=log_file, stderr=log_file)
    try:
        wait_until_serving(issuer + "/.well-known/openid-configuration", proc, log=log)
        yield OidcProvider(issuer, log)
    finally:
        stop(proc)
