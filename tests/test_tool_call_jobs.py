"""The job-service client (respx) and the whole flow against a real loopback job service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx

from gateway.config import Settings
from gateway.errors import JobServiceBadResponse, JobServiceTimeout, JobServiceUnavailable
from gateway.toolcalls.jobs import HttpJobService, Job, Media, parse_job
from tests.conftest import client_for
from tests.fake_job_service import fake_job_service
from tests.tool_call_helpers import (
    JOBS,
    confirm,
    gateway,
    proposed_call,
    tool_message,
    with_jobs,
)

pytestmark = pytest.mark.both_databases

# --- the client, against respx -----------------------------------------------------------------


@pytest.fixture
def service() -> respx.MockRouter:
    return respx.MockRouter(base_url=JOBS, assert_all_called=False)


def client(router: respx.MockRouter) -> HttpJobService:
    return HttpJobService(JOBS + "/", 5.0, httpx.MockTransport(router.async_handler))


async def test_submit_posts_kind_and_payload_with_the_idempotency_key(
    service: respx.MockRouter,
) -> None:
    route = service.post("/jobs").respond(201, json={"id": "j1", "status": "queued"})
    jobs = client(service)
    job = await jobs.submit("alice", "image.edit", {"args": {"a": 1}}, "editor-agent:c:m:t")
    assert job == Job("j1", "queued")
    request = route.calls.last.request
    assert request.headers["idempotency-key"] == "editor-agent:c:m:t"
    assert request.url == f"{JOBS}/jobs"
    assert request.read() == b'{"kind":"image.edit","payload":{"args":{"a":1}}}'
    await jobs.aclose()


async def test_read_gets_the_job_by_its_quoted_id(service: respx.MockRouter) -> None:
    route = service.get("/jobs/a%2Fb").respond(200, json={
        "id": "a/b", "status": "completed",
        "result": {"media": [{"kind": "video", "url": "https://v/1.mp4"}]}})
    jobs = client(service)
    job = await jobs.read("alice", "a/b")
    assert job == Job("a/b", "completed", media=(Media("video", "https://v/1.mp4"),))
    assert route.called
    await jobs.aclose()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (httpx.ConnectError("refused"), JobServiceUnavailable),
        (httpx.ReadTimeout("slow"), JobServiceTimeout),
        (httpx.Response(500, json={}), JobServiceUnavailable),
        (httpx.Response(404, json={}), JobServiceUnavailable),
        (httpx.Response(200, text="<html>"), JobServiceBadResponse),
        (httpx.Response(200, json={"id": "other", "status": "queued"}), JobServiceBadResponse),
        (httpx.Response(200, json={"id": "j1", "status": "done"}), JobServiceBadResponse),
    ],
)
async def test_read_failures_become_job_service_errors(
    service: respx.MockRouter, answer: Any, error: type[Exception]
) -> None:
    service.get("/jobs/j1").mock(side_effect=[answer])
    jobs = client(service)
    with pytest.raises(error):
        await jobs.read("alice", "j1")
    await jobs.aclose()


PARSED = [
    ({"id": "j", "status": "queued"}, Job("j", "queued")),
    ({"id": "j", "status": "running", "result": "ignored"}, Job("j", "running")),
    ({"id": "j", "status": "failed", "error": "boom"}, Job("j", "failed", error="boom")),
    ({"id": "j", "status": "failed", "error": {"message": "why"}}, Job("j", "failed", error="why")),
    ({"id": "j", "status": "failed"}, Job("j", "failed", error="the job failed")),
    ({"id": "j", "status": "completed", "result": {"media": [
        {"kind": "image", "url": "u", "mimeType": "image/png", "width": 3, "height": -1}]}},
     Job("j", "completed", media=(Media("image", "u", "image/png", 3, None),))),
]


@pytest.mark.parametrize(("body", "job"), PARSED)
def test_job_answers_are_parsed(body: dict[str, Any], job: Job) -> None:
    assert parse_job(body, "j") == job


@pytest.mark.parametrize(
    "result",
    [None, {}, {"media": []}, {"media": [{"kind": "image"}]},
     {"media": [{"kind": "text", "url": "u"}]}, {"media": ["u"]}],
)
def test_a_completed_job_without_usable_media_is_unreadable(result: Any) -> None:
    with pytest.raises(JobServiceBadResponse):
        parse_job({"id": "j", "status": "completed", "result": result}, "j")


# --- the flow, against a real job service on loopback -------------------------------------------


@pytest.fixture(scope="module")
def job_service_url() -> Iterator[str]:
    with fake_job_service() as url:
        yield url


def stats(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/control/stats").json())


def control(url: str, path: str, body: dict[str, Any]) -> None:
    httpx.post(f"{url}/control/{path}", json=body).raise_for_status()


def loopback(settings: Settings, url: str) -> Settings:
    return with_jobs(settings, base_url=url, timeout_s=5.0)


async def test_twenty_concurrent_confirms_reach_the_job_service_once(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    job_service_url: str,
) -> None:
    before = stats(job_service_url)
    async with gateway(loopback(settings, job_service_url), engine) as app, \
            client_for(app, make_key("alice")) as alice:
        conversation_id, message_id, _ = await proposed_call(alice)
        answers = await asyncio.gather(
            *(confirm(alice, conversation_id, message_id) for _ in range(20))
        )
    assert [a.status_code for a in answers] == [200] * 20
    job_ids = {a.json()["message"]["toolCall"]["externalJobId"] for a in answers}
    after = stats(job_service_url)
    assert after["submissions"] - before["submissions"] == 1
    assert after["jobs"] - before["jobs"] == 1
    [submitted] = after["submitted"][before["jobs"]:]
    assert submitted["key"] == f"editor-agent:{conversation_id}:{message_id}:edit_image"
    assert len(job_ids) == 1


async def test_restart_between_confirm_and_read_settles_from_the_job_service(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    job_service_url: str,
) -> None:
    token = make_key("alice")
    configured = loopback(settings, job_service_url)
    async with gateway(configured, engine) as first, client_for(first, token) as alice:
        conversation_id, message_id, input_asset = await proposed_call(alice)
        job_id = (await confirm(alice, conversation_id, message_id)
                  ).json()["message"]["toolCall"]["externalJobId"]
    control(job_service_url, f"jobs/{job_id}", {"status": "completed", "result": {"media": [
        {"kind": "image", "url": "https://results.test/after-restart.png"}]}})
    async with gateway(configured, engine) as second, client_for(second, token) as alice:
        call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
        assert call["status"] == "completed"
        asset_id = call["result"]["media"][0]["assetId"]
        asset = (await alice.get(f"/assets/{asset_id}")).json()
        assert asset["primaryParentAssetId"] == input_asset
        # A retried confirmation after the restart gets the same job, without a new one.
        before = stats(job_service_url)["jobs"]
        again = await confirm(alice, conversation_id, message_id)
        assert again.json()["message"]["toolCall"]["externalJobId"] == job_id
        assert stats(job_service_url)["jobs"] == before


@pytest.mark.parametrize(("failures", "status"), [(3, "completed"), (4, "failed")])
async def test_job_read_failures_are_retried_three_times_within_one_read(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
    job_service_url: str, failures: int, status: str,
) -> None:
    async with gateway(loopback(settings, job_service_url), engine) as app, \
            client_for(app, make_key("alice")) as alice:
        conversation_id, message_id, _ = await proposed_call(alice)
        job_id = (await confirm(alice, conversation_id, message_id)
                  ).json()["message"]["toolCall"]["externalJobId"]
        control(job_service_url, f"jobs/{job_id}", {"status": "completed", "result": {
            "media": [{"kind": "image", "url": "https://results.test/r.png"}]}})
        control(job_service_url, "fail-reads", {"count": failures})
        before = stats(job_service_url)["reads"]
        call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
        assert stats(job_service_url)["reads"] - before == 4
        assert call["status"] == status
        if status == "failed":
            assert "503" in call["error"]
