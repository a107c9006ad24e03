"""The text-reference parser alone: what it finds, folds and marks, and that it never breaks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.resolution.parsing import (
    Reference,
    normalise_text,
    parse_number,
    parse_references,
)


def _refs(text: str) -> list[tuple[str, str, str]]:
    return [(r.kind, r.value, r.role) for r in parse_references(text).references]


@pytest.mark.parametrize(
    ("word", "value"),
    [("3", 3), ("三", 3), ("两", 2), ("十", 10), ("十二", 12), ("二十三", 23), ("three", 3),
     ("一百", 100), ("99999", None), ("几", None), ("零", None)],
)  # fmt: skip
def test_parse_number_reads_digits_chinese_and_english(word: str, value: int | None) -> None:
    assert parse_number(word) == value


def test_normalise_text_folds_full_width_case_and_spaces() -> None:
    assert normalise_text("  ＴＨＥ  Left\u3000ONE  第３张 don’t ") == "the left one 第3张 don't"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("左边那张", [("position", "left", "target")]),
        ("the bottom-right image", [("position", "bottom-right", "target")]),
        ("倒数第二张", [("ordinal", "nth", "target")]),
        ("参考图", [("chain", "root", "target")]),
        ("the previous version", [("chain", "parent", "target")]),
        ("刚才那张", [("chain", "latest", "target")]),
        ("我选的这几张", [("selection", "selected", "target")]),
        ("the image I uploaded", [("upload", "uploaded", "target")]),
        ("这三张都", [("batch", "all", "target")]),
        ("the others", [("complement", "other", "target")]),
        (
            "不要改选中的，改原图",
            [("selection", "selected", "excluded"), ("chain", "root", "target")],
        ),
        (
            "左边的别动，右边的改",
            [("position", "left", "excluded"), ("position", "right", "target")],
        ),
        ("像原图一样", [("chain", "root", "source")]),
    ],
)
def test_parser_finds_kind_value_and_role(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert _refs(text) == expected


def _chain(text: str) -> list[tuple[str, int | None, int | None, str, str | None]]:
    return [
        (r.value, r.index, r.count, r.role, r.scope and r.scope.value)
        for r in parse_references(text).references
        if r.kind == "chain"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # rounds count back from the turn being resolved (-1 is the latest) or from the first (1)
        ("上上轮的图", [("round", -2, None, "target", None)]),
        ("两轮之前的", [("round", -2, None, "target", None)]),
        ("three rounds ago", [("round", -3, None, "target", None)]),
        ("第二轮的结果", [("round", 2, None, "target", None)]),
        ("the result of the first round", [("round", 1, None, "target", None)]),
        ("上上轮的三张", [("round", -2, 3, "target", None)]),
        # steps and versions count back from the anchor (-1), the latest when named
        ("退两步", [("parent", -3, None, "target", None)]),
        ("back three steps", [("parent", -4, None, "target", None)]),
        ("the one before the newest", [("parent", -2, None, "target", "latest")]),
        ("倒數第三版", [("version", -3, None, "target", None)]),
        ("the fourth version from the end", [("version", -4, None, "target", None)]),
        ("最近两版", [("version", -1, 2, "target", None)]),
        ("the first two versions", [("version", 1, 2, "target", None)]),
        ("the middle version", [("middle", None, None, "target", None)]),
        ("all the versions", [("versions", None, None, "target", None)]),
        # the original and the generated turns however they are named
        ("我一開始給你的那張", [("root", None, None, "target", None)]),
        ("the picture I began with", [("root", None, None, "target", None)]),
        ("the earliest result", [("generated", 1, None, "target", None)]),
        ("your first attempt", [("generated", 1, None, "target", None)]),
        ("前两次生成的", [("generated", 1, 2, "target", None)]),
        # an ordinal read inside a turn, or on the chain by what it goes with
        ("不是最新那版，是再前一版",
         [("latest", None, None, "excluded", None), ("before", None, None, "target", None)]),
        ("both of the last two are wrong, go back one more",
         [("version", -1, 2, "excluded", None), ("before", None, None, "target", None)]),
        ("not the first generated one, the second",
         [("generated", 1, None, "excluded", None), ("generated", 2, None, "target", None)]),
    ],
)  # fmt: skip
def test_chain_places_by_turn_step_and_role(
    text: str, expected: list[tuple[str, int | None, int | None, str, str | None]]
) -> None:
    assert _chain(text) == expected


@pytest.mark.parametrize(
    ("text", "index", "scope", "scope_index"),
    [("上上轮的第三张", 3, "round", -2), ("第二次生成的第一张", 1, "generated", 2),
     ("the first variant of the second round", 1, "round", 2),
     ("你生成的第四張", 4, "generated", None)],
)  # fmt: skip
def test_an_ordinal_inside_a_turn_is_scoped_by_it(
    text: str, index: int, scope: str, scope_index: int | None
) -> None:
    (ref,) = parse_references(text).references
    assert ref.kind == "ordinal"
    assert (ref.index, ref.scope and ref.scope.value, ref.scope and ref.scope.index) == (
        index, scope, scope_index
    )


@pytest.mark.parametrize(
    "text",
    ["在左边加一棵树", "让他向左看", "30度左右", "调整一下", "第一步先调色", "最后加一个logo",
     "把猫放到墙上", "还原图片", "make the sky bluer", "at the last minute", "",
     "往前走两步", "one step at a time", "我一开始想要蓝色", "我一开始给你的要求是蓝色背景",
     "第一次改的时候太暗了", "退一步说，背景可以更亮"],
)  # fmt: skip
def test_content_words_are_not_image_references(text: str) -> None:
    assert _refs(text) == []


def test_ordinal_indexes_count_from_either_end() -> None:
    def index(text: str) -> tuple[int | None, int | None]:
        (ref,) = parse_references(text).references
        return ref.index, ref.count

    assert index("第三张") == (3, None)
    assert index("最后一张") == (-1, None)
    assert index("second to last") == (-2, None)
    assert index("前两张") == (1, 2)
    assert index("the last two images") == (-1, 2)


def test_scope_before_the_ordinal_is_folded_in() -> None:
    (ref,) = parse_references("上一轮的第二张").references
    assert (ref.kind, ref.index) == ("ordinal", 2)
    assert ref.scope is not None and (ref.scope.kind, ref.scope.value) == ("chain", "latest")


def test_anchor_of_a_chain_reference_is_folded_in() -> None:
    (ref,) = parse_references("the original of the left one").references
    assert (ref.kind, ref.value) == ("chain", "root")
    assert ref.scope is not None and ref.scope.value == "left"


def test_two_references_without_de_stay_two() -> None:
    assert len(parse_references("左边那张原图").references) == 2


def test_or_between_references_marks_alternatives() -> None:
    refs = parse_references("左边或右边").references
    assert [r.either for r in refs] == [False, True]


def test_describe_reads_as_english() -> None:
    (ref,) = parse_references("选中的第二张").references
    assert ref.describe() == "the 2nd image of the selection"
    assert Reference("ordinal", "nth", 0, 0, index=-2).describe() == "the 2nd to last image"


_WORDS = st.sampled_from(
    ["左边", "那张", "第二张", "原图", "不要", "别动", "改", "选中的", "都", "或", "的", "，",
     "the", "left", "one", "not", "original", "of", "first", "instead of", "these", " ", "图"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=120), st.lists(_WORDS, max_size=16).map(" ".join)))
def test_references_are_ordered_disjoint_spans_of_the_normalised_text(text: str) -> None:
    parsed = parse_references(text)
    assert parsed.text == normalise_text(text)
    previous_end = 0
    for ref in parsed.references:
        assert previous_end <= ref.start < ref.end <= len(parsed.text)
        previous_end = ref.end
        assert ref.role in ("target", "excluded", "source")
        assert ref.index is None or ref.index != 0
        assert ref.count is None or ref.count > 1
        assert ref.describe()


@pytest.mark.parametrize(
    ("text", "count"),
    [("除了左上角那张，其他三张", 3), ("除了左上角，其他四张", 4), ("除了左上角那張，其他兩張", 2),
     ("all but the top-left, the other three", 3), ("除了 top-left 的，other two 调亮", 2),
     ("除了左上角那张，其他都调亮", None), ("all but the top-left, the others", None)],
)  # fmt: skip
def test_an_exclusion_with_a_count_of_the_rest_reads_both(text: str, count: int | None) -> None:
    # issue 55: the excluded place is read even bare ("除了左上角，", "all but the top-left,"),
    # and "the other three" keeps its count, which the resolver checks against what is left
    refs = parse_references(text).references
    assert [(r.kind, r.value, r.role) for r in refs if r.kind != "batch"] == [
        ("position", "top-left", "excluded"), ("complement", "other", "target")
    ]
    (other,) = [r for r in refs if r.kind == "complement"]
    assert other.count == count


@pytest.mark.parametrize("text", ["头一张", "頭一張", "the 头一张", "头一幅图"])
def test_tou_yi_zhang_is_the_first(text: str) -> None:
    (ref,) = parse_references(text).references
    assert (ref.kind, ref.index) == ("ordinal", 1)
