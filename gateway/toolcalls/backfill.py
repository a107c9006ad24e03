"""Lazy backfill: what one read of a conversation learns from the job service about a call.

Each running call's job is read once; a read that fails (transport, a non-2xx answer, an answer
that is not a job, a completed job whose result is unusable) is tried again up to
`READ_RETRIES` times `RETRY_DELAY_S` apart within the same read, then the call fails with the
last error. The writes happen in one transaction (gateway/store/tool_calls.py `settle`).
"""

from __future__ import annotations

import asyncio
import logging

from gateway.errors import GatewayError
from gateway.store.ids import new_id
from gateway.store.tool_calls import GeneratedImage, Settlement, ToolCall
from gateway.toolcalls import states
from gateway.toolcalls.jobs import Job, JobService

READ_RETRIES = 3
RETRY_DELAY_S = 0.1

log = logging.getLogger("gateway.toolcalls")


async def read_job(
    jobs: JobService, user_id: str, job_id: str, delay_s: float = RETRY_DELAY_S
) -> Job | GatewayError:
    """The job, or the last error after the first read and READ_RETRIES more."""
    last: GatewayError | None = None
    for attempt in range(1 + READ_RETRIES):
        if attempt:
            await asyncio.sleep(delay_s)
        try:
            return await jobs.read(user_id, job_id)
        except GatewayError as exc:
            last = exc
            log.warning("job %s read %d failed: %s", job_id, attempt + 1, exc.message)
    assert last is not None
    return last


def settlement(call: ToolCall, read: Job | GatewayError) -> Settlement | None:
    """What a read means for a running call; None when it stays as it is (queued/running)."""
    assert call.external_job_id is not None
    state = states.current(call.status, call.confirmed_at_ms is not None, True)
    if isinstance(read, GatewayError):
        states.step(state, states.Event.JOB_UNREADABLE)
        return Settlement(call.message_id, call.external_job_id, "failed",
                          error=f"the job could not be read: {read.message}")
    event = states.event_for_job_status(read.status)
    after = states.step(state, event)
    if after is states.State.RUNNING:
        return None
    if after is states.State.FAILED:
        return Settlement(call.message_id, call.external_job_id, "failed", error=read.error)
    images = []
    media = []
    for item in read.media:
        asset_id = None
        if item.kind == "image":
            asset_id = new_id("ast")
            images.append(GeneratedImage(asset_id, item.url, item.mime_type, item.width,
                                         item.height))
        media.append({"kind": item.kind, "url": item.url, "assetId": asset_id})
    return Settlement(call.message_id, call.external_job_id, "completed",
                      result={"media": media}, images=tuple(images))
