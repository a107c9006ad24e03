"""The dev engine's file parser: what EverOS 1.5.1's parser records on a content item, for the
formats it reads without a model (`memory/extract/parser/{mapping,enrich}.py`, everalgo-parser).

The bytes come from `base64` or a `file://` URI, as the engine's `build_raw_file` takes them;
the format is the extension (`ext`, else the file's suffix). Plain text (`txt md vtt csv tsv`) is
decoded and an `eml` email rendered (headers, then the body) exactly as the engine's parser does
it; an email's inline images become the parser's own `[image: <name>, OCR failed]` marker. Every
other known format (images, audio, PDF, office files, HTML) needs the multimodal model the dev
engine does not have: the item is recorded as the engine records an item its model did not parse
(`parse_status: "failed"`, `parse_error: "LLMError"`, no `parsed_content`), so it adds no text.
`http(s)` URIs are not fetched (the engine would, then ask its model): recorded the same way.
What the engine refuses with 415 is refused here with `UnsupportedFile` and the engine's message.
"""

from __future__ import annotations

import base64
import email
import email.policy
import re
from collections.abc import Container
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

FILE_URI_MAX_BYTES = 52_428_800  # [multimodal] file_uri_max_bytes, the engine's default

IMAGE = frozenset({"png", "jpg", "jpeg", "webp", "tiff", "tif", "bmp", "svg"})
AUDIO = frozenset({"mp3", "wav", "m4a", "amr", "aiff", "aac", "ogg", "flac"})
DOCUMENT = frozenset({"docx", "pptx", "xlsx", "doc", "ppt", "xls", "pages", "key", "numbers",
                      "odt", "ods", "odp", "rtf"})
DIRECT = frozenset({"txt", "md", "vtt", "csv", "tsv"})
# Formats the engine's parser sends to its multimodal model (everalgo `types/modality.py`).
NEEDS_MODEL = IMAGE | AUDIO | DOCUMENT | {"pdf", "html", "htm"}
INLINE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/jpg", "image/webp",
                                "image/bmp", "image/tiff", "image/svg+xml"})


class UnsupportedFile(ValueError):
    """A content item the engine's parser refuses (415 UNSUPPORTED_FORMAT)."""


def parse_item(item: dict[str, Any], objects: Container[str] = ()) -> None:
    """Record on a non-text item what the engine's parser would (`parsed_content`,
    `parse_status`, `parse_error`), in place; raise UnsupportedFile where the engine answers 415.
    `objects`: keys of objects uploaded through the Cloud's sign route (devengine/objects.py),
    read as the Cloud reads them, by a model the dev engine does not have."""
    uri = item.get("uri")
    if uri and (urlparse(uri).scheme in ("http", "https") or uri in objects):
        _not_parsed(item)
        return
    content, ext = _hydrate(item)
    if not content:
        raise UnsupportedFile("Cannot dispatch: RawFile has no content. Provide either an "
                              "http(s) uri (the URL parser fetches) or hydrated bytes.")
    ext = ext.lower().lstrip(".")
    if ext in DIRECT:
        _parsed(item, content.decode("utf-8", errors="replace"))
    elif ext == "eml":
        _parsed(item, email_text(content))
    elif ext in NEEDS_MODEL:
        _not_parsed(item)
    else:
        raise UnsupportedFile(f"Cannot dispatch: extension={ext!r} mime='' do not map to a "
                              "known Modality.")


def _parsed(item: dict[str, Any], text: str) -> None:
    item["parsed_content"] = text
    item["parse_status"] = "success"


def _not_parsed(item: dict[str, Any]) -> None:
    item["parse_status"] = "failed"
    item["parse_error"] = "LLMError"


def _hydrate(item: dict[str, Any]) -> tuple[bytes, str]:
    """The item's bytes and extension, as `build_raw_file` reads them."""
    uri = item.get("uri")
    if uri:
        if urlparse(uri).scheme != "file":
            return b"", ""  # handed to the parser as a bare URI, which it cannot read
        path = _file_path(uri)
        return path.read_bytes(), item.get("ext") or path.suffix
    encoded = item.get("base64")
    if encoded:
        try:
            return base64.b64decode(encoded), item.get("ext") or ""
        except ValueError as exc:  # binascii.Error
            raise UnsupportedFile(str(exc)) from None
    raise UnsupportedFile(f"content item has neither uri nor base64 (type={item.get('type')!r})")


def _file_path(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost"):
        raise UnsupportedFile(f"file uri with remote host not supported: {parsed.netloc!r}")
    try:
        path = Path(url2pathname(parsed.path)).expanduser().resolve(strict=True)
    except OSError as exc:
        raise UnsupportedFile(f"cannot resolve file uri {uri!r}: {exc}") from None
    if not path.is_file():
        raise UnsupportedFile(f"file uri target is not a regular file: {path}")
    size = path.stat().st_size
    if size > FILE_URI_MAX_BYTES:
        raise UnsupportedFile(f"file uri target too large: {size} bytes "
                              f"(cap {FILE_URI_MAX_BYTES}; raise "
                              "EVEROS_MULTIMODAL__FILE_URI_MAX_BYTES)")
    return path


# --- email, as everalgo-parser's `document._aparse_email` renders it ---------------------------


def email_text(content: bytes) -> str:
    msg = email.message_from_bytes(content, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    parts: list[str] = []
    headers = "\n".join(f"{field}: {value}" for field in ("Subject", "From", "To", "Cc", "Date")
                        if (value := msg.get(field)))
    if headers:
        parts.append(headers)
    images = _inline_images(msg)
    body = _email_body(msg, images, prefer_html=any(cid for cid, _ in images.values()))
    if body:
        parts.append(body)
    result = "\n\n".join(parts)
    if not images:
        return result
    appended: list[str] = []
    for index, (_, filename) in images.items():
        marker = f"[image: {filename}, OCR failed]"  # what the parser writes when its model fails
        placeholder = f"[image:{index}]"
        if placeholder in result:
            result = result.replace(placeholder, marker)
        else:
            appended.append(marker)
    return result + "\n\n" + "\n\n".join(appended) if appended else result


def _inline_images(msg: EmailMessage) -> dict[int, tuple[str, str]]:
    """{index: (content id, filename)} of the email's inline images, numbered from 1."""
    images: dict[int, tuple[str, str]] = {}
    for part in msg.walk():
        if part.get_content_type() not in INLINE_IMAGE_TYPES:
            continue
        data = part.get_content() if isinstance(part, EmailMessage) else None
        if not isinstance(data, bytes) or not data:
            continue
        index = len(images) + 1
        images[index] = ((part.get("Content-ID", "") or "").strip("<>"),
                         part.get_filename() or f"image_{index}")
    return images


def _email_body(msg: EmailMessage, images: dict[int, tuple[str, str]], *,
                prefer_html: bool) -> str:
    if not prefer_html and (plain := _body_text(msg, "plain")):
        return plain.strip()
    html = _body_text(msg, "html")
    if html:
        placeholders = {cid: f"[image:{index}]" for index, (cid, _) in images.items() if cid}
        cleaned = html_text(_replace_cid_images(html, placeholders))
        if cleaned:
            return cleaned
    if prefer_html and (plain := _body_text(msg, "plain")):
        return plain.strip()
    return ""


def _body_text(msg: EmailMessage, kind: str) -> str:
    body = msg.get_body(preferencelist=(kind,))
    content = body.get_content() if isinstance(body, EmailMessage) else None
    return content if isinstance(content, str) and content.strip() else ""


def _replace_cid_images(html: str, placeholders: dict[str, str]) -> str:
    if not placeholders:
        return html
    return re.sub(r'<img\b[^>]*\bsrc=["\']cid:([^"\']+)["\'][^>]*/?>',
                  lambda match: placeholders.get(match.group(1), match.group(0)), html,
                  flags=re.IGNORECASE)


class _TextOf(HTMLParser):
    SKIPPED = frozenset({"head", "style", "script", "noscript"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skipping = 0
        self.pieces: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIPPED:
            self.skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping and data.strip():
            self.pieces.append(data.strip())


def html_text(html: str) -> str:
    """The text of an HTML body, one stripped text node a line (the parser's
    `clean_html_content`: head, style, script and noscript dropped)."""
    if not html.strip():
        return ""
    reader = _TextOf()
    reader.feed(html)
    reader.close()
    lines = [line.strip() for line in "\n".join(reader.pieces).split("\n") if line.strip()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
