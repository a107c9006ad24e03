"""Which stored files the console shows as images (SPEC §20): PNG, JPEG, WebP and GIF, decided
by the file's first bytes, never by its name or declared type. Everything else, SVG included,
is only ever a download."""

from __future__ import annotations

from gateway.attachments.files import FileStore

HEAD_BYTES = 16


def raster_type(head: bytes) -> str | None:
    """The image type these leading bytes open, or None when they open no shown type."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


async def stored_raster_type(files: FileStore, internal_uri: str) -> str | None:
    """`raster_type` of a stored file's first bytes (None when it is missing)."""
    found = await files.open(internal_uri)
    if found is None:
        return None
    chunks = found.chunks
    head = b""
    try:
        async for chunk in chunks:
            head += chunk
            if len(head) >= HEAD_BYTES:
                break
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
    return raster_type(head[:HEAD_BYTES])
