"""The OpenAPI document: valid 3.1, complete, generated from the handlers' pydantic models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import respx
from openapi_spec_validator import validate
from starlette.routing import Route

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.routes import PUBLIC_PATHS
from tests.conftest import client_for

ROOT = Path(__file__).resolve().parent.parent


async def fetch(anonymous: httpx.AsyncClient) -> dict[str, Any]:
    response = await anonymous.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    document: dict[str, Any] = response.json()
    return document


def owned(app: Gateway) -> list[tuple[str, str]]:
    """(OpenAPI path, method) of every owned route."""
    found = []
    for route in app.routes:
        assert isinstance(route, Route)
        path = re.sub(r"{(\w+)(:\w+)?}", r"{\1}", route.path)
        found += [(path, m.lower()) for m in route.methods or () if m != "HEAD"]
    return found


def conforms(document: dict[str, Any], schema: dict[str, Any], instance: Any) -> None:
    """Validate `instance` against a schema of the document (its $refs resolved in it)."""
    rooted = {**schema, "components": document["components"]}
    jsonschema.Draft202012Validator(rooted).validate(instance)


async def test_openapi_document_is_served_without_a_key_and_validates(
    anonymous: httpx.AsyncClient,
) -> None:
    document = await fetch(anonymous)
    validate(document)
    assert document["openapi"].startswith("3.1")
    assert "proxied to the" in document["info"]["description"]


async def test_every_owned_route_appears_with_its_methods(
    app: Gateway, anonymous: httpx.AsyncClient
) -> None:
    document = await fetch(anonymous)
    listed = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert listed == set(owned(app))


async def test_every_owned_handler_is_documented(app: Gateway) -> None:
    undocumented = [
        route.path for route in app.routes
        if isinstance(route, Route) and not hasattr(route.endpoint, "__api__")
    ]
    assert undocumented == []


async def test_operation_ids_are_unique(anonymous: httpx.AsyncClient) -> None:
    document = await fetch(anonymous)
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


async def test_create_agent_body_is_the_camel_case_model_with_its_constraints(
    anonymous: httpx.AsyncClient,
) -> None:
    document = await fetch(anonymous)
    operation = document["paths"]["/agents"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(schema["properties"]) == {"name", "profile", "openingMessage"}
    assert schema["required"] == ["name"]
    assert schema["properties"]["name"]["maxLength"] == 200
    assert "201" in operation["responses"]
    assert {"401", "413", "422"} <= set(operation["responses"])


async def test_enums_and_ranges_come_from_the_models(anonymous: httpx.AsyncClient) -> None:
    document = await fetch(anonymous)
    schemas = document["components"]["schemas"]
    policy = schemas["ContextPayload"]["properties"]["focusPolicy"]
    assert policy["enum"] == ["auto", "selected", "latest_result", "original"]
    message = schemas["MessageIn"]["properties"]["clientMessageId"]
    assert (message["minLength"], message["maxLength"]) == (1, 128)


async def test_query_parameters_come_from_the_query_model(anonymous: httpx.AsyncClient) -> None:
    document = await fetch(anonymous)
    params = {p["name"]: p for p in document["paths"]["/agents"]["get"]["parameters"]}
    assert params["limit"]["in"] == "query"
    assert params["limit"]["schema"]["minimum"] == 1
    assert params["limit"]["schema"]["maximum"] == 200
    assert params["cursor"]["schema"] == {"type": "string"}  # a query string cannot say null


async def test_path_parameters_are_required(anonymous: httpx.AsyncClient) -> None:
    document = await fetch(anonymous)
    operation = document["paths"]["/agents/{agent_id}/memories/{memory_id}"]["patch"]
    params = [(p["name"], p["in"], p["required"]) for p in operation["parameters"]]
    assert params == [("agent_id", "path", True), ("memory_id", "path", True)]
    assert "404" in operation["responses"]


async def test_upload_is_multipart_with_a_binary_file(anonymous: httpx.AsyncClient) -> None:
    document = await fetch(anonymous)
    body = document["paths"]["/resources"]["post"]["requestBody"]["content"]
    ref = body["multipart/form-data"]["schema"]["$ref"]
    form = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert form["properties"]["file"] == {"format": "binary", "title": "File", "type": "string"}
    assert form["required"] == ["file"]


async def test_public_paths_need_no_key_and_the_rest_a_bearer_key(
    anonymous: httpx.AsyncClient,
) -> None:
    document = await fetch(anonymous)
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    assert document["security"] == [{"bearerAuth": []}]
    for path, operations in document["paths"].items():
        for operation in operations.values():
            if path in PUBLIC_PATHS:
                assert operation["security"] == []
                assert "401" not in operation["responses"]
            elif path.startswith("/admin/"):
                assert operation["security"] == [{"adminKey": []}]
                assert "401" in operation["responses"]
            else:
                assert "security" not in operation
                assert "401" in operation["responses"]
    assert {"/healthz", "/readyz", "/openapi.json", "/metrics"} <= set(document["paths"])


async def test_a_real_error_matches_the_documented_error_shape(
    anonymous: httpx.AsyncClient, alice: httpx.AsyncClient
) -> None:
    document = await fetch(anonymous)
    unauthorized = document["paths"]["/agents"]["get"]["responses"]["401"]
    schema = unauthorized["content"]["application/json"]["schema"]
    conforms(document, schema, (await anonymous.get("/agents")).json())
    invalid = await alice.post("/agents", json={"name": ""})
    assert invalid.status_code == 422
    conforms(document, schema, invalid.json())
    assert "field" in invalid.json()["error"]


async def test_real_answers_match_their_documented_schemas(
    anonymous: httpx.AsyncClient, alice: httpx.AsyncClient
) -> None:
    document = await fetch(anonymous)
    created = await alice.post("/agents", json={"name": "Ada", "profile": {"tone": "dry"}})
    assert created.status_code == 201
    agent_schema = document["paths"]["/agents"]["post"]["responses"]["201"]["content"]
    conforms(document, agent_schema["application/json"]["schema"], created.json())
    listed = await alice.get("/agents")
    list_schema = document["paths"]["/agents"]["get"]["responses"]["200"]["content"]
    conforms(document, list_schema["application/json"]["schema"], listed.json())
    health = document["paths"]["/healthz"]["get"]["responses"]["200"]["content"]
    alive = (await anonymous.get("/healthz")).json()
    conforms(document, health["application/json"]["schema"], alive)


async def test_docs_api_md_lists_every_owned_endpoint(app: Gateway) -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    missing = [f"{m.upper()} {p}" for p, m in owned(app) if f"`{m.upper()} {p}`" not in text]
    assert missing == [], "regenerate the table in docs/api.md (see its last section)"


async def test_the_document_follows_the_upstream_flavour(
    settings: Settings, engine: respx.MockRouter
) -> None:
    mem0 = create_app(settings.with_values(upstream={"flavor": "mem0"}),
                      upstream_transport=httpx.MockTransport(engine.async_handler))
    async with mem0.running(), client_for(mem0) as anonymous:
        document = await fetch(anonymous)
    validate(document)
    assert {(p, m) for p, ops in document["paths"].items() for m in ops} == set(owned(mem0))
    assert "post" in document["paths"]["/search"]
    assert "/api/v2/memory/search" not in document["paths"]


async def test_docs_is_a_public_page_of_what_the_public_document_says(
    anonymous: httpx.AsyncClient,
) -> None:
    page = await anonymous.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    document = (await anonymous.get("/openapi.json")).json()
    for path in ("/memories/search", "/agents", "/resources"):
        assert f"<code>{path}</code>" in page.text and path in document["paths"]
    assert "<script" not in page.text and "/openapi.json" in page.text
