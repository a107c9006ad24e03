"""The resolution table: how people refer to images, and which image they mean.

Written from SPEC §12 ("References compose") and issue 13 alone. Each row is a scene, a text,
and the expected targets (``None``: the resolver must ask, ``clarification``) with the modes
that may report them. Grouped by kind; ``KINDS`` lists them in the order the docs report them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scenes import (
    Scene,
    chain,
    chain_on_canvas,
    column,
    flag_nodes,
    grid,
    ragged,
    results,
    row,
    select_assets,
    select_nodes,
    story,
    upload,
    with_chain,
    with_results,
)

TEXT = ("text_reference",)
SELECTION = ("explicit_selection",)
UPLOAD = ("current_upload",)
MEMORY = ("working_memory", "latest_result")
CLARIFY = ("clarification",)


@dataclass(frozen=True)
class Case:
    kind: str
    scene: Scene
    text: str
    expected: tuple[str, ...] | None  # None: clarification
    modes: tuple[str, ...]
    # 1: written from the requirements before the resolver was read; 2, 3: written after the
    # redesign and first run unchanged; 4: found in review (docs/resolution.md reports them)
    round: int = 1

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.scene.name}:{self.text}"


CN_DIGITS = "零一二三四五六七八九"
ORDINALS = ["zeroth", "first", "second", "third", "fourth", "fifth", "sixth", "seventh",
            "eighth", "ninth", "tenth", "eleventh", "twelfth"]


def cn(n: int) -> str:
    """Chinese numeral for 1..99 as people write it (十一, 二十, 二十三)."""
    if n < 10:
        return CN_DIGITS[n]
    tens, ones = divmod(n, 10)
    return ("" if tens == 1 else CN_DIGITS[tens]) + "十" + (CN_DIGITS[ones] if ones else "")


def fw(n: int) -> str:
    """Full-width digits."""
    return "".join(chr(ord(d) - ord("0") + ord("０")) for d in str(n))


def nth(n: int) -> str:
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n if n < 20 else n % 10, "th")
    return f"{n}{suffix}"


def cell(k: int, cols: int = 3) -> str:
    """The k-th (1-based) asset of a grid in reading order."""
    r, c = divmod(k - 1, cols)
    return f"r{r + 1}c{c + 1}"


def row_of(r: int, cols: int = 3) -> tuple[str, ...]:
    return tuple(f"r{r}c{c}" for c in range(1, cols + 1))


def col_of(c: int, rows: int = 3) -> tuple[str, ...]:
    return tuple(f"r{r}c{c}" for r in range(1, rows + 1))


def a(*ks: int) -> tuple[str, ...]:
    return tuple(f"a{k}" for k in ks)


def r(*ks: int) -> tuple[str, ...]:
    return tuple(f"r{k}" for k in ks)


CASES: list[Case] = []


ROUND = 1


def add(kind: str, scene: Scene, expected: tuple[str, ...] | None, *texts: str,
        modes: tuple[str, ...] | None = None) -> None:
    for text in texts:
        CASES.append(Case(kind, scene, text, expected,
                          modes or (CLARIFY if expected is None else TEXT), ROUND))


G3 = grid(3, 3)
G2 = grid(2, 2)
G34 = grid(3, 4)
R3, R4, R5, R6 = row(3), row(4), row(5), row(6)
RAG = ragged()
C4 = column(4)
CH2, CH4, CH5 = chain(2), chain(4), chain(5)
RES4 = results(4)

# --- script and numerals: simplified, traditional, digits, full-width, Chinese numerals --------
K = "script_numerals"
for k in range(1, 10):
    add(K, G3, (cell(k),),
        f"把第{cn(k)}张调亮一点", f"第{k}个换成蓝色背景", f"第{fw(k)}幅图再清晰一点",
        f"把第{cn(k)}張調亮一點", f"第{fw(k)}幅圖換個背景", f"make the {ORDINALS[k]} one brighter",
        f"the {nth(k)} image, sharper please")
add(K, G34, (cell(11, 4),), "第十一张调亮", "第１１个换背景", "第十一張", "the 11th picture",
    "the eleventh one")
add(K, G34, (cell(12, 4),), "第十二张", "第十二幅圖", "the twelfth image")
add(K, G34, (cell(10, 4),), "第十张", "第 10 个", "第１０幅")
add(K, R3, a(1), "左边那张调亮", "左邊那張調亮", "左側那幅圖")
add(K, R3, a(3), "右边那张", "右邊那幅圖", "最右邊的")
add(K, R3, a(2), "中间那张", "中間那張", "中間的圖")
add(K, R3, a(3), "最后一张", "最後一張", "最後那個")
add(K, G3, ("r1c1",), "左上那张", "左上角那張")
add(K, G3, ("r3c3",), "右下那张", "右下角那幅圖")
add(K, CH4, ("v3",), "那幅圖再亮一點", "这张再亮一点", "這張調亮一點", modes=MEMORY)

# --- Chinese mixed with English -----------------------------------------------------------
K = "mixed_language"
add(K, G3, ("r1c1",), "top-left 的那个调亮", "top-left 的那張", "把 top left 那张换背景")
add(K, G3, ("r3c3",), "bottom-right 那张", "bottom right 那個")
add(K, G3, ("r1c3",), "top-right 那张换个背景")
add(K, G3, ("r3c1",), "bottom-left 那個調亮")
add(K, G3, ("r2c2",), "center 那张", "middle 那張")
add(K, R5, a(3), "把 third 那张调亮", "the 第三张", "第三个 picture")
add(K, R5, a(2), "second 那个", "第二个 picture 调亮", "第二張 image")
add(K, R5, a(5), "last 那张", "最后一个 image", "the 最右边 one")
add(K, R5, a(1), "first 那張", "最左边的 image")
add(K, R5, a(4), "第四个 image 调亮", "fourth 那张")
add(K, R5, a(2), "the 左边第二个")
add(K, R3, a(1), "left 那张", "左边那张 image")
add(K, R3, a(3), "right 那个", "the 右边那张")
add(K, R3, a(2), "middle 那张")
add(K, CH4, ("v0",), "original 那张", "原图 please", "use the 原图", "原圖 please")
add(K, CH4, ("v2",), "上一个 version", "previous version 那张")
add(K, CH4, ("v1",), "the 上上个版本")
add(K, CH4, ("v3",), "the latest 那张", "latest 那個")
add(K, RES4, r(3), "第三个 variant", "the third 结果")
add(K, RES4, r(2), "the 第二个结果")
add(K, RES4, r(4), "last variant 那个")
add(K, G3, ("r2c2",), "第二排 second one")
add(K, G3, ("r3c1",), "third row 第一个")
add(K, G3, row_of(3), "bottom row 全部", "bottom row 都调亮")
add(K, G3, col_of(1), "left column 的都")
add(K, R5, a(1, 5), "first 和 last", "第一和 last 那张")
add(K, select_nodes(R3, "n2"), a(2), "selected 的那张", "选中的 image", modes=SELECTION)

# --- rows and columns with ordinals and positions ----------------------------------------
K = "row_column"
for rr in range(1, 4):
    for cc in range(1, 4):
        target = (f"r{rr}c{cc}",)
        add(K, G3, target, f"第{cn(rr)}排第{cn(cc)}个", f"第{cn(rr)}行第{cn(cc)}张",
            f"{ORDINALS[rr]} row, {ORDINALS[cc]} picture", f"第{cn(rr)}排第{cn(cc)}個",
            f"第{cn(cc)}列第{cn(rr)}个", f"the {ORDINALS[rr]} image in the {ORDINALS[cc]} column")
add(K, G3, ("r2c1",), "第二排最左边", "the left one in the middle row", "中间一排左边那张")
add(K, G3, ("r2c3",), "第二排最右边那张", "第二排最右邊那張")
add(K, G3, ("r1c2",), "第一排中间", "最上面一排中间那张", "top row, middle")
add(K, G3, ("r3c3",), "最下面一排右边那张", "the rightmost in the bottom row")
add(K, G3, ("r3c1",), "最左边一列最下面")
add(K, G3, ("r1c3",), "the top of the right column")
add(K, G3, ("r3c2",), "the bottom image of the middle column")
add(K, grid(2, 3), ("r2c3",), "second row, third picture", "第二排第三张")
add(K, RAG, ("B",), "第二个", "top row, second")
add(K, RAG, ("C",), "第一排第三个", "the third image", "the last one in the first row", "右上那张")
add(K, RAG, ("D",), "第二排第一个", "第4张", "左下那张")
add(K, RAG, ("E",), "第二排第二个", "第五个")
add(K, RAG, ("F",), "第二排最右边", "second row, third picture", "第六个", "最后一张")
add(K, RAG, ("A",), "第一排最左边", "第一张")

# --- counting from either end; centre-left -------------------------------------------------
K = "from_either_end"
for k in range(1, 6):
    add(K, R5, a(6 - k), f"倒数第{cn(k)}个", f"倒數第{cn(k)}張", f"{ORDINALS[k]} from the right",
        f"从右数第{cn(k)}个")
    add(K, R5, a(k), f"{ORDINALS[k]} from the left", f"从左边数第{cn(k)}张")
add(K, R5, a(4), "右边第二个", "the second-to-last one", "the penultimate image", "last but one",
    "second from last", "倒数第２个")
add(K, R5, a(2), "左边第二张")
add(K, R4, a(2), "中间偏左那张", "centre-left", "the center-left one", "中間偏左")
add(K, R4, a(3), "中间偏右", "centre-right")
add(K, R5, a(2), "中间偏左", "center-left")
add(K, R5, a(4), "centre-right", "中间偏右的")
add(K, R6, a(3), "中间偏左")
add(K, R6, a(4), "centre-right")
add(K, G3, ("r3c2",), "倒数第二个", "从下往上数第一排中间")
add(K, G3, ("r2c1",), "倒数第二排第一个", "second row from the bottom, first image")
add(K, G3, ("r1c2",), "第一排倒数第二个", "the second-to-last in the top row")
add(K, G3, ("r1c1",), "倒数第三列最上面")
add(K, G3, ("r3c3",), "倒数第一个", "the last one")
add(K, RAG, ("E",), "倒数第二个")
add(K, RAG, ("B",), "第一排倒数第二个")

# --- sets by count or region ----------------------------------------------------------------
K = "sets"
add(K, R5, a(3, 4, 5), "右边三个", "右邊三個", "the three on the right", "最右边三张")
add(K, R5, a(1, 2), "左边两张", "左邊兩張", "the two on the left")
add(K, R5, a(1, 2, 3), "前三张", "the first three", "左边三个都调亮")
add(K, R5, a(4, 5), "后两张", "最后两张", "the last two", "最後兩張", "the two on the right")
add(K, R5, a(2, 3, 4), "中间三张", "the middle three")
add(K, R5, a(1, 2, 3, 4, 5), "全部调亮", "所有图片都换背景", "all of them", "这五张都",
    "這五張都", "every image", "all five")
add(K, C4, a(1, 2), "the top two", "上面两张", "上面兩張", "最上面两张")
add(K, C4, a(3, 4), "下面两张", "the bottom two")
add(K, C4, a(1, 2, 3), "最上面三张")
add(K, C4, a(2, 3, 4), "the bottom three")
add(K, G3, row_of(3), "最下面一排全部", "the bottom row", "最下面一排都调亮",
    "the whole bottom row")
add(K, G3, row_of(1), "第一排全部", "the whole top row", "上面三张", "the top three")
add(K, G3, row_of(2), "第二行都", "中间一排都", "the middle row")
add(K, G3, col_of(2), "整个第二列", "the whole second column", "the middle column")
add(K, G3, col_of(1), "the left column", "最左边一列", "左边三个")
add(K, G3, col_of(3), "最右边一列", "最右邊一列", "右边三个")
corners = ("r1c1", "r1c3", "r3c1", "r3c3")
add(K, G3, corners, "四个角", "the corners", "the four corners", "四個角落的", "四个角上的都")
add(K, G3, tuple(cell(k) for k in range(1, 10)), "全部九张", "所有的图", "all nine")
add(K, G2, row_of(1, 2), "the top two", "上面两张", "上面那排")
add(K, G2, col_of(2, 2), "右边两张", "the two on the right")
add(K, G2, row_of(2, 2), "the bottom two", "下面那排")
add(K, G2, col_of(1, 2), "左边两张")
add(K, RAG, ("A", "B", "C"), "第一排全部", "the top row")
add(K, RAG, ("D", "E", "F"), "the bottom row", "最下面一排")

# --- lists and exclusions -----------------------------------------------------------------
K = "lists_exclusions"
add(K, R5, a(1, 5), "第一和第五个", "第一張和第五張", "the first and the last", "第一和最后一张",
    "最左边和最右边的")
add(K, R5, a(1, 3), "第一张和第三张", "1st and 3rd")
add(K, R5, a(1, 3, 5), "第1、3、5张", "first, third and fifth", "第一、第三和第五张")
add(K, R5, a(2, 4), "第二个跟第四个", "the second and fourth images", "第二張和第四張")
add(K, R5, a(1, 2, 3, 4), "除了最后一张都调亮", "除了最後一張", "all but the last",
    "except the rightmost", "everything except the last one")
add(K, R5, a(2, 3, 4, 5), "all except the first", "除了第一张")
add(K, R5, a(1, 3, 4, 5), "除了第二张，其他都调亮", "all but the second")
add(K, R5, a(2, 4, 5), "除了第一和第三张")
add(K, R5, a(1, 2, 4, 5), "everything but the middle one", "除了中间那张")
add(K, R5, a(1, 2, 3), "除了最后两张", "all except the last two")
add(K, R5, a(1, 2, 4, 5), "其他的都调亮，除了第三张")
add(K, R3, a(2, 3), "除了左边那张", "除了左邊那張", "all but the left one")
add(K, G3, row_of(1) + row_of(3), "第一和第三排", "the first and third rows")
add(K, G3, ("r1c1", "r3c3"), "左上和右下", "the top-left and bottom-right ones", "左上和右下那兩張")
add(K, G3, row_of(2) + row_of(3), "除了第一排", "all but the top row")
add(K, G3, ("r1c2", "r2c1", "r2c2", "r2c3", "r3c2"), "everything except the corners", "除了四个角")
add(K, G3, tuple(cell(k) for k in range(1, 10) if k != 5), "除了中间那张都调亮")
add(K, RES4, r(1, 3), "第一和第三个", "the first and third variants")
add(K, RES4, r(1, 3, 4), "除了第二个")
add(K, RES4, r(1, 2, 3), "all but the last variant")
add(K, select_nodes(R3, "n1"), a(2, 3), "除了选中的都调亮", "all except the selected one")

# --- version chain positions ----------------------------------------------------------------
K = "version_chain"
add(K, CH4, ("v0",), "原图", "把原图调亮", "最初那张", "参考图", "the original", "原圖", "最初那張",
    "第一版", "the first version", "回到原图再改")
add(K, CH4, ("v2",), "上一个版本", "上个版本", "上一版", "上一個版本", "the previous version",
    "one version back", "the version before", "倒数第二个版本", "the second-to-last version",
    "第3版", "the third version")
add(K, CH4, ("v1",), "上上个版本", "上上個版本", "two versions back", "两个版本之前",
    "兩個版本之前", "the first generated version", "第一个生成的版本", "第一次生成的那张",
    "第一次生成的那張", "第二个版本", "version 2")
add(K, CH4, ("v0",), "上上上个版本", "three versions back", "三个版本之前")
add(K, CH4, ("v3",), "最新的", "最新那张", "the latest one", "刚生成的", "上一个结果",
    "the previous result", "这个结果", "上一轮的", "the last version", "剛生成的")
add(K, CH5, ("v2",), "上上个版本", "two versions back", "倒数第三个版本",
    "the second generated version", "第二次生成的")
add(K, CH5, ("v1",), "the first generated version", "三个版本之前")
add(K, CH5, ("v0",), "原图", "the original")
add(K, CH2, ("v0",), "上一个版本", "the original", "上一個版本")

# --- turns that produced several results -----------------------------------------------------
K = "turn_results"
add(K, RES4, r(3), "第三个", "第三张", "the third variant", "the third one", "第三个结果",
    "第三個結果", "variant 3", "倒数第二个")
add(K, RES4, r(2), "第二个变体", "the second image", "第二張")
add(K, RES4, r(4), "the last variant", "最后一个", "最後一個")
add(K, RES4, r(1), "the first result", "第一張", "第一个")
add(K, RES4, None, "再亮一点", "再亮一點", "make it brighter", "调亮一点", "换个背景",
    "这张再亮一点", "這張再亮一點", "this one but bluer")
add(K, RES4, r(1, 2, 3, 4), "这四张都再亮一点", "都再亮一点", "all of them brighter", "all four",
    "這幾張都調亮", "these four")
add(K, with_results(R3, 4), r(3), "第三个结果", "the third variant")
add(K, with_results(R3, 4), a(2), "第二个")
add(K, results(1), r(1), "再亮一点", "make it brighter", "再亮一點", modes=MEMORY)
add(K, results(3), r(2), "第二個", "the second result")

# --- selection by selectedNodeIds only, isSelected only, selectedAssetIds ---------------------
K = "selection"
for scene, target in ((select_nodes(R3, "n2"), a(2)), (flag_nodes(R3, "n3"), a(3)),
                      (select_assets(R3, "a1"), a(1))):
    add(K, scene, target, "选中的这张调亮", "调亮一点", "make the selected one brighter", "選中的",
        "当前这张", modes=SELECTION)
add(K, select_nodes(R3, "n1", "n3"), a(1, 3), "我选的这几张都调亮", "the selected ones", "调亮",
    modes=SELECTION)
add(K, flag_nodes(R3, "n1", "n2"), a(1, 2), "我選的這幾張", "选中的几张", modes=SELECTION)
add(K, with_results(select_nodes(R3, "n2"), 4), a(2), "再亮一点", modes=SELECTION)
add(K, with_results(flag_nodes(R3, "n1"), 4), a(1), "make it brighter", modes=SELECTION)
add(K, R3, None, "选中的那张", "the selected one", "選中的那張")

# --- this turn's uploads and working memory ---------------------------------------------------
K = "priority"
add(K, upload(R3, "u1"), ("u1",), "调亮一点", "make it brighter", modes=UPLOAD)
add(K, CH4, ("v3",), "再亮一点", "调亮", "make it brighter", modes=MEMORY)
add(K, CH4, ("v3",), "在左上角加个logo", "add a logo in the top-left corner", modes=MEMORY)
add(K, Scene("empty"), None, "再亮一点", "make it brighter")
add(K, R3, None, "调亮一点", "make it brighter")

# --- negation and redirects -------------------------------------------------------------------
K = "negation"
add(K, R3, a(3), "不要左边的，要右边那个", "不要左邊的，要右邊那個",
    "not the left one, the right one", "改右边的，不是左边的", "the right one, not the left")
add(K, R3, a(3), "不是第二张，是第三张")
add(K, R3, a(2), "不是第一張，是第二張", "not the first, the second")
selected_chain = select_nodes(chain_on_canvas(3), "nv")
add(K, selected_chain, ("v0",), "不要改选中的，改原图", "不要改選中的，改原圖",
    "not the selected one, the original")
add(K, selected_chain, ("v1",), "别改选中的，改上一个版本")
add(K, G3, ("r2c2",), "不要第一排的，要第二排第二个")

# --- ordinals and regions that do not exist ---------------------------------------------------
K = "nonexistent"
add(K, R5, None, "第六个", "第六張", "the sixth one", "倒数第六个", "seventh from the right",
    "右边六个", "第十一张", "第１１张", "第二排", "the second row", "第一和第六张", "除了第六张")
add(K, G3, None, "第七排", "第四排第一个", "the fourth row, first picture", "第二排第四个",
    "第四列", "the fifth column", "第十张", "倒数第四排", "第二排第四個")
add(K, RES4, None, "第五个", "the fifth variant", "第五個結果")
add(K, CH2, None, "上上个版本", "two versions back", "the second generated version")
add(K, CH4, None, "四个版本之前", "four versions back", "第五版", "左边那张", "第三张")

# --- references the rules cannot fully read --------------------------------------------------
K = "partial"
R3_FOCUS = with_results(R3, 1)
add(K, R3_FOCUS, None, "有猫的那张", "the one with the dog", "蓝色背景那张", "the blurry one",
    "那张日落的", "有貓的那張", "the picture of the beach")
add(K, G3, None, "左边那张", "the top one", "第二排那张", "右数第二个", "上面两张",
    "third from the right")
add(K, R4, None, "中间那张", "the middle one")

# =============================================================================================
# Round 2: more scenes and phrasings, written after the redesign, measured before any change.
ROUND = 2
G24, G42, R7, C3 = grid(2, 4), grid(4, 2), row(7), column(3)
CH6, RES6 = chain(6), results(6)

K = "script_numerals"
add(K, G24, ("r2c3",), "第七张", "第７个", "第七張圖", "the seventh image")
add(K, G24, ("r2c4",), "第八幅")
add(K, R7, a(6), "第六個", "第６張", "第 6 张")
add(K, R7, a(2), "把第二幅畫調亮")

K = "mixed_language"
add(K, G24, ("r2c1",), "bottom-left 那幅")
add(K, G24, ("r1c4",), "top-right 的调亮一点")
add(K, R7, a(2), "the second 张")
add(K, R7, a(7), "把 last one 调亮")
add(K, R7, a(1), "leftmost 那张")
add(K, R7, a(6), "the 倒数第二个")
add(K, CH6, ("v3",), "上上个 version")
add(K, CH6, ("v0",), "the 原图 please", "original image 调亮")
add(K, RES6, r(4), "第四个 result")
add(K, RES6, r(5), "the 第五个结果")

K = "row_column"
add(K, G24, ("r2c3",), "第二排第三个", "第三列第二个")
add(K, G24, ("r2c4",), "second row, fourth image", "第二行倒数第一个")
add(K, G24, ("r1c4",), "第一排最右边那张")
add(K, G24, ("r2c1",), "the bottom image in the first column")
add(K, G24, ("r1c3",), "top row, third one")
add(K, G42, ("r4c1",), "第四排第一个", "最后一排左边那张")
add(K, G42, ("r3c2",), "third row, the right one", "第三行右边")
add(K, G42, ("r1c2",), "第二列最上面")
add(K, RAG, ("B",), "第一排中间那张", "the middle one in the top row")
add(K, RAG, ("E",), "第二排中间")

K = "from_either_end"
add(K, R7, a(5), "倒数第三张", "从右边数第三个")
add(K, R7, a(3), "third from the left", "中间偏左那张")
add(K, R7, a(4), "the fourth from the right")
add(K, R7, a(7), "右数第一个")
add(K, R7, a(6), "second from the end")
add(K, R7, a(1), "倒數第七個")
add(K, R7, a(5), "the centre-right one")
add(K, C3, a(2), "从下往上数第二张", "second from the top")
add(K, C3, a(3), "从上往下数第三个", "the bottom one")

K = "sets"
add(K, R7, a(1, 2, 3), "左边三张")
add(K, R7, a(6, 7), "the right two")
add(K, R7, a(4, 5, 6, 7), "最右边四个")
add(K, R7, a(1, 2, 3, 4), "the first four")
add(K, R7, a(5, 6, 7), "后三张")
add(K, R7, a(1, 2, 3, 4, 5, 6, 7), "所有七张")
add(K, R7, a(3, 4, 5), "中间那三张")
add(K, G24, row_of(2, 4), "下面那一排")
add(K, G24, row_of(1, 4), "the top row")
add(K, G24, col_of(1, 2) + col_of(2, 2), "最左边两列")
add(K, G24, col_of(3, 2) + col_of(4, 2), "右边四张")
add(K, G24, col_of(3, 2), "the whole third column")
add(K, G24, ("r1c1", "r1c4", "r2c1", "r2c4"), "四个角的图")

K = "lists_exclusions"
add(K, R7, a(2, 4, 6), "第二、四、六张")
add(K, R7, a(1, 7), "第一个和第七个")
add(K, R7, a(2, 6), "the second and the sixth")
add(K, R7, a(2, 3, 4, 5, 6), "除了第一张和最后一张")
add(K, R7, a(1, 2, 3, 5, 6, 7), "all except the middle one")
add(K, R7, a(1, 2, 4, 5, 6, 7), "都调亮，第三张除外")
add(K, R7, a(2, 3, 4, 5, 6, 7), "everything but the leftmost")
add(K, G24, col_of(1, 2) + col_of(4, 2), "第一列和第四列")
add(K, G24, row_of(1, 4), "除了第二排")

K = "version_chain"
add(K, CH6, ("v2",), "上上上个版本")
add(K, CH6, ("v0",), "five versions back", "回到最初的版本", "the very first version")
add(K, CH6, ("v1",), "four versions back", "第二个版本")
add(K, CH6, ("v3",), "第4版", "倒数第三个版本", "the third generated version", "第三次生成的")
add(K, CH6, ("v4",), "the fifth version", "the previous version", "上一版")

K = "turn_results"
add(K, RES6, r(5), "第五个", "倒数第二个结果")
add(K, RES6, r(6), "the sixth variant", "第六个结果")
add(K, RES6, r(2), "option 2")
add(K, RES6, None, "再暖一点", "make it warmer")
add(K, RES6, r(1, 2, 3, 4, 5, 6), "都再暖一点")
add(K, RES6, r(1, 2), "the first two variants", "前两个结果")

K = "selection"
add(K, select_nodes(G24, "n23"), ("r2c3",), "这张调亮", modes=SELECTION)
add(K, flag_nodes(G24, "n11", "n24"), ("r1c1", "r2c4"), "选中的两张", modes=SELECTION)
add(K, select_assets(G24, "r1c2"), ("r1c2",), "the selected picture", "换背景", modes=SELECTION)

K = "negation"
add(K, R7, a(4), "不是第三张，是第四张")
add(K, R7, a(1), "not the last one, the first one")
add(K, R7, a(2), "别动第一张，改第二张")
add(K, R7, a(7), "把右边那张改了，左边的别动")

K = "nonexistent"
add(K, R7, None, "第八张", "the eighth one", "倒数第八个", "右边八个", "第二排第一个")
add(K, G24, None, "第三排", "第五列", "the third row", "第一排第五个")
add(K, RES6, None, "第七个结果", "the seventh variant")
add(K, CH6, None, "六个版本之前", "第七版", "the sixth generated version")

K = "partial"
add(K, with_results(R7, 1), None, "the sunset one", "颜色最暗的那张", "the one that looks blurry",
    "带logo的那张", "那张有人的")
add(K, G24, None, "左边那张", "the middle one")

# =============================================================================================
# Round 3: written after round 2 was fixed, measured before any change.
ROUND = 3
G45, R6C = grid(4, 5), row(6)
R3_ONE = with_results(R3, 1)

K = "script_numerals"
add(K, G3, ("r1c3",), "把3号调亮", "no. 3")
add(K, G45, ("r4c5",), "第二十张")
add(K, G45, ("r3c3",), "第十三个", "the 13th picture")
add(K, G45, ("r3c1",), "倒數第十個")
add(K, R3, a(3), "第三張圖片")

K = "mixed_language"
add(K, G3, ("r1c3",), "右上角 that one")
add(K, R5, a(2), "2nd 那个")
add(K, G3, ("r2c2",), "middle row 的第二个")
add(K, G3, row_of(1), "top 那一排")

K = "row_column"
add(K, G3, ("r2c3",), "第二行的第三张", "row 2, image 3", "the 2nd row, 3rd image")
add(K, G3, ("r2c1",), "第二排里面第一张")
add(K, G3, ("r3c1",), "in the third row, the first one")
add(K, G3, ("r3c3",), "第三列最下面那张")
add(K, G3, ("r3c2",), "the middle image of the bottom row", "最下面一排的中间")

K = "from_either_end"
add(K, R6C, a(5), "倒数第2张", "second-last", "second from right")
add(K, R6C, a(4), "从右往左数第三张")
add(K, R6C, a(2), "从左往右第二个")
add(K, R6C, a(3), "3rd from left")

K = "sets"
add(K, R6C, a(4, 5, 6), "右边的三张", "最后三个")
add(K, R6C, a(1, 2), "左边那两张")
add(K, R6C, a(1, 2, 3), "the leftmost three")
add(K, R6C, a(1, 2, 3, 4, 5, 6), "all 6", "六张全部")
add(K, G3, row_of(1), "最上面一行的三张")
add(K, G3, col_of(2), "中间那一列", "the centre column")
add(K, G3, ("r1c1", "r1c3", "r3c1", "r3c3"), "四个角上的图片")

K = "lists_exclusions"
add(K, R6C, a(2, 4, 6), "第二张、第四张和第六张")
add(K, R6C, a(1, 3, 5), "the 1st, 3rd and 5th")
add(K, R6C, a(1, 2), "第一、二张")
add(K, R6C, a(1, 4, 5, 6), "除了第二个和第三个，其他都调亮")
add(K, R6C, a(2, 3, 4, 5), "all except the first and the last")
add(K, R6C, a(2, 3, 4, 5, 6), "除了最左边的")

K = "version_chain"
add(K, CH5, ("v2",), "上上一个版本", "退回到上上个版本", "go back two versions")
add(K, CH5, ("v1",), "第一次修改的")
add(K, CH5, ("v0",), "the original upload", "最早那版")

K = "turn_results"
add(K, RES4, r(3), "第三个方案")
add(K, RES4, r(2), "the 2nd option")
add(K, RES4, r(4), "option #4", "第四个候选")
add(K, RES4, None, "好，就这样再亮一点", "nice, more contrast")

K = "selection"
add(K, select_nodes(R3, "n3"), a(3), "我刚选的那张", modes=SELECTION)
add(K, flag_nodes(R3, "n1", "n2"), a(1, 2), "框选的这两张", modes=SELECTION)

K = "priority"
add(K, CH4, ("v3",), "make the background blue", "把背景换成蓝色", modes=MEMORY)
add(K, R3_ONE, r(1), "在左边加一棵树", modes=MEMORY)

K = "negation"
add(K, R3, a(1), "不改中间的，改左边", "右边那张别动，改左边那张")
add(K, R3, a(3), "leave the middle, edit the right one")

K = "nonexistent"
add(K, R6C, None, "第七张", "倒数第七个", "the 3rd row", "左边七张")
add(K, CH5, None, "上上上上上上个版本", "ten versions back")

K = "partial"
add(K, R3_ONE, None, "the cat picture", "穿红衣服的那张", "the darker one", "那张比较亮的",
    "the image with the red car")

# =============================================================================================
# Round 4: phrasings found silently wrong while reviewing round 3's fixes, added with their fix.
ROUND = 4

K = "row_column"
add(K, G24, ("r2c2",), "第二排的左边第二张")
add(K, G24, ("r1c4",), "第一排右边第一张")
add(K, G24, ("r2c3",), "第二排从右数第二个")
add(K, G24, ("r1c3",), "第一排里面第三个", "the second from the right in the top row")

K = "partial"
add(K, G24, None, "the second one in the top row from the right")
add(K, G3, None, "中间那张周围的", "the one next to the middle one")

K = "row_column"
add(K, G3, ("r1c1", "r3c1"), "第一排和第三排的第一个")
add(K, G3, ("r3c2",), "最下面中间那张", "the bottom centre image")
add(K, G3, ("r1c2",), "上面中间", "the top middle one")
add(K, G3, ("r2c1",), "左边中间那张", "middle left")
add(K, G3, ("r2c3",), "the middle-right one")

K = "lists_exclusions"
add(K, R5, a(2, 3, 4), "第二到第四张", "第2-4张", "images 2 to 4")

# =============================================================================================
# Round 5 (issue 25): every position of the version chain, written from the issue before the
# resolver was read. The chain is the conversation's turns that produced results, root (the
# upload "o") first; versions count the root as the first and step back from the latest version;
# rounds count back from the turn being resolved (the previous round is the latest result).
ROUND = 5
S1 = story(name="story:o")
S2 = story("t1", name="story:o,t1")
S3 = story("t1", "t2", name="story:o..t2")
S4 = story("t1", "t2", "t3", name="story:o..t3")
S5 = story("t1", "t2", "t3", "t4", name="story:o..t4")
S6 = story("t1", "t2", "t3", "t4", "t5", name="story:o..t5")
S7 = story("t1", "t2", "t3", "t4", "t5", "t6", name="story:o..t6")
M1 = story("t1a t1b t1c")
M2 = story("t1", "t2a t2b t2c", "t3<t2b")
M3 = story("t1a t1b", "t2<t1b", "t3", "t4a t4b t4c t4d")
T4 = ("t4a", "t4b", "t4c", "t4d")

K = "chain_back"
add(K, S4, ("t2",), "the one before the newest", "the one before the latest", "最新的前一版",
    "倒数第二版", "倒數第二版", "the version before last", "the last-but-one version",
    "one step back", "回退一步", "two rounds back", "two rounds ago", "两轮之前的", "上上轮的图",
    "上上輪的圖", "上上轮的 image", "one step back 那张")
add(K, S4, ("t1",), "倒数第三版", "倒數第三版", "三轮之前那张", "three rounds ago",
    "two steps back",
    "退两步", "往前两步", "两个版本前", "倒数第三个 version")
add(K, S4, ("o",), "倒数第四版", "back three steps", "往回退三步")
add(K, S6, ("t3",), "倒数第三版", "the third-to-last version", "三轮前的那张",
    "the one three turns ago", "the 倒数第三版")
add(K, S6, ("t1",), "倒数第五版")
add(K, S6, ("o",), "倒数第六版")
add(K, S6, ("t2",), "倒數第四個版本", "the fourth version from the end", "three versions back",
    "上上上个版本")
add(K, S6, ("t4",), "the 倒数第二版", "上上轮的 image", "the one before the newest")
add(K, S2, ("o",), "the one before the newest", "倒数第二版", "上一版")
add(K, S7, ("t3",), "倒数第四版", "four rounds ago")

K = "chain_forward"
add(K, S4, ("o",), "the picture I began with", "the image I started with",
    "the photo I started from", "我一开始给你的那张", "我一開始給你的那張", "我最开始发的那张",
    "我最早上传的那张", "一开始的那张图", "最開始那張圖", "the one I first uploaded",
    "what I gave you at the start", "我一开始发给你的图", "我一开始给你的 picture")
add(K, S4, ("t1",), "the first generated one", "the first result you made", "your first attempt",
    "the earliest result", "the earliest generated image", "第一次生成的", "最早生成的那张",
    "最早生成的那張", "你生成的第一张", "你生成的第一張", "第一次改的那版", "第一轮的结果",
    "the result of the first round", "第二版", "第一次 generate 的那张", "first generated 那张",
    "the 最早生成的 one")
add(K, S4, ("t2",), "the second generated one", "第二次生成的那张",
    "你生成的第二张", "第二轮的结果",
    "the second round's result", "version 3")
add(K, S4, ("t3",), "第三次生成的", "第四版")
add(K, S1, ("o",), "the picture I began with", "我一开始给你的那张", "原图", "the original")
add(K, S7, ("t5",), "第五次生成的", "the fifth generated image")
add(K, S7, ("t6",), "第六轮的结果", "第七版")
add(K, S7, ("t4",), "你生成的第四張")
add(K, S7, ("t1",), "the earliest result")
add(K, S7, ("o",), "the first one I uploaded")

K = "chain_middle"
add(K, S3, ("t1",), "the middle version", "中间那个版本", "中間那個版本", "中间那版",
    "the version in the middle", "middle 那个 version")
add(K, S5, ("t2",), "the middle version", "中间的版本")
add(K, S4, ("t2",), "the middle generated one")
add(K, S6, ("t2",), "第三版", "the third version", "第三個版本", "第二次生成的", "the second edit")
add(K, S6, ("t3",), "version 4", "the 第四版", "第三次修改的", "第3次生成的 image")
add(K, M3, ("t2",), "the middle version")

K = "chain_redirect"
add(K, S4, ("t2",), "not the newest, the one before it", "不要最新的，要前一版",
    "不是最新那版，是再前一版", "不是最新這版，是上一版", "不要 latest 的，要 previous version",
    "not 最新的, 上一版")
add(K, S4, ("t1",),
    "both of the last two are wrong, go back one more", "最后两版都不对，再往前一版",
    "最後兩版都不對，再往前一個", "not the original, the first generated one",
    "不是原图，是第一次生成的那张", "不要原圖，要第一次生成的", "不是第一版，是第二版",
    "not the one before the newest, one further back")
add(K, S4, ("o",), "not the latest, the original")
add(K, S4, ("t2",), "not the first generated one, the second")
add(K, S4, ("o", "t1", "t2"), "all versions except the latest")
add(K, S4, ("t1", "t2", "t3"), "除了原图，其他版本都调亮",
    "every generated version", "所有生成的版本")
add(K, S4, ("o", "t1", "t2", "t3"), "all the versions")
add(K, S4, ("t2", "t3"), "the last two versions", "最近两版")
add(K, S4, ("t1", "t2", "t3"), "最后三个版本")
add(K, S4, ("o", "t1"), "the first two versions")
add(K, S4, ("t1", "t2"), "前两次生成的")
add(K, S6, ("t3",), "最后两版都不行，再往前一版")
add(K, S6, ("t2",), "not the last three, the one before them")
add(K, S2, ("o",), "not the newest, the one before it")
add(K, M3, ("t3",), "不要最新的，要上一版", "这四张都不对，回到上一版")

K = "chain_turns"
add(K, M1, ("t1b",), "第二张", "上一轮的第二张")
add(K, M1, ("t1a", "t1b", "t1c"), "上一轮的三张都", "the latest ones", "最新的三张")
add(K, M1, ("o",), "the original", "上一版", "the previous version", "倒数第二版")
add(K, M1, ("t1a",), "你生成的第一张")
add(K, M2, ("t2b",), "上一版", "the previous version", "倒数第二版", "第三版",
    "不是这一版，是上一版")
add(K, M2, ("t1",), "上上个版本", "第一次生成的")
add(K, M2, ("t2c",), "上上轮的第三张", "第二轮的第三个结果", "第二輪的第三個結果",
    "the third result from two rounds ago", "上上轮的 third one")
add(K, M2, ("t2a", "t2b", "t2c"), "上上轮的三张")
add(K, M2, ("t2a",), "第二次生成的第一张", "the first variant of the second round")
add(K, M2, ("t2b",), "第二轮 second variant")
add(K, M2, ("t2a", "t2c"), "第二轮除了第二张", "all of round two except the second")
add(K, M2, ("t3",), "最新的")
add(K, M2, ("o",), "the original")
add(K, M3, ("t4c",), "第三张")
add(K, M3, ("t4d",), "上一轮的第四张")
add(K, M3, ("t3",), "上上轮的", "上一版", "倒数第二版")
add(K, M3, ("t1b",), "第二版", "the second result of the first round")
add(K, M3, ("t1a",), "第一次生成的第一张", "你生成的第一张")
add(K, M3, ("t1a", "t1b"), "第一轮的两张")
add(K, M3, T4, "最新的四张都")
add(K, M3, ("t2",), "三轮之前的")

K = "chain_outside"
add(K, S2, None, "倒数第三版", "three versions back", "上上轮的", "two rounds ago",
    "the second generated one", "第二次生成的", "第三版", "version 3",
    "both of the last two are wrong, go back one more")
add(K, S1, None, "the first generated one", "上一版", "the one before the newest", "第一次生成的",
    "第二版", "倒数第二版", "最新生成的", "not the newest, the one before it")
add(K, S4, None, "倒数第五版", "four versions back", "第五版", "the fourth generated image",
    "第四次生成的", "倒數第五個版本", "four rounds ago", "往回退四步", "the last five versions",
    "the middle version", "中间那个版本")
add(K, M2, None, "上上轮的那张", "第二次生成的那张", "第二轮的第四张")
add(K, M1, None, "最新的", "第一次生成的那张", "上一轮的第四张", "the newest one")
add(K, M3, None, "最新的", "the newest one")
add(K, S6, None, "倒数第七版", "第七版", "six versions back", "the sixth generated one")
add(K, S7, None, "the seventh generated one", "倒数第八版")

# =============================================================================================
# Round 6: written after the chain model of round 5 passed, measured once before any change
# (39 of 49 right, 1 asked, 9 silent wrong), then fixed.
ROUND = 6
A5 = story("t1", "t2", "t3", "t4", name="story:o..t4")
B4 = story("t1a t1b t1c", "t2<t1c", "t3")

K = "chain_back"
add(K, A5, ("t3",), "the version just before this one", "上一步的", "前一个版本", "倒退一步",
    "go back one step", "往回一步", "the second newest", "倒数第二个版本", "上一輪之前的那張")
add(K, A5, ("t2",), "两步之前的", "倒数第三个版本", "go back two versions")
add(K, A5, ("t3",), "the one from two turns ago", "上上一轮的")
add(K, A5, ("t3", "t4"), "最新两版", "the two most recent versions")
K = "chain_forward"
add(K, A5, ("o",), "最最开始那张", "the very first image I sent", "我最初发的图",
    "the photo I uploaded at the start", "原始上传的那张", "我最開始傳的圖")
add(K, A5, ("t1",), "第一次出的图", "the first output", "你第一次做的", "第一轮生成的",
    "the first one you generated", "最初生成的")
K = "chain_middle"
add(K, A5, ("t2",), "the middle one of the versions", "第二次修改后的")
K = "chain_outside"
add(K, A5, None, "倒数第六版", "five rounds ago", "第五次生成的", "the sixth version")
add(K, B4, None, "第一次生成的那张", "第一轮的第四张", "上上上轮的那张")
K = "chain_redirect"
add(K, A5, ("t2",), "不要最新的也不要上一版，再往前一版",
    "neither the latest nor the one before, one more back")
add(K, A5, ("t1",), "最后三版都不好，再往前一版")
K = "chain_turns"
add(K, B4, ("t1b",), "第一轮的第二张", "the second variant from the first round",
    "第一次生成的第二个")
add(K, B4, ("t1c",), "上上个版本", "倒数第三版")
add(K, B4, ("t1a", "t1b", "t1c"), "第一轮的三张都", "all three from the first round")
add(K, B4, ("t2",), "上上轮的", "two rounds ago")

# Round 7: found while fixing round 6, added with their fix.
ROUND = 7
K = "chain_forward"
add(K, A5, ("t2",), "the second result", "第二个结果")
K = "chain_outside"
add(K, B4, None, "the first result", "第二个结果")
K = "chain_back"
add(K, A5, ("t4",), "the last result")
K = "chain_outside"  # places outside the chain in mixed language and traditional script
add(K, S2, None, "倒数第三个 version", "the 第三版", "上上輪的那張")
add(K, S4, None, "the 第五版", "五個版本之前")
add(K, M1, None, "the 最新的 one", "第一次 generate 的那张")

# =============================================================================================
# Round 8 (issue 55): two classes of confident wrong answer found on held-out text, written from
# the issue before the resolver was read again, with near misses that must keep their answers.
ROUND = 8
FIRST_ONE = ("第一张", "头一张", "第一張", "頭一張", "the first one", "the 1st", "the first image",
             "把第一张调亮一点", "make the first one brighter", "頭一張再亮一點", "first 那张",
             "第一个 image", "the 头一张", "頭一張 please")

# "the first one" where the conversation is a version chain: the chain's first version (its
# root), unless a turn of several results makes "the first of them" fit as well (then ask); on a
# canvas, ordinals count the canvas
K = "ordinal_chain"
add(K, CH4, ("v0",), *FIRST_ONE)
add(K, CH2, ("v0",), "第一张", "the first one", "頭一張", "first 那張")
add(K, S4, ("o",), "第一张", "头一张", "第一張", "the first one", "the 1st", "the 第一张")
# near misses: the chain's own words, no reference, and ordinals with no set to count (ask)
add(K, CH4, ("v0",), "最初的版本", "第一個版本", "the original one", "原图吧")
add(K, CH4, ("v1",), "第一次生成的")
add(K, CH4, ("v3",), "再亮一點", "make this brighter", modes=MEMORY)
add(K, CH4, None, "第二张", "the second one", "第二個", "the third one")
add(K, RES4, r(1), "头一张", "頭一張", "the first one", "the 1st", "first 那个")  # no chain
for scene in (M1, M3, story("t1", "t2a t2b t2c", "t3<t2b", name="story:o,t1,t2abc,t3")):
    add(K, scene, None, "第一张", "头一张", "第一張", "頭一張", "the first one", "the 1st",
        "first 那张", "第一个 image")  # the root and the first of the turn's results both fit
add(K, M1, ("t1a",), "the first result", "第一个结果", "第一個結果", "the first variant",
    "你生成的第一張", "first 那个 result")
add(K, M1, ("t1b",), "第二張", "the second one")
add(K, M1, ("o",), "第一版", "the first version", "原图")
add(K, M3, ("t4a",), "the first variant", "上一轮的第一张", "上一轮的 first one")
add(K, M3, ("t4c",), "第三張", "the third one")
R3_CHAIN = with_chain(R3, 4)
add(K, R3_CHAIN, a(1), "第一张", "头一张", "頭一張", "the first one", "the 1st", "first 那张")
add(K, R3_CHAIN, a(2), "第二张", "the second one")
add(K, R3_CHAIN, ("v0",), "原图", "the original", "第一版")
add(K, with_results(R3, 4), a(1), "第一张", "the first one", "头一张")

# a negated cell with a count of the rest: the count must agree with the set it names
K = "exclusion_count"
TL_REST = ("r1c2", "r2c1", "r2c2")
add(K, G2, TL_REST, "除了左上角那张，其他三张都调亮", "除了左上角那张，其他三张",
    "除了左上角的，其他三个",
    "除了左上角那張，其他三張", "除了左上角那張，其他三張都調亮",
    "all but the top-left, the other three brighter", "all but the top-left, the other three",
    "except the top-left one, make the other three brighter",
    "除了 top-left 的，其他三个", "除了 top-left 那张，其他三张调亮",
    "all but the 左上角, the other three", "除了左上角那张，other three 调亮")
add(K, G2, ("r1c1", "r1c2", "r2c1"), "除了右下角那张，其他三张", "除了右下角那張，其他三張",
    "all but the bottom-right, the other three", "除了 bottom-right 的，其他三个")
add(K, G2, None, "除了左上角那张，其他两张都调亮", "除了左上角那張，其他兩張",
    "除了左上角，其他四张",
    "all but the top-left, the other two", "all but the top-left, the other four",
    "除了 top-left 的，其他两个")  # the count disagrees with the set: ask
add(K, G2, TL_REST, "除了左上角那张", "除了左上角那张，其他都调亮", "all but the top-left",
    "除了左上角那張", "除了 top-left 的")  # near misses: no count
add(K, G2, ("r1c1", "r1c2", "r2c1", "r2c2"), "这四张都调亮", "all four", "這四張都")
add(K, G2, ("r1c1",), "左上角那张", "the top-left one", "top-left 那张")
add(K, R5, a(1, 3, 4, 5), "除了第二张，其他四张", "all but the second, the other four")
add(K, R5, None, "除了第二张，其他三张", "all but the second, the other three")
add(K, R4, a(1, 2, 3), "除了最后一张，其他三张都调亮", "all but the last, the other three")
add(K, G3, tuple(cell(k) for k in range(1, 10) if k != 5), "除了中间那张，其他八张")
add(K, RES4, r(2, 3, 4), "除了第一个，其他三个", "all but the first, the other three")

KINDS = ["script_numerals", "mixed_language", "row_column", "from_either_end", "sets",
         "lists_exclusions", "version_chain", "turn_results", "selection", "priority", "negation",
         "nonexistent", "partial", "chain_back", "chain_forward", "chain_middle", "chain_redirect",
         "chain_turns", "chain_outside", "ordinal_chain", "exclusion_count"]
