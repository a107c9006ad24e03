"""A JWKS endpoint and token minting for the credential benchmarks (bench/passthrough.py).

Serves `GET /jwks` from a thread; `rotate()` publishes a new signing key first (the old ones stay)
and `token(user)` signs an RS256 access token with the newest key.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

AUDIENCE = "https://bench.memory-gateway"


class Provider:
    def __init__(self, url: str) -> None:
        self.url = url
        self.keys: list[tuple[str, rsa.RSAPrivateKey]] = []
        self.published: list[dict[str, Any]] = []
        self.rotate()

    def rotate(self) -> str:
        kid = f"bench-{len(self.keys) + 1}"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        entry: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        self.published.insert(0, {**entry, "kid": kid, "alg": "RS256", "use": "sig"})
        self.keys.insert(0, (kid, key))
        return kid

    def jwks(self) -> bytes:
        return json.dumps({"keys": self.published}).encode()

    def token(self, user_id: str) -> str:
        kid, key = self.keys[0]
        now = int(time.time())
        claims = {"sub": user_id, "aud": AUDIENCE, "iat": now, "exp": now + 3600,
                  "scope": "memory:read memory:write"}
        return jwt.encode(claims, key, "RS256", headers={"kid": kid})

    def gateway_env(self, **keys: str) -> dict[str, str]:
        values = {"jwks_url": self.url + "/jwks", "audience": AUDIENCE, **keys}
        return {f"MEMORY_GATEWAY_AUTH_JWT_{k.upper()}": v for k, v in values.items()}


@contextmanager
def identity_provider() -> Iterator[Provider]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    provider = Provider(f"http://127.0.0.1:{server.server_address[1]}")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = provider.jwks()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server.RequestHandlerClass = Handler
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
