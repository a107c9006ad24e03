"""Table-driven tests of the target resolver: one row per expression, plus property tests."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.resolution.resolver import (
    MODES,
    AssetInfo,
    CanvasNode,
    Decision,
    ResolutionInput,
    WorkingState,
    canvas_layout,
    resolve_targets,
)

# ----------------------------------------------------------------------------------- fixtures
#
# chain:   root (upload) → edit1 → edit2            seed (upload) → a1, a2, a3 (3 in a row)
# grid:    tl tr / bl br (2x2 canvas)               pair: p1 p2 (two side by side)
# results: r1 r2 r3 r4 (a 4-result turn, no canvas) uploads: up1, up2


def _asset(id_: str, t: int, parent: str | None = None, root: str | None = None) -> AssetInfo:
    source = "upload" if parent is None else "generated"
    return AssetInfo(id_, root or id_, parent, source, "image", t)


ASSETS: dict[str, AssetInfo] = {
    a.id: a
    for a in [
        _asset("root", 1000),
        _asset("edit1", 2000, "root", "root"),
        _asset("edit2", 3000, "edit1", "root"),
        _asset("seed", 1100),
        _asset("a1", 4000, "seed", "seed"),
        _asset("a2", 4001, "seed", "seed"),
        _asset("a3", 4002, "seed", "seed"),
        _asset("tl", 5000),
        _asset("tr", 5001),
        _asset("bl", 5002),
        _asset("br", 5003),
        _asset("p1", 5500),
        _asset("p2", 5501),
        _asset("r1", 6000),
        _asset("r2", 6001),
        _asset("r3", 6002),
        _asset("r4", 6003),
        _asset("up1", 7000),
        _asset("up2", 7001),
    ]
}


def _node(asset: str, x: float, y: float, selected: bool = False) -> CanvasNode:
    return CanvasNode(
        f"n-{asset}", asset, f"https://cdn/{asset}.png", x, y, 100, 100, None, None, selected
    )


GRID = (_node("tl", 0, 0), _node("tr", 120, 0), _node("bl", 0, 120), _node("br", 120, 120))
ROW3 = (_node("a1", 0, 0), _node("a2", 150, 5), _node("a3", 300, -5))
PAIR = (_node("p1", 0, 0), _node("p2", 130, 10))
RESULTS = ("r1", "r2", "r3", "r4")


@dataclass(frozen=True)
class Scene:
    canvas: tuple[CanvasNode, ...] = ()
    selected: tuple[str, ...] = ()
    selected_nodes: tuple[str, ...] = ()
    uploads: tuple[str, ...] = ()
    policy: str = "auto"
    focus: str | None = None
    latest: tuple[str, ...] = ()
    multi: tuple[str, ...] = ()
    ws: dict[str, Any] = field(default_factory=dict)
    assets: dict[str, AssetInfo] = field(default_factory=lambda: ASSETS)

    def request(self, text: str) -> ResolutionInput:
        ws = WorkingState(
            current_focus_asset_id=self.focus,
            selected_asset_ids=self.ws.get("selected", ()),
            last_uploaded_asset_ids=self.ws.get("uploaded", ()),
            last_generated_asset_ids=self.ws.get("generated", self.latest),
            last_referenced_asset_ids=(),
            last_resolved_asset_ids=self.ws.get("resolved", ()),
            active_canvas_node_ids=tuple(n.nodeId for n in self.canvas),
            turn_count=3,
        )
        return ResolutionInput(
            text=text,
            uploaded_asset_ids=self.uploads,
            selected_asset_ids=self.selected,
            selected_node_ids=self.selected_nodes,
            focus_policy=self.policy,
            canvas_nodes=self.canvas,
            assets=self.assets,
            working_state=ws,
            latest_result_ids=self.latest,
            last_multi_result_ids=self.multi,
        )


_chain = Scene(focus="edit2", latest=("edit2",), ws={"uploaded": ("root",)})
_grid = Scene(
    canvas=GRID, focus="tr", latest=("tl", "tr", "bl", "br"), multi=("tl", "tr", "bl", "br")
)
_grid_tl = replace(_grid, canvas=(replace(GRID[0], isSelected=True), *GRID[1:]), selected=("tl",))
SCENES: dict[str, Scene] = {
    "chain": _chain,
    "chain+sel": replace(_chain, selected=("edit2",)),
    "chain+sel+policy-selected": replace(_chain, selected=("edit2",), policy="selected"),
    "chain+policy-original": replace(_chain, policy="original"),
    "chain+upload": replace(_chain, uploads=("up1",)),
    "chain+focus-edit1": replace(_chain, focus="edit1"),
    "chain+earlier-selection-edit1": replace(_chain, ws={"selected": ("edit1",)}),
    "chain+focus-edit1+policy-latest": replace(_chain, focus="edit1", policy="latest_result"),
    "row3": Scene(canvas=ROW3, focus="a3", latest=("a1", "a2", "a3"), multi=("a1", "a2", "a3")),
    "grid": _grid,
    "grid+sel-tl": _grid_tl,
    "grid+sel-tl+upload": replace(_grid_tl, uploads=("up1",)),
    "grid+sel-tl-br": replace(_grid, selected_nodes=("n-tl", "n-br")),
    "pair": Scene(canvas=PAIR, focus="p2", latest=("p1", "p2"), multi=("p1", "p2")),
    "results": Scene(latest=RESULTS, multi=RESULTS),
    "results+focus-r2": Scene(focus="r2", latest=RESULTS, multi=RESULTS),
    "uploads-2": Scene(uploads=("up1", "up2"), focus="edit2", latest=("edit2",)),
    "latest-only": Scene(latest=("edit2",), ws={"generated": ()}),
    "resolved-only": Scene(latest=("edit2",), ws={"resolved": ("edit1",), "generated": ()}),
    "latest-only+policy-original": Scene(
        latest=("edit2",), ws={"generated": ()}, policy="original"
    ),
    "root-only": Scene(focus="root", latest=("root",)),
    "nothing": Scene(),
    "no-assets": Scene(canvas=GRID, assets={}),
}

E, U, T = "explicit_selection", "current_upload", "text_reference"
W, L, C = "working_memory", "latest_result", "clarification"

# (id, text, scene, expected targets, expected mode)
ROWS: list[tuple[str, str, str, tuple[str, ...], str]] = [
    # --- positions, 2x2 grid (tl tr / bl br) ---
    ("zh-top-left-corner", "左上角那张", "grid", ("tl",), T),
    ("zh-top-right-de", "右上角的改成黑白", "grid", ("tr",), T),
    ("zh-bottom-left-tu", "左下角那张图", "grid", ("bl",), T),
    ("zh-bottom-right-short", "右下那张", "grid", ("br",), T),
    ("zh-top-left-picture", "左上的图片加个边框", "grid", ("tl",), T),
    ("zh-ba-bottom-right", "把右下角的改成黑白", "grid", ("br",), T),
    ("zh-left-ties-in-grid", "左边那张", "grid", (), C),
    ("zh-left-two", "左边两张", "grid", ("tl", "bl"), T),
    ("zh-top-two-dou", "上面两张都换成蓝天", "grid", ("tl", "tr"), T),
    ("zh-bottom-na-two", "下面那两张", "grid", ("bl", "br"), T),
    ("zh-right-dou", "右边的都调亮", "grid", ("tr", "br"), T),
    ("zh-top-row", "上排改成夜景", "grid", ("tl", "tr"), T),
    ("zh-middle-ties-in-grid", "中间那张", "grid", (), C),
    ("zh-left-tu-ties", "左图", "grid", (), C),
    ("zh-left-column-count-mismatch", "左边三张", "grid", (), C),
    ("en-top-left-one", "the top-left one", "grid", ("tl",), T),
    ("en-bottom-right-image", "make the bottom right image warmer", "grid", ("br",), T),
    ("en-upper-right-picture", "make the upper right picture brighter", "grid", ("tr",), T),
    ("en-lower-left-photo", "the lower-left photo", "grid", ("bl",), T),
    ("en-in-top-left-corner", "the one in the top left corner", "grid", ("tl",), T),
    ("en-two-on-the-left", "the two on the left", "grid", ("tl", "bl"), T),
    ("en-top-row", "change the top row to night", "grid", ("tl", "tr"), T),
    ("en-left-one-ties", "the left one", "grid", (), C),
    ("en-images-on-the-right", "both images on the right", "grid", ("tr", "br"), T),
    ("en-right-column", "the right column", "grid", ("tr", "br"), T),
    ("en-bottom-ones", "the bottom images", "grid", ("bl", "br"), T),
    # --- positions, three in a row (a1 a2 a3, slightly uneven y) ---
    ("zh-left-in-row", "左边那张", "row3", ("a1",), T),
    ("zh-middle-in-row", "中间那张", "row3", ("a2",), T),
    ("zh-right-de-end", "右边的", "row3", ("a3",), T),
    ("zh-leftmost-tu", "最左边的图", "row3", ("a1",), T),
    ("zh-middle-de-verb", "中间的改成黑白", "row3", ("a2",), T),
    ("zh-right-side", "右侧那幅", "row3", ("a3",), T),
    ("zh-left-and-middle", "左边和中间的", "row3", ("a1", "a2"), T),
    ("zh-verb-then-position", "改右边，其他不变", "row3", ("a3",), T),
    ("zh-top-ties-in-one-row", "上面那张", "row3", (), C),
    ("en-middle-one", "the middle one", "row3", ("a2",), T),
    ("en-one-in-the-middle", "edit the one in the middle", "row3", ("a2",), T),
    ("en-rightmost-image", "the rightmost image", "row3", ("a3",), T),
    ("en-leftmost", "the leftmost, please", "row3", ("a1",), T),
    ("en-center-image", "the center image", "row3", ("a2",), T),
    ("en-centre-british", "the centre one", "row3", ("a2",), T),
    ("en-one-on-the-right", "the one on the right", "row3", ("a3",), T),
    ("en-right-one", "the right one", "row3", ("a3",), T),
    ("en-far-left", "the image on the far left", "row3", ("a1",), T),
    ("en-left-and-middle", "the left one and the middle one", "row3", ("a1", "a2"), T),
    ("en-fullwidth-letters", "ＴＨＥ ＬＥＦＴ ＯＮＥ", "row3", ("a1",), T),
    # --- ordinals on a canvas (reading order) ---
    ("zh-first", "第一张", "row3", ("a1",), T),
    ("zh-second", "第二张", "row3", ("a2",), T),
    ("zh-third-digit-ge", "第3个", "row3", ("a3",), T),
    ("zh-third-ge", "第三个", "row3", ("a3",), T),
    ("zh-fullwidth-digit", "第３张", "row3", ("a3",), T),
    ("zh-last", "最后一张", "row3", ("a3",), T),
    ("zh-second-to-last", "倒数第二张", "row3", ("a2",), T),
    ("zh-out-of-range", "第四张", "row3", (), C),
    ("zh-first-two", "前两张", "row3", ("a1", "a2"), T),
    ("zh-last-two", "后两张", "row3", ("a2", "a3"), T),
    ("zh-first-and-third", "第一张和第三张", "row3", ("a1", "a3"), T),
    ("zh-tu-number", "图2", "row3", ("a2",), T),
    ("zh-hao-tu", "3号图", "row3", ("a3",), T),
    ("zh-grid-reading-order-third", "第三张", "grid", ("bl",), T),
    ("zh-grid-reading-order-second", "第二张", "grid", ("tr",), T),
    ("en-first-one", "the first one", "row3", ("a1",), T),
    ("en-second-image", "the second image", "row3", ("a2",), T),
    ("en-3rd-one", "the 3rd one", "row3", ("a3",), T),
    ("en-last-one", "the last one", "row3", ("a3",), T),
    ("en-second-to-last", "the second to last", "row3", ("a2",), T),
    ("en-second-to-last-hyphens", "second-to-last image", "row3", ("a2",), T),
    ("en-penultimate", "the penultimate one", "row3", ("a2",), T),
    ("en-first-two", "the first two", "row3", ("a1", "a2"), T),
    ("en-last-two-images", "the last two images", "row3", ("a2", "a3"), T),
    ("en-first-and-last", "the first and the last one", "row3", ("a1", "a3"), T),
    ("en-image-number", "image 3", "row3", ("a3",), T),
    ("en-hash-number", "#1 please", "row3", ("a1",), T),
    ("en-grid-fourth", "the fourth image", "grid", ("br",), T),
    ("en-out-of-range", "the fifth one", "row3", (), C),
    # --- ordinals without a canvas count the last multi-result turn ---
    ("zh-results-first", "第一张", "results", ("r1",), T),
    ("zh-results-second", "第二张", "results", ("r2",), T),
    ("zh-results-fourth", "第四张", "results", ("r4",), T),
    ("zh-results-last", "最后一张", "results", ("r4",), T),
    ("zh-results-second-to-last", "倒数第二张", "results", ("r3",), T),
    ("zh-results-fifth", "第五张", "results", (), C),
    ("zh-results-first-three", "前三张", "results", ("r1", "r2", "r3"), T),
    ("zh-results-second-and-fourth", "第二张和第四张", "results", ("r2", "r4"), T),
    ("zh-results-hao", "2号图", "results", ("r2",), T),
    ("zh-results-latest-second", "上一轮的第二张", "results", ("r2",), T),
    ("en-results-third", "the third one", "results", ("r3",), T),
    ("en-results-last-image", "the last image", "results", ("r4",), T),
    ("en-results-option", "option 3", "results", ("r3",), T),
    ("en-results-second-of-latest", "the second of the latest results", "results", ("r2",), T),
    ("zh-no-canvas-no-results", "第二张", "chain", (), C),
    ("zh-position-without-canvas", "左边那张", "results", (), C),
    ("en-position-without-canvas", "the top-left one", "chain", (), C),
    # --- the version chain: root → edit1 → edit2, focus edit2 ---
    ("zh-original", "改原图", "chain", ("root",), T),
    ("zh-original-bare", "原图", "chain", ("root",), T),
    ("zh-very-first", "最初那张", "chain", ("root",), T),
    ("zh-earliest", "用最早的那张", "chain", ("root",), T),
    ("zh-reference-image", "参考图", "chain", ("root",), T),
    ("zh-original-picture", "原始图片", "chain", ("root",), T),
    ("zh-restore-is-not-original", "还原图片", "chain", ("edit2",), W),
    ("zh-previous-version", "上一个版本", "chain", ("edit1",), T),
    ("zh-previous-edition", "回到前一版", "chain", ("edit1",), T),
    ("zh-last-round", "上一轮的结果", "chain", ("edit2",), T),
    ("zh-previous-result", "上一个结果", "chain", ("edit2",), T),
    ("zh-just-generated", "刚生成的", "chain", ("edit2",), T),
    ("zh-newest", "最新的再亮一点", "chain", ("edit2",), T),
    ("zh-this-result", "这个结果不错，再加点雾", "chain", ("edit2",), T),
    ("zh-just-now", "刚才那张", "chain", ("edit2",), T),
    ("en-original", "the original", "chain", ("root",), T),
    ("en-original-image", "go back to the original image", "chain", ("root",), T),
    ("en-first-version", "the first version", "chain", ("root",), T),
    ("en-previous-version", "the previous version", "chain", ("edit1",), T),
    ("en-version-before", "the version before this", "chain", ("edit1",), T),
    ("en-previous-result", "the previous result", "chain", ("edit2",), T),
    ("en-latest-one", "the latest one", "chain", ("edit2",), T),
    ("en-what-you-just-made", "tweak what you just made", "chain", ("edit2",), T),
    ("zh-latest-ties", "刚生成的", "results", (), C),
    ("zh-latest-batch", "刚生成的这几张", "results", RESULTS, T),
    ("zh-original-of-middle", "中间那张的原图", "row3", ("seed",), T),
    ("zh-previous-version-of-second", "第二张的上一个版本", "row3", ("seed",), T),
    ("en-original-of-left", "the original of the left one", "row3", ("seed",), T),
    ("zh-original-nothing-in-focus", "原图", "nothing", (), C),
    ("zh-root-has-no-parent", "上一个版本", "root-only", (), C),
    # --- explicit selection ---
    ("sel-empty-text", "", "chain+sel", ("edit2",), E),
    ("sel-plain-instruction", "把背景换成海边", "chain+sel", ("edit2",), E),
    ("sel-zh-selected-this", "选中的这张调亮", "chain+sel", ("edit2",), E),
    ("sel-en-selected-one", "the selected one", "chain+sel", ("edit2",), E),
    ("sel-outranks-latest-word", "上一轮的结果", "chain+sel", ("edit2",), E),
    ("sel-canvas-node", "改成黑白", "grid+sel-tl", ("tl",), E),
    ("sel-outranks-position", "右下角那张", "grid+sel-tl", ("tl",), E),
    ("sel-two-nodes", "", "grid+sel-tl-br", ("tl", "br"), E),
    ("sel-zh-these-i-picked", "我选的这几张", "grid+sel-tl-br", ("tl", "br"), E),
    ("sel-zh-selected-several", "选中的几张都改成黑白", "grid+sel-tl-br", ("tl", "br"), E),
    ("sel-en-both", "both", "grid+sel-tl-br", ("tl", "br"), E),
    ("sel-narrow-left", "左边那张", "grid+sel-tl-br", ("tl",), E),
    ("sel-narrow-second", "第二张", "grid+sel-tl-br", ("br",), E),
    ("sel-narrow-scoped-first", "选中的第一张", "grid+sel-tl-br", ("tl",), E),
    ("sel-en-first-of-selected", "the first of the selected ones", "grid+sel-tl-br", ("tl",), E),
    ("sel-minus-excluded", "不要改左上角那张", "grid+sel-tl-br", ("br",), E),
    ("sel-original-of-selection", "改原图", "chain+sel", ("root",), T),
    ("sel-parent-of-selection", "选中那张的上一个版本", "chain+sel", ("edit1",), T),
    (
        "sel-en-original-of-selected",
        "the original of the selected image",
        "chain+sel",
        ("root",),
        T,
    ),
    (
        "sel-remembered-from-earlier-turn",
        "选中的那张",
        "chain+earlier-selection-edit1",
        ("edit1",),
        T,
    ),
    ("sel-none-anywhere", "把选中的改成黑白", "chain", (), C),
    ("sel-policy-forces", "不要改选中的，改原图", "chain+sel+policy-selected", ("edit2",), E),
    # --- negations and redirections ---
    ("neg-zh-not-selected-original", "不要改选中的，改原图", "chain+sel", ("root",), T),
    ("neg-zh-not-this-original", "不是这张，是原图", "chain+sel", ("root",), T),
    (
        "neg-en-not-selected-original",
        "not the selected one, the original",
        "chain+sel",
        ("root",),
        T,
    ),
    (
        "neg-en-instead-of",
        "instead of the selected one use the original",
        "chain+sel",
        ("root",),
        T,
    ),
    (
        "neg-en-use-instead-of",
        "use the original instead of the selected one",
        "chain+sel",
        ("root",),
        T,
    ),
    ("neg-zh-selected-to-position", "不要改选中的，改右下角那张", "grid+sel-tl", ("br",), T),
    (
        "neg-en-selected-to-position",
        "not the selected one, the bottom-right one",
        "grid+sel-tl",
        ("br",),
        T,
    ),
    ("neg-zh-excludes-selected-by-position", "别动左上角的，改右上角的", "grid+sel-tl", ("tr",), T),
    ("neg-zh-selection-only-falls-through", "不要改选中的", "grid+sel-tl", ("tr",), W),
    ("neg-zh-left-right", "别动左边的，改右边的", "row3", ("a3",), T),
    ("neg-zh-post-cue", "左边的别动，右边的改一下", "row3", ("a3",), T),
    ("neg-zh-post-cue-no-comma", "左边的不要动改右边的", "row3", ("a3",), T),
    ("neg-zh-except-all", "除了左边的都改", "row3", ("a2", "a3"), T),
    ("neg-zh-keep-left", "保留左边的，改中间的", "row3", ("a2",), T),
    ("neg-zh-only-negation", "不要改左边那张", "row3", ("a3",), W),
    ("neg-zh-not-but", "不是左边那张，是中间那张", "row3", ("a2",), T),
    ("neg-en-not-left-middle", "not the left one, the middle one", "row3", ("a2",), T),
    ("neg-en-leave-alone", "leave the right one alone and change the left one", "row3", ("a1",), T),
    (
        "neg-en-keep-unchanged",
        "keep the left one unchanged, edit the right one",
        "row3",
        ("a3",),
        T,
    ),
    ("neg-en-dont-touch", "don't touch the middle one; change the right one", "row3", ("a3",), T),
    ("neg-en-except", "all of them except the middle one", "row3", ("a1", "a3"), T),
    ("neg-pair-not-left", "not the left one", "pair", ("p2",), T),
    ("neg-pair-zh-not-right", "不要改右边的", "pair", ("p1",), T),
    ("neg-pair-other-one", "不要改左边的，改另一张", "pair", ("p2",), T),
    ("neg-pair-en-other-one", "leave the left one, change the other one", "pair", ("p2",), T),
    ("neg-results-except-first", "除了第一张都要", "results", ("r2", "r3", "r4"), T),
    (
        "neg-results-keep-first-others",
        "keep the first one, change the others",
        "results",
        ("r2", "r3", "r4"),
        T,
    ),
    ("neg-results-not-first-ties", "not the first one", "results", (), C),
    ("neg-excludes-original-only", "不要改原图", "chain", ("edit2",), W),
    ("neg-upload-redirect-zh", "不要改我上传的，改原图", "chain+upload", ("root",), T),
    (
        "neg-upload-redirect-en",
        "don't edit the image I uploaded, edit the original",
        "chain+upload",
        ("root",),
        T,
    ),
    ("neg-names-and-excludes-same", "不要改左边那张，改左边那张", "row3", (), C),
    ("neg-zh-both-untouched", "左边和右边的都别动", "row3", ("a2",), T),
    # --- alternatives tie; "the other" is relative to what is excluded, else to the focus ---
    ("or-zh-huo", "左边或右边", "row3", (), C),
    ("or-zh-haishi", "左边还是右边的", "row3", (), C),
    ("or-en", "the left or the right one", "row3", (), C),
    ("and-en-elliptic", "the left and right ones", "row3", ("a1", "a3"), T),
    ("and-zh-corners", "分别把左上和右下调亮", "grid", ("tl", "br"), T),
    ("other-zh-besides-focus", "其他的", "row3", ("a1", "a2"), T),
    ("other-en-besides-focus", "the other one", "pair", ("p1",), T),
    ("other-en-several-left-ties", "the other one", "row3", (), C),
    # --- sources are not targets ---
    ("src-zh-same-as", "和原图一样", "chain", ("edit2",), W),
    ("src-zh-style-applied-to", "把第一张的风格用到第三张", "row3", ("a3",), T),
    ("src-en-style-of", "apply the style of the first one to the third one", "row3", ("a3",), T),
    ("src-zh-like-original", "改得像原图一样", "chain", ("edit2",), W),
    ("src-zh-left-like-original", "把左边那张改得像原图一样", "row3", ("a1",), T),
    ("src-en-look-like", "make it look like the original", "chain", ("edit2",), W),
    ("src-en-left-like-right", "make the left one look like the right one", "pair", ("p1",), T),
    ("src-zh-borrow-style", "用右边那张的风格改左边那张", "pair", ("p1",), T),
    ("src-zh-reference-cue", "参考第一张，改第二张", "row3", ("a2",), T),
    # --- batches ---
    ("batch-zh-these-three", "这三张都改成黑白", "row3", ("a1", "a2", "a3"), T),
    ("batch-zh-all", "全部换成夏天", "row3", ("a1", "a2", "a3"), T),
    ("batch-zh-each", "每一张都加上logo", "row3", ("a1", "a2", "a3"), T),
    ("batch-zh-these-few", "这几张", "row3", ("a1", "a2", "a3"), T),
    ("batch-zh-them", "把它们都调亮", "results", RESULTS, T),
    ("batch-zh-these-two", "这两张", "pair", ("p1", "p2"), T),
    ("batch-zh-two-dou", "两张都加上雪", "pair", ("p1", "p2"), T),
    ("batch-en-all-of-them", "all of them", "row3", ("a1", "a2", "a3"), T),
    ("batch-en-these-three", "these three", "row3", ("a1", "a2", "a3"), T),
    ("batch-en-all-four", "all four", "results", RESULTS, T),
    ("batch-en-both", "both", "pair", ("p1", "p2"), T),
    ("batch-en-each-image", "add snow to each image", "grid", ("tl", "tr", "bl", "br"), T),
    ("batch-en-count-mismatch", "these three", "results", (), C),
    ("batch-zh-count-mismatch", "这三张", "pair", (), C),
    # --- this turn's uploads ---
    ("up-empty-text", "", "chain+upload", ("up1",), U),
    ("up-this-one", "把这张变成水彩风格", "chain+upload", ("up1",), U),
    ("up-zh-mine", "用我上传的图", "chain+upload", ("up1",), U),
    ("up-outranks-text", "改原图", "chain+upload", ("up1",), U),
    ("up-two", "", "uploads-2", ("up1", "up2"), U),
    ("up-two-second", "第二张", "uploads-2", ("up2",), U),
    ("up-two-en-first", "the first one", "uploads-2", ("up1",), U),
    ("up-selection-first", "", "grid+sel-tl+upload", ("tl",), E),
    ("up-after-selection-redirect", "不要改选中的", "grid+sel-tl+upload", ("up1",), U),
    ("up-earlier-upload-by-words", "我上传的那张", "chain", ("root",), T),
    ("up-en-earlier-upload", "the image I uploaded", "chain", ("root",), T),
    # --- no reference at all: working memory, latest result, clarification ---
    ("none-zh-brighter", "把亮度调高一点", "chain", ("edit2",), W),
    ("none-en-brighter", "make it brighter", "chain", ("edit2",), W),
    ("none-zh-this", "这张再亮一点", "chain", ("edit2",), W),
    ("none-en-this-one", "this one, but warmer", "chain", ("edit2",), W),
    ("none-zh-content-position", "在左边加一棵树", "chain", ("edit2",), W),
    ("none-zh-yixia", "调整一下", "chain", ("edit2",), W),
    ("none-en-focus-r2", "make it brighter", "results+focus-r2", ("r2",), W),
    ("none-zh-focus-this", "这张", "results+focus-r2", ("r2",), W),
    ("none-several-generated-ties", "make it brighter", "results", (), C),
    ("none-grid-focus", "更有电影感", "grid", ("tr",), W),
    ("none-latest-only", "make it brighter", "latest-only", ("edit2",), L),
    ("none-last-resolved", "再暖一点", "resolved-only", ("edit1",), W),
    ("none-nothing", "make it brighter", "nothing", (), C),
    ("none-no-assets", "左上角那张", "no-assets", (), C),
    ("none-empty-text-nothing", "", "nothing", (), C),
    # --- focus policies ---
    ("policy-original-memory", "make it brighter", "chain+policy-original", ("root",), W),
    ("policy-original-text-wins", "上一个版本", "chain+policy-original", ("edit1",), T),
    ("policy-original-latest", "再亮一点", "latest-only+policy-original", ("root",), L),
    ("policy-auto-focus-first", "make it brighter", "chain+focus-edit1", ("edit1",), W),
    ("policy-latest-first", "make it brighter", "chain+focus-edit1+policy-latest", ("edit2",), L),
]


@pytest.mark.parametrize(
    ("text", "scene", "targets", "mode"),
    [pytest.param(t, s, ids, m, id=name) for name, t, s, ids, m in ROWS],
)
def test_resolution_rule(text: str, scene: str, targets: tuple[str, ...], mode: str) -> None:
    decision = resolve_targets(SCENES[scene].request(text))
    assert (decision.mode, decision.target_asset_ids) == (mode, targets), decision.reason


def test_table_has_at_least_150_rows_with_unique_ids() -> None:
    assert len(ROWS) >= 150
    assert len({row[0] for row in ROWS}) == len(ROWS)


# ------------------------------------------------------------------------- behaviours in detail


def test_tied_position_lists_the_tied_images_for_a_model_to_pick() -> None:
    decision = resolve_targets(SCENES["grid"].request("左边那张"))
    assert decision.tied_candidate_ids == ("tl", "bl")
    assert decision.candidate_asset_ids == ("tl", "bl")


def test_several_latest_results_tie_in_registration_order() -> None:
    decision = resolve_targets(SCENES["results"].request("make it brighter"))
    assert decision.tied_candidate_ids == RESULTS


def test_clarification_without_tie_lists_newest_assets_capped_at_nine() -> None:
    decision = resolve_targets(SCENES["nothing"].request("make it brighter"))
    assert decision.tied_candidate_ids == ()
    assert decision.candidate_asset_ids == ("up2", "up1", "r4", "r3", "r2", "r1", "p2", "p1", "br")


def test_clarification_candidates_leave_out_negated_images() -> None:
    decision = resolve_targets(SCENES["results"].request("not the first one"))
    assert decision.tied_candidate_ids == ("r2", "r3", "r4")


def test_confidence_orders_rules() -> None:
    def confidence(scene: str, text: str) -> int:
        return resolve_targets(SCENES[scene].request(text)).confidence

    selection = confidence("chain+sel", "")
    upload = confidence("chain+upload", "")
    text = confidence("row3", "左边那张")
    memory = confidence("chain", "make it brighter")
    latest = confidence("latest-only", "make it brighter")
    clarify = confidence("nothing", "make it brighter")
    assert selection > memory and upload > memory and text > memory > latest > clarify


def test_selection_outranking_text_says_so_and_lowers_confidence() -> None:
    decision = resolve_targets(SCENES["grid+sel-tl"].request("右下角那张"))
    assert "outranks" in decision.reason
    assert decision.confidence < resolve_targets(SCENES["grid+sel-tl"].request("")).confidence


def test_reason_is_one_english_sentence_naming_the_rule() -> None:
    decision = resolve_targets(SCENES["row3"].request("左边那张"))
    assert decision.reason == "The text refers to the left image."


def test_candidates_include_targets_first() -> None:
    decision = resolve_targets(SCENES["row3"].request("中间那张"))
    assert decision.candidate_asset_ids[0] == "a2"
    assert set(decision.candidate_asset_ids) == {"a1", "a2", "a3"}


def test_unknown_ids_are_never_returned() -> None:
    scene = replace(SCENES["chain"], uploads=("someone-elses",), selected=("ghost",))
    decision = resolve_targets(scene.request(""))
    assert decision.target_asset_ids == ("edit2",)


def test_canvas_node_without_asset_is_counted_but_not_returned() -> None:
    canvas = (CanvasNode("n0", None, "u", 0, 0, 100, 100), *ROW3[1:])
    scene = replace(SCENES["row3"], canvas=canvas)
    assert resolve_targets(scene.request("第二张")).target_asset_ids == ("a2",)
    assert resolve_targets(scene.request("第一张")).mode == "clarification"


def test_reading_order_groups_rows_by_vertical_overlap() -> None:
    nodes = (
        _node("c", 300, 10),
        _node("a", 0, 0),
        _node("d", 0, 200),
        _node("b", 150, 60),  # overlaps the first row's extent, so it belongs to it
    )
    layout = canvas_layout(nodes)
    assert layout is not None
    assert [n.assetId for n in layout.reading_order] == ["a", "b", "c", "d"]


def test_nodes_without_sizes_take_their_neighbours_size() -> None:
    nodes = (
        CanvasNode("1", "a", "u", 0, 0, 100, 100),
        CanvasNode("2", "b", "u", 200, 40),
        CanvasNode("3", "c", "u", 0, 300),
    )
    layout = canvas_layout(nodes)
    assert layout is not None
    assert [[n.assetId for n in row] for row in layout.rows] == [["a", "b"], ["c"]]


# ---------------------------------------------------------------------------- property tests

_SCENE_NAMES = sorted(SCENES)
_WORDS = st.sampled_from(
    ["左边", "那张", "第二张", "原图", "不要", "改", "选中的", "都", "the", "left", "one", "not",
     "original", "first", "，", " ", "这三张", "倒数第", "all of them", "instead of", "的"]
)  # fmt: skip
_TEXTS = st.one_of(st.text(max_size=80), st.lists(_WORDS, max_size=12).map("".join))


def _check(decision: Decision, scene: Scene) -> None:
    assert decision.mode in MODES and decision.mode != "llm_disambiguation"
    assert decision.needs_clarification == (decision.mode == "clarification")
    assert 0 <= decision.confidence <= 100
    assert set(decision.target_asset_ids) <= set(scene.assets)
    assert set(decision.candidate_asset_ids) <= set(scene.assets)
    assert set(decision.tied_candidate_ids) <= set(decision.candidate_asset_ids)
    assert bool(decision.target_asset_ids) != decision.needs_clarification
    assert decision.reason.endswith(".")


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS, scene=st.sampled_from(_SCENE_NAMES))
def test_any_text_in_any_scene_yields_a_well_formed_decision(text: str, scene: str) -> None:
    _check(resolve_targets(SCENES[scene].request(text)), SCENES[scene])


_coords = st.floats(allow_nan=True, allow_infinity=True, width=32)
_sizes = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32))


@settings(max_examples=200, deadline=None)
@given(
    text=_TEXTS,
    nodes=st.lists(
        st.builds(
            CanvasNode,
            nodeId=st.text(max_size=3),
            assetId=st.one_of(st.none(), st.sampled_from(sorted(ASSETS)), st.text(max_size=3)),
            url=st.just("u"),
            x=_coords,
            y=_coords,
            width=_sizes,
            height=_sizes,
            isSelected=st.booleans(),
        ),
        max_size=6,
    ),
    policy=st.sampled_from(["auto", "selected", "latest_result", "original", "bogus"]),
)
def test_arbitrary_canvas_never_breaks_the_resolver(
    text: str, nodes: list[CanvasNode], policy: str
) -> None:
    scene = replace(SCENES["chain"], canvas=tuple(nodes), policy=policy)
    _check(resolve_targets(scene.request(text)), scene)


@settings(max_examples=100, deadline=None)
@given(text=_TEXTS, scene=st.sampled_from(_SCENE_NAMES))
def test_resolution_is_deterministic(text: str, scene: str) -> None:
    request = SCENES[scene].request(text)
    assert resolve_targets(request) == resolve_targets(request)
