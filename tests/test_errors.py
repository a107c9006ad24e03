"""The one error shape, for every error class and for upstream transport failures."""

import httpx
import pytest
import respx
from starlette.requests import Request
from starlette.routing import Route

from gateway import errors
from gateway.app import Gateway
from gateway.errors import ALL_ERRORS, error_body
from tests.conftest import client_for


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=lambda c: c.__name__)
async def test_every_error_class_renders_the_one_shape(
    app: Gateway, make_key, cls: type[errors.GatewayError]
) -> None:
    async def boom(request: Request) -> None:
        raise cls("it went wrong", field="f")

    app.add_route(Route("/agents/_boom", boom, methods=["GET"]))
    async with client_for(app, make_key("alice")) as client:
        response = await client.get("/agents/_boom")
    assert response.status_code == cls.status
    body = response.json()
    extra = {"upstream_status": 502} if cls is errors.UpstreamRefused else {}
    assert body == {"error": {"code": cls.code, "message": "it went wrong", "status": cls.status,
                              "request_id": response.headers["x-request-id"], "field": "f",
                              **extra}}
    assert error_body(cls(), "r")["error"]["code"] == cls.code


async def test_unexpected_exception_is_500_in_the_shape(app: Gateway, make_key) -> None:
    async def boom(request: Request) -> None:
        raise RuntimeError("secret detail")

    app.add_route(Route("/agents/_crash", boom, methods=["GET"]))
    async with client_for(app, make_key("alice")) as client:
        response = await client.get("/agents/_crash")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "secret detail" not in response.text


async def test_every_response_carries_a_request_id(
    alice: httpx.AsyncClient, anonymous: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.get("/health").mock(return_value=httpx.Response(200))
    for response in (await alice.get("/health"), await anonymous.get("/health"),
                     await alice.get("/not-a-route"), await anonymous.get("/healthz")):
        assert len(response.headers["x-request-id"]) >= 16
    response = await alice.get("/health", headers={"X-Request-Id": "client-chosen-1"})
    assert response.headers["x-request-id"] == "client-chosen-1"


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (httpx.ConnectError("refused"), 502, "upstream_unavailable"),
        (httpx.RemoteProtocolError("bad"), 502, "upstream_unavailable"),
        (httpx.ReadError("reset"), 502, "upstream_unavailable"),
        (httpx.ConnectTimeout("slow"), 504, "upstream_timeout"),
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
        (httpx.WriteTimeout("slow"), 504, "upstream_timeout"),
        (httpx.PoolTimeout("full"), 503, "upstream_pool_exhausted"),
    ],
)
async def test_transport_failures_map_to_gateway_errors(
    alice: httpx.AsyncClient, engine: respx.MockRouter, exc: Exception, status: int, code: str
) -> None:
    engine.post("/api/v2/memory/get").mock(side_effect=exc)
    response = await alice.post("/api/v2/memory/get", 
        json={"user_id": "alice", "memory_type": "episode"})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_writes_are_never_retried_but_idempotent_reads_are_once(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    post = engine.post("/api/v2/memory/get").mock(side_effect=httpx.ConnectError("refused"))
    get = engine.get("/health").mock(
        side_effect=[httpx.ConnectError("stale"), httpx.Response(200, text="ok")]
    )
    body = {"user_id": "alice", "memory_type": "episode"}
    assert (await alice.post("/api/v2/memory/get", json=body)).status_code == 502
    assert post.call_count == 1
    response = await alice.get("/health")
    assert response.status_code == 200 and get.call_count == 2


async def test_upstream_error_responses_pass_through_unchanged(
    alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.post("/api/v2/memory/get").mock(
        return_value=httpx.Response(422, json={"detail": "engine says no"})
    )
    response = await alice.post("/api/v2/memory/get", 
        json={"user_id": "alice", "memory_type": "episode"})
    assert response.status_code == 422
    assert response.json() == {"detail": "engine says no"}


@pytest.mark.parametrize(("body", "message"), [
    (b'{"request_id": "r", "error": {"code": "INVALID_INPUT", "message": "m1"}}', "m1"),
    (b'{"status": 2018, "error": "objectList required"}', "objectList required"),
    (b'{"detail": "Not Found"}', "Not Found"),
    (b'{"detail": [{"loc": ["body", "user_id"], "msg": "Field required"}]}',
     "body.user_id: Field required"),
    (b'{"code": 50000, "message": "m2"}', "m2"),
    (b"plain text\n", "plain text"),
    (b'{"other": 1}', '{"other": 1}'),
])
def test_an_engines_message_is_read_from_each_engines_shape(body: bytes, message: str) -> None:
    refused = errors.UpstreamRefused.of(415, body)
    assert (refused.status, refused.message, refused.upstream_status) == (415, message, 415)
    assert error_body(refused, "rid")["error"]["upstream_status"] == 415


async def test_malformed_json_gets_one_message_on_every_route(alice: httpx.AsyncClient) -> None:
    messages = set()
    for path in ("/agents", "/memories/add", "/memories/search", "/api/v2/memory/add"):
        response = await alice.post(path, content=b'{"name": ', headers={
            "Content-Type": "application/json"})
        assert response.status_code == 422, (path, response.text)
        error = response.json()["error"]
        assert error["field"] == "body"
        messages.add(error["message"])
    assert messages == {"request body is not valid JSON: Expecting value: line 1 column 10 "
                        "(char 9)"}
