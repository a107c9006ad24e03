"""The tool-call flow: propose, confirm, cancel, and settle on read (SPEC §16).

Each step reads the call, asks the state machine (gateway/toolcalls/states.py) and writes what
it answers, under the conversation's lock: in this process an `asyncio` lock per conversation, so
twenty concurrent confirmations submit one job; across processes the writes are
compare-and-set and the job service dedupes by the idempotency key.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from gateway.attachments.fetch_guard import FetchGuard, url_strings
from gateway.errors import (
    Conflict,
    NotFound,
    ToolCallCancelled,
    ToolCallConfirmed,
    ValidationFailed,
)
from gateway.store import Database, assets, conversations
from gateway.store import tool_calls as store
from gateway.store.tool_calls import NewToolCall, Proposed, ToolCall
from gateway.toolcalls import backfill, states
from gateway.toolcalls.canonical import canonical_args, image_ids
from gateway.toolcalls.display import InputImage, display_args
from gateway.toolcalls.jobs import JobService
from gateway.toolcalls.locks import KeyedLocks
from gateway.toolcalls.registry import Registry, Tool

_REFUSED: dict[str, type[Conflict]] = {
    "tool_call_cancelled": ToolCallCancelled,
    "tool_call_confirmed": ToolCallConfirmed,
}


def _refused(exc: states.Refused) -> Conflict:
    return _REFUSED.get(exc.code, Conflict)(exc.message)


def proposal_fingerprint(tool_name: str, args: dict[str, Any], assistant_text: str) -> str:
    """What a retried proposal must repeat: the tool, the canonical args and the text."""
    canonical = json.dumps([tool_name, args, assistant_text], ensure_ascii=False,
                           separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def job_inputs(tool: Tool | None, args: dict[str, Any], images: list[dict[str, Any]]
               ) -> list[tuple[str, str]]:
    """(field, URL) of what a job service would fetch: the input images' URLs, named by the
    argument that chose them, and every http(s) URL among the args."""
    fields: dict[str, str] = {}
    for name, index, image_id in image_ids(tool, args) if tool else []:
        fields.setdefault(image_id, f"args.{name}" + ("" if index is None else f".{index}"))
    found = [(fields.get(str(image.get("imageId")), f"images.{position}.url"), image["url"])
             for position, image in enumerate(images) if isinstance(image.get("url"), str)]
    return found + url_strings(args, "args")


def _state(call: ToolCall) -> states.State:
    return states.current(
        call.status, call.confirmed_at_ms is not None, call.external_job_id is not None
    )


class ToolCallService:
    def __init__(self, db: Database, registry: Registry, jobs: JobService,
                 fetch_guard: FetchGuard) -> None:
        self.db = db
        self.registry = registry
        self.jobs = jobs
        self.fetch_guard = fetch_guard
        self.locks = KeyedLocks()
        self.retry_delay_s = backfill.RETRY_DELAY_S

    async def aclose(self) -> None:
        await self.jobs.aclose()

    # --- propose ------------------------------------------------------------------------------

    async def _input_images(
        self, user_id: str, found: list[tuple[str, int | None, str]]
    ) -> dict[str, InputImage]:
        """The caller's asset behind each image id; 422 naming the first that is not theirs."""
        by_digest = await assets.by_url_sha256(
            self.db, user_id, [image_id.removeprefix("sha256:") for _, _, image_id in found]
        )
        images: dict[str, InputImage] = {}
        for name, index, image_id in found:
            asset = by_digest.get(image_id.removeprefix("sha256:"))
            if asset is None:
                field = f"args.{name}" + ("" if index is None else f".{index}")
                raise ValidationFailed(f"{field}: no image of yours has this id", field=field)
            images[image_id] = InputImage(
                image_id, asset.id, asset.original_url, asset.preview_url, asset.mime_type,
                asset.width, asset.height,
            )
        return images

    async def propose(
        self,
        user_id: str,
        conversation_id: str,
        client_message_id: str,
        tool_name: str,
        raw_args: Any,
        assistant_text: str,
    ) -> Proposed:
        """Store a `tool` message with its canonical call; nothing is stored when it is invalid."""
        await conversations.get(self.db, user_id, conversation_id)  # 404 before 422
        tool = self.registry.get(tool_name)
        if tool is None:
            raise ValidationFailed(f"toolName: no tool named {tool_name!r}", field="toolName")
        args = canonical_args(tool, raw_args)
        found = image_ids(tool, args)
        images = await self._input_images(user_id, found)
        inputs = list({image_id: images[image_id].as_json() for _, _, image_id in found}.values())
        await self.fetch_guard.check(job_inputs(tool, args, inputs))
        return await store.propose(self.db, user_id, conversation_id, NewToolCall(
            client_message_id=client_message_id,
            tool_name=tool.name,
            job_kind=tool.job_kind,
            args=args,
            display_args=display_args(tool, args, images),
            input_images=inputs,
            assistant_text=assistant_text,
            fingerprint=proposal_fingerprint(tool.name, args, assistant_text),
        ))

    # --- confirm and cancel -------------------------------------------------------------------

    async def _require(self, user_id: str, conversation_id: str, message_id: str) -> ToolCall:
        await conversations.get(self.db, user_id, conversation_id)
        call = await store.get(self.db, user_id, conversation_id, message_id)
        if call is None:
            raise NotFound("no tool call with this message id in this conversation")
        return call

    def job_payload(self, user_id: str, call: ToolCall) -> dict[str, Any]:
        """What the job runs: the canonical args, and the input images they name, resolved."""
        payload: dict[str, Any] = {
            "toolName": call.tool_name,
            "args": call.args,
            "images": call.input_images,
            "userId": user_id,
            "conversationId": call.conversation_id,
            "messageId": call.message_id,
        }
        if "pricePoints" in call.display_args:
            payload["pricePoints"] = call.display_args["pricePoints"]
        return payload

    async def confirm(self, user_id: str, conversation_id: str, message_id: str) -> ToolCall:
        """Submit the call's one job (idempotency key: its dedupe key) and keep the job's id."""
        async with self.locks.hold(conversation_id):
            call = await self._require(user_id, conversation_id, message_id)
            try:
                after = states.step(_state(call), states.Event.CONFIRM)
                if after is not states.State.CONFIRMING:
                    return call  # already has its job (or is settled): the same answer
                # Checked again as the job is handed over: names resolve anew (422, unchanged).
                await self.fetch_guard.check(job_inputs(
                    self.registry.get(call.tool_name), call.args, call.input_images))
                if _state(call) is states.State.PROPOSED:
                    call = await store.mark_confirmed(self.db, user_id, call)
                    # Another process may have cancelled or confirmed it meanwhile.
                    if states.step(_state(call), states.Event.CONFIRM) is not after:
                        return call
                job = await self.jobs.submit(
                    user_id, call.job_kind, self.job_payload(user_id, call), call.dedupe_key
                )
                states.step(_state(call), states.Event.JOB_SUBMITTED)
            except states.Refused as exc:
                raise _refused(exc) from None
            return await store.set_job(self.db, user_id, call, job.id)

    async def cancel(self, user_id: str, conversation_id: str, message_id: str) -> ToolCall:
        """Cancel a call nobody confirmed yet; cancelling again changes nothing."""
        async with self.locks.hold(conversation_id):
            call = await self._require(user_id, conversation_id, message_id)
            try:
                states.step(_state(call), states.Event.CANCEL)
                if call.status == "cancelled":
                    return call
                call = await store.cancel(self.db, user_id, call)
                if call.status != "cancelled":  # confirmed by another process meanwhile
                    states.step(_state(call), states.Event.CANCEL)
            except states.Refused as exc:
                raise _refused(exc) from None
            return call

    # --- settle on read -----------------------------------------------------------------------

    async def settle(self, user_id: str, conversation_id: str) -> int:
        """Read the jobs of the conversation's running calls and write what they say, in one
        transaction; returns how many calls were settled. Cheap when nothing waits."""
        if not await store.has_waiting(self.db, user_id, conversation_id):
            return 0
        async with self.locks.hold(conversation_id):
            waiting = await store.waiting(self.db, user_id, conversation_id)
            reads: list[Any] = await asyncio.gather(*(
                backfill.read_job(self.jobs, user_id, call.external_job_id or "",
                                  self.retry_delay_s)
                for call in waiting
            ))
            outcomes = []
            for call, read in zip(waiting, reads, strict=True):
                found = backfill.settlement(call, read)
                if found is not None:
                    outcomes.append(found)
            if not outcomes:
                return 0
            return await store.settle(self.db, user_id, conversation_id, waiting, outcomes)
