"""EverOS Cloud's object sign route and the presigned POST target it hands out, so that
`upstream.flavor = "everos-cloud"` runs on the dev engine as on the Cloud: the gateway signs a
file the SDK uploaded through `POST /api/v{1,2}/object/sign`, posts the form to the URL it is
given, then names the object key in an add (SPEC §18). The dev engine keeps only each object's
key and size (the gateway keeps the file); a key it never signed is simply text in an add, as
any `uri` it cannot read."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MAX_SIGNED = 100  # signed, not yet uploaded forms kept (oldest dropped first)
MAX_SIZE = 512 * 1024 * 1024  # objectSignedInfo.maxSize


class DevObjects:
    def __init__(self) -> None:
        self.signed: dict[str, str] = {}  # upload token -> object key
        self.sizes: dict[str, int] = {}  # object key -> bytes received

    async def sign(self, request: Request) -> JSONResponse:
        try:
            body: Any = await request.json()
        except ValueError:
            body = None
        listed = body.get("objectList") if isinstance(body, dict) else None
        if not isinstance(listed, list) or not listed \
                or not all(isinstance(e, dict) and isinstance(e.get("fileName"), str)
                           for e in listed):
            return JSONResponse({"status": 2018, "error": "objectList required",
                                 "result": {"data": "objectList required"}})
        base = str(request.base_url).rstrip("/")
        out = []
        for entry in listed:
            token = uuid.uuid4().hex
            key = f"dev/{uuid.uuid4().hex}/{entry['fileName']}"
            while len(self.signed) >= MAX_SIGNED:
                self.signed.pop(next(iter(self.signed)))
            self.signed[token] = key
            out.append({**entry, "objectKey": key, "objectSignedInfo": {
                "url": f"{base}/_objects/{token}", "fields": {"key": key},
                "maxSize": MAX_SIZE}})
        return JSONResponse({"status": 0, "error": "OK",
                             "result": {"data": {"objectList": out}}})

    async def upload(self, request: Request) -> Response:
        key = self.signed.pop(request.path_params["token"], None)
        async with request.form() as form:
            file = form.get("file")
            if key is None or form.get("key") != key or file is None or isinstance(file, str):
                return Response(status_code=403)
            self.sizes[key] = file.size or 0
        return Response(status_code=204)

    def routes(self) -> list[Route]:
        return [Route("/api/v2/object/sign", self.sign, methods=["POST"]),
                Route("/api/v1/object/sign", self.sign, methods=["POST"]),
                Route("/_objects/{token}", self.upload, methods=["POST"])]
