"""The tool registry (`tools.registry`, a JSON file): what an agent may propose, its parameters
as JSON Schema (draft 2020-12, with defaults), how it is shown, what it costs, what job runs it.

Loaded once at start-up and checked whole: a registry that is not what SPEC §16 describes stops
the gateway with a message naming the tool and the field, never half-loads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from gateway.config import ConfigError

IMAGE_ID_FORMAT = "image-id"
IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")
_TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_POINTER = re.compile(r"(/([^~/]|~[01])*)+")
EXAMPLE_FILE = "tools.example.json"


def _format_checker() -> FormatChecker:
    checker = FormatChecker()

    @checker.checks(IMAGE_ID_FORMAT)  # type: ignore[untyped-decorator]  # jsonschema's is untyped
    def is_image_id(value: object) -> bool:
        return not isinstance(value, str) or IMAGE_ID.fullmatch(value) is not None

    return checker


FORMATS = _format_checker()


@dataclass(frozen=True)
class Display:
    title: str
    fields: tuple[str, ...]  # JSON pointers into the canonical args, in display order


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    display: Display
    job_kind: str
    validator: Draft202012Validator = field(compare=False, repr=False)
    price_points: int | None = None
    # Top-level parameters holding image ids: name → True when an array of them.
    image_parameters: dict[str, bool] = field(default_factory=dict)

    @property
    def properties(self) -> dict[str, Any]:
        found: dict[str, Any] = self.parameters.get("properties", {})
        return found

    def first_error(self, args: dict[str, Any]) -> ValidationError | None:
        """The most relevant reason `args` do not fit the parameters' schema, or None."""
        return best_match(self.validator.iter_errors(args))

    def as_json(self) -> dict[str, Any]:
        """The tool as `GET /tools` lists it (the registry entry, camelCase where it is ours)."""
        listed: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "display": {"title": self.display.title, "fields": list(self.display.fields)},
            "job": {"kind": self.job_kind},
            "imageParameters": sorted(self.image_parameters),
        }
        if self.price_points is not None:
            listed["price"] = {"points": self.price_points}
        return listed


@dataclass(frozen=True)
class Registry:
    tools: dict[str, Tool]
    source: str  # the file it came from, for messages

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


def _is_image_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("format") == IMAGE_ID_FORMAT


def _image_parameters(properties: dict[str, Any]) -> dict[str, bool]:
    found: dict[str, bool] = {}
    for name, schema in properties.items():
        if _is_image_schema(schema):
            found[name] = False
        elif isinstance(schema, dict) and _is_image_schema(schema.get("items")):
            found[name] = True
    return found


def _tool(entry: Any, where: str) -> Tool:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: each tool must be a JSON object")

    def need(key: str, kind: type, text: str) -> Any:
        value = entry.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(f"{where}.{key}: {text}")
        return value

    name = need("name", str, "a name is required")
    if not _TOOL_NAME.fullmatch(name):
        raise ConfigError(f"{where}.name: {name!r} is not a tool name ([A-Za-z][A-Za-z0-9_.-]*)")
    where = f"{where} ({name})"
    description = need("description", str, "a description (text) is required")
    parameters = need("parameters", dict, "a JSON Schema object is required")
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as exc:
        raise ConfigError(f"{where}.parameters: not a valid JSON Schema: {exc.message}") from None
    if parameters.get("type") != "object" or not isinstance(parameters.get("properties"), dict):
        raise ConfigError(f"{where}.parameters: must be an object schema with properties")
    validator = Draft202012Validator(parameters, format_checker=FORMATS)
    for prop, schema in parameters["properties"].items():
        if isinstance(schema, dict) and "default" in schema:
            error = best_match(Draft202012Validator(schema, format_checker=FORMATS)
                               .iter_errors(schema["default"]))
            if error is not None:
                raise ConfigError(f"{where}.parameters.{prop}: default is invalid: "
                                  f"{error.message}")
    display = need("display", dict, "display {title, fields} is required")
    title = display.get("title")
    fields = display.get("fields", [])
    if not isinstance(title, str) or not title.strip():
        raise ConfigError(f"{where}.display.title: a title is required")
    if not isinstance(fields, list) or not all(
        isinstance(p, str) and _POINTER.fullmatch(p) for p in fields
    ):
        raise ConfigError(f"{where}.display.fields: a list of JSON pointers (\"/prompt\")")
    job = need("job", dict, "job {kind} is required")
    kind = job.get("kind")
    if not isinstance(kind, str) or not kind.strip():
        raise ConfigError(f"{where}.job.kind: a job kind is required")
    price = entry.get("price")
    points = None
    if price is not None:
        points = price.get("points") if isinstance(price, dict) else None
        if not isinstance(points, int) or isinstance(points, bool) or points < 0:
            raise ConfigError(f"{where}.price.points: a whole number of points (0 or more)")
    return Tool(
        name=name, description=description, parameters=parameters,
        display=Display(title.strip(), tuple(fields)), job_kind=kind.strip(),
        price_points=points, image_parameters=_image_parameters(parameters["properties"]),
        validator=validator,
    )


def parse_registry(data: Any, source: str) -> Registry:
    if not isinstance(data, list):
        raise ConfigError(f"tools.registry {source}: must be a JSON array of tools")
    tools: dict[str, Tool] = {}
    for index, entry in enumerate(data):
        tool = _tool(entry, f"tools.registry {source}: [{index}]")
        if tool.name in tools:
            raise ConfigError(f"tools.registry {source}: tool {tool.name!r} is listed twice")
        tools[tool.name] = tool
    return Registry(tools, source)


def example_text() -> str:
    """The example registry shipped inside the package (the top-level copy is the same file)."""
    return resources.files("gateway.toolcalls").joinpath(EXAMPLE_FILE).read_text("utf-8")


def load_registry(path: str) -> Registry:
    """The registry at `path`; empty = the shipped example (two image tools)."""
    if not path:
        return parse_registry(json.loads(example_text()), f"(built-in {EXAMPLE_FILE})")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"tools.registry: cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"tools.registry {path}: not valid JSON: {exc}") from None
    return parse_registry(data, path)
