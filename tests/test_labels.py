"""`normalise_label` (SPEC §10): examples, then properties over arbitrary text."""

import string
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.store.labels import normalise_label

DROPPED = set(string.punctuation) - set("-_.")
labels = st.one_of(st.none(), st.text(max_size=80),
                   st.text(alphabet=" \t\n\u3000!#()-_.ab图片", max_size=40))
reference_ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1,
                        max_size=40)


def test_examples() -> None:
    assert normalise_label("  holiday   photo (final)!  ", None, "res_1") == "holiday photo final"
    assert normalise_label("a\tb\x00c", None, "res_1") == "abc"
    assert normalise_label("v1.2_final-cut", None, "res_1") == "v1.2_final-cut"
    assert normalise_label("一二三四五六七八九十一二三四五六七八九十一二三四五六", None, "r") == (
        "一二三四五六七八九十一二三四五六七八九十一二三四")
    assert normalise_label("!!! ???", "cat (1).png", "res_1") == "cat 1.png"
    assert normalise_label("", "  ", "res_1") == "res_1"
    assert normalise_label(None, None, "") == "图片"
    assert normalise_label("twenty-three characters x", None, "r") == "twenty-three characters"


@settings(max_examples=1000)
@given(label=labels, name=labels, reference_id=reference_ids)
def test_a_label_is_never_empty_and_at_most_24_code_points(
    label: str | None, name: str | None, reference_id: str
) -> None:
    result = normalise_label(label, name, reference_id)
    assert result
    if result != reference_id:
        assert len(result) <= 24


@settings(max_examples=1000)
@given(label=labels, name=labels)
def test_a_cleaned_label_keeps_only_allowed_characters(label: str | None, name: str | None) -> None:
    result = normalise_label(label, name, "ref-id")
    if result in ("ref-id", "图片"):
        return
    assert not any(ch in DROPPED for ch in result)
    assert not any(unicodedata.category(ch) == "Cc" for ch in result)
    assert result == result.strip()
    assert "  " not in result
    assert all(ch == " " or not ch.isspace() for ch in result)


@settings(max_examples=1000)
@given(label=labels, name=labels)
def test_normalising_twice_changes_nothing(label: str | None, name: str | None) -> None:
    once = normalise_label(label, name, "ref-id")
    assert normalise_label(once, None, "other") == once


@settings(max_examples=1000)
@given(label=st.text(max_size=80), name=labels)
def test_the_label_wins_whenever_something_of_it_remains(label: str, name: str | None) -> None:
    from_label_alone = normalise_label(label, None, "ref-id")
    if from_label_alone != "ref-id":
        assert normalise_label(label, name, "ref-id") == from_label_alone
        # What survives is the label's kept characters, in order.
        kept = iter(label)
        assert all(any(ch == k or (ch == " " and k.isspace()) for k in kept)
                   for ch in from_label_alone)


@settings(max_examples=1000)
@given(junk=st.text(alphabet="".join(DROPPED) + " \t\n\x00\x07\u3000", max_size=30),
       name=labels, reference_id=reference_ids)
def test_a_label_of_nothing_falls_back_to_the_name_then_the_id(
    junk: str, name: str | None, reference_id: str
) -> None:
    result = normalise_label(junk, name, reference_id)
    assert result == normalise_label(name, None, reference_id)
    assert normalise_label(junk, junk, reference_id) == reference_id
    assert normalise_label(junk, None, " ") == "图片"
