"""`displayArgs`: what the user sees before confirming, built by the gateway alone from the
canonical args, the registry and the caller's own assets (display data a client sends is never
read). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.toolcalls.canonical import image_ids
from gateway.toolcalls.registry import Tool


@dataclass(frozen=True)
class InputImage:
    """One of the caller's assets an image id names, as shown and as handed to the job."""

    image_id: str
    asset_id: str
    url: str
    preview_url: str | None
    mime_type: str | None
    width: int | None
    height: int | None

    def as_json(self) -> dict[str, Any]:
        return {"imageId": self.image_id, "assetId": self.asset_id, "url": self.url,
                "mimeType": self.mime_type, "width": self.width, "height": self.height}


_MISSING = object()


def _pointer_value(document: Any, pointer: str) -> Any:
    """RFC 6901: the value at `pointer`, or _MISSING."""
    value = document
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _label(tool: Tool, pointer: str) -> str:
    top = pointer.split("/")[1].replace("~1", "/").replace("~0", "~")
    schema = tool.properties.get(top)
    title = schema.get("title") if isinstance(schema, dict) else None
    if pointer.count("/") == 1 and isinstance(title, str):
        return title
    return pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")


def display_args(
    tool: Tool, args: dict[str, Any], images: dict[str, InputImage]
) -> dict[str, Any]:
    """`{title, prompt?, params: [{label, value}], images: [...], pricePoints?}`.

    `images` maps every image id of `args` to the caller's asset (checked by the caller).
    """
    shown: dict[str, Any] = {"title": tool.display.title}
    prompt = args.get("prompt")
    if isinstance(prompt, str):
        shown["prompt"] = prompt
    params = []
    for pointer in tool.display.fields:
        top = pointer.split("/")[1]
        if top in tool.image_parameters or (pointer == "/prompt" and "prompt" in shown):
            continue  # images are shown as images, the prompt on its own
        value = _pointer_value(args, pointer)
        if value is not _MISSING:
            params.append({"label": _label(tool, pointer), "value": value})
    shown["params"] = params
    shown_images = []
    for name, index, image_id in image_ids(tool, args):
        image = images[image_id]
        label = _label(tool, f"/{name}")
        if index is not None:
            label = f"{label} {index + 1}"
        shown_images.append({
            "assetId": image.asset_id, "url": image.preview_url or image.url, "label": label,
            "width": image.width, "height": image.height,
        })
    shown["images"] = shown_images
    if tool.price_points is not None:
        shown["pricePoints"] = tool.price_points
    return shown
