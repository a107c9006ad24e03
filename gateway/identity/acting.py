"""Which user a request acts as, and whether its credential may make the call (SPEC §3, §17).

A user key and a JWT act as their own user: `X-Memory-Gateway-User`, when sent, must name it.
A service key acts for the user the header names or, on an engine route without the header,
for the user the route's own user field names (the route model's USER ids: `user_id`, the
`sender_id` of user messages, ...), so an engine SDK that passes `user_id` per call works
unchanged. Either way the id must be a valid user id the key's `users` glob admits. A route that
names no user needs the header (422). From then on the request runs exactly as that user's.

Scopes: a read (search, get, list, a GET of an owned route) needs `read`; anything else `write`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from fnmatch import fnmatchcase
from typing import Any

from gateway.errors import Forbidden, InsufficientScope, Unauthorized, ValidationFailed
from gateway.identity.auth import validate_user_id
from gateway.identity.named import USER, Named
from gateway.identity.principal import PRINCIPAL_KEY, READ, WRITE, Principal

ACTING_HEADER = "X-Memory-Gateway-User"
ACTING_HEADER_KEY = b"x-memory-gateway-user"


def with_header(principal: Principal, value: bytes | None) -> Principal:
    """The Principal once `X-Memory-Gateway-User` is applied (403/422 when it may not be)."""
    if value is None:
        return principal
    try:
        named = value.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ValidationFailed(f"{ACTING_HEADER} must be a user id", field=ACTING_HEADER) from None
    if principal.kind == "service":
        return principal.acting_for(permitted(principal, named))
    if named != principal.user_id:
        raise Forbidden(f"{ACTING_HEADER} must name the authenticated user", field=ACTING_HEADER)
    return principal


def permitted(principal: Principal, user_id: str) -> str:
    """A user id this service key may act for (422 when invalid, 403 outside its glob)."""
    try:
        validate_user_id(user_id)
    except ValidationFailed:
        raise ValidationFailed("the user a service key acts for must match "
                               "[A-Za-z0-9][A-Za-z0-9._@-]{0,127}", field=ACTING_HEADER) from None
    if principal.users and not fnmatchcase(user_id, principal.users):
        raise Forbidden(f"this service key may not act for user {user_id}", field=ACTING_HEADER)
    return user_id


def needs_acting_user(principal: Principal) -> bool:
    return principal.kind == "service" and not principal.user_id


def require_acting_user(principal: Principal) -> None:
    """Owned routes name no user of their own: a service key must send the header."""
    if needs_acting_user(principal):
        raise ValidationFailed(f"a service key names the user it acts for in {ACTING_HEADER}",
                               field=ACTING_HEADER)


def settle_from_route(scope: MutableMapping[str, Any], named: Named) -> str:
    """The user the request acts as, fixed from the route's user field for a service key
    without the header; the user id as before for everyone else."""
    principal = scope[PRINCIPAL_KEY]
    assert isinstance(principal, Principal)
    if not needs_acting_user(principal):
        return principal.user_id
    users = {value for kind, _, value in named.ids if kind == USER}
    if not users:
        require_acting_user(principal)
    if len(users) > 1 or not all(isinstance(user, str) for user in users):
        raise Forbidden("the request names more than one user", field="user_id")
    user = permitted(principal, str(next(iter(users))))
    scope[PRINCIPAL_KEY] = principal.acting_for(user)
    scope["user_id"] = user
    return user


async def settle_user(scope: MutableMapping[str, Any], named: Named,
                      refused: Callable[[str], Awaitable[bool]] | None) -> str:
    """`settle_from_route`, and an erased user (SPEC §17) refused once a service key's acting
    user is fixed from the route (the dispatcher refused the others already)."""
    settling = needs_acting_user(scope[PRINCIPAL_KEY])
    user = settle_from_route(scope, named)
    if settling and refused is not None and await refused(user):
        raise Unauthorized("this user's data was erased")
    return user


def require_scope(principal: Principal, reads: bool) -> None:
    needed = READ if reads else WRITE
    if needed not in principal.scopes:
        raise InsufficientScope(f"this credential is not allowed to {needed} "
                                f"(its scopes: {', '.join(sorted(principal.scopes)) or 'none'})")
