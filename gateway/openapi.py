"""The OpenAPI 3.1 document of the gateway's own endpoints, generated from the routes' `@api` docs.

Request, response and query schemas come from the pydantic models next to each handler
(`model_json_schema`), so the document cannot drift from what the handlers validate. Paths the
gateway does not own are passed through to the engine (SPEC §5) and are not described here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from starlette.routing import BaseRoute, Route

from gateway import __version__
from gateway.routes.common import ApiDoc

OPENAPI_VERSION = "3.1.0"
REF_TEMPLATE = "#/components/schemas/{model}"
ERROR_SCHEMA_NAME = "ErrorResponse"
SECURITY_SCHEME = "bearerAuth"
ADMIN_SECURITY_SCHEME = "adminKey"

DESCRIPTION = """\
An authenticating, attachment-aware gateway in front of an EverOS-compatible memory engine.

This document describes the gateway's own endpoints. **The engine routes of the flavour's
route table are proxied to the engine** unchanged (method, body and headers, minus hop-by-hop
headers and credentials), after the caller's key and the identity checks; any other path is a
404 `route_not_found`. See the engine's own API for those routes.

Authentication: `Authorization: Bearer <key>` (keys come from `memory-gateway keys create`).
`/healthz`, `/readyz`, `/openapi.json` and `/metrics` need no key. Every response carries
`X-Request-Id`; errors the gateway itself produces share one JSON shape (`ErrorResponse`).
"""

ERROR_DESCRIPTIONS = {
    400: "Bad request",
    401: "Missing, unknown or revoked API key (`unauthorized`)",
    403: "Not allowed for this user, e.g. another user's id or session (`forbidden`, "
    "`session_owned_by_another_user`)",
    404: "No such object for this user (`not_found`)",
    409: "Conflicts with stored state (`conflict`, `idempotency_conflict`)",
    413: "Request body or upload larger than the configured limit (`payload_too_large`)",
    422: "Invalid input; `field` names the offending one (`validation_error`)",
    502: "The engine could not be reached or answered badly (`upstream_unavailable`, "
    "`upstream_bad_response`)",
    503: "Too many upstream requests in flight; retry shortly (`upstream_pool_exhausted`)",
    504: "The engine timed out (`upstream_timeout`)",
}

ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "status", "request_id"],
            "properties": {
                "code": {"type": "string", "description": "snake_case error code"},
                "message": {"type": "string", "description": "a human sentence"},
                "status": {"type": "integer", "description": "the HTTP status, repeated"},
                "request_id": {"type": "string", "description": "as in X-Request-Id"},
                "field": {"type": "string", "description": "the input at fault, when one is"},
            },
        }
    },
}

_PATH_PARAM = re.compile(r"{([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?}")
_CONVERTOR_SCHEMAS: dict[str, dict[str, Any]] = {
    "int": {"type": "integer", "minimum": 0},
    "float": {"type": "number", "minimum": 0},
    "uuid": {"type": "string", "format": "uuid"},
    "path": {"type": "string", "minLength": 1},
}
_SEGMENT_SCHEMA = {"type": "string", "minLength": 1, "pattern": "^[^/]+$"}


def _operations(routes: Iterable[BaseRoute]) -> list[tuple[Route, str, ApiDoc]]:
    """(route, method, doc) for every owned endpoint, in route order."""
    found = []
    for route in routes:
        if not isinstance(route, Route):
            continue
        doc = getattr(route.endpoint, "__api__", None)
        if not isinstance(doc, ApiDoc):
            doc = ApiDoc(summary=route.name.replace("_", " "))
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                found.append((route, method, doc))
    return found


def _model_schemas(
    operations: Sequence[tuple[Route, str, ApiDoc]],
) -> tuple[dict[tuple[type[BaseModel], JsonSchemaMode], dict[str, Any]], dict[str, Any]]:
    """One schema per (model, mode), sharing `components.schemas`; names kept unique by pydantic."""
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for _, _, doc in operations:
        for model, mode in ((doc.request, "validation"), (doc.query, "validation"),
                            (doc.response, "serialization")):
            if model is not None:
                wanted[(model, mode)] = None  # type: ignore[index]
    refs, top = models_json_schema(list(wanted), by_alias=True, ref_template=REF_TEMPLATE)
    return {(model, mode): ref for (model, mode), ref in refs.items()}, dict(top.get("$defs", {}))  # type: ignore[misc]


def _component(ref: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = components[ref["$ref"].rsplit("/", 1)[1]]
    return found


def _path_parameters(route: Route) -> tuple[str, list[dict[str, Any]]]:
    params = []
    for name, convertor in _PATH_PARAM.findall(route.path):
        schema = _CONVERTOR_SCHEMAS.get(convertor, _SEGMENT_SCHEMA)
        params.append({"name": name, "in": "path", "required": True, "schema": dict(schema)})
    return _PATH_PARAM.sub(r"{\1}", route.path), params


def _query_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema: a query string cannot say null, it leaves the key out."""
    prop = {k: v for k, v in prop.items() if k != "title" and not (k == "default" and v is None)}
    branches = prop.get("anyOf")
    if branches is not None:
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) == 1:
            del prop["anyOf"]
            prop = {**kept[0], **prop}
    return prop


def _query_parameters(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema.get("properties", {}).items():
        param: dict[str, Any] = {
            "name": name, "in": "query", "required": name in required,
            "schema": _query_schema(prop),
        }
        if "description" in prop:
            param["description"] = prop["description"]
        params.append(param)
    return params


def _error_statuses(doc: ApiDoc, public: bool, has_path_params: bool) -> list[int]:
    statuses = set(doc.errors)
    if not public:
        statuses.add(401)
    if has_path_params:
        statuses.add(404)
    if doc.request is not None:
        statuses.update((413, 422))
    if doc.query is not None:
        statuses.add(422)
    return sorted(statuses)


def _success_content(
    doc: ApiDoc, refs: dict[tuple[type[BaseModel], JsonSchemaMode], dict[str, Any]]
) -> tuple[str, dict[str, Any] | None]:
    """(description, content) of the success response."""
    if doc.response is not None:
        return HTTPStatus(doc.status).phrase, {
            "application/json": {"schema": refs[(doc.response, "serialization")]}
        }
    if doc.status == 204:
        return HTTPStatus(204).phrase, None
    if doc.request is None and doc.content_type:
        text = doc.content_type.startswith("text/")
        schema = {"type": "string"} if text else {"type": "string", "format": "binary"}
        return HTTPStatus(doc.status).phrase, {doc.content_type: {"schema": schema}}
    # The engine's own add/search paths and /memories/add answer in the engine's shape.
    return "The engine's answer, in the engine's shape", {"application/json": {"schema": {}}}


def build_document(
    routes: Iterable[BaseRoute], public_paths: Collection[str]
) -> dict[str, Any]:
    """The OpenAPI 3.1 document for these routes; `public_paths` need no API key."""
    operations = _operations(routes)
    refs, components = _model_schemas(operations)
    components[ERROR_SCHEMA_NAME] = ERROR_SCHEMA
    error_ref = {"$ref": REF_TEMPLATE.format(model=ERROR_SCHEMA_NAME)}
    names = [route.name for route, _, _ in operations]
    paths: dict[str, dict[str, Any]] = {}
    tags: dict[str, None] = {}
    for route, method, doc in operations:
        path, parameters = _path_parameters(route)
        public = route.path in public_paths
        if doc.query is not None:
            parameters += _query_parameters(
                _component(refs[(doc.query, "validation")], components)
            )
        operation_id = route.name
        if names.count(route.name) > 1:
            operation_id += "_" + re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_")
        operation: dict[str, Any] = {"operationId": operation_id, "summary": doc.summary}
        if doc.tag:
            operation["tags"] = [doc.tag]
            tags[doc.tag] = None
        if public:
            operation["security"] = []
        elif path.startswith("/admin/"):
            operation["security"] = [{ADMIN_SECURITY_SCHEME: []}]
        if parameters:
            operation["parameters"] = parameters
        if doc.request is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {
                    doc.content_type or "application/json": {
                        "schema": refs[(doc.request, "validation")]
                    }
                },
            }
        description, content = _success_content(doc, refs)
        responses: dict[str, Any] = {}
        for status in (doc.status, *doc.also):
            responses[str(status)] = {"description": description}
            if content is not None:
                responses[str(status)]["content"] = content
        for status in _error_statuses(doc, public, "{" in path):
            responses[str(status)] = {
                "description": ERROR_DESCRIPTIONS.get(status, HTTPStatus(status).phrase),
                "content": {"application/json": {"schema": error_ref}},
            }
        operation["responses"] = responses
        paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "memory-gateway", "version": __version__, "description": DESCRIPTION},
        "tags": [{"name": tag} for tag in tags],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A user or service key (`memory-gateway keys create`, "
                                   "POST /admin/keys) or a JWT from the product's identity "
                                   "provider (docs/identity.md)",
                },
                ADMIN_SECURITY_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An admin key (`memory-gateway keys create --admin`); it "
                                   "reaches only /admin/",
                },
            },
        },
        "security": [{SECURITY_SCHEME: []}],
    }


def document_bytes(routes: Iterable[BaseRoute], public_paths: Collection[str]) -> bytes:
    return json.dumps(build_document(routes, public_paths), ensure_ascii=False).encode()


def endpoint_table(document: dict[str, Any]) -> str:
    """A Markdown overview of the document's endpoints grouped by tag (for docs/api.md)."""
    by_tag: dict[str, list[str]] = {}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["other"])[0]
            security = operation.get("security")
            key = "" if security is None else " (no key)" if security == [] else " (admin key)"
            by_tag.setdefault(tag, []).append(
                f"| `{method.upper()} {path}` | {operation['summary']}{key} |"
            )
    lines: list[str] = []
    for tag, rows in by_tag.items():
        lines += [f"### {tag}", "", "| endpoint | what it does |", "|---|---|", *rows, ""]
    return "\n".join(lines)
