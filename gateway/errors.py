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
Upstream error *responses* are not errors of ours: they pass through unchanged.
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
    return {"error": error}


def error_bytes(exc: GatewayError, request_id: str) -> bytes:
    return json.dumps(error_body(exc, request_id), ensure_ascii=False).encode()
