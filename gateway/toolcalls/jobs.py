"""The job service a confirmed call runs on (SPEC §16), and its HTTP client.

    POST {jobs.base_url}/jobs  {kind, payload}  Idempotency-Key: <dedupe key>  → {id, status}
    GET  {jobs.base_url}/jobs/{id}  → {id, status: queued|running|completed|failed, result?, error?}

A completed job's `result` is `{media: [{kind: image|video|audio, url, mimeType?, width?,
height?}]}`. `JobService` is what the tool-call flow needs; the HTTP client and the built-in dev
runner (gateway/devjobs/) are its two adapters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from gateway.errors import JobServiceBadResponse as UnreadableJob
from gateway.errors import JobServiceTimeout, JobServiceUnavailable

JOB_STATUSES = ("queued", "running", "completed", "failed")
MEDIA_KINDS = ("image", "video", "audio")
MAX_MEDIA = 16
DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Media:
    kind: str
    url: str
    mime_type: str | None = None
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True)
class Job:
    id: str
    status: str  # queued | running | completed | failed
    media: tuple[Media, ...] = field(default=())
    error: str | None = None


class JobService(Protocol):
    async def submit(
        self, user_id: str, kind: str, payload: dict[str, Any], idempotency_key: str
    ) -> Job:
        """Create the job for this key, or answer the one it already made.

        Raises JobServiceUnavailable / JobServiceTimeout when it cannot say.
        """
        ...

    async def read(self, user_id: str, job_id: str) -> Job:
        """The job's current state; JobServiceUnavailable / JobServiceTimeout / UnreadableJob."""
        ...

    async def aclose(self) -> None: ...


def _positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31:
        return value
    return None


def parse_media(result: Any) -> tuple[Media, ...]:
    """A completed job's media; UnreadableJob when the result is not `{media: [...]}`."""
    items = result.get("media") if isinstance(result, dict) else None
    if not isinstance(items, list) or not items or len(items) > MAX_MEDIA:
        raise UnreadableJob("the completed job's result has no media list")
    media = []
    for item in items:
        if not isinstance(item, dict) or item.get("kind") not in MEDIA_KINDS:
            raise UnreadableJob("a media item's kind is not image, video or audio")
        url = item.get("url")
        if not isinstance(url, str) or not url or len(url) > 8192:
            raise UnreadableJob("a media item has no url")
        mime = item.get("mimeType")
        media.append(Media(
            kind=item["kind"], url=url, mime_type=mime if isinstance(mime, str) else None,
            width=_positive_int(item.get("width")), height=_positive_int(item.get("height")),
        ))
    return tuple(media)


def parse_job(body: Any, expected_id: str | None = None, *, brief: bool = False) -> Job:
    """A job as the service describes it; UnreadableJob when it does not fit the contract.

    `brief`: only the id and status matter (a submission's answer)."""
    if not isinstance(body, dict):
        raise UnreadableJob("the job service answered something other than a JSON object")
    job_id, status = body.get("id"), body.get("status")
    if not isinstance(job_id, str) or not job_id or len(job_id) > 256:
        raise UnreadableJob("the job service's answer has no job id")
    if expected_id is not None and job_id != expected_id:
        raise UnreadableJob("the job service answered about another job")
    if status not in JOB_STATUSES:
        raise UnreadableJob(f"unknown job status {status!r}")
    if brief:
        return Job(job_id, status)
    if status == "completed":
        return Job(job_id, status, media=parse_media(body.get("result")))
    if status == "failed":
        error = body.get("error")
        if isinstance(error, dict):
            error = error.get("message")
        return Job(job_id, status, error=str(error) if error else "the job failed")
    return Job(job_id, status)


class HttpJobService:
    """The job service at `jobs.base_url`, over httpx."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport,
            follow_redirects=False,
        )

    async def _call(self, request: httpx.Request, expected_id: str | None) -> Job:
        """Send one request; the job it describes (a submission: id and status only)."""
        try:
            response = await self._client.send(request)
        except httpx.TimeoutException as exc:
            raise JobServiceTimeout(f"the job service timed out: {type(exc).__name__}") from exc
        except httpx.HTTPError as exc:
            raise JobServiceUnavailable(
                f"the job service could not be reached: {type(exc).__name__}"
            ) from exc
        if not 200 <= response.status_code < 300:
            raise JobServiceUnavailable(f"the job service answered {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            raise UnreadableJob("the job service's answer is not JSON") from None
        return parse_job(body, expected_id, brief=expected_id is None)

    async def submit(
        self, user_id: str, kind: str, payload: dict[str, Any], idempotency_key: str
    ) -> Job:
        request = self._client.build_request(
            "POST", "/jobs", json={"kind": kind, "payload": payload},
            headers={"Idempotency-Key": idempotency_key},
        )
        return await self._call(request, None)

    async def read(self, user_id: str, job_id: str) -> Job:
        request = self._client.build_request("GET", f"/jobs/{quote(job_id, safe='')}")
        return await self._call(request, job_id)

    async def aclose(self) -> None:
        await self._client.aclose()
