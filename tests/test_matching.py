"""Raw walking and filename matching: pure functions, checked against the naive definitions."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.search.matching import FilenameMatcher, searchable_text, walk_strings

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "base64", "text", "name", "b"]), children,
                      max_size=4),
    max_leaves=30,
)


def naive_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k != "base64" for s in naive_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in naive_strings(v)]
    return []


@settings(max_examples=1000)
@given(json_values)
def test_walk_reads_every_string_except_under_base64(value: Any) -> None:
    assert sorted(walk_strings(value)) == sorted(naive_strings(value))


def test_walk_skips_base64_at_any_depth_but_not_other_keys() -> None:
    raw = {"base64": "hidden.png", "x": [{"base64": "also.png", "name": "shown.png"}],
           "base64_like": "kept.png"}
    assert sorted(walk_strings(raw)) == ["kept.png", "shown.png"]


filenames = st.builds(
    lambda stem, ext: f"{stem}.{ext}" if ext else stem,
    st.text(alphabet="abcXYZ-_ .1é图", min_size=1, max_size=8),
    st.sampled_from(["png", "PNG", "jpg", "tar.gz", "", "p"]),
)


@settings(max_examples=1000)
@given(st.lists(filenames, min_size=1, max_size=8),
       st.lists(st.text(alphabet="abcXYZ-_ .1é图pngjPG", max_size=30) | filenames, max_size=6))
def test_matcher_finds_exactly_the_names_that_occur(names: list[str], pieces: list[str]) -> None:
    text = searchable_text(pieces)
    expected = {n.lower() for n in names if n.lower() in text}
    assert FilenameMatcher(names).find(text) == expected


def test_matching_is_case_insensitive_and_needs_the_full_name() -> None:
    matcher = FilenameMatcher(["Photo.PNG", "notes.txt", "README"])
    assert matcher.find(searchable_text(["see photo.png and readme"])) == {"photo.png", "readme"}
    assert matcher.find(searchable_text(["photo.pn", "hoto.png"])) == set()
    assert matcher.find(searchable_text(["a photo.pngx"])) == {"photo.png"}


def test_a_match_never_spans_two_strings() -> None:
    assert FilenameMatcher(["a.png"]).find(searchable_text(["a", ".png"])) == set()


def test_matching_cost_grows_linearly_with_the_text() -> None:
    names = [f"image-{i}.png" for i in range(200)]
    matcher = FilenameMatcher(names)
    text = searchable_text(["lorem ipsum. " * 2000 + "image-7.png"])
    assert matcher.find(text) == {"image-7.png"}


def test_a_name_holding_nul_never_matches() -> None:
    # The walk joins strings with NUL: such a name could only "occur" across two strings.
    matcher = FilenameMatcher(["a\x00b.png", "c.png"])
    assert matcher.find(searchable_text(["a", "b.png c.png"])) == {"c.png"}
    assert matcher.find(searchable_text(["a\x00b.png"])) == set()
