"""Tool calls through HTTP (SPEC §16): propose, confirm, cancel, and settle on read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import respx

from gateway.app import Gateway
from gateway.config import Settings
from tests import databases
from tests.attachment_helpers import stored_bytes, stored_files
from tests.conftest import client_for, on_both_stores
from tests.test_messages import new_conversation
from tests.tool_call_helpers import JOBS as JOBS_URL
from tests.tool_call_helpers import (
    FakeJobs,
    cancel,
    confirm,
    gateway,
    image_id,
    propose,
    proposed_call,
    register_image,
    tool_message,
    with_jobs,
)

pytestmark = pytest.mark.both_databases
CAT = "https://cdn.test/cat.png"


@pytest.fixture
def jobs() -> FakeJobs:
    return FakeJobs()


@pytest.fixture
async def app(settings: Settings, engine: respx.MockRouter, jobs: FakeJobs
              ) -> AsyncIterator[Gateway]:
    """The gateway with the respx job service (and no delay between read retries)."""
    async with gateway(with_jobs(settings, base_url=JOBS_URL), engine, jobs, 0.0) as running:
        yield running


def rows(settings: Settings, sql: str, *params: Any) -> list[Any]:
    return databases.rows(settings.storage.database, sql, *params)


def counts(settings: Settings) -> tuple[int, int]:
    """(messages, tool calls) stored."""
    return (rows(settings, "SELECT COUNT(*) FROM conversation_messages")[0][0],
            rows(settings, "SELECT COUNT(*) FROM tool_calls")[0][0])


# --- the registry ------------------------------------------------------------------------------


async def test_tools_lists_the_registry(alice: httpx.AsyncClient) -> None:
    response = await alice.get("/tools")
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()["tools"]}
    assert set(tools) == {"edit_image", "generate_image", "upscale_image"}
    edit = tools["edit_image"]
    assert edit["price"] == {"points": 20}
    assert edit["job"] == {"kind": "image.edit"}
    assert edit["display"] == {"title": "Edit image", "fields": ["/prompt", "/strength"]}
    assert edit["imageParameters"] == ["image", "references"]
    assert edit["parameters"]["properties"]["strength"]["default"] == 0.6


async def test_tools_needs_a_key(anonymous: httpx.AsyncClient) -> None:
    assert (await anonymous.get("/tools")).status_code == 401


# --- proposing ---------------------------------------------------------------------------------


async def test_proposal_is_a_tool_message_with_canonical_args_and_gateway_display(
    alice: httpx.AsyncClient,
) -> None:
    conversation_id = await new_conversation(alice)
    asset_id = await register_image(alice, CAT, previewUrl="https://cdn.test/cat-small.png")
    response = await alice.post(f"/conversations/{conversation_id}/tool-calls", json={
        "clientMessageId": "call-1", "toolName": "edit_image", "assistantText": "Shall I?",
        "args": {"image": image_id(CAT), "prompt": "make it blue", "strength": None,
                 "style": "ignored"},
        "displayArgs": {"title": "FREE!", "pricePoints": 0},
    })
    assert response.status_code == 201, response.text
    message = response.json()["message"]
    assert (message["role"], message["content"], message["status"]) == (
        "tool", "Shall I?", "completed")
    call = message["toolCall"]
    assert call["toolName"] == "edit_image"
    assert call["args"] == {"image": image_id(CAT), "prompt": "make it blue", "strength": 0.6,
                            "references": []}
    assert call["status"] == "not_completed"
    assert call["externalJobId"] is None
    assert call["dedupeKey"] == f"editor-agent:{conversation_id}:{message['id']}:edit_image"
    assert (call["result"], call["error"]) == (None, None)
    assert call["displayArgs"] == {
        "title": "Edit image",
        "prompt": "make it blue",
        "params": [{"label": "Strength", "value": 0.6}],
        "images": [{"assetId": asset_id, "url": "https://cdn.test/cat-small.png",
                    "label": "Image to edit", "width": 800, "height": 600}],
        "pricePoints": 20,
    }
    assert response.json()["conversation"]["messageCount"] == 1


async def test_history_shows_the_tool_call_on_its_message(alice: httpx.AsyncClient) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    message = await tool_message(alice, conversation_id, message_id)
    assert message["role"] == "tool"
    assert message["toolCall"]["args"]["prompt"] == "make it blue"


async def test_proposal_is_idempotent_by_client_message_id(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    conversation_id = await new_conversation(alice)
    await register_image(alice, CAT)
    first = await propose(alice, conversation_id, image=image_id(CAT), prompt="blue")
    again = await propose(alice, conversation_id, image=image_id(CAT), prompt="blue")
    # The same canonical call spelled differently (a default written out) is the same proposal.
    spelled = await propose(alice, conversation_id, image=image_id(CAT), prompt="blue",
                            strength=0.6, extra="dropped")
    assert (first.status_code, again.status_code, spelled.status_code) == (201, 200, 200)
    assert again.json()["message"] == first.json()["message"]
    assert spelled.json()["message"]["id"] == first.json()["message"]["id"]
    different = await propose(alice, conversation_id, image=image_id(CAT), prompt="red")
    assert different.status_code == 409
    assert different.json()["error"]["code"] == "idempotency_conflict"
    assert counts(settings) == (1, 1)


async def test_a_plain_message_key_is_not_reused_by_a_proposal(
    alice: httpx.AsyncClient, settings: Settings
) -> None:
    conversation_id = await new_conversation(alice)
    posted = await alice.post(f"/conversations/{conversation_id}/messages",
                              json={"clientMessageId": "k", "role": "user", "content": "hi"})
    assert posted.status_code == 201
    response = await propose(alice, conversation_id, "k", "generate_image", prompt="a cat")
    assert response.status_code == 409
    assert counts(settings) == (1, 0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"toolName": "make_video", "args": {"prompt": "x"}}, "toolName"),
        ({"toolName": "edit_image", "args": {"prompt": "x"}}, "args.image"),
        ({"toolName": "edit_image", "args": {"image": image_id(CAT), "prompt": ""}},
         "args.prompt"),
        ({"toolName": "edit_image", "args": {"image": image_id(CAT), "prompt": "x",
                                              "strength": 2}}, "args.strength"),
        ({"toolName": "edit_image", "args": {"image": "https://cdn.test/cat.png",
                                              "prompt": "x"}}, "args.image"),
        ({"toolName": "edit_image", "args": {"image": image_id("https://cdn.test/none.png"),
                                              "prompt": "x"}}, "args.image"),
        ({"toolName": "edit_image", "args": {"image": image_id(CAT), "prompt": "x",
                                              "references": [image_id(CAT), image_id("u")]}},
         "args.references.1"),
        ({"toolName": "generate_image", "args": ["a cat"]}, "args"),
        ({"toolName": "generate_image", "args": {"prompt": "x", "count": "2"}}, "args.count"),
        ({"args": {"prompt": "x"}}, "toolName"),
        ({"toolName": "generate_image", "args": {"prompt": "x"}, "clientMessageId": ""},
         "clientMessageId"),
    ],
)
async def test_bad_proposals_are_422_and_store_nothing(
    alice: httpx.AsyncClient, settings: Settings, jobs: FakeJobs, body: dict[str, Any],
    field: str,
) -> None:
    conversation_id = await new_conversation(alice)
    await register_image(alice, CAT)
    response = await alice.post(f"/conversations/{conversation_id}/tool-calls",
                                json={"clientMessageId": "c", **body})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert counts(settings) == (0, 0)
    assert jobs.submissions == []


async def test_proposal_to_a_missing_conversation_is_404(alice: httpx.AsyncClient) -> None:
    response = await propose(alice, "cnv_missing", tool_name="generate_image", prompt="x")
    assert response.status_code == 404


# --- confirming and cancelling ---------------------------------------------------------------


async def test_confirm_submits_one_job_with_the_dedupe_key_and_writes_its_id(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, asset_id = await proposed_call(alice)
    response = await confirm(alice, conversation_id, message_id)
    assert response.status_code == 200, response.text
    call = response.json()["message"]["toolCall"]
    assert call["externalJobId"] == "job-1"
    assert call["status"] == "not_completed"
    [submission] = jobs.submissions
    assert submission.headers["idempotency-key"] == call["dedupeKey"] == (
        f"editor-agent:{conversation_id}:{message_id}:edit_image")
    [payload] = jobs.payloads()
    assert payload["kind"] == "image.edit"
    assert payload["payload"]["args"] == call["args"]
    assert payload["payload"]["images"] == [{
        "imageId": image_id(CAT), "assetId": asset_id, "url": CAT, "mimeType": None,
        "width": 800, "height": 600,
    }]
    assert payload["payload"]["pricePoints"] == 20
    again = await confirm(alice, conversation_id, message_id)
    assert again.json()["message"]["toolCall"]["externalJobId"] == "job-1"
    assert len(jobs.submissions) == 1


async def test_twenty_concurrent_confirms_submit_one_job(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    answers = await asyncio.gather(
        *(confirm(alice, conversation_id, message_id) for _ in range(20))
    )
    assert [a.status_code for a in answers] == [200] * 20
    assert {a.json()["message"]["toolCall"]["externalJobId"] for a in answers} == {"job-1"}
    assert len(jobs.submissions) == 1


async def test_confirm_after_a_failed_submission_resubmits_with_the_same_key(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    jobs.router.routes[0].side_effect = httpx.ConnectError("down")
    failed = await confirm(alice, conversation_id, message_id)
    assert failed.status_code == 502
    assert failed.json()["error"]["code"] == "job_service_unavailable"
    # Confirmed but without a job id: it can no longer be cancelled (a job may exist) ...
    refused = await cancel(alice, conversation_id, message_id)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "tool_call_confirmed"
    # ... and confirming again reaches the job service with the same key.
    jobs.router.routes[0].side_effect = jobs._submit
    retried = await confirm(alice, conversation_id, message_id)
    assert retried.status_code == 200
    assert retried.json()["message"]["toolCall"]["externalJobId"] == "job-1"
    assert len({r.headers["idempotency-key"] for r in jobs.submissions}) == 1


async def test_cancel_then_confirm_is_409_tool_call_cancelled(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    first = await cancel(alice, conversation_id, message_id)
    second = await cancel(alice, conversation_id, message_id)
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json()["message"]["toolCall"]["status"] == "cancelled"
    refused = await confirm(alice, conversation_id, message_id)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "tool_call_cancelled"
    assert jobs.submissions == []


async def test_cancel_after_the_job_exists_is_409(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    refused = await cancel(alice, conversation_id, message_id)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "tool_call_confirmed"
    message = await tool_message(alice, conversation_id, message_id)
    assert message["toolCall"]["status"] == "not_completed"


async def test_confirming_what_is_not_a_tool_call_is_404(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id = await new_conversation(alice)
    posted = await alice.post(f"/conversations/{conversation_id}/messages",
                              json={"clientMessageId": "m", "role": "user", "content": "hi"})
    plain_id = posted.json()["message"]["id"]
    for message_id in (plain_id, "msg_missing"):
        assert (await confirm(alice, conversation_id, message_id)).status_code == 404
        assert (await cancel(alice, conversation_id, message_id)).status_code == 404
    assert jobs.submissions == []


async def test_a_call_is_confirmed_only_in_its_own_conversation(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    _, message_id, _ = await proposed_call(alice)
    other = await new_conversation(alice)
    assert (await confirm(alice, other, message_id)).status_code == 404
    assert jobs.submissions == []


# --- settling on read --------------------------------------------------------------------------


async def test_a_completed_job_completes_the_call_and_registers_its_image(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, input_asset = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.complete("job-1", "https://results.test/blue-cat.png")
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    assert call["status"] == "completed"
    [media] = call["result"]["media"]
    assert (media["kind"], media["url"]) == ("image", "https://results.test/blue-cat.png")
    asset = (await alice.get(f"/assets/{media['assetId']}")).json()
    assert asset["sourceType"] == "generated"
    assert asset["chatId"] == conversation_id
    assert asset["primaryParentAssetId"] == input_asset
    assert asset["rootAssetId"] == input_asset
    assert asset["sourceMessageId"] == message_id
    assert (asset["width"], asset["height"], asset["mimeType"]) == (512, 512, "image/png")
    # Settled once: later reads neither read the job again nor register the image twice.
    reads = len(jobs.reads)
    await tool_message(alice, conversation_id, message_id)
    assert len(jobs.reads) == reads
    lineage = (await alice.get(f"/assets/{input_asset}/lineage")).json()
    assert [a["id"] for a in lineage["children"]] == [media["assetId"]]


async def test_the_resolver_picks_the_backfilled_image_as_the_latest_result(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, input_asset = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.complete("job-1", "https://results.test/blue-cat.png")
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    result_asset = call["result"]["media"][0]["assetId"]
    for text in ("now take the latest one and add a frame", "上一个结果再亮一点"):
        resolved = await alice.post(f"/chats/{conversation_id}/resolve", json={"text": text})
        assert resolved.status_code == 200, resolved.text
        assert resolved.json()["targetAssetIds"] == [result_asset], text
    original = await alice.post(f"/chats/{conversation_id}/resolve",
                                json={"text": "go back to the original"})
    assert original.json()["targetAssetIds"] == [input_asset]


async def test_a_failed_job_fails_the_call_with_its_error(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.jobs["job-1"] = {"id": "job-1", "status": "failed", "error": "content policy"}
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    assert (call["status"], call["error"], call["result"]) == ("failed", "content policy", None)


@pytest.mark.parametrize("status", ["queued", "running"])
async def test_a_pending_job_leaves_the_call_unchanged(
    alice: httpx.AsyncClient, jobs: FakeJobs, status: str
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.jobs["job-1"]["status"] = status
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    assert (call["status"], call["externalJobId"], call["result"]) == (
        "not_completed", "job-1", None)
    assert jobs.reads == ["job-1"]


async def test_a_job_read_failing_three_more_times_fails_the_call_with_the_last_error(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.complete("job-1", "https://results.test/x.png")
    jobs.read_failures = 4
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    assert jobs.reads == ["job-1"] * 4  # the read and its three retries
    assert call["status"] == "failed"
    assert "503" in call["error"]


async def test_a_job_read_that_recovers_within_the_retries_completes_the_call(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.complete("job-1", "https://results.test/x.png")
    jobs.read_failures = 3
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    assert jobs.reads == ["job-1"] * 4
    assert call["status"] == "completed"


async def test_an_unusable_result_is_retried_then_fails_the_call(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.jobs["job-1"] = {"id": "job-1", "status": "completed", "result": {"media": "nope"}}
    call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
    assert len(jobs.reads) == 4
    assert call["status"] == "failed"
    assert "media" in call["error"]


@pytest.mark.parametrize("read", ["conversation", "default", "messages", "context"])
async def test_every_conversation_read_settles_the_calls(
    alice: httpx.AsyncClient, jobs: FakeJobs, read: str
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    agent_id = (await alice.get(f"/conversations/{conversation_id}")).json()["agentId"]
    await confirm(alice, conversation_id, message_id)
    jobs.complete("job-1", "https://results.test/x.png")
    path = {
        "conversation": f"/conversations/{conversation_id}",
        "default": f"/agents/{agent_id}/conversation",
        "messages": f"/conversations/{conversation_id}/messages",
        "context": f"/agents/{agent_id}/context?conversationId={conversation_id}",
    }[read]
    assert (await alice.get(path)).status_code == 200
    assert jobs.reads == ["job-1"]
    # The settled call is what every later read shows, without reading the job again.
    assert (await tool_message(alice, conversation_id, message_id))["toolCall"]["status"] == (
        "completed")
    assert jobs.reads == ["job-1"]


async def test_one_read_settles_every_waiting_call_in_one_go(
    alice: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id = await new_conversation(alice)
    ids = []
    for index in range(3):
        response = await propose(alice, conversation_id, f"c{index}", "generate_image",
                                 prompt=f"cat {index}")
        ids.append(response.json()["message"]["id"])
        await confirm(alice, conversation_id, ids[-1])
    jobs.complete("job-1", "https://results.test/1.png")
    jobs.jobs["job-2"] = {"id": "job-2", "status": "failed", "error": "no"}
    page = (await alice.get(f"/conversations/{conversation_id}/messages")).json()["messages"]
    assert [m["toolCall"]["status"] for m in page] == ["completed", "failed", "not_completed"]


# --- isolation between users -------------------------------------------------------------------


async def test_another_users_conversation_and_calls_are_404_on_every_route(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, jobs: FakeJobs, settings: Settings
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    assert (await propose(bob, conversation_id, "b", "generate_image", prompt="x")
            ).status_code == 404
    assert (await confirm(bob, conversation_id, message_id)).status_code == 404
    assert (await cancel(bob, conversation_id, message_id)).status_code == 404
    bob_conversation = await new_conversation(bob)
    assert (await confirm(bob, bob_conversation, message_id)).status_code == 404
    assert (await cancel(bob, bob_conversation, message_id)).status_code == 404
    assert (await bob.get(f"/conversations/{conversation_id}/messages")).status_code == 404
    assert jobs.submissions == []
    assert counts(settings) == (1, 1)
    message = await tool_message(alice, conversation_id, message_id)
    assert message["toolCall"]["status"] == "not_completed"


async def test_another_users_image_id_is_422(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, settings: Settings
) -> None:
    await register_image(alice, CAT)
    bob_conversation = await new_conversation(bob)
    response = await propose(bob, bob_conversation, image=image_id(CAT), prompt="mine now")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "args.image"
    assert counts(settings) == (0, 0)


async def test_another_users_read_does_not_settle_or_show_the_call(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, jobs: FakeJobs
) -> None:
    conversation_id, message_id, _ = await proposed_call(alice)
    await confirm(alice, conversation_id, message_id)
    jobs.complete("job-1", "https://results.test/x.png")
    assert (await bob.get(f"/conversations/{conversation_id}")).status_code == 404
    assert jobs.reads == []


async def test_the_same_image_url_names_each_users_own_asset(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    await register_image(alice, CAT)
    bob_asset = await register_image(bob, CAT)
    bob_conversation = await new_conversation(bob)
    response = await propose(bob, bob_conversation, image=image_id(CAT), prompt="x")
    assert response.status_code == 201
    [shown] = response.json()["message"]["toolCall"]["displayArgs"]["images"]
    assert shown["assetId"] == bob_asset


# --- the dev job runner ----------------------------------------------------------------------


@on_both_stores
async def test_dev_runner_flow_survives_a_restart_between_confirm_and_read(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    dev = with_jobs(settings, base_url="", dev_delay_s=0.0)
    token = make_key("alice")
    async with gateway(dev, engine) as first, client_for(first, token) as alice:
        conversation_id, message_id, input_asset = await proposed_call(alice)
        confirmed = await confirm(alice, conversation_id, message_id)
        assert confirmed.status_code == 200
        job_id = confirmed.json()["message"]["toolCall"]["externalJobId"]
        assert job_id.startswith("djob_")
    async with gateway(dev, engine) as second, client_for(second, token) as alice:
        call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
        assert (call["status"], call["externalJobId"]) == ("completed", job_id)
        [media] = call["result"]["media"]
        assert media["kind"] == "image" and media["url"].startswith("resource://")
        resource_id = media["url"].removeprefix("resource://")
        content = await alice.get(f"/resources/{resource_id}/content")
        assert content.status_code == 200
        assert content.headers["content-type"] == "image/png"
        assert content.content.startswith(b"\x89PNG\r\n\x1a\n")
        # The image lives in the configured file store (on S3 as an object of the prefix).
        [stored] = stored_files(dev)
        assert stored.startswith(f"alice/resources/{resource_id}/")
        assert stored_bytes(dev, stored) == content.content
        asset = (await alice.get(f"/assets/{media['assetId']}")).json()
        assert (asset["originalUrl"], asset["primaryParentAssetId"]) == (
            media["url"], input_asset)
        again = await confirm(alice, conversation_id, message_id)
        assert again.json()["message"]["toolCall"]["externalJobId"] == job_id


async def test_dev_runner_job_is_pending_until_its_delay_has_passed(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    dev = with_jobs(settings, base_url="", dev_delay_s=3600.0)
    async with gateway(dev, engine) as app, client_for(app, make_key("alice")) as alice:
        conversation_id, message_id, _ = await proposed_call(alice)
        await confirm(alice, conversation_id, message_id)
        call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
        assert call["status"] == "not_completed"
        assert call["externalJobId"].startswith("djob_")
        resources = (await alice.get("/resources")).json()["items"]
        assert resources == []


async def test_dev_runner_makes_as_many_images_as_asked_and_resources_are_the_callers(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str]
) -> None:
    dev = with_jobs(settings, base_url="", dev_delay_s=0.0)
    async with gateway(dev, engine) as app, client_for(app, make_key("alice")) as alice, \
            client_for(app, make_key("bob")) as bob:
        conversation_id = await new_conversation(alice)
        response = await propose(alice, conversation_id, "c", "generate_image", prompt="cats",
                                 count=3)
        message_id = response.json()["message"]["id"]
        await confirm(alice, conversation_id, message_id)
        call = (await tool_message(alice, conversation_id, message_id))["toolCall"]
        assert call["status"] == "completed"
        urls = [m["url"] for m in call["result"]["media"]]
        assert len(set(urls)) == 3
        for url in urls:
            resource_id = url.removeprefix("resource://")
            assert (await alice.get(f"/resources/{resource_id}")).status_code == 200
            assert (await bob.get(f"/resources/{resource_id}")).status_code == 404
        latest = await alice.post(f"/chats/{conversation_id}/resolve",
                                  json={"text": "all of them"})
        assert latest.json()["targetAssetIds"] == [m["assetId"] for m in call["result"]["media"]]


# --- two processes on one database -------------------------------------------------------------


async def test_two_gateways_confirming_and_reading_at_once_keep_one_job_and_one_result(
    settings: Settings, engine: respx.MockRouter, make_key: Callable[[str], str],
) -> None:
    """Two gateway instances share the database and the job service (no shared lock): the
    compare-and-set writes keep one job id and register the result once."""
    jobs = FakeJobs()
    configured = with_jobs(settings, base_url=JOBS_URL)
    token = make_key("alice")
    async with gateway(configured, engine, jobs, 0.0) as one, \
            gateway(configured, engine, jobs, 0.0) as two, \
            client_for(one, token) as first, client_for(two, token) as second:
        conversation_id, message_id, _ = await proposed_call(first)
        answers = await asyncio.gather(*(
            confirm(client, conversation_id, message_id)
            for client in (first, second) * 5
        ))
        assert {a.json()["message"]["toolCall"]["externalJobId"] for a in answers} == {"job-1"}
        assert len(jobs.jobs) == 1
        jobs.complete("job-1", "https://results.test/once.png")
        calls = await asyncio.gather(*(
            tool_message(client, conversation_id, message_id) for client in (first, second)
        ))
        assert [c["toolCall"]["status"] for c in calls] == ["completed", "completed"]
    generated = rows(settings, "SELECT id FROM media_assets WHERE source_type = 'generated'")
    results = rows(settings, "SELECT asset_ids FROM chat_turn_results WHERE chat_id = ?",
                   conversation_id)
    assert len(generated) == 1
    assert len(results) == 1
