"""Where the MCP endpoint is and how a client authorizes to it (SPEC §19, RFC 9728, RFC 8707).

The resource is `<server.public_url><mcp.path>`; its protected-resource metadata is served at
`/.well-known/oauth-protected-resource<mcp.path>` (and at the bare well-known path) and named in
every 401's `WWW-Authenticate`. A JWT on the endpoint must carry `mcp.jwt_audience`, by default
the resource URL itself; with neither set, the endpoint takes no JWT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gateway.config import Settings

WELL_KNOWN = "/.well-known/oauth-protected-resource"
READ_SCOPE = "memory:read"
WRITE_SCOPE = "memory:write"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Endpoint:
    path: str  # mcp.path
    public_url: str  # server.public_url without a trailing slash ("" = none)
    audience: str  # "" = JWTs are refused on the endpoint
    issuer: str  # auth.jwt.issuer ("" = none configured)

    @classmethod
    def from_settings(cls, settings: Settings) -> Endpoint:
        public = settings.server.public_url.rstrip("/")
        path = settings.mcp.path
        audience = settings.mcp.jwt_audience or (public + path if public else "")
        return cls(path, public, audience, settings.auth_jwt.issuer)

    @property
    def resource(self) -> str:
        return self.public_url + self.path

    @property
    def metadata_paths(self) -> frozenset[str]:
        return frozenset({WELL_KNOWN + self.path, WELL_KNOWN})

    @property
    def metadata_url(self) -> str:
        return self.public_url + WELL_KNOWN + self.path

    def metadata(self) -> dict[str, Any]:
        """The RFC 9728 protected-resource metadata document."""
        document: dict[str, Any] = {"resource": self.resource}
        if self.issuer:
            document["authorization_servers"] = [self.issuer]
        document["scopes_supported"] = [READ_SCOPE, WRITE_SCOPE]
        document["bearer_methods_supported"] = ["header"]
        return document

    def challenge(self, credential_sent: bool) -> str:
        """The `WWW-Authenticate` value of a 401 on the endpoint."""
        value = f'Bearer resource_metadata="{self.metadata_url}"'
        return value + ', error="invalid_token"' if credential_sent else value

    def insufficient_scope(self, scope: str) -> str:
        """The `WWW-Authenticate` value of a 403 for a call outside the credential's scopes."""
        return (f'Bearer error="insufficient_scope", scope="{scope}", '
                f'resource_metadata="{self.metadata_url}"')

    def allowed_hosts(self) -> list[str]:
        """Host header values the transport answers (DNS-rebinding protection): loopback, and
        the public URL's host."""
        hosts = [f"{host}:*" for host in LOOPBACK_HOSTS] + list(LOOPBACK_HOSTS)
        if self.public_url:
            parts = urlsplit(self.public_url)
            host = parts.netloc.rsplit("@", 1)[-1]
            name = host if parts.port is None else host[:-len(f":{parts.port}")]
            hosts += [host, name, f"{name}:*"]
        return hosts

    def allowed_origins(self) -> list[str]:
        """Origin header values the transport answers: loopback pages, and the public URL's."""
        origins = [f"{scheme}://{host}:*" for scheme in ("http", "https")
                   for host in LOOPBACK_HOSTS]
        origins += [f"{scheme}://{host}" for scheme in ("http", "https")
                    for host in LOOPBACK_HOSTS]
        if self.public_url:
            parts = urlsplit(self.public_url)
            origins.append(f"{parts.scheme}://{parts.netloc}")
        return origins
