"""Shared pieces of the tool-call tests: a job service faked with respx, images, proposals."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx

from gateway.app import Gateway, create_app
from gateway.config import Settings
from tests.conftest import client_for
from tests.test_messages import new_conversation

JOBS = "http://jobs.test"


def image_id(url: str) -> str:
    return "sha256:" + hashlib.sha256(url.encode()).hexdigest()


@dataclass
class FakeJobs:
    """A job service behind respx: dedupes by Idempotency-Key, counts every request."""

    router: respx.MockRouter = field(
        default_factory=lambda: respx.MockRouter(base_url=JOBS, assert_all_called=False)
    )
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_key: dict[str, str] = field(default_factory=dict)
    submissions: list[httpx.Request] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    read_failures: int = 0  # the next N reads answer 503

    def __post_init__(self) -> None:
        self.router.post("/jobs").mock(side_effect=self._submit)
        self.router.get(path__regex=r"^/jobs/(?P<job_id>[^/]+)$").mock(side_effect=self._read)

    def _submit(self, request: httpx.Request) -> httpx.Response:
        self.submissions.append(request)
        key = request.headers["idempotency-key"]
        if key not in self.by_key:
            job_id = f"job-{len(self.jobs) + 1}"
            self.jobs[job_id] = {"id": job_id, "status": "queued"}
            self.by_key[key] = job_id
        job = self.jobs[self.by_key[key]]
        return httpx.Response(201, json={"id": job["id"], "status": job["status"]})

    def _read(self, request: httpx.Request, job_id: str) -> httpx.Response:
        self.reads.append(job_id)
        if self.read_failures > 0:
            self.read_failures -= 1
            return httpx.Response(503, json={"error": "busy"})
        if job_id not in self.jobs:
            return httpx.Response(404, json={"error": "no such job"})
        return httpx.Response(200, json=self.jobs[job_id])

    def complete(self, job_id: str, *urls: str) -> None:
        self.jobs[job_id] = {
            "id": job_id, "status": "completed",
            "result": {"media": [{"kind": "image", "url": url, "mimeType": "image/png",
                                  "width": 512, "height": 512} for url in urls]},
        }

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.submissions]

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.router.async_handler)


def with_jobs(settings: Settings, **jobs: Any) -> Settings:
    return settings.with_values(jobs=jobs)


@asynccontextmanager
async def gateway(
    settings: Settings, engine: respx.MockRouter, jobs: FakeJobs | None = None,
    retry_delay_s: float | None = None,
) -> AsyncIterator[Gateway]:
    app = create_app(
        settings, upstream_transport=httpx.MockTransport(engine.async_handler),
        jobs_transport=jobs.transport if jobs is not None else None,
    )
    if retry_delay_s is not None:
        app.services.tool_calls.retry_delay_s = retry_delay_s
    async with app.running():
        yield app


@asynccontextmanager
async def user(app: Gateway, make_key: Callable[[str], str], name: str
               ) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app, make_key(name)) as client:
        yield client


async def register_image(client: httpx.AsyncClient, url: str, **extra: Any) -> str:
    body = {"mediaType": "image", "sourceType": "upload", "originalUrl": url,
            "width": 800, "height": 600, **extra}
    response = await client.post("/assets", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def propose(
    client: httpx.AsyncClient, conversation_id: str, client_message_id: str = "call-1",
    tool_name: str = "edit_image", **args: Any,
) -> httpx.Response:
    return await client.post(
        f"/conversations/{conversation_id}/tool-calls",
        json={"clientMessageId": client_message_id, "toolName": tool_name, "args": args,
              "assistantText": "I can do that."},
    )


async def proposed_call(client: httpx.AsyncClient, url: str = "https://cdn.test/cat.png"
                        ) -> tuple[str, str, str]:
    """A conversation with one proposed edit of a registered image: (conversation, message,
    input asset id)."""
    conversation_id = await new_conversation(client)
    asset_id = await register_image(client, url)
    response = await propose(client, conversation_id, image=image_id(url), prompt="make it blue")
    assert response.status_code == 201, response.text
    return conversation_id, response.json()["message"]["id"], asset_id


async def confirm(client: httpx.AsyncClient, conversation_id: str, message_id: str
                  ) -> httpx.Response:
    return await client.post(f"/conversations/{conversation_id}/tool-calls/{message_id}/confirm")


async def cancel(client: httpx.AsyncClient, conversation_id: str, message_id: str
                 ) -> httpx.Response:
    return await client.post(f"/conversations/{conversation_id}/tool-calls/{message_id}/cancel")


async def tool_message(client: httpx.AsyncClient, conversation_id: str, message_id: str
                       ) -> dict[str, Any]:
    """The message as a history page shows it (the read settles its job)."""
    page = await client.get(f"/conversations/{conversation_id}/messages")
    assert page.status_code == 200, page.text
    found = [m for m in page.json()["messages"] if m["id"] == message_id]
    assert len(found) == 1
    return dict(found[0])


