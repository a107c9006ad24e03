"""Canonical arguments: what is stored, confirmed, executed and shown, never the raw proposal.

Top-level `null` counts as missing, missing parameters take their schema's default, parameters
the schema does not name are dropped, and then the result is validated against the schema.
Pure: data in, data out (or ValidationFailed naming the argument).
"""

from __future__ import annotations

import copy
from typing import Any

from gateway.errors import ValidationFailed
from gateway.toolcalls.registry import Tool


def canonical_args(tool: Tool, raw: Any) -> dict[str, Any]:
    """The canonical form of `raw` for `tool`; ValidationFailed (field `args…`) when invalid."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValidationFailed("args: must be a JSON object", field="args")
    canonical: dict[str, Any] = {}
    for name, schema in tool.properties.items():  # the registry's order, so equal args are equal
        value = raw.get(name)
        if value is not None:
            canonical[name] = value
        elif isinstance(schema, dict) and "default" in schema:
            canonical[name] = copy.deepcopy(schema["default"])
    error = tool.first_error(canonical)
    if error is not None:
        field = ".".join(["args", *(str(part) for part in error.absolute_path)])
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = [n for n in error.validator_value if n not in error.instance]
            if missing:
                field = f"{field}.{missing[0]}"
        raise ValidationFailed(f"{field}: {error.message}", field=field)
    return canonical


def image_ids(tool: Tool, args: dict[str, Any]) -> list[tuple[str, int | None, str]]:
    """Every image id the canonical args name: (parameter, index in an array or None, id)."""
    found: list[tuple[str, int | None, str]] = []
    for name, is_array in tool.image_parameters.items():
        value = args.get(name)
        if is_array and isinstance(value, list):
            found += [(name, index, item) for index, item in enumerate(value)
                      if isinstance(item, str)]
        elif isinstance(value, str):
            found.append((name, None, value))
    return found
