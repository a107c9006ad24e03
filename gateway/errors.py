"""The gateway's own errors and their one JSON shape.

    GatewayError (500 internal_error)
    ├── BadRequest (400 bad_request)
    ├── Unauthorized (401 unauthorized)
    ├── Forbidden (403 forbidden)
    │   ├── InsufficientScope (403 insufficient_scope)
    │   └── SessionOwnedByAnotherUser (403 session_owned_by_another_user)
    ├── NotFound (404 not_found)
    │   └── RouteNotFound (404 route_not_found)
    ├── MethodNotAllowed (405 method_not_allowed)
    ├── Conflict (409 conflict)
    │   ├── IdempotencyConflict (409 idempotency_conflict)
    │   ├── ToolCallCancelled (409 tool_call_cancelled)
    │   ├── ToolCallConfirmed (409 tool_call_confirmed)
    │   └── UserErased (409 user_erased)
    ├── RequestTimeout (408 request_timeout, the connection closed)
    ├── PayloadTooLarge (413 payload_too_large)
    ├── RequestHeadTooLarge (431 request_head_too_large)
    ├── UnsupportedMediaType (415 unsupported_media_type)
    ├── ValidationFailed (422 validation_error)
    │   ├── UriNotAllowed (422 uri_not_allowed)
    │   └── UserIdRequired (422 user_id_required)
    ├── RateLimited (429 rate_limited)
    ├── UpstreamUnavailable (502 upstream_unavailable)
    ├── UpstreamBadResponse (502 upstream_bad_response)
    ├── UpstreamAnswerTooLarge (502 upstream_answer_too_large)
    ├── UpstreamRefused (the engine's status, upstream_error, with upstream_status)
    ├── JobServiceUnavailable (502 job_service_unavailable)
    │   └── JobServiceBadResponse (502 job_service_bad_response)
    ├── UpstreamPoolExhausted (503 upstream_pool_exhausted)
    ├── NotReady (503 not_ready)
    ├── IdentityProviderUnavailable (503 identity_provider_unavailable)
    ├── ParsingBudgetExhausted (503 parsing_budget_exhausted, with Retry-After)
    ├── StorageUnavailable (503 storage_unavailable)
    ├── UpstreamTimeout (504 upstream_timeout)
    └── JobServiceTimeout (504 job_service_timeout)

Every error renders as
`{"error": {"code", "message", "status", "request_id"}}` (plus `field` when one input is at fault);
a class with `retry_after_s` also sends `Retry-After`.
Upstream error *responses* pass through unchanged on the engine's own paths; on the gateway's
own routes they are an `UpstreamRefused` (SPEC §4).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar


class GatewayError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    default_message: ClassVar[str] = "internal error"
    retry_after_s: ClassVar[int | None] = None  # sent as Retry-After when set

    def __init__(
        self, message: str | None = None, *, field: str | None = None, code: str | None = None
    ) -> None:
        self.message = message or self.default_message
        self.field = field
        self.error_code = code or self.code
        super().__init__(self.message)


class BadRequest(GatewayError):
    status, code, default_message = 400, "bad_request", "bad request"


class Unauthorized(GatewayError):
    status, code, default_message = 401, "unauthorized", "a valid API key is required"


class Forbidden(GatewayError):
    status, code, default_message = 403, "forbidden", "not allowed for this user"


class InsufficientScope(Forbidden):
    code = "insufficient_scope"
    default_message = "this credential's scopes do not allow this call"


class SessionOwnedByAnotherUser(Forbidden):
    code = "session_owned_by_another_user"
    default_message = "this session belongs to another user"


class NotFound(GatewayError):
    status, code, default_message = 404, "not_found", "not found"


class RouteNotFound(NotFound):
    code = "route_not_found"
    default_message = "no such route: the engine is reached only through its flavour's table"


class MethodNotAllowed(GatewayError):
    status, code, default_message = 405, "method_not_allowed", "method not allowed"


class Conflict(GatewayError):
    status, code, default_message = 409, "conflict", "conflict"


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"
    default_message = "this clientMessageId was already used with different content"


class ToolCallCancelled(Conflict):
    code = "tool_call_cancelled"
    default_message = "this tool call was cancelled; it cannot be confirmed"


class ToolCallConfirmed(Conflict):
    code = "tool_call_confirmed"
    default_message = "this tool call was already confirmed; it cannot be cancelled"


class UserErased(Conflict):
    code = "user_erased"
    default_message = "this user's data was erased and the id may not come back"


class RequestTimeout(GatewayError):
    status, code = 408, "request_timeout"
    default_message = "the request body did not arrive in time"


class PayloadTooLarge(GatewayError):
    status, code, default_message = 413, "payload_too_large", "request body too large"


class RequestHeadTooLarge(GatewayError):
    status, code = 431, "request_head_too_large"
    default_message = "request line and headers too large"


class UnsupportedMediaType(GatewayError):
    status, code, default_message = 415, "unsupported_media_type", "unsupported media type"


class ValidationFailed(GatewayError):
    status, code, default_message = 422, "validation_error", "invalid input"


def body_not_json(exc: ValueError) -> ValidationFailed:
    """The one answer to a malformed JSON body, on every route (the parser's position kept)."""
    return ValidationFailed(f"request body is not valid JSON: {exc}", field="body")


class UriNotAllowed(ValidationFailed):
    code = "uri_not_allowed"
    default_message = "this URI names files that are not yours, or a host that is not public"


class UserIdRequired(ValidationFailed):
    code = "user_id_required"
    default_message = "this route reads or changes many users' items: name your own user_id"


class RateLimited(GatewayError):
    # Its Retry-After and RateLimit-* headers travel in the request scope (gateway/limits/).
    status, code, default_message = 429, "rate_limited", "too many requests; retry later"


class UpstreamUnavailable(GatewayError):
    status, code, default_message = 502, "upstream_unavailable", "upstream unavailable"


class UpstreamBadResponse(GatewayError):
    status, code, default_message = 502, "upstream_bad_response", "upstream answered badly"


class UpstreamAnswerTooLarge(GatewayError):
    status, code = 502, "upstream_answer_too_large"
    default_message = "the engine's answer is larger than limits.max_upstream_answer_bytes"


class UpstreamRefused(GatewayError):
    """An engine's error answer on one of the gateway's own routes (SPEC §4): the engine's
    status and message, in the gateway's shape, with `upstream_status`."""

    status, code, default_message = 502, "upstream_error", "the engine refused the request"

    def __init__(self, message: str | None = None, *, upstream_status: int = 502,
                 field: str | None = None, code: str | None = None) -> None:
        super().__init__(message, field=field, code=code)
        self.upstream_status = upstream_status
        # the answer's status is the engine's: an instance value over the class default
        object.__setattr__(self, "status", upstream_status if 400 <= upstream_status < 600
                           else 502)

    @classmethod
    def of(cls, status: int, body: bytes) -> UpstreamRefused:
        return cls(engine_message(body) or f"the engine answered {status}",
                   upstream_status=status)


MAX_ENGINE_MESSAGE = 1000  # characters of an engine's message kept


def engine_message(body: bytes) -> str:
    """The human message of an engine's error body, whichever engine's shape it has: EverOS
    `{"error": {"message"}}`, the Cloud's `{"error": "..."}`, FastAPI's and Starlette's
    `{"detail": ...}`, MemOS's `{"message"}`; else the body's text."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", errors="replace").strip()[:MAX_ENGINE_MESSAGE]
    found: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        found = error.get("message") if isinstance(error, dict) else error
        if not isinstance(found, str):
            found = data.get("detail", data.get("message"))
        if isinstance(found, list) and found and isinstance(found[0], dict):  # FastAPI's 422
            found = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}"
                              for e in found if isinstance(e, dict))
    text = found if isinstance(found, str) else json.dumps(data, ensure_ascii=False)
    return text[:MAX_ENGINE_MESSAGE]


class JobServiceUnavailable(GatewayError):
    status, code, default_message = 502, "job_service_unavailable", "job service unavailable"


class JobServiceBadResponse(JobServiceUnavailable):
    code = "job_service_bad_response"
    default_message = "the job service answered with something that is not a job"


class UpstreamPoolExhausted(GatewayError):
    status, code = 503, "upstream_pool_exhausted"
    default_message = "too many upstream requests in flight; retry shortly"


class NotReady(GatewayError):
    status, code, default_message = 503, "not_ready", "not ready"


class IdentityProviderUnavailable(GatewayError):
    status, code = 503, "identity_provider_unavailable"
    default_message = "the identity provider cannot be reached to verify this token"


class ParsingBudgetExhausted(GatewayError):
    status, code, retry_after_s = 503, "parsing_budget_exhausted", 1
    default_message = "too many request bodies are being read at once; retry shortly"


class StorageUnavailable(GatewayError):
    status, code, default_message = 503, "storage_unavailable", "the file store is unavailable"


class UpstreamTimeout(GatewayError):
    status, code, default_message = 504, "upstream_timeout", "upstream timed out"


class JobServiceTimeout(GatewayError):
    status, code, default_message = 504, "job_service_timeout", "the job service timed out"


ALL_ERRORS: tuple[type[GatewayError], ...] = (
    GatewayError,
    BadRequest,
    Unauthorized,
    Forbidden,
    InsufficientScope,
    SessionOwnedByAnotherUser,
    NotFound,
    RouteNotFound,
    MethodNotAllowed,
    Conflict,
    IdempotencyConflict,
    ToolCallCancelled,
    ToolCallConfirmed,
    UserErased,
    RequestTimeout,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
    UriNotAllowed,
    UserIdRequired,
    RateLimited,
    UpstreamUnavailable,
    UpstreamBadResponse,
    UpstreamAnswerTooLarge,
    UpstreamRefused,
    JobServiceUnavailable,
    JobServiceBadResponse,
    UpstreamPoolExhausted,
    NotReady,
    IdentityProviderUnavailable,
    ParsingBudgetExhausted,
    StorageUnavailable,
    UpstreamTimeout,
    JobServiceTimeout,
)


def error_body(exc: GatewayError, request_id: str) -> dict[str, Any]:
    error: dict[str, Any] = {
        "code": exc.error_code,
        "message": exc.message,
        "status": exc.status,
        "request_id": request_id,
    }
    if exc.field is not None:
        error["field"] = exc.field
    if isinstance(exc, UpstreamRefused):
        error["upstream_status"] = exc.upstream_status
    return {"error": error}


def error_bytes(exc: GatewayError, request_id: str) -> bytes:
    return json.dumps(error_body(exc, request_id), ensure_ascii=False).encode()
