"""The MCP endpoint's errors in the shapes of SPEC §19.

- Arguments a tool's schema refuses: JSON-RPC -32602 whose message names the field, in every
  protocol version (not a tool result: the call never ran).
- A refusal of the REST twin (401/403/404/409/413/422) or an engine failure (502/504): a tool
  result with `isError: true` and `structuredContent: {"error": {code, message, status}}`, the
  gateway's §4 shape.
- A resource that is not the caller's (another user's, unknown, deleted): -32002 "Resource not
  found" with `data: {uri}`, the same answer for each (no oracle).
- A call outside the credential's scopes: HTTP 403 whose JSON-RPC error `data` is the §4 error
  (gateway/mcp/mount.py sends it).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from gateway.errors import GatewayError, error_body
from gateway.serving import jsonio
from gateway.serving.inprocess import Answer

INVALID_PARAMS = types.INVALID_PARAMS  # -32602
RESOURCE_NOT_FOUND = -32002
RESOURCE_TOO_LARGE = -32003
INSUFFICIENT_SCOPE = -32001


def invalid_arguments(exc: ValidationError, prefix: str = "") -> MCPError:
    """-32602 naming the first field at fault (all of them in `data.errors`)."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        location = ".".join(str(part) for part in error["loc"] if not _union_arm(part))
        message = error["msg"].removeprefix("Value error, ")
        if not location and ": " in message:  # a rule across fields names its field first
            location, message = message.split(": ", 1)
        problems.append({"field": prefix + location if location else prefix.rstrip("."),
                         "message": message})
    first = problems[0] if problems else {"field": prefix.rstrip("."), "message": "invalid"}
    field = first["field"] or "arguments"
    message = first["message"]
    if not message.startswith(field):
        message = f"{field}: {message}"
    return MCPError(INVALID_PARAMS, message, {"field": field, "errors": problems})


def _union_arm(part: Any) -> bool:
    """pydantic names the model a union member is tried as (`InlineFile`): not a field."""
    return isinstance(part, str) and part[:1].isupper()


def unknown_tool(name: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"name: no tool named {name!r}", {"field": "name"})


def resource_not_found(uri: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})


def resource_too_large(uri: str, size: int, limit: int, url: str) -> MCPError:
    return MCPError(
        RESOURCE_TOO_LARGE,
        f"this file is {size} bytes, more than mcp.max_read_bytes ({limit}): download it from "
        f"{url} with your credential",
        {"uri": uri, "size": size, "url": url},
    )


def error_of(answer: Answer) -> dict[str, Any]:
    """The §4 error of a route's refusal; an engine's own error body (its paths pass refusals
    through as they are) is put in that shape with the engine's status."""
    try:
        body = jsonio.loads(answer.body) if answer.body else None
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        shaped = {"code": str(error.get("code") or "upstream_error"),
                  "message": error["message"], "status": answer.status}
        for key in ("field", "request_id", "upstream_status"):
            if key in error:
                shaped[key] = error[key]
        return shaped
    message = (body.get("message") or body.get("detail")) if isinstance(body, dict) else None
    return {"code": "upstream_error" if answer.status >= 500 else "request_refused",
            "message": message if isinstance(message, str) else f"refused ({answer.status})",
            "status": answer.status, "request_id": answer.header("x-request-id")}


def refusal(answer: Answer) -> dict[str, Any]:
    """The tool result for a route's refusal: `isError`, the §4 error, and its sentence."""
    return failure(error_of(answer))


def failure(error: dict[str, Any]) -> dict[str, Any]:
    text = f"{error['code']} ({error['status']}): {error['message']}"
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"error": error},
            "isError": True}


def gateway_failure(exc: GatewayError, request_id: str) -> dict[str, Any]:
    """A refusal the tool itself found, before any route ran (an unknown resource URI)."""
    return failure(error_body(exc, request_id)["error"])
