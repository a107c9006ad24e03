"""The console's one door into the gateway's rules: the admin API as the signed-in admin key,
and the user routes as the user an operator looks at (read-only), through `call_as`."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import urlencode

from starlette.requests import Request

from gateway.console.guard import Operator
from gateway.identity.principal import READ, Principal
from gateway.serving.inprocess import Answer

CONSOLE_KEY = "gateway.console"  # scope key: the Console serving the request


class CallsAs(Protocol):
    async def call_as(self, principal: Principal, method: str, path: str,
                      **options: Any) -> Answer: ...


class Refused(Exception):
    """A route refused what a page asked: shown as a page with the route's status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _gateway(request: Request) -> CallsAs:
    found: CallsAs = request.scope[CONSOLE_KEY].gateway
    return found


def viewer(who: Operator, user_id: str) -> Principal:
    """The principal the console reads a user's data as: that user, read-only, named after the
    admin key looking (so logs and limits tell it apart from the user's own calls)."""
    return Principal("user", f"console:{who.key_id}", user_id, frozenset({READ}))


def refused(answer: Answer) -> Refused:
    try:
        message = str(answer.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = f"refused ({answer.status})"
    return Refused(answer.status, message)


async def as_admin(request: Request, who: Operator, method: str, path: str,
                   **options: Any) -> Answer:
    """`method path` of the admin API as the operator's admin key; Refused unless 2xx."""
    answer = await _gateway(request).call_as(who.principal, method, path,
                                             origin=request.scope, **options)
    if not answer.ok:
        raise refused(answer)
    return answer


async def as_user(request: Request, who: Operator, user_id: str, method: str, path: str,
                  **options: Any) -> Answer:
    """`method path` as `user_id`, read-only; the answer as it is (the caller reads status)."""
    return await _gateway(request).call_as(viewer(who, user_id), method, path,
                                           origin=request.scope, **options)


async def public(request: Request, who: Operator, path: str) -> Answer:
    """A public route (`/readyz`) as the gateway serves it to anyone."""
    return await _gateway(request).call_as(who.principal, "GET", path, origin=request.scope)


def query_string(**params: str) -> str:
    """A query string of the params that are set."""
    return urlencode({name: value for name, value in params.items() if value})
