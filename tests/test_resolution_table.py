"""The resolution table (tests/resolution_cases): every row answers as written, and the answer does
not depend on the order nodes or assets arrive in, nor on where the canvas sits or its scale."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opencc_purepy import OpenCC

from gateway.resolution.resolver import ResolutionInput, resolve_targets
from tests.resolution_cases import CASES, KINDS, Case
from tests.resolution_cases.harness import resolution_input, verdict
from tests.resolution_cases.scenes import Scene, grid, row, story, with_results

_SIMPLIFIED = OpenCC("t2s")


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_table_row(case: Case) -> None:
    decision = resolve_targets(resolution_input(case.scene, case.text))
    assert verdict(case, decision) == "right", (
        f"expected {case.expected} by {case.modes}, got {decision.target_asset_ids} by "
        f"{decision.mode}: {decision.reason}"
    )


def _script(text: str) -> str:
    if not re.search(r"[\u3400-\u9fff]", text):
        return "english"
    if _SIMPLIFIED.convert(text) != text:
        return "traditional"
    return "mixed" if re.search(r"[a-z]{3,}", text, re.IGNORECASE) else "simplified"


def test_table_has_500_rows_in_both_languages_and_scripts_for_every_kind() -> None:
    assert len(CASES) >= 500
    assert {c.kind for c in CASES} == set(KINDS)
    scripts = Counter((c.kind, _script(c.text)) for c in CASES)
    for kind in KINDS:
        if kind == "mixed_language":
            assert scripts[kind, "mixed"] >= 40
        else:
            assert scripts[kind, "english"] and scripts[kind, "simplified"], kind
    for script in ("traditional", "mixed"):
        assert sum(n for (_, s), n in scripts.items() if s == script) >= 40, script
    assert len({(c.scene, c.text) for c in CASES}) == len(CASES)


def test_the_chain_rows_cover_chains_of_one_to_six_turns_in_every_script() -> None:
    # issue 25: written before the resolver was read, over chains of 1 to 6 turns (the upload's
    # and those that produced results), some turns with several results
    rows = [c for c in CASES if c.round == 5]
    assert len(rows) >= 150
    places = {1 + len(c.scene.result_turns()) for c in rows}
    assert set(range(1, 7)) <= places
    assert any(len(turn) > 1 for c in rows for turn in c.scene.result_turns())
    assert {_script(c.text) for c in rows} == {"english", "simplified", "traditional", "mixed"}
    assert sum(c.expected is None for c in rows) >= 30  # places outside the chain ask


# ---------------------------------------------------------------------------- property tests

_ON_CANVAS = [c for c in CASES if len(c.scene.nodes) > 1]


def _answer(inp: ResolutionInput) -> tuple[str, tuple[str, ...]]:
    decision = resolve_targets(inp)
    return decision.mode, decision.target_asset_ids


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(_ON_CANVAS), data=st.data())
def test_canvas_node_order_never_changes_the_answer(case: Case, data: st.DataObject) -> None:
    inp = resolution_input(case.scene, case.text)
    nodes = data.draw(st.permutations(inp.canvas_nodes))
    assert _answer(dataclasses.replace(inp, canvas_nodes=tuple(nodes))) == _answer(inp)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(CASES), data=st.data())
def test_asset_registration_order_never_changes_the_answer(case: Case, data: st.DataObject) -> None:
    # the turn's results keep their own order (it is what "the third variant" counts); which asset
    # was registered first among everything else the chat knows must not matter
    inp = resolution_input(case.scene, case.text)
    order = data.draw(st.permutations(list(inp.assets)))
    assets = {
        asset_id: dataclasses.replace(inp.assets[asset_id], created_at_ms=1000 + t)
        for t, asset_id in enumerate(order)
    }
    assert _answer(dataclasses.replace(inp, assets=assets)) == _answer(inp)


_ON_CHAIN = [c for c in CASES if len(c.scene.result_turns()) > 1]


@settings(max_examples=400, deadline=None)
@given(case=st.sampled_from(_ON_CHAIN), data=st.data())
def test_renumbering_turns_and_reordering_registrations_never_changes_the_answer(
    case: Case, data: st.DataObject
) -> None:
    # only the order of the chat's result turns counts, not their numbers (gaps, negative
    # numbers, any starting point), nor the order they are listed in, nor which asset was
    # registered first
    inp = resolution_input(case.scene, case.text)
    turns = inp.result_turns
    start = data.draw(st.integers(min_value=-10**9, max_value=10**9))
    gaps = data.draw(st.lists(st.integers(min_value=1, max_value=10**6), min_size=len(turns),
                              max_size=len(turns)))
    numbers = [start + sum(gaps[: k + 1]) for k in range(len(turns))]
    renumbered = [dataclasses.replace(t, turn=n) for t, n in zip(turns, numbers, strict=True)]
    listed = data.draw(st.permutations(renumbered))
    order = data.draw(st.permutations(list(inp.assets)))
    assets = {
        asset_id: dataclasses.replace(inp.assets[asset_id], created_at_ms=1000 + t)
        for t, asset_id in enumerate(order)
    }
    moved = dataclasses.replace(inp, result_turns=tuple(listed), assets=assets)
    assert _answer(moved) == _answer(inp)


_CHAIN_WORDS = [
    "再往前一版", "go back one more", "最后两版", "the last two", "上上轮的", "第二轮的", "第三张",
    "倒数第三版", "the one before the newest", "你生成的", "原图", "最新的", "两步之前的",
    "the middle version", "所有版本", "第一次生成的",
]  # fmt: skip
_CUES = ["", "不要", "not ", "除了", "，", "都不对，", " are wrong, ", "的", " and ", "和"]
_STORIES = list(dict.fromkeys(c.scene for c in CASES if c.round in (5, 6)))


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(st.tuples(st.sampled_from(_CUES), st.sampled_from(_CHAIN_WORDS)), max_size=5),
    scene=st.sampled_from(_STORIES),
)
def test_any_mix_of_chain_words_is_answered_or_asked(
    parts: list[tuple[str, str]], scene: Scene
) -> None:
    # negated, repeated and nested chain words never break the resolver ("不要再往前一版"
    # rejects the step back itself), and whatever it answers is an image of the chat
    text = "".join(cue + word for cue, word in parts)
    inp = resolution_input(scene, text)
    decision = resolve_targets(inp)
    assert set(decision.target_asset_ids) <= set(inp.assets)
    assert decision.needs_clarification == (decision.mode == "clarification")


def test_the_chain_counts_turns_in_their_order_not_their_listing() -> None:
    # swapping two turns' numbers swaps what "the second round" means: the order is read
    case = next(c for c in _ON_CHAIN if c.text == "第二轮的结果")
    inp = resolution_input(case.scene, case.text)
    first, second, *rest = inp.result_turns
    swapped = (dataclasses.replace(first, turn=second.turn),
               dataclasses.replace(second, turn=first.turn), *rest)
    assert _answer(inp) == ("text_reference", second.asset_ids)
    assert _answer(dataclasses.replace(inp, result_turns=swapped)) == (
        "text_reference", first.asset_ids
    )


_SCALES = st.floats(min_value=0.05, max_value=50, allow_nan=False, allow_infinity=False)
_SHIFTS = st.floats(min_value=-1e5, max_value=1e5, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(_ON_CANVAS), scale=_SCALES, dx=_SHIFTS, dy=_SHIFTS)
def test_scaling_and_moving_the_canvas_never_changes_the_answer(
    case: Case, scale: float, dx: float, dy: float
) -> None:
    inp = resolution_input(case.scene, case.text)
    moved = tuple(
        dataclasses.replace(
            n,
            x=n.x * scale + dx,
            y=n.y * scale + dy,
            width=None if n.width is None else n.width * scale,
            height=None if n.height is None else n.height * scale,
        )
        for n in inp.canvas_nodes
    )
    assert _answer(dataclasses.replace(inp, canvas_nodes=moved)) == _answer(inp)



@pytest.mark.parametrize(
    "text",
    ["把背景换成3号色", "12月3号的照片再亮一点", "在左边加一棵树", "第一步先调色",
     "把文字放在右下角", "add a cat in the top-left corner", "make the sky one shade bluer"],
)  # fmt: skip
def test_content_words_leave_the_focus_in_place(text: str) -> None:
    # positions and numbers that describe the content, not which image: working memory decides
    scene = with_results(row(3), 1)
    decision = resolve_targets(resolution_input(scene, text))
    answer = (decision.mode, decision.target_asset_ids)
    assert answer == ("working_memory", ("r1",)), decision.reason


@pytest.mark.parametrize(
    ("scene", "text", "candidates"),
    [
        # "the first one" fits the chain's first version and the first of the turn's results
        (story("t1a t1b t1c"), "the first one", ("o", "t1a")),
        (story("t1", "t2a t2b t2c", "t3<t2b"), "头一张", ("o", "t2a")),
        # the count of the rest disagrees with what the exclusion leaves: those are offered
        (grid(2, 2), "除了左上角那张，其他两张都调亮", ("r1c2", "r2c1", "r2c2")),
        (grid(2, 2), "all but the top-left, the other four", ("r1c2", "r2c1", "r2c2")),
    ],
)
def test_a_question_offers_the_readings_that_fit(
    scene: Scene, text: str, candidates: tuple[str, ...]
) -> None:
    # issue 55: where both readings fit, the clarification lists exactly them as tied
    decision = resolve_targets(resolution_input(scene, text))
    assert (decision.mode, decision.needs_clarification) == ("clarification", True)
    assert decision.tied_candidate_ids == candidates
