"""`resources/list` and `resources/read` (SPEC §19): the caller's files, through their routes.

`resources/list` is `GET /resources` (the caller's uploads, paginated, as `resource://<id>`);
`resources/read` is `GET /resources/{id}/content` for `resource://<id>` and
`GET /attachments/{id}/content` for `attachment://<id>`. Whatever the route does not serve to
the caller (another user's file, an unknown or deleted one, a URI of another shape) is the one
error -32002 "Resource not found": nothing tells a foreign id from a made-up one.
"""

from __future__ import annotations

import base64
from urllib.parse import urlencode

import mcp_types as types
from mcp.shared.exceptions import MCPError

from gateway.mcp import errors
from gateway.mcp.tools import RESOURCE_SCHEME, Caller, parse_file_uri

PAGE = 50


async def list_resources(caller: Caller, cursor: str | None) -> types.ListResourcesResult:
    query = {"limit": str(PAGE)}
    if cursor:
        query["cursor"] = cursor
    answer = await caller.call("GET", "/resources", query=urlencode(query))
    if answer.status == 422:
        raise MCPError(errors.INVALID_PARAMS, "cursor: not a cursor resources/list returned",
                       {"field": "cursor"})
    if not answer.ok:
        raise MCPError(types.INTERNAL_ERROR, "could not list your resources",
                       {"error": errors.error_of(answer)})
    page = answer.json()
    return types.ListResourcesResult(
        resources=[types.Resource(uri=item["uri"], name=item["name"],
                                  mime_type=item["content_type"], size=item["size"])
                   for item in page["items"]],
        next_cursor=page.get("next_cursor"),
    )


async def read_resource(caller: Caller, uri: str) -> types.ReadResourceResult:
    parsed = parse_file_uri(uri)
    if parsed is None:
        raise errors.resource_not_found(uri)
    scheme, file_id = parsed
    kind = "resources" if scheme == RESOURCE_SCHEME else "attachments"
    path = f"/{kind}/{file_id}/content"
    limit = caller.gateway.settings.mcp.max_read_bytes
    answer = await caller.call("GET", path, max_body=limit)
    if answer.status == 404:
        raise errors.resource_not_found(uri)
    if not answer.ok:
        raise MCPError(types.INTERNAL_ERROR, "could not read this resource",
                       {"uri": uri, "error": errors.error_of(answer)})
    if answer.size > limit:
        url = caller.gateway.settings.server.public_url.rstrip("/") + path
        raise errors.resource_too_large(uri, answer.size, limit, url)
    mime = (answer.header("content-type") or "application/octet-stream").split(";")[0].strip()
    return types.ReadResourceResult(contents=[types.BlobResourceContents(
        uri=uri, mime_type=mime, blob=base64.b64encode(answer.body).decode("ascii"))])
