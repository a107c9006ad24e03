"""`/admin/`: keys for any user, the users the gateway knows, and the audit log (SPEC §17).

Only admin keys reach these routes (gateway/app.py answers 404 to every other credential, and
every handler asks `require_admin` again); admin keys reach nothing else. Every action that
changes something is written to the audit log in the transaction that makes the change.
"""

from __future__ import annotations

from typing import Literal, TypeVar

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.errors import NotFound, ValidationFailed
from gateway.identity.auth import generate_key, hash_secret, validate_user_id
from gateway.identity.principal import require_admin
from gateway.routes.common import api, json_body, json_response, query_params
from gateway.routes.schema import CamelModel, CamelRequest, PageQuery, cursor_param
from gateway.services import services
from gateway.store import audit, keys, users
from gateway.store.cursors import Cursor, keyset_page
from gateway.userdata.refusal import REFUSE

Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")
NAME_MAX = 200
GLOB_MAX = 200
Listing = TypeVar("Listing", bound=PageQuery)


class KeyCreate(CamelRequest):
    user_id: str = Field(description="the user the key is for (a service key: its owner's name)")
    kind: Literal["user", "service"] = "user"
    scopes: list[Scope] = Field(default_factory=lambda: list(SCOPES), min_length=1)
    name: str = Field(default="", max_length=NAME_MAX)
    expires_at: int | None = Field(default=None, description="ms since the epoch")
    users: str = Field(default="", max_length=GLOB_MAX,
                       description="service keys: glob of the user ids it may act for")


class KeyOut(CamelModel):
    id: str
    user_id: str
    kind: str
    scopes: list[str]
    name: str
    users: str
    state: str  # active | revoked | expired
    expires_at: int | None
    created_at_ms: int
    last_used_at_ms: int | None
    revoked_at_ms: int | None


class NewKeyOut(KeyOut):
    token: str  # shown in this answer only


class KeyList(CamelModel):
    items: list[KeyOut]
    next_cursor: str | None


class KeyListQuery(PageQuery):
    user_id: str | None = None


class UserOut(CamelModel):
    user_id: str
    keys: int
    resources: int
    conversations: int
    agents: int
    facts: int
    assets: int
    sessions: int


class UserList(CamelModel):
    items: list[UserOut]
    next_cursor: str | None


class AuditQuery(PageQuery):
    action: str | None = Field(default=None, max_length=100,
                               description="only this action's entries (e.g. keys.create)")


class AuditOut(CamelModel):
    seq: int
    at_ms: int
    admin_key_id: str
    action: str
    target: str


class AuditList(CamelModel):
    items: list[AuditOut]
    next_cursor: str | None


def _listing(request: Request, model: type[Listing]) -> tuple[Listing, Cursor | None]:
    """An admin listing's query and the cursor it continues from (admin keys only)."""
    require_admin(request.scope)
    query = query_params(request, model)
    return query, cursor_param(query.cursor, "cursor")


def key_out(key: keys.ApiKey) -> KeyOut:
    return KeyOut(id=key.id, user_id=key.user_id, kind=key.kind, scopes=list(key.scopes),
                  name=key.name, users=key.users_glob, state=key.state,
                  expires_at=key.expires_at_ms, created_at_ms=key.created_at_ms,
                  last_used_at_ms=key.last_used_at_ms, revoked_at_ms=key.revoked_at_ms)


@api(summary="Create a key for a user (the token is shown once)", request=KeyCreate,
     response=NewKeyOut, status=201, tag="admin", errors=(409,))
async def create_key(request: Request) -> Response:
    admin = require_admin(request.scope)
    body = await json_body(request, KeyCreate)
    try:
        validate_user_id(body.user_id)
    except ValidationFailed as exc:
        raise ValidationFailed(exc.message, field="userId") from None
    if body.users and body.kind != "service":
        raise ValidationFailed("users: only a service key acts for other users", field="users")
    if body.expires_at is not None and body.expires_at <= 0:
        raise ValidationFailed("expiresAt: must be a time in ms since the epoch",
                               field="expiresAt")
    new = generate_key(body.user_id)
    svc = services(request)
    stored = await keys.insert(
        svc.db, new.key_id, new.user_id, hash_secret(new.secret),
        kind=body.kind, scopes=body.scopes, name=body.name, expires_at_ms=body.expires_at,
        users_glob=body.users, audit=(admin.credential_id, "keys.create"),
        refuse_erased=svc.settings.auth.erased_users == REFUSE)
    return json_response(NewKeyOut(**key_out(stored).model_dump(), token=new.token), 201)


@api(summary="List keys (never their secrets), oldest first", query=KeyListQuery,
     response=KeyList, tag="admin")
async def list_keys(request: Request) -> Response:
    query, cursor = _listing(request, KeyListQuery)
    found = await keys.page(services(request).db, query.user_id,
                            None if cursor is None else (cursor.key, cursor.id), query.limit + 1)
    page, next_cursor = keyset_page(found, query.limit, lambda key: (key.created_at_ms, key.id))
    return json_response(KeyList(items=[key_out(key) for key in page], next_cursor=next_cursor))


async def _key(request: Request) -> keys.ApiKey:
    found = await keys.find(services(request).db, request.path_params["key_id"])
    if found is None:
        raise NotFound("no such key")
    return found


@api(summary="Show a key (never its secret)", response=KeyOut, tag="admin")
async def show_key(request: Request) -> Response:
    require_admin(request.scope)
    return json_response(key_out(await _key(request)))


@api(summary="Revoke a key (at once, in every process)", status=204, tag="admin")
async def revoke_key(request: Request) -> Response:
    admin = require_admin(request.scope)
    key = await _key(request)
    if key.revoked_at_ms is None:
        await keys.revoke(services(request).db, key.id, audit=(admin.credential_id,
                                                               "keys.revoke"))
    return Response(status_code=204)


@api(summary="List the users the gateway holds anything for, with their counts",
     query=PageQuery, response=UserList, tag="admin")
async def list_users(request: Request) -> Response:
    query, cursor = _listing(request, PageQuery)
    db = services(request).db
    found = await users.page(db, None if cursor is None else cursor.id, query.limit + 1)
    page, next_cursor = keyset_page(found, query.limit, lambda user: (0, user))  # by id alone
    counted = await users.counts(db, page)
    items = [UserOut(user_id=user, **counted[user]) for user in page]
    return json_response(UserList(items=items, next_cursor=next_cursor))


@api(summary="The admin audit log, oldest first", query=AuditQuery, response=AuditList,
     tag="admin")
async def audit_log(request: Request) -> Response:
    query, cursor = _listing(request, AuditQuery)
    found = await audit.page(services(request).db, 0 if cursor is None else cursor.key,
                             query.limit + 1, query.action)
    entries, next_cursor = keyset_page(found, query.limit, lambda entry: (entry.seq, "audit"))
    return json_response(AuditList(
        items=[AuditOut(seq=e.seq, at_ms=e.at_ms, admin_key_id=e.admin_key_id, action=e.action,
                        target=e.target) for e in entries],
        next_cursor=next_cursor))


routes = [
    Route("/admin/keys", create_key, methods=["POST"]),
    Route("/admin/keys", list_keys, methods=["GET"]),
    Route("/admin/keys/{key_id}", show_key, methods=["GET"]),
    Route("/admin/keys/{key_id}", revoke_key, methods=["DELETE"]),
    Route("/admin/users", list_users, methods=["GET"]),
    Route("/admin/audit", audit_log, methods=["GET"]),
]
