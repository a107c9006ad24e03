"""The tool registry, canonical arguments and display arguments (pure, as tables)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.config import ConfigError
from gateway.errors import ValidationFailed
from gateway.toolcalls.canonical import canonical_args, image_ids
from gateway.toolcalls.display import InputImage, display_args
from gateway.toolcalls.registry import example_text, load_registry, parse_registry

ROOT = Path(__file__).resolve().parent.parent
IMG = "sha256:" + "a" * 64
IMG2 = "sha256:" + "b" * 64

TOOL: dict[str, Any] = {
    "name": "paint",
    "description": "Paint.",
    "parameters": {
        "type": "object",
        "properties": {
            "image": {"type": "string", "format": "image-id", "title": "Canvas"},
            "prompt": {"type": "string", "minLength": 1},
            "level": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3,
                      "title": "Level"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            "options": {"type": "object", "properties": {"seed": {"type": "integer"}},
                        "additionalProperties": False},
            "refs": {"type": "array", "items": {"type": "string", "format": "image-id"}},
        },
        "required": ["image", "prompt"],
    },
    "display": {"title": "Paint", "fields": ["/prompt", "/level", "/options/seed", "/image"]},
    "price": {"points": 7},
    "job": {"kind": "image.paint"},
}


def tool(**changes: Any) -> Any:
    entry = copy.deepcopy(TOOL)
    entry.update(changes)
    return parse_registry([entry], "test").tools[entry["name"]]


BASE = {"image": IMG, "prompt": "sky"}

CANONICAL = [
    # (raw args, canonical args)
    (BASE, {**BASE, "level": 3, "tags": []}),
    ({**BASE, "level": None}, {**BASE, "level": 3, "tags": []}),  # null = missing
    ({**BASE, "tags": None, "refs": None}, {**BASE, "level": 3, "tags": []}),
    ({**BASE, "level": 5, "tags": ["a"]}, {**BASE, "level": 5, "tags": ["a"]}),
    ({**BASE, "unknown": 1, "prompt2": "x"}, {**BASE, "level": 3, "tags": []}),  # dropped
    ({"prompt": "sky", "image": IMG, "level": 2}, {**BASE, "level": 2, "tags": []}),
    ({**BASE, "options": {"seed": 4}}, {**BASE, "level": 3, "tags": [], "options": {"seed": 4}}),
    ({**BASE, "refs": [IMG2]}, {**BASE, "level": 3, "tags": [], "refs": [IMG2]}),
]


@pytest.mark.parametrize(("raw", "canonical"), CANONICAL)
def test_canonical_args(raw: dict[str, Any], canonical: dict[str, Any]) -> None:
    found = canonical_args(tool(), raw)
    assert found == canonical
    assert list(found) == [k for k in TOOL["parameters"]["properties"] if k in canonical]
    assert canonical_args(tool(), found) == found  # canonical args are their own canonical form


INVALID = [
    # (raw args, field named)
    ({"prompt": "sky"}, "args.image"),
    ({"image": IMG}, "args.prompt"),
    ({"image": None, "prompt": "sky"}, "args.image"),  # null = missing, and it is required
    ({**BASE, "prompt": ""}, "args.prompt"),
    ({**BASE, "level": 9}, "args.level"),
    ({**BASE, "level": 2.5}, "args.level"),
    ({**BASE, "level": "3"}, "args.level"),
    ({**BASE, "tags": [1]}, "args.tags.0"),
    ({**BASE, "options": {"seed": 1, "extra": True}}, "args.options"),  # nested: the schema's
    ({**BASE, "image": "cat.png"}, "args.image"),
    ({**BASE, "image": "sha256:" + "A" * 64}, "args.image"),
    ({**BASE, "refs": [IMG2, "s3://bucket/key.png"]}, "args.refs.1"),
]


@pytest.mark.parametrize(("raw", "field"), INVALID)
def test_invalid_args_name_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationFailed) as failed:
        canonical_args(tool(), raw)
    assert failed.value.field == field
    assert failed.value.message.startswith(f"{field}: ")


@pytest.mark.parametrize("raw", [[1], "x", 3])
def test_args_must_be_an_object(raw: Any) -> None:
    with pytest.raises(ValidationFailed) as failed:
        canonical_args(tool(), raw)
    assert failed.value.field == "args"


def test_missing_args_are_an_empty_object() -> None:
    generate = parse_registry(json.loads(example_text()), "x").tools["generate_image"]
    with pytest.raises(ValidationFailed) as failed:
        canonical_args(generate, None)
    assert failed.value.field == "args.prompt"


def test_image_ids_are_found_in_single_and_array_parameters() -> None:
    args = canonical_args(tool(), {**BASE, "refs": [IMG2, IMG]})
    assert image_ids(tool(), args) == [("image", None, IMG), ("refs", 0, IMG2), ("refs", 1, IMG)]


def test_display_args_come_from_canonical_args_and_assets_only() -> None:
    args = canonical_args(tool(), {**BASE, "options": {"seed": 9}, "refs": [IMG2]})
    images = {
        IMG: InputImage(IMG, "ast_1", "https://x/1.png", "https://x/1s.png", "image/png", 10, 20),
        IMG2: InputImage(IMG2, "ast_2", "https://x/2.png", None, None, None, None),
    }
    assert display_args(tool(), args, images) == {
        "title": "Paint",
        "prompt": "sky",
        "params": [{"label": "Level", "value": 3}, {"label": "seed", "value": 9}],
        "images": [
            {"assetId": "ast_1", "url": "https://x/1s.png", "label": "Canvas", "width": 10,
             "height": 20},
            {"assetId": "ast_2", "url": "https://x/2.png", "label": "refs 1", "width": None,
             "height": None},
        ],
        "pricePoints": 7,
    }


def test_display_skips_fields_the_args_do_not_have_and_price_when_none() -> None:
    entry = {k: v for k, v in TOOL.items() if k != "price"}
    without_price = parse_registry([entry], "t").tools["paint"]
    shown = display_args(without_price, canonical_args(without_price, BASE),
                         {IMG: InputImage(IMG, "a", "u", None, None, None, None)})
    assert "pricePoints" not in shown
    assert shown["params"] == [{"label": "Level", "value": 3}]


BAD_REGISTRIES = [
    ({"name": ""}, "name"),
    ({"name": "has space"}, "name"),
    ({"description": None}, "description"),
    ({"parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}}, "parameters"),
    ({"parameters": {"type": "string"}}, "parameters"),
    ({"parameters": {"type": "object", "properties": {
        "level": {"type": "integer", "default": "high"}}}}, "parameters.level"),
    ({"display": {"fields": []}}, "display.title"),
    ({"display": {"title": "T", "fields": ["prompt"]}}, "display.fields"),
    ({"job": {}}, "job.kind"),
    ({"price": {"points": -1}}, "price.points"),
    ({"price": {"points": True}}, "price.points"),
]


@pytest.mark.parametrize(("change", "named"), BAD_REGISTRIES)
def test_bad_registry_entries_stop_loading_with_the_field_named(
    change: dict[str, Any], named: str
) -> None:
    entry = {**copy.deepcopy(TOOL), **change}
    with pytest.raises(ConfigError) as failed:
        parse_registry([entry], "tools.json")
    assert f".{named}" in str(failed.value)
    assert "tools.json" in str(failed.value)


def test_a_tool_listed_twice_or_a_non_list_is_refused() -> None:
    with pytest.raises(ConfigError, match="twice"):
        parse_registry([TOOL, TOOL], "t")
    with pytest.raises(ConfigError, match="array"):
        parse_registry({"tools": [TOOL]}, "t")


def test_registry_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_registry(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("[{", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_registry(str(broken))
    good = tmp_path / "tools.json"
    good.write_text(json.dumps([TOOL]), encoding="utf-8")
    assert list(load_registry(str(good)).tools) == ["paint"]


def test_the_example_registry_ships_in_the_package_and_at_the_top_level() -> None:
    assert (ROOT / "tools.example.json").read_text(encoding="utf-8") == example_text()
    registry = load_registry("")  # empty: the shipped example
    assert registry.tools == load_registry(str(ROOT / "tools.example.json")).tools
    assert {t.job_kind for t in registry.tools.values()} == {
        "image.edit", "image.generate", "image.upscale"}


def test_serve_refuses_a_bad_registry_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.cli import main

    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{**TOOL, "job": {}}]), encoding="utf-8")
    config = tmp_path / "gateway.toml"
    config.write_text(f'[tools]\nregistry = "{bad}"\n', encoding="utf-8")
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "configuration error: tools.registry" in err and "job.kind" in err


# --- properties ----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=3),
    max_leaves=8,
)
HEX = "0123456789abcdef"
PAINT = tool()


@settings(deadline=None)  # a loaded machine must not fail a test by its timing
@given(st.dictionaries(st.sampled_from([*TOOL["parameters"]["properties"], "x", "y"]),
                       JSON_VALUES, max_size=8))
def test_canonical_args_are_valid_fixed_points_or_refused(raw: dict[str, Any]) -> None:
    paint = PAINT
    try:
        canonical = canonical_args(paint, raw)
    except ValidationFailed as failed:
        assert failed.field is not None and failed.field.startswith("args")
        return
    assert set(canonical) <= set(paint.properties)
    assert None not in canonical.values()
    assert paint.first_error(canonical) is None
    assert canonical_args(paint, canonical) == canonical


@settings(deadline=None)
@given(st.one_of(
    st.text(max_size=80),
    st.text(HEX.upper() + HEX + " :/%", min_size=60, max_size=72).map(lambda t: "sha256:" + t),
    st.sampled_from(["SHA256:", "sha256 :", " sha256:", "sha-256:", "sha256:0x"]).flatmap(
        lambda prefix: st.text(HEX, min_size=64, max_size=64).map(lambda h: prefix + h)),
    st.text(HEX, min_size=64, max_size=64).map(lambda h: f"sha256:{h}\n"),
))
def test_only_exact_sha256_ids_pass_as_image_ids(candidate: str) -> None:
    exact = (candidate.startswith("sha256:") and len(candidate) == 71
             and all(c in HEX for c in candidate[7:]))
    try:
        canonical_args(PAINT, {"image": candidate, "prompt": "p"})
    except ValidationFailed as failed:
        assert not exact
        assert failed.field == "args.image"
    else:
        assert exact
