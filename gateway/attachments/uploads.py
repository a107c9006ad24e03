"""Streaming multipart parsing for `POST /resources`: the file part goes to disk as it arrives.

Exactly one file part, named `file`; at most `MAX_FIELDS` other fields of at most
`MAX_FIELD_BYTES` each. The file never sits in memory: parsed chunks are handed to the file
store as the request body streams in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.types import Receive, Scope

from gateway.attachments.files import FileStore, StoredFile, last_segment, safe_name
from gateway.errors import PayloadTooLarge, ValidationFailed
from gateway.serving.asgi import header, stream_body

MAX_FIELDS = 16
MAX_FIELD_BYTES = 64 * 1024
MAX_PARTS = MAX_FIELDS + 1
MULTIPART_OVERHEAD = 1024 * 1024  # headers and small fields allowed beyond the file limit


@dataclass
class _Part:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    name: str = ""
    filename: str | None = None
    content_type: str = ""
    value: bytearray = field(default_factory=bytearray)


@dataclass
class Upload:
    stored: StoredFile
    filename: str | None  # as the client sent it (not yet safe)
    content_type: str
    fields: dict[str, str]


# Called with the fields read so far and the file part's Content-Type when the file part begins;
# it raises to refuse the upload before any of the file is stored.
FileCheck = Callable[[dict[str, str], str], None]


class _Collector:
    """python-multipart callbacks: collects fields, queues file data for the async writer."""

    def __init__(self, on_file: FileCheck | None = None) -> None:
        self.on_file = on_file
        self.fields: dict[str, str] = {}
        self.file_part: _Part | None = None
        self.file_data: deque[bytes] = deque()
        self.parts = 0
        self._part = _Part()
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._in_file = False

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise ValidationFailed(f"too many form parts (at most {MAX_PARTS})", field="body")
        self._part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        self._part.headers[bytes(self._header_field).lower()] = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def on_headers_finished(self) -> None:
        part = self._part
        _, options = parse_options_header(part.headers.get(b"content-disposition", b""))
        part.name = options.get(b"name", b"").decode("utf-8", "replace")
        raw_filename = options.get(b"filename")
        part.filename = None if raw_filename is None else raw_filename.decode("utf-8", "replace")
        part.content_type = part.headers.get(b"content-type", b"").decode("latin-1").strip()
        self._in_file = part.filename is not None
        if self._in_file:
            if part.name != "file":
                raise ValidationFailed(
                    f"unexpected file field {part.name!r}: send the file as 'file'", field=part.name
                )
            if self.file_part is not None:
                raise ValidationFailed("exactly one file is accepted per upload", field="file")
            self.file_part = part
            if self.on_file is not None:  # before the file's first byte is stored
                self.on_file(self.fields, part.content_type)

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            self.file_data.append(data[start:end])
            return
        self._part.value += data[start:end]
        if len(self._part.value) > MAX_FIELD_BYTES:
            raise PayloadTooLarge(
                f"form field {self._part.name!r} exceeds {MAX_FIELD_BYTES} bytes",
                field=self._part.name,
            )

    def on_part_end(self) -> None:
        if not self._in_file:
            if len(self.fields) >= MAX_FIELDS:
                raise ValidationFailed(f"too many form fields (at most {MAX_FIELDS})", field="body")
            self.fields[self._part.name] = self._part.value.decode("utf-8", "replace")
        self._in_file = False


def boundary_of(scope: Scope) -> bytes:
    content_type, options = parse_options_header(header(scope, b"content-type") or b"")
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise ValidationFailed(
            "expected a multipart/form-data body with a 'file' field", field="file"
        )
    return boundary


def upload_name(fields: dict[str, str], filename: str | None) -> str:
    """The display name of an upload: the `name` field, else the file part's filename."""
    # NUL never belongs in a name (and PostgreSQL text cannot hold one)
    client_name = (fields.get("name") or filename or "").replace("\x00", "")
    return last_segment(client_name).strip() or "file"


async def receive_upload(
    scope: Scope, receive: Receive, store: FileStore, folder: str, limit: int, *,
    on_file: FileCheck | None = None, name: str | None = None,
) -> Upload:
    """Parse the multipart body, streaming the file part into `folder` (413 past `limit`).

    The file is stored under the safe form of its display name as far as it is known when the
    store needs a name (an object store: at the first part; the disk: at the end); a `name`
    field that comes after the file makes the route rename it. `name` fixes the stored name;
    `on_file` checks the fields and the file's type before the file is stored.
    """
    declared = header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit + MULTIPART_OVERHEAD:
        raise PayloadTooLarge(f"upload of {int(declared)} bytes exceeds the limit of {limit} bytes")
    collector = _Collector(on_file)
    callbacks = {
        name: getattr(collector, name)
        for name in ("on_part_begin", "on_header_field", "on_header_value", "on_header_end",
                     "on_headers_finished", "on_part_data", "on_part_end")
    }
    parser = MultipartParser(boundary_of(scope), callbacks=callbacks)  # type: ignore[arg-type]

    async def file_chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in stream_body(receive):
                parser.write(chunk)
                while collector.file_data:
                    yield collector.file_data.popleft()
            parser.finalize()
        except FormParserError as exc:
            raise ValidationFailed(f"malformed multipart body: {exc}", field="body") from None
        while collector.file_data:
            yield collector.file_data.popleft()

    def name_so_far() -> str:
        if name is not None:
            return name
        part = collector.file_part
        return safe_name(upload_name(collector.fields, part.filename if part else None))

    stored = await store.write_stream(folder, name_so_far, file_chunks(), limit)
    if collector.file_part is None:
        await store.remove_folder(folder)
        raise ValidationFailed("the 'file' field is required", field="file")
    return Upload(
        stored, collector.file_part.filename, collector.file_part.content_type, collector.fields
    )
