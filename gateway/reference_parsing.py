"""The text-reference lexicon and parser: which images a chat message names, in Chinese and English.

Pure functions over a string. `gateway/resolution.py` decides what the references point at; this
module only finds them, folds compounds ("选中的第二张", "the original of the left one") and marks
each as a target, an exclusion ("不要改选中的", "not the left one") or a source ("像原图一样").
To add an expression, add it to the tables below and a row to `tests/test_resolution_rules.py`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

Kind = Literal["position", "ordinal", "chain", "selection", "upload", "batch", "complement"]
Role = Literal["target", "excluded", "source"]


@dataclass(frozen=True)
class Reference:
    """One mention of an image in the text.

    `value` per kind: position → top-left|top-right|bottom-left|bottom-right|left|right|top|bottom|
    middle; ordinal → "nth" (see `index`); chain → root|parent|latest; selection → selected|this;
    upload → uploaded; batch → all; complement → other.
    """

    kind: Kind
    value: str
    start: int
    end: int
    index: int | None = None  # ordinals: 1-based from the start, negative from the end (-1 = last)
    count: int | None = None  # how many images the words name: "这三张", "左边两张", "前两张"
    plural: bool = False  # the words name several images
    weak: bool = False  # "这张", "this one", "都": never outranks the priority order on its own
    role: Role = "target"
    scope: Reference | None = None  # ordinals/positions: the group counted; chain: the anchor
    either: bool = False  # joined to the previous reference by "或 / or": one of them, not both

    def describe(self) -> str:
        """A few English words for reasons: "the left image", "the 2nd image", "the original"."""
        if self.kind == "position":
            text = f"the {self.value} image" + ("s" if self.plural or self.count else "")
        elif self.kind == "ordinal":
            text = _describe_ordinal(self.index or 1, self.count)
        elif self.kind == "chain":
            text = {"root": "the original", "parent": "the previous version"}.get(
                self.value, "the latest result"
            )
        elif self.kind == "selection":
            text = "the selected image" if self.value == "selected" else "this image"
        elif self.kind == "upload":
            text = "the uploaded image"
        elif self.kind == "batch":
            text = f"these {self.count} images" if self.count else "all of them"
        else:
            text = "the other image" + ("s" if self.plural else "")
        if self.scope is None:
            return text
        if self.kind == "chain":
            return f"{text} of {self.scope.describe()}"
        groups = {
            "selection": "the selection",
            "upload": "the uploads",
            "chain": "the latest results",
        }
        return f"{text} of {groups.get(self.scope.kind) or self.scope.describe()}"


def _describe_ordinal(index: int, count: int | None) -> str:
    n = count or 1
    if index > 0:
        head = f"the first {n}" if n > 1 and index == 1 else f"the {_nth(index)}"
    else:
        head = (
            f"the last {n}"
            if n > 1
            else ("the last" if index == -1 else f"the {_nth(-index)} to last")
        )
    return head + (" images" if n > 1 else " image")


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# ---------------------------------------------------------------------------------------------
# The lexicon. Chinese entries are regex fragments matched anywhere; English entries are matched
# on word boundaries. Longer alternatives are tried first, and when two matches overlap the longer
# one wins (so "上一个版本" beats "上一个", "这个结果" beats "这个").
# ---------------------------------------------------------------------------------------------

NUM = r"[0-9]+|[零一二两三四五六七八九十百]+"
_BATCH_NUM = r"[0-9]+|[两二三四五六七八九十]+"  # "这一张" is "this one", not a batch
_NUM_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "last": -1,
}  # fmt: skip
EN_COUNT = r"two|three|four|five|six|seven|eight|nine|ten|[0-9]+"
EN_ORD = r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[0-9]+(?:st|nd|rd|th)"  # noqa: E501
EN_NOUN = r"(?:one|image|picture|photo|pic|result|output|option|variant|variation|tile|shot|render|frame|draft)s?"  # noqa: E501
EN_IMAGE = r"(?:one|image|picture|photo|pic|version|shot|render|tile|frame)s?"
ZH_CLASSIFIER = r"(?:张|幅|个|副|只)"
ZH_NOUNS = "图片|图像|图|照片|画"
ZH_NOUN = f"(?:{ZH_NOUNS})"
_EN_PLURAL = re.compile(
    r"\b(?:ones|images|pictures|photos|pics|results|outputs|renders|generations|tiles|versions)\b"
)

POSITIONS_ZH: dict[str, tuple[str, ...]] = {
    "top-left": ("左上角", "左上方", "左上边", "左上"),
    "top-right": ("右上角", "右上方", "右上边", "右上"),
    "bottom-left": ("左下角", "左下方", "左下边", "左下"),
    "bottom-right": ("右下角", "右下方", "右下边", "右下"),
    "left": ("最左边", "最左侧", "最左面", "最左", "左手边", "左边", "左侧", "左面", "左方"),
    "right": ("最右边", "最右侧", "最右面", "最右", "右手边", "右边", "右侧", "右面", "右方"),
    "top": ("最上面", "最上边", "最上方", "最上", "上面", "上边", "上方", "顶部", "顶上"),
    "bottom": ("最下面", "最下边", "最下方", "最下", "下面", "下边", "下方", "底部", "底下"),
    "middle": ("正中间", "正中央", "中间", "中央", "正中", "居中"),
}
# Rows and columns name several images at once.
POSITION_ROWS_ZH: dict[str, tuple[str, ...]] = {
    "top": ("上排", "上面一排", "上面那排", "第一排", "上一行", "第一行"),
    "bottom": ("下排", "下面一排", "下面那排", "最后一排", "下一行", "最后一行"),
    "left": ("左列", "左边一列", "第一列"),
    "right": ("右列", "右边一列", "最后一列"),
}
POSITIONS_EN: dict[str, tuple[str, ...]] = {
    "top-left": ("top left", "upper left", "top left corner", "upper left corner"),
    "top-right": ("top right", "upper right", "top right corner", "upper right corner"),
    "bottom-left": ("bottom left", "lower left", "bottom left corner", "lower left corner"),
    "bottom-right": ("bottom right", "lower right", "bottom right corner", "lower right corner"),
    "left": ("left", "leftmost", "left hand", "far left"),
    "right": ("right", "rightmost", "right hand", "far right"),
    "top": ("top", "upper", "topmost", "uppermost"),
    "bottom": ("bottom", "lower", "bottommost", "lowest"),
    "middle": ("middle", "center", "centre", "central", "centered", "centred"),
}

CHAIN_ZH: dict[str, tuple[str, ...]] = {
    "root": (
        "(?<![还复])原图", "原始图片", "原始图像", "原始图", "原始照片", "原始的那张", "原始版本",
        "原来的图片", "原来的图", "原来的那张", "原来那张", "原来的版本", "原版", "原片", "原稿",
        "原照片", "最初那张", "最初的那张", "最初的图", "最初的版本", "最初版本", "最初的",
        "最开始那张", "最开始的那张", "最开始的图", "最开始的", "一开始那张", "一开始的那张",
        "一开始的图", "最早的那张", "最早那张", "最早的图", "最早的版本", "最早的", "初始图片",
        "初始图", "初始版本", "初版", "第一版", "参考图", "底图", "源图",
    ),
    "parent": (
        "上一个版本", "上个版本", "上一版本", "上一版", "前一版", "前一个版本", "前一版本",
        "前个版本", "之前的版本", "之前那版", "之前那个版本", "上一步的结果", "上一步的图",
        "上一步的", "上一步", "修改前的版本", "修改前的那张", "修改前的图", "修改前的",
        "改之前的版本", "改之前的那张", "改之前的图", "改之前那张", "改之前的", "编辑前的版本",
        "编辑前的那张", "编辑前的图", "编辑前的", "改动前的", "上一稿", "前一稿",
    ),
    "latest": (
        "上一轮的结果", "上一轮的图", "上一轮生成的", "上一轮的", "上一轮", "上轮的", "上轮",
        "上一个结果", "上个结果", "上一次的结果", "上次的结果", "上一次生成的", "上次生成的",
        "刚刚生成的", "刚才生成的", "刚生成的", "新生成的", "最新生成的", "最新的那张", "最新那张",
        "最新一张", "最新的图", "最新的结果", "最新的版本", "最新版本", "最新的", "最新",
        "这个结果", "这次的结果", "这次结果", "刚才那张", "刚刚那张", "刚才的那张", "刚才的图",
        "刚刚的图", "刚画的", "刚做的", "刚出的", "刚出来的", "刚改好的", "刚改的",
        "你刚才画的", "你刚才做的", "你刚才生成的", "你刚画的", "你刚做的", "上一张",
        "最近一张", "最近生成的", "最近的那张", "生成的结果", "生成结果",
    ),
}  # fmt: skip
CHAIN_EN: dict[str, tuple[str, ...]] = {
    "root": (
        # "the original prompt / size / idea" is not an image
        "the original(?! (?:prompt|text|idea|plan|size|ratio|aspect|resolution|request|caption"
        "|description|question|message|meaning|colou?rs?|style|lighting|look|composition))",
        "the original (?:one|image|picture|photo|pic|version|upload|file)",
        "original (?:image|picture|photo|pic|version)",
        r"(?<='s\s)original",
        "the (?:very )?first version",
        "the very first (?:one|image|picture|photo)",
        "the (?:source|reference|base|initial|starting|root) "
        "(?:image|picture|photo|pic|one|version)",
        "the (?:very )?(?:earliest|oldest)(?: (?:one|image|picture|photo|version))?",
    ),
    "parent": (
        "the (?:previous|prior|earlier|last) version",
        "the version before(?: (?:this|that|it))?",
        "the one before (?:this|that|it|the (?:last )?edit)",
        "the parent(?: image| version| one)?",
        "the (?:pre-?edit|pre edit|unedited) (?:one|image|picture|version)",
        "(?:the )?(?:image|picture|version|one) before the (?:last )?edit",
    ),
    "latest": (
        "the (?:previous|last|latest|newest|most recent|new) "
        "(?:result|output|generation|render|attempt|try)s?",
        "the (?:previous|latest|newest|most recent|new|just generated|freshly generated) "
        "(?:image|picture|photo|pic|one|version)s?",
        "the latest",
        "the newest",
        "the most recent",
        "this result",
        "the results?",
        "the outputs?",
        "what you just (?:made|generated|created|drew|did|rendered|produced)",
        "(?:the )?(?:one|image|picture|photo|result|output|thing)s? (?:that )?you (?:just )?"
        "(?:made|generated|created|produced|drew|rendered|did|gave me|returned|edited)",
        "(?:the )?(?:results?|outputs?|images?) (?:from|of) (?:the )?(?:last|previous) "
        "(?:turn|round|step|time|generation)",
        "(?:the )?(?:last|previous) (?:turn|round)'?s? (?:results?|images?|outputs?)",
    ),
}

SELECTION_ZH: tuple[str, ...] = (
    "(?:我|已经?|当前|刚才?|被)?(?:选中|选定|勾选|框选|圈选)了?的?"
    f"(?P<det>这|那)?(?P<count>几|些|{_BATCH_NUM})?(?:张|幅|个)?{ZH_NOUN}?",
    f"我(?:刚才?|刚刚)?(?:选|挑|点|圈)了?的(?P<det>这|那)?(?P<count>几|些|{_BATCH_NUM})?"
    f"(?:张|幅|个)?{ZH_NOUN}?",
    f"已选的?(?P<det>这|那)?(?P<count>几|些|{_BATCH_NUM})?(?:张|幅|个)?{ZH_NOUN}?",
)
SELECTION_EN: tuple[str, ...] = (
    rf"the (?:currently )?selected(?: {EN_IMAGE})?",
    rf"selected {EN_IMAGE}",
    r"(?:the )?(?:one|image|picture|photo|pic)s? (?:that )?i(?:'ve| have)? (?:just )?"
    r"(?:selected|picked|chose|chosen|highlighted|marked|clicked(?: on)?|ticked)",
    "(?:my|the) (?:current )?selection",
    rf"the (?:highlighted|chosen|picked|marked) {EN_IMAGE}",
)
THIS_ZH: tuple[str, ...] = (
    f"这一?(?:张|幅){ZH_NOUN}?",
    "这个图片",
    "这个图",
    "这图",
    "此图",
    f"当前(?:这|那)?(?:张|幅|个)?{ZH_NOUN}",
    "当前这张",
    "当前的这张",
)
THIS_EN: tuple[str, ...] = (
    "(?:this|that) (?:one|image|picture|photo|pic|version)",
    "the current (?:one|image|picture|photo|version)",
)

UPLOAD_ZH: tuple[str, ...] = (
    f"(?:我|刚|刚刚|刚才){{0,2}}上传(?:的|了的|过的)(?:这|那)?(?P<count>几|些|{_BATCH_NUM})?"
    f"(?:张|幅|个)?{ZH_NOUN}?",
    f"我(?:刚|刚刚|刚才)?(?:发|传)(?:的|过来的|来的)(?:这|那)?(?:张|幅)?{ZH_NOUN}",
    "上传的图片",
    "上传图",
)
UPLOAD_EN: tuple[str, ...] = (
    r"(?:the )?(?:image|picture|photo|pic|file|one)s? (?:that )?i (?:just )?"
    r"(?:uploaded|sent|attached|shared|gave you)",
    "(?:the|my) (?:uploaded|attached) (?:image|picture|photo|pic|file|one)s?",
    "my (?:upload|attachment)s?",
    "the (?:upload|attachment)s?",
)

# (regex fragment, count, plural, weak)
BATCH_ZH: tuple[tuple[str, int | None, bool, bool], ...] = (
    (f"(?:这|那)(?P<count>{_BATCH_NUM})(?:张|幅|个){ZH_NOUN}?(?:都|全都|全部)?", None, True, False),
    (f"(?:这|那)(?:几|些)(?:张|幅|个)?{ZH_NOUN}?(?:都|全都|全部)?", None, True, False),
    ("这俩", 2, True, False),
    (f"(?P<count>{_BATCH_NUM})(?:张|幅|个){ZH_NOUN}?(?:都|全都|全部)", None, True, False),
    (f"(?:所有|全部)的?(?:{ZH_NOUNS}|结果|张)", None, True, False),
    (f"每一?(?:张|幅){ZH_NOUN}?|每个图片?", None, True, False),
    ("它们(?:都|全都|全部)?", None, True, False),
    ("全部|全都|都|统统|通通", None, True, True),
)
BATCH_EN: tuple[tuple[str, int | None, bool, bool], ...] = (
    (rf"all (?:of )?(?:them|these|those|the {EN_NOUN})", None, True, False),
    (rf"all (?P<count>{EN_COUNT})(?: of them| {EN_NOUN})?", None, True, False),
    (
        "(?:every|each) (?:single )?(?:one|image|picture|photo|result)(?: of them)?",
        None,
        True,
        False,
    ),
    ("each of them", None, True, False),
    (rf"both(?: of them| {EN_NOUN})?", 2, True, False),
    (rf"(?:these|those)(?: (?P<count>{EN_COUNT}))?(?: {EN_NOUN})?", None, True, False),
    ("them all", None, True, False),
    ("them", None, True, True),
)

COMPLEMENT_ZH: tuple[tuple[str, bool], ...] = (
    (f"另(?:一|外)一?(?:张|幅|个){ZH_NOUN}?|另外那张|剩下那张|剩下的那张", False),
    (f"(?:其他|其余|剩下)的?(?:{ZH_NOUNS}|几张|张|那几张)?|别的(?:{ZH_NOUNS}|几张|那几张)", True),
)
COMPLEMENT_EN: tuple[tuple[str, bool], ...] = (
    ("the other (?:one|image|picture|photo)|the remaining (?:one|image|picture)", False),
    (
        rf"the other (?:ones|images|pictures|photos|{EN_COUNT})|the others"
        r"|the rest(?: of them)?|the remaining (?:ones|images|pictures)",
        True,
    ),
)

# Negation cues: "pre" cues exclude the next reference(s) in their clause, "post" cues the one(s)
# just before them ("左边的别动", "the left one stays untouched").
NEGATION_PRE_ZH = (
    "不要|不用|不需要|无需|不必|不想|(?<![特区分差告级识类性个])别|(?<!是)不是|并非|而不是|除了|除去|"
    "排除|跳过|保留|保持|不改|不动|勿"
)
NEGATION_POST_ZH = (
    "别动|不要动|不动|不用动|别改|不要改|不改|不用改|不变|保持不变|保持原样|保留|除外|"
    "不要了|别管|不用管|先不动|别碰|不要碰"
)
NEGATION_PRE_EN = (
    r"\b(?:not|don'?t|do not|never|leave|keep|except(?: for)?|excluding|exclude|other than|"
    r"but not|instead of|rather than|without|skip|ignore|avoid|no longer)\b"
)
NEGATION_POST_EN = r"\b(?:alone|as[ -]is|as it is|unchanged|untouched|intact)\b"
# Source cues: the reference after them is a model to copy, not the image to change.
SOURCE_ZH = "(?<![图好不])像|参考|按照|根据|照着|仿照|模仿|比照|对照|依照"
SOURCE_EN = (
    r"\b(?:(?:look|looks|looking|be|more|just|exactly)\s+like|similar\s+to|based\s+on|"
    r"in\s+the\s+style\s+of|the\s+(?:style|colou?rs?|palette|lighting|look)\s+of|to\s+match|"
    r"matching|as\s+in|inspired\s+by|according\s+to|"
    r"the\s+same\s+as)\b"
)
# What ends a cue's reach: clause punctuation and contrast words.
_BREAK = re.compile(
    r"[,.;!?，。；！？\n]|而是|但是|但|不过|然后|并且|而且|\b(?:and|but|then|instead|rather|so|while)\b"
)
# Text allowed between two references that share one cue ("不要左边的和右边的").
_JOIN = re.compile(
    r"^(?:\s|[、&/+]|和|与|跟|及|以及|还有|或者|或是|或|也|都|全都|全部|"
    r"\b(?:and|or|nor|plus|as well as|also|the)\b)*$"
)
_EITHER = re.compile(r"^\s*(?:的)?\s*(?:或者|或是|或|还是|\bor\b)\s*$")
_POST_GAP = re.compile(
    r"^(?:\s|的|都|也|就|全都|全部|先|暂时|请|要|"
    r"\b(?:is|are|stays?|remains?|should|must|be|left|kept|please)\b)*$"
)
_MAX_CUE_GAP = 24
# "选中的第二张", "上一轮的第二张" / "the second of the selected ones".
_SCOPE_BEFORE = re.compile(r"^\s*(?:的|里的|中的|里面的|当中的|之中的|里|中)?\s*$")
_SCOPE_AFTER = re.compile(r"^\s*(?:of|among|from|in|out of)\s*$")
# "左边那张的原图" / "the original of the left one".
_ANCHOR_BEFORE = re.compile(r"^\s*(?:的|'s)?\s*$")
_ANCHOR_AFTER = re.compile(r"^\s*of\s*$")
_SCOPE_KINDS = ("selection", "upload", "batch")
_ANCHOR_KINDS = ("position", "ordinal", "selection", "upload")
# "用左边那张的风格…": a reference whose style is borrowed is a source.
_BORROW_BEFORE = re.compile(r"(?:用|拿|以|按|照|\b(?:use|using|with|take|apply)\b)\s*$")
_STYLE_WORDS = "风格|色调|配色|构图|光线|光影|画风|滤镜|姿势|动作"
# "把第一张的风格用到第三张", "和原图一样": the reference is a model whatever precedes it.
_SOURCE_AFTER = re.compile(
    rf"^\s*(?:的?(?:一样|一致|相同|类似|相似|那样|似的)|的(?:{_STYLE_WORDS})(?:用|应用|迁移|套|放|换|转)到"
    r"|'s\s+(?:style|colou?rs?|palette|lighting|look)\s+(?:to|onto|on)\b)"
)
_BORROW_AFTER = re.compile(
    rf"^\s*(?:的(?:{_STYLE_WORDS})|'s\s+"
    r"(?:style|colou?rs?|palette|composition|lighting|look|pose|mood|vibe))"
)


@dataclass(frozen=True)
class _Pattern:
    kind: Kind
    value: str  # "" means: read it from the match (positions, ordinals)
    regex: re.Pattern[str]
    priority: int  # breaks ties between overlapping matches of equal length
    index: int | None = None
    count: int | None = None
    plural: bool = False
    weak: bool = False


def _alternation(fragments: Iterable[str]) -> str:
    return "|".join(sorted(set(fragments), key=len, reverse=True))


def _en(fragment: str) -> str:
    # spaces in English fragments match any run of spaces or hyphens
    return r"\b(?:" + fragment.replace(" ", r"[\s-]+") + r")\b"


def _compile(fragment: str) -> re.Pattern[str]:
    return re.compile(fragment)


def _position_patterns() -> list[_Pattern]:
    zh_pos = _alternation(w for words in POSITIONS_ZH.values() for w in words)
    zh_rows = _alternation(w for words in POSITION_ROWS_ZH.values() for w in words)
    en_pos = _alternation(w.replace(" ", "[\\s-]+") for ws in POSITIONS_EN.values() for w in ws)
    after_de = (
        r"(?=$|[\s,.;:!?，。；：！？、)）]|和|与|跟|及|以|还|也|都|再|改|换|变|调|弄|做|修|去|删|"
        r"放|重|生|用|加|保|别|不|就|要|请|给|让|转|原|上一|前一|最初|那|这)"
    )
    zh = [
        rf"(?P<pos>{zh_pos})(?:的)?(?:那|这)?(?P<count>{_BATCH_NUM}|一)?{ZH_CLASSIFIER}{ZH_NOUN}?",
        rf"(?P<pos>{zh_pos})的{ZH_NOUN}",
        rf"(?P<pos>{zh_pos})的{after_de}",
        rf"(?P<pos>{zh_pos})(?=和|与|跟|或|、|还是)",
        rf"(?:(?<=[和与跟、或])|(?<=或者)|(?<=还是))(?P<pos>{zh_pos})",
        rf"(?<=[改选要是用换把对])(?P<pos>{zh_pos})"
        r"(?=$|[\s,.;:!?，。；：！？、)）]|和|与|跟|或|而)",
        r"(?<![原底参母源初始贴])(?P<pos>左上|右上|左下|右下|左|右|上|下|中)图片?(?!标|层|案|形|表|纸|谱|书|文|像)",
    ]
    en = [
        rf"\b(?:the )?(?P<pos>{en_pos})(?:[\s-]+most)?(?:[\s-]+(?:side|corner))?[\s-]+{EN_IMAGE}\b",
        rf"\b(?:one|ones|image|images|picture|pictures|photo|photos|pics?)\s+(?:on|at|in)\s+"
        rf"(?:the\s+)?(?:very\s+)?(?P<pos>{en_pos})(?:\s+(?:side|corner|edge|row|column))?\b",
        rf"\bthe\s+(?P<pos>{en_pos})\s+(?P<count>{EN_COUNT})\b(?:\s+{EN_NOUN})?",
        rf"\bthe\s+(?P<count>{EN_COUNT})\s+(?:{EN_NOUN}\s+)?(?:on|at|in)\s+the\s+(?P<pos>{en_pos})"
        r"(?:\s+(?:side|corner|row|column))?\b",
        r"\bthe\s+(?P<pos>leftmost|rightmost|topmost|bottommost|uppermost)\b",
        # "the left or the right one", "the top and bottom images"
        rf"\b(?:the\s+)?(?P<pos>{en_pos})(?=\s+(?:and|or)\s+(?:the\s+)?(?:{en_pos})[\s-]+{EN_IMAGE}\b)",
    ]
    patterns = [_Pattern("position", "", _compile(p), 5) for p in zh]
    patterns += [_Pattern("position", "", re.compile(p), 5) for p in en]
    patterns.append(_Pattern("position", "", _compile(f"(?P<row>{zh_rows})"), 5, plural=True))
    rows_en = r"\bthe\s+(?P<row>top|bottom|upper|lower|first|last)\s+row\b"
    cols_en = r"\bthe\s+(?P<row>left|right|first|last)\s+column\b"
    patterns += [
        _Pattern("position", "", re.compile(p), 5, plural=True) for p in (rows_en, cols_en)
    ]
    return patterns


def _ordinal_patterns() -> list[_Pattern]:
    noun = f"{ZH_CLASSIFIER}{ZH_NOUN}?"
    zh = [
        (rf"倒数第(?P<rev>{NUM}){ZH_CLASSIFIER}?{ZH_NOUN}?", None),
        (rf"第(?P<n>{NUM}){noun}", None),
        (rf"第(?P<n>{NUM})(?=$|[\s,.;:!?，。；：！？、]|和|与|跟|或|也|都)", None),
        (rf"最后(?:一|那|这)?{noun}|最后面的?那?{noun}", -1),
        (rf"最后的?(?P<last>{_BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![之以然最])前(?P<first>{_BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![之以然最])后(?P<last>{_BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![原底参母源初始贴])图(?P<n>{NUM})(?!样|下|点|些|起|直|定|致|般|共|模|标|层)", None),
        (rf"(?P<n>{NUM})号(?:图片|图像|图|作品)", None),
    ]
    en = [
        (
            rf"\b(?:the )?(?:(?P<rev>{EN_ORD})[\s-]+(?:to[\s-]+)?last"
            rf"|(?P<pen>penultimate|last[\s-]+but[\s-]+one))(?:[\s-]+{EN_NOUN})?\b",
            None,
        ),
        (rf"\b(?:the )?(?P<ord>{EN_ORD}|last)[\s-]+{EN_NOUN}\b", None),
        (
            rf"\bthe\s+(?P<ord>{EN_ORD}|last)\b(?=\s*(?:$|[,.;:!?)]|and\b|or\b|of\b|instead\b|"
            r"please\b|among\b|from\b|in\b|is\b))",
            None,
        ),
        (rf"\b(?:the )?first\s+(?P<first>{EN_COUNT})\b(?:\s+{EN_NOUN})?", None),
        (rf"\b(?:the )?last\s+(?P<last>{EN_COUNT})\b(?:\s+{EN_NOUN})?", None),
        (r"(?:\b(?:image|picture|photo|pic|option|number|no\.)\s*|#\s*)(?P<n>[0-9]+)\b", None),
        (
            r"\b(?:image|picture|photo|option)\s+(?P<n>one|two|three|four|five|six|seven|eight|nine)\b",
            None,
        ),
    ]
    return [_Pattern("ordinal", "nth", re.compile(p), 4, index=i) for p, i in zh + en]


def _simple_patterns() -> list[_Pattern]:
    patterns: list[_Pattern] = []
    for value, words in CHAIN_ZH.items():
        patterns.append(_Pattern("chain", value, _compile(_alternation(words)), 0))
    for value, words in CHAIN_EN.items():
        patterns.append(_Pattern("chain", value, re.compile(_en(_alternation(words))), 0))
    for fragment in SELECTION_ZH:
        patterns.append(_Pattern("selection", "selected", _compile(fragment), 2))
    for fragment in SELECTION_EN:
        patterns.append(_Pattern("selection", "selected", re.compile(_en(fragment)), 2))
    patterns.append(_Pattern("selection", "this", _compile(_alternation(THIS_ZH)), 2, weak=True))
    this_en = re.compile(_en(_alternation(THIS_EN)))
    patterns.append(_Pattern("selection", "this", this_en, 2, weak=True))
    for fragment in UPLOAD_ZH:
        patterns.append(_Pattern("upload", "uploaded", _compile(fragment), 1))
    for fragment in UPLOAD_EN:
        patterns.append(_Pattern("upload", "uploaded", re.compile(_en(fragment)), 1))
    for fragment, count, plural, weak in BATCH_ZH:
        patterns.append(_Pattern("batch", "all", _compile(fragment), 6, None, count, plural, weak))
    for fragment, count, plural, weak in BATCH_EN:
        regex = re.compile(_en(fragment))
        patterns.append(_Pattern("batch", "all", regex, 6, None, count, plural, weak))
    for fragment, plural in COMPLEMENT_ZH:
        patterns.append(_Pattern("complement", "other", _compile(fragment), 3, plural=plural))
    for fragment, plural in COMPLEMENT_EN:
        patterns.append(
            _Pattern("complement", "other", re.compile(_en(fragment)), 3, plural=plural)
        )
    return patterns


_PATTERNS: tuple[_Pattern, ...] = tuple(
    _simple_patterns() + _ordinal_patterns() + _position_patterns()
)
_POSITION_LOOKUP: dict[str, str] = {
    **{w: value for value, words in POSITIONS_ZH.items() for w in words},
    **{w: value for value, words in POSITIONS_EN.items() for w in words},
    **{w: value for value, words in POSITION_ROWS_ZH.items() for w in words},
    **{"左": "left", "右": "right", "上": "top", "下": "bottom", "中": "middle"},
    **{"upper": "top", "lower": "bottom", "first": "top", "last": "bottom"},
}


def normalise_text(text: str) -> str:
    """NFKC (full-width digits and punctuation become ASCII), lower case, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text).strip()


def parse_number(word: str) -> int | None:
    """ "3", "三", "十二", "两", "three" → int; None when it is not a small number."""
    if word.isascii() and word.isdigit():
        return int(word) if len(word) <= 4 else None
    if word in _NUM_WORDS:
        return _NUM_WORDS[word]
    digits = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}  # fmt: skip
    total, current = 0, 0
    for char in word:
        if char in digits:
            current = digits[char]
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        elif char == "百":
            total += (current or 1) * 100
            current = 0
        else:
            return None
    value = total + current
    return value if 0 < value < 1000 else None


def _parse_ordinal_word(word: str) -> int | None:
    if word in _ORDINAL_WORDS:
        return _ORDINAL_WORDS[word]
    digits = re.match(r"^([0-9]+)(?:st|nd|rd|th)$", word)
    return parse_number(digits.group(1)) if digits else None


def _build(pattern: _Pattern, match: re.Match[str]) -> Reference | None:
    groups = {k: v for k, v in match.groupdict().items() if v}
    plural = pattern.plural or bool(_EN_PLURAL.search(match.group(0)))
    ref = Reference(
        pattern.kind, pattern.value, match.start(), match.end(), pattern.index, pattern.count,
        plural, pattern.weak,
    )  # fmt: skip
    raw_count = groups.get("count")
    if raw_count in ("几", "些"):
        ref = replace(ref, plural=True)
    elif raw_count is not None:
        count = parse_number(raw_count)
        if count is None:
            return None
        if count > 1:
            ref = replace(ref, count=count, plural=True)
    if pattern.kind == "position":
        return _build_position(ref, groups)
    if pattern.kind == "ordinal":
        return _build_ordinal(ref, groups)
    return ref


def _build_position(ref: Reference, groups: dict[str, str]) -> Reference | None:
    word = groups.get("pos") or groups.get("row", "")
    key = re.sub(r"[\s-]+", " ", word)
    value = _POSITION_LOOKUP.get(key)
    if value is None:
        return None
    return replace(ref, value=value, plural=ref.plural or "row" in groups)


def _build_ordinal(ref: Reference, groups: dict[str, str]) -> Reference | None:
    if "n" in groups:
        n = parse_number(groups["n"])
        return replace(ref, index=n) if n else None
    if "ord" in groups:
        n = _parse_ordinal_word(groups["ord"])
        return replace(ref, index=n) if n else None
    if "rev" in groups:
        n = _parse_ordinal_word(groups["rev"]) or parse_number(groups["rev"])
        return replace(ref, index=-n) if n and n > 0 else None
    if "pen" in groups:
        return replace(ref, index=-2)
    if "first" in groups or "last" in groups:
        n = parse_number(groups.get("first") or groups.get("last", ""))
        if not n:
            return None
        return replace(ref, index=1 if "first" in groups else -1, count=n, plural=n > 1)
    return ref if ref.index is not None else None


def _scan(text: str) -> list[Reference]:
    found: list[tuple[int, int, int, Reference]] = []
    for pattern in _PATTERNS:
        for match in pattern.regex.finditer(text):
            if match.end() == match.start():
                continue
            ref = _build(pattern, match)
            if ref is not None:
                if ref.kind == "position" and "row" in match.groupdict() and match.group("row"):
                    ref = _fix_column(ref, match.group(0))
                found.append((-(ref.end - ref.start), pattern.priority, ref.start, ref))
    found.sort(key=lambda item: item[:3])
    taken: list[Reference] = []
    for _, _, _, ref in found:
        if all(ref.end <= other.start or ref.start >= other.end for other in taken):
            taken.append(ref)
    return sorted(taken, key=lambda r: r.start)


def _fix_column(ref: Reference, matched: str) -> Reference:
    if "column" in matched and ref.value in ("top", "bottom"):
        return replace(ref, value="left" if ref.value == "top" else "right")
    return ref


def _fold(text: str, refs: list[Reference]) -> list[Reference]:
    """Fold "选中的第二张", "the second of the selected ones", "左边那张的原图" into one each."""
    out: list[Reference] = []
    i = 0
    while i < len(refs):
        folded = _fold_pair(text, refs[i], refs[i + 1]) if i + 1 < len(refs) else None
        out.append(folded or refs[i])
        i += 2 if folded else 1
    return out


def _is_group(ref: Reference) -> bool:
    return ref.kind in _SCOPE_KINDS or (ref.kind == "chain" and ref.value == "latest")


def _is_anchor(ref: Reference) -> bool:
    return ref.kind in _ANCHOR_KINDS or (ref.kind == "chain" and ref.value == "latest")


def _fold_pair(text: str, a: Reference, b: Reference) -> Reference | None:
    gap = text[a.end : b.start]
    counted = ("ordinal", "position")
    if _is_group(a) and not a.weak and b.kind in counted and _SCOPE_BEFORE.match(gap):
        return replace(b, start=a.start, scope=a)
    if a.kind in counted and _is_group(b) and not b.weak and _SCOPE_AFTER.match(gap):
        return replace(a, end=b.end, scope=b)
    relative = ("root", "parent")
    if _is_anchor(a) and b.kind == "chain" and b.value in relative and _ANCHOR_BEFORE.match(gap):
        # "左边那张的原图" is one reference; "左边那张原图" (no 的) is two
        if gap.strip() or text[a.end - 1] == "的":
            return replace(b, start=a.start, scope=a)
    if a.kind == "chain" and a.value in relative and _is_anchor(b) and _ANCHOR_AFTER.match(gap):
        return replace(a, end=b.end, scope=b)
    return None


def _mask(text: str, refs: list[Reference]) -> str:
    chars = list(text)
    for ref in refs:
        chars[ref.start : ref.end] = "\x01" * (ref.end - ref.start)
    return "".join(chars)


def _cues(masked: str, pre: str, post: str | None) -> Iterator[tuple[int, int, bool]]:
    """(start, end, may_be_post) of every cue; longest cue wins where they overlap."""
    spans: list[tuple[int, int, bool]] = []
    for regex, may_post in ((pre, False), (post, True)):
        if regex is None:
            continue
        for m in re.finditer(regex, masked):
            if m.end() > m.start():
                spans.append((m.start(), m.end(), may_post))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0]), not s[2]))
    last_end = -1
    for start, end, may_post in spans:
        if start >= last_end:
            last_end = end
            yield start, end, may_post


def _joined_run(text: str, refs: list[Reference], first: int, step: int) -> list[int]:
    """Indices of refs[first] and its neighbours joined to it by "和/and/、" only."""
    run = [first]
    j = first
    while 0 <= j + step < len(refs):
        left, right = (refs[j], refs[j + step]) if step > 0 else (refs[j + step], refs[j])
        if not _JOIN.match(text[left.end : right.start]):
            break
        j += step
        run.append(j)
    return run


def _reach_forward(text: str, refs: list[Reference], cue_end: int) -> list[int]:
    for i, ref in enumerate(refs):
        if ref.start < cue_end:
            continue
        gap = text[cue_end : ref.start]
        if len(gap) > _MAX_CUE_GAP or _BREAK.search(gap):
            return []
        return _joined_run(text, refs, i, 1)
    return []


def _reach_backward(text: str, refs: list[Reference], cue_start: int) -> list[int]:
    for i in range(len(refs) - 1, -1, -1):
        ref = refs[i]
        if ref.end > cue_start:
            continue
        if not _POST_GAP.match(text[ref.end : cue_start]):
            return []
        return _joined_run(text, refs, i, -1)
    return []


def _assign_roles(text: str, refs: list[Reference]) -> list[Reference]:
    masked = _mask(text, refs)
    roles: dict[int, Role] = {}
    # Batch words are fillers for cue reach, never excluded themselves.
    cuable = [r for r in refs if r.kind != "batch"]
    for _, end, _ in _cues(masked, SOURCE_ZH + "|" + SOURCE_EN, None):
        for i in _reach_forward(text, cuable, end):
            roles[cuable[i].start] = "source"
    for i, ref in enumerate(cuable):
        before = text[max(0, ref.start - 8) : ref.start]
        after = text[ref.end :]
        borrowed = _BORROW_BEFORE.search(before) and _BORROW_AFTER.match(after)
        if borrowed or _SOURCE_AFTER.match(after):
            roles[cuable[i].start] = "source"
    pre = NEGATION_PRE_ZH + "|" + NEGATION_PRE_EN
    post = NEGATION_POST_ZH + "|" + NEGATION_POST_EN
    for start, end, may_post in _cues(masked, pre, post):
        hits: list[int] = []
        if may_post:
            # "左边的别动右边的改" — a post cue hugging the reference before it binds to that one
            hits = _reach_backward(text, cuable, start)
        if not hits:
            hits = _reach_forward(text, cuable, end)
        for i in hits:
            roles[cuable[i].start] = "excluded"
        if hits:
            # batch words inside a negated stretch ("其他的都不变") go with it
            low = min(start, cuable[hits[0]].start, cuable[hits[-1]].start)
            high = max(end, cuable[hits[0]].end, cuable[hits[-1]].end)
            for ref in refs:
                if ref.kind == "batch" and low <= ref.start and ref.end <= high:
                    roles[ref.start] = "excluded"
    out = [replace(r, role=roles.get(r.start, "target")) for r in refs]
    for i in range(1, len(out)):
        if _EITHER.match(text[out[i - 1].end : out[i].start]):
            out[i] = replace(out[i], either=True)
    return out


@dataclass(frozen=True)
class ParsedText:
    text: str  # the normalised text the spans refer to
    references: tuple[Reference, ...]

    def with_role(self, role: Role) -> tuple[Reference, ...]:
        return tuple(r for r in self.references if r.role == role)


def parse_references(text: str) -> ParsedText:
    """Every image reference in `text`, in order, compounds folded and roles assigned."""
    normalised = normalise_text(text)
    refs = _fold(normalised, _scan(normalised))
    return ParsedText(normalised, tuple(_assign_roles(normalised, refs)))
