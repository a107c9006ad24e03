"""Prometheus metrics at `/metrics`: bounded labels, latency, upstream errors, domain counters."""

from __future__ import annotations

import httpx
import pytest
import respx
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import Gateway, create_app
from gateway.config import Settings
from gateway.metrics import Metrics
from tests.attachment_helpers import answer_search, engine_ok, episodes
from tests.conftest import client_for

# Routes beyond the everos table, opened the way an operator would (SPEC §5).
OPENED = ["GET /api/v2/anything/*", "PURGE /cache", "BREW /cache", "GET /down", "GET /slow"]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.with_values(upstream={"allow_paths": OPENED})


def sample(app: Gateway, name: str, **labels: str) -> float:
    value = app.services.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def requests(app: Gateway, route: str, method: str, status: int) -> float:
    return sample(app, "gateway_requests_total", route=route, method=method, status=str(status))


async def test_metrics_are_served_without_a_key_in_the_prometheus_format(
    anonymous: httpx.AsyncClient,
) -> None:
    await anonymous.get("/healthz")
    response = await anonymous.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(response.text)}
    assert {
        "gateway_requests", "gateway_request_duration_seconds", "gateway_upstream_errors",
        "gateway_attachments_recorded", "gateway_attachments_matched", "gateway_resolutions",
    } <= names


async def test_requests_count_by_route_template_never_the_raw_path(
    app: Gateway, alice: httpx.AsyncClient, anonymous: httpx.AsyncClient
) -> None:
    for agent_id in ("agt_one", "agt_two"):
        assert (await alice.get(f"/agents/{agent_id}")).status_code == 404
    assert requests(app, "/agents/{agent_id}", "GET", 404) == 2
    exposition = (await anonymous.get("/metrics")).text
    assert "agt_one" not in exposition and "agt_two" not in exposition


async def test_latency_histogram_observes_every_request(
    app: Gateway, anonymous: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await anonymous.get("/healthz")
    assert sample(app, "gateway_request_duration_seconds_count", route="/healthz") == 3
    assert sample(app, "gateway_request_duration_seconds_bucket", route="/healthz", le="+Inf") == 3
    assert sample(app, "gateway_request_duration_seconds_sum", route="/healthz") > 0


async def test_pass_through_counts_as_proxy(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.get("/api/v2/anything/123").mock(return_value=httpx.Response(207))
    engine.get("/api/v2/anything/456").mock(return_value=httpx.Response(207))
    await alice.get("/api/v2/anything/123")
    await alice.get("/api/v2/anything/456")
    assert requests(app, "proxy", "GET", 207) == 2


async def test_requests_that_reach_no_handler_count_as_unmatched(
    app: Gateway, anonymous: httpx.AsyncClient, alice: httpx.AsyncClient
) -> None:
    assert (await anonymous.get("/agents")).status_code == 401
    assert (await alice.get("/resources/a/b/c/d")).status_code == 404
    assert requests(app, "unmatched", "GET", 401) == 1
    assert requests(app, "unmatched", "GET", 404) == 1


async def test_unusual_methods_share_one_label(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.route(method="PURGE", path="/cache").mock(return_value=httpx.Response(200))
    engine.route(method="BREW", path="/cache").mock(return_value=httpx.Response(200))
    await alice.request("PURGE", "/cache")
    await alice.request("BREW", "/cache")
    assert requests(app, "proxy", "OTHER", 200) == 2


async def test_upstream_failures_count_by_kind(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.get("/down").mock(side_effect=httpx.ConnectError("refused"))
    engine.get("/slow").mock(side_effect=httpx.ReadTimeout("slow"))
    assert (await alice.get("/down")).status_code == 502
    assert (await alice.get("/slow")).status_code == 504
    assert (await alice.get("/slow")).status_code == 504
    assert sample(app, "gateway_upstream_errors_total", kind="unavailable") == 1
    assert sample(app, "gateway_upstream_errors_total", kind="timeout") == 2
    assert sample(app, "gateway_upstream_errors_total", kind="pool_exhausted") == 0


async def test_a_search_answer_that_is_not_json_counts_as_bad_response(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine.post("/api/v2/memory/search").mock(return_value=httpx.Response(200, content=b"<html>"))
    response = await alice.post("/memories/search", json={"query": "x", "user_id": "alice"})
    assert response.status_code == 502
    assert sample(app, "gateway_upstream_errors_total", kind="bad_response") == 1


async def test_attachments_recorded_by_source_and_matched_in_search(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    items = [{"type": "text", "text": "look"},
             {"type": "image", "uri": "https://cdn.test/a/sunset.png"},
             {"type": "image", "uri": "https://cdn.test/a/beach.png"}]
    added = await alice.post("/memories/add", json={
        "session_id": "s1", "messages": [{"role": "user", "sender_id": "alice", "content": items}],
    })
    assert added.status_code == 200, added.text
    assert sample(app, "gateway_attachments_recorded_total", source="memory_add_uri") == 2
    answer_search(engine, episodes(
        {"id": "ep1", "session_id": "s1", "episode": "sunset.png and beach.png", "score": 1.0}))
    found = await alice.post("/memories/search", json={"query": "sunset", "user_id": "alice"})
    assert len(found.json()["results"][0]["attachments"]) == 2
    assert sample(app, "gateway_attachments_matched_total") == 2


async def test_uploads_count_as_recorded_attachments(
    app: Gateway, alice: httpx.AsyncClient, engine: respx.MockRouter
) -> None:
    engine_ok(engine)
    response = await alice.post("/resources", files={"file": ("notes.txt", b"hello")})
    assert response.status_code == 201, response.text
    assert sample(app, "gateway_attachments_recorded_total", source="resource_upload") == 1


async def test_resolutions_count_by_mode(app: Gateway, alice: httpx.AsyncClient) -> None:
    asset = await alice.post("/assets", json={
        "mediaType": "image", "sourceType": "upload", "originalUrl": "https://cdn.test/a.png",
        "chatId": "c1",
    })
    assert asset.status_code == 201, asset.text
    decided = await alice.post("/chats/c1/resolve", json={
        "text": "make it brighter", "uploadedAssetIds": [asset.json()["id"]],
    })
    mode = decided.json()["resolutionMode"]
    assert mode == "current_upload"
    assert sample(app, "gateway_resolutions_total", mode=mode) == 1


def test_latency_buckets_are_cumulative_with_inclusive_bounds() -> None:
    metrics = Metrics()
    for seconds in (0.0005, 0.001, 0.003, 100.0):
        metrics.request("/healthz", "GET", 200, seconds)
    metrics.request("/healthz", "BREW", 418, 0.2)
    value = metrics.registry.get_sample_value

    def bucket(le: str) -> float | None:
        return value("gateway_request_duration_seconds_bucket", {"route": "/healthz", "le": le})

    assert [bucket(le) for le in ("0.001", "0.0025", "0.005", "0.25", "60.0", "+Inf")] == [
        2, 2, 3, 4, 4, 5]
    assert value("gateway_request_duration_seconds_count", {"route": "/healthz"}) == 5
    assert value("gateway_request_duration_seconds_sum", {"route": "/healthz"}) == pytest.approx(
        100.2045)
    assert value("gateway_requests_total",
                 {"route": "/healthz", "method": "GET", "status": "200"}) == 4
    assert value("gateway_requests_total",
                 {"route": "/healthz", "method": "OTHER", "status": "418"}) == 1


async def test_each_app_has_its_own_registry(settings: Settings) -> None:
    one, two = Metrics(), Metrics()
    one.request("/healthz", "GET", 200, 0.001)
    assert one.registry.get_sample_value(
        "gateway_requests_total", {"route": "/healthz", "method": "GET", "status": "200"}) == 1
    assert two.registry.get_sample_value(
        "gateway_requests_total", {"route": "/healthz", "method": "GET", "status": "200"}) is None


async def test_metrics_can_be_turned_off(settings: Settings, engine: respx.MockRouter) -> None:
    off = create_app(settings.with_values(metrics={"enabled": False}),
                     upstream_transport=httpx.MockTransport(engine.async_handler))
    async with off.running(), client_for(off) as anonymous:
        await anonymous.get("/healthz")
        response = await anonymous.get("/metrics")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert requests(off, "/healthz", "GET", 200) == 0


async def test_metrics_carry_the_default_process_and_platform_collectors(
    anonymous: httpx.AsyncClient,
) -> None:
    text = (await anonymous.get("/metrics")).text
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"process_resident_memory_bytes", "process_cpu_seconds", "process_start_time_seconds",
            "python_info", "python_gc_collections"} <= names
