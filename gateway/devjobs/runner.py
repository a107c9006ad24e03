"""The dev job runner: jobs kept in the gateway's database (`dev_jobs`), finished on the first
read after `jobs.dev_delay_s` with generated PNGs kept as the caller's resources.

Everything is derived from the stored row (its creation time, its id), so a gateway restart
between submission and reading loses nothing. Image kinds (`image.*`) only; other kinds fail.
The images are not sent to the memory engine: they are results, not memories.
"""

from __future__ import annotations

import hashlib
from typing import Any

from gateway.attachments.files import FileStore
from gateway.devjobs.png import SIZE, gradient_png
from gateway.errors import JobServiceUnavailable
from gateway.store import Database, dev_jobs, resources
from gateway.store.dev_jobs import DevJob
from gateway.store.ids import now_ms
from gateway.store.resources import Resource
from gateway.toolcalls.jobs import Job, parse_job

MAX_IMAGES = 4


def _image_count(payload: dict[str, Any]) -> int:
    count = payload.get("args", {}).get("count", 1) if isinstance(payload, dict) else 1
    if not isinstance(count, int) or isinstance(count, bool):
        return 1
    return max(1, min(count, MAX_IMAGES))


class DevJobRunner:
    def __init__(self, db: Database, files: FileStore, delay_s: float) -> None:
        self.db = db
        self.files = files
        self.delay_ms = int(delay_s * 1000)

    async def submit(
        self, user_id: str, kind: str, payload: dict[str, Any], idempotency_key: str
    ) -> Job:
        job, _ = await dev_jobs.submit(self.db, user_id, idempotency_key, kind, payload)
        return self._answer(job)

    async def read(self, user_id: str, job_id: str) -> Job:
        job = await dev_jobs.get(self.db, user_id, job_id)
        if job is None:
            raise JobServiceUnavailable(f"the dev job runner has no job {job_id}")
        if job.finished_at_ms is None and now_ms() - job.created_at_ms >= self.delay_ms:
            job = await self._finish(job)
        return self._answer(job)

    async def aclose(self) -> None:
        return None

    def _answer(self, job: DevJob) -> Job:
        if job.finished_at_ms is None:
            return Job(job.id, "running")
        if job.error is not None:
            return Job(job.id, "failed", error=job.error)
        return parse_job({"id": job.id, "status": "completed", "result": job.result}, job.id)

    async def _finish(self, job: DevJob) -> DevJob:
        if not job.kind.startswith("image."):
            return await dev_jobs.finish(
                self.db, job.user_id, job.id,
                error=f"the dev job runner makes images only, not {job.kind}",
            )
        media = []
        for index in range(_image_count(job.payload)):
            resource = await self._keep_png(job, index)
            media.append({"kind": "image", "url": f"resource://{resource.id}",
                          "mimeType": "image/png", "width": SIZE, "height": SIZE})
        return await dev_jobs.finish(self.db, job.user_id, job.id, result={"media": media})

    async def _keep_png(self, job: DevJob, index: int) -> Resource:
        """The job's index-th image as the caller's resource; the same id and bytes however
        often it is made (two readers at once keep one)."""
        seed = f"{job.id}:{index}"
        resource_id = "res_" + hashlib.sha256(seed.encode()).hexdigest()[:24]
        data = gradient_png(seed)
        name = f"{job.kind.replace('.', '-')}-{index + 1}.png"
        folder = self.files.folder(job.user_id, "resources", resource_id)
        stored = await self.files.write_bytes(folder, name, data)
        resource = Resource(
            id=resource_id, user_id=job.user_id, name=name, safe_name=name,
            content_type="image/png", size=stored.size, sha256=stored.sha256, app_id="default",
            project_id="default", session_id=f"resource:{job.user_id}:{resource_id}",
            internal_uri=stored.uri, metadata={"devJobId": job.id},
            created_at=now_ms(),
        )
        await resources.insert(self.db, resource)
        return resource
