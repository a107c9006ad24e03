"""Who a request comes from: the credential that authenticated it and the user it acts as.

Every credential kind ends in one Principal (SPEC §3, §17): a user key (its user), a service key
acting for a user, a JWT from the product's identity provider, or an admin key (admin routes
only). Checks downstream read `user_id` and `scopes`; rate limits key on `credential_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from gateway.errors import RouteNotFound

Kind = Literal["user", "service", "jwt", "admin"]
READ = "read"
WRITE = "write"
ALL_SCOPES: frozenset[str] = frozenset({READ, WRITE})
PRINCIPAL_KEY = "gateway.principal"  # scope key: the request's Principal


@dataclass(frozen=True)
class Principal:
    kind: Kind
    credential_id: str  # key id, or "jwt:" + a digest of issuer and subject
    user_id: str  # the user the request acts as ("" for a service key not yet acting)
    scopes: frozenset[str] = ALL_SCOPES
    users: str = ""  # service keys: the glob of user ids it may act for ("" = any)

    def acting_for(self, user_id: str) -> Principal:
        return replace(self, user_id=user_id)

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


def request_principal(scope: Mapping[str, Any]) -> Principal:
    """The Principal the gateway authenticated for this request (set before any route runs)."""
    found: Principal = scope[PRINCIPAL_KEY]
    return found


def require_admin(scope: Mapping[str, Any]) -> Principal:
    """The admin Principal of an /admin/ request; any other credential finds nothing there."""
    principal = scope.get(PRINCIPAL_KEY)
    if not isinstance(principal, Principal) or principal.kind != "admin":
        raise RouteNotFound("no such endpoint")
    return principal
