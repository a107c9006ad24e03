"""The words of image references: Chinese and English word lists and regex fragments for positions,
ordinals, version chains, selection, uploads, batches and the negation and source cues."""

from __future__ import annotations

import re
from typing import Literal

# The kinds of image reference the tables below name (see `Reference` in reference_parsing).
Kind = Literal[
    "position", "ordinal", "chain", "selection", "upload", "batch", "complement", "line"
]


# ---------------------------------------------------------------------------------------------
# The lexicon. Chinese entries are regex fragments matched anywhere; English entries are matched
# on word boundaries. Longer alternatives are tried first, and when two matches overlap the longer
# one wins (so "上一个版本" beats "上一个", "这个结果" beats "这个").
# ---------------------------------------------------------------------------------------------

# Bounded: a number is a few characters, and an unbounded run would make every start position of
# a long run of digits or numerals scan to its end.
NUM = r"[0-9]{1,4}|[零一二两三四五六七八九十百]{1,6}"
BATCH_NUM = r"[0-9]{1,4}|[两二三四五六七八九十]{1,4}"  # "这一张" is "this one", not a batch
NUM_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
ORDINAL_WORDS = {
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
EN_PLURAL = re.compile(
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
    "centre-left": ("中间偏左", "中间靠左", "居中偏左", "正中偏左", "中央偏左"),
    "centre-right": ("中间偏右", "中间靠右", "居中偏右", "正中偏右", "中央偏右"),
    "corners": ("四个角落", "四个角上", "四个角", "四角"),
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
    "centre-left": ("centre left", "center left", "left of centre", "left of center"),
    "centre-right": ("centre right", "center right", "right of centre", "right of center"),
    "corners": ("corners", "four corners", "corner ones", "corner images"),
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
        "the (?:previous|prior|earlier) version",
        "previous version",
        "one version (?:back|ago|before|earlier)",
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
    f"(?P<det>这|那)?(?P<count>几|些|{BATCH_NUM})?(?:张|幅|个)?{ZH_NOUN}?",
    f"我(?:刚才?|刚刚)?(?:选|挑|点|圈)了?的(?P<det>这|那)?(?P<count>几|些|{BATCH_NUM})?"
    f"(?:张|幅|个)?{ZH_NOUN}?",
    f"已选的?(?P<det>这|那)?(?P<count>几|些|{BATCH_NUM})?(?:张|幅|个)?{ZH_NOUN}?",
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
    f"(?:我|刚|刚刚|刚才){{0,2}}上传(?:的|了的|过的)(?:这|那)?(?P<count>几|些|{BATCH_NUM})?"
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
    (f"(?:这|那)(?P<count>{BATCH_NUM})(?:张|幅|个){ZH_NOUN}?(?:都|全都|全部)?", None, True, False),
    (f"(?:这|那)(?:几|些)(?:张|幅|个)?{ZH_NOUN}?(?:都|全都|全部)?", None, True, False),
    ("这俩", 2, True, False),
    (f"(?P<count>{BATCH_NUM})(?:张|幅|个){ZH_NOUN}?(?:都|全都|全部)", None, True, False),
    (f"(?:所有|全部)的?(?:{ZH_NOUNS}|结果|张)", None, True, False),
    (f"(?:所有|全部)的?(?P<count>{BATCH_NUM})(?:张|幅|个){ZH_NOUN}?", None, True, False),
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
    ("everything|every one of them|all(?= (?:but|except)\\b)", None, True, False),
    ("them", None, True, True),
)

COMPLEMENT_ZH: tuple[tuple[str, bool], ...] = (
    (f"另(?:一|外)一?(?:张|幅|个){ZH_NOUN}?|另外那张|剩下那张|剩下的那张", False),
    (f"(?:其他|其余|剩下)的?(?:(?P<count>{BATCH_NUM})(?:张|幅|个){ZH_NOUN}?|{ZH_NOUNS}|几张|张|那几张)?"
     f"|别的(?:{ZH_NOUNS}|几张|那几张)", True),
)
COMPLEMENT_EN: tuple[tuple[str, bool], ...] = (
    ("the other (?:one|image|picture|photo)|the remaining (?:one|image|picture)", False),
    (
        r"the other (?:ones|images|pictures|photos)|the others"
        r"|the rest(?: of them)?|the remaining (?:ones|images|pictures)",
        True,
    ),
    # "the other three": the count must agree with what is left
    (rf"(?:the )?(?:other|remaining) (?P<count>{EN_COUNT})(?: {EN_NOUN})?", True),
)

# Negation cues: "pre" cues exclude the next reference(s) in their clause, "post" cues the one(s)
# just before them ("左边的别动", "the left one stays untouched").
NEGATION_PRE_ZH = (
    "不要|不用|不需要|无需|不必|不想|(?<![特区分差告级识类性个])别|(?<!是)不是|并非|而不是|除了|除去|"
    "排除|跳过|保留|保持|不改|不动|勿"
)
NEGATION_POST_ZH = (
    "别动|不要动|不动|不用动|别改|不要改|不改|不用改|不变|保持不变|保持原样|保留|除外|"
    "不要了|别管|不用管|先不动|别碰|不要碰|"
    # a rejection: "最后两版都不对，再往前一版"
    "不对|不行|错了|不满意|不好(?![看玩听说意用])"
)
NEGATION_PRE_EN = (
    r"\b(?:not|neither|nor|don'?t|do not|never|leave|keep|except(?: for)?|excluding|exclude|"
    r"other than|"
    r"but not|instead of|rather than|without|skip|ignore|avoid|no longer)\b"
)
NEGATION_POST_EN = (
    r"\b(?:alone|as[ -]is|as it is|unchanged|untouched|intact|wrong|no good|not right)\b"
)
# Source cues: the reference after them is a model to copy, not the image to change.
SOURCE_ZH = "(?<![图好不])像|参考|按照|根据|照着|仿照|模仿|比照|对照|依照"
SOURCE_EN = (
    r"\b(?:(?:look|looks|looking|be|more|just|exactly)\s+like|similar\s+to|based\s+on|"
    r"in\s+the\s+style\s+of|the\s+(?:style|colou?rs?|palette|lighting|look)\s+of|to\s+match|"
    r"matching|as\s+in|inspired\s+by|according\s+to|"
    r"the\s+same\s+as)\b"
)
# What ends a cue's reach: clause punctuation and contrast words.
BREAK = re.compile(
    r"[,.;!?，。；！？\n]|而是|但是|但|不过|然后|并且|而且|\b(?:and|but|then|instead|rather|so|while)\b"
)
# Text allowed between two references that share one cue ("不要左边的和右边的").
JOIN = re.compile(
    r"^(?:\s|[、&/+]|和|与|跟|及|以及|还有|或者|或是|或|也|都|全都|全部|"
    r"\b(?:and|or|nor|plus|as well as|also|the)\b)*$"
)
EITHER = re.compile(r"^\s*(?:的)?\s*(?:或者|或是|或|还是|\bor\b)\s*$")
POST_GAP = re.compile(
    r"^(?:\s|的|都|也|就|全都|全部|先|暂时|请|要|"
    r"\b(?:is|are|stays?|remains?|should|must|be|left|kept|please)\b)*$"
)
# "选中的第二张", "上一轮的第二张" / "the second of the selected ones".
SCOPE_BEFORE = re.compile(r"^\s*(?:的|里的|中的|里面的|当中的|之中的|里|中)?\s*$")
SCOPE_AFTER = re.compile(r"^\s*(?:of|among|from|in|out of)\s*$")
# "左边那张的原图" / "the original of the left one".
ANCHOR_BEFORE = re.compile(r"^\s*(?:的|'s)?\s*$")
ANCHOR_AFTER = re.compile(r"^\s*of\s*$")
# "用左边那张的风格…": a reference whose style is borrowed is a source.
BORROW_BEFORE = re.compile(r"(?:用|拿|以|按|照|\b(?:use|using|with|take|apply)\b)\s*$")
_STYLE_WORDS = "风格|色调|配色|构图|光线|光影|画风|滤镜|姿势|动作"
# "把第一张的风格用到第三张", "和原图一样": the reference is a model whatever precedes it.
SOURCE_AFTER = re.compile(
    rf"^\s*(?:的?(?:一样|一致|相同|类似|相似|那样|似的)|的(?:{_STYLE_WORDS})(?:用|应用|迁移|套|放|换|转)到"
    r"|'s\s+(?:style|colou?rs?|palette|lighting|look)\s+(?:to|onto|on)\b)"
)
BORROW_AFTER = re.compile(
    rf"^\s*(?:的(?:{_STYLE_WORDS})|'s\s+"
    r"(?:style|colou?rs?|palette|composition|lighting|look|pose|mood|vibe))"
)

# ---------------------------------------------------------------------------------------------
# Structure words: what the constructions in `patterns.py` combine into rows and columns, counting
# sides, turn results, version-chain positions and lists.
# ---------------------------------------------------------------------------------------------

# A line is a row or a column; its place along the other axis is a number or one of these words.
LINE_AXIS_ZH = {"排": "row", "行": "row", "列": "column"}
LINE_AXIS_EN = {"row": "row", "rows": "row", "column": "column", "columns": "column"}
LINE_PLACE: dict[str, str] = {
    **{w: "first" for w in ("最上面", "最上边", "最上方", "上面", "上边", "顶部", "最上", "上",
                            "最左边", "最左侧", "左边", "左侧", "最左", "左", "top", "upper",
                            "topmost", "left", "leftmost", "first")},
    **{w: "last" for w in ("最下面", "最下边", "最下方", "下面", "下边", "底部", "最下", "下",
                           "最右边", "最右侧", "右边", "右侧", "最右", "右", "最后", "bottom",
                           "lower", "bottommost", "right", "rightmost", "last")},
    **{w: "middle" for w in ("正中间", "中间", "中", "middle", "center", "centre", "central")},
}  # fmt: skip
# Words naming the side a count starts from: a row is counted from the left or the right, a
# column from the top or the bottom; "from the end" is reading order backwards.
COUNT_FROM: dict[str, tuple[str | None, int]] = {
    "左": ("row", 1), "右": ("row", -1), "上": ("column", 1), "下": ("column", -1),
    "顶": ("column", 1), "底": ("column", -1),
    "left": ("row", 1), "right": ("row", -1), "top": ("column", 1), "bottom": ("column", -1),
    "end": (None, -1), "last": (None, -1),
}  # fmt: skip
# Heads that make an ordinal count the latest turn's results ("第三个结果", "the third variant").
RESULT_HEAD_ZH = "结果|变体|方案|选项|候选"
RESULT_HEAD_EN = r"(?:variant|variation|result|output|option|candidate|generation)s?"
# The demonstrative or head of an image reference that the parse did not read: such a text refers
# to an image in words the rules cannot follow ("有猫的那张", "the blurry one"): it is asked about.
UNREAD_ZH = (
    # a modifier before the demonstrative; a verb or 把 before it is fine ("把那张调亮")
    r"(?:的|[^\x01\s,.;!?，。；！？把将改用给让对要是选换调和跟与及或再就先都也])"
    r"(?:那|这)一?(?:张|幅|版)",
    r"(?:那|这)一?(?:张|幅|个)[^\x01\s,.;!?，。；！？]{1,10}的(?=$|[\s,.;!?，。；！？])",
    r"的(?:那|这)(?:个|几张|些)",
    r"第[0-9零一二两三四五六七八九十百]{1,6}(?:排|行|列|张|个|幅|版|号)|倒数",
    r"[0-9零一二两三四五六七八九十]{1,6}个版本",
    # an image named by where it is relative to another: "中间那张周围的", "选中的旁边那张"
    r"\x01的?(?:周围|旁边|附近|隔壁|对面|之间|两边|两侧|上边的|下边的|左边的|右边的)",
    r"第[0-9零一二两三四五六七八九十百]{1,6}(?=到|至|-|~)",
)
UNREAD_EN = (
    r"\bthe (?:one|ones|image|images|picture|pictures|photo|photos|pic|pics) "
    r"(?:with|of|that|which|where|showing|having|without|from|in|on|at)\b",
    r"\bthe (?!(?:same|whole|entire|other|current|edited|new|final|\x01)\b)[a-z]+ "
    r"(?:one|ones|image|images|picture|pictures|photo|photos|pic|pics)\b"
    r"(?! (?:shade|bit|step|notch|level|tone|stop|degree|touch)s?\b)",  # "one shade bluer"
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|[0-9]+(?:st|nd|rd|th))"
    r" (?:row|column|version|variant|result)s?\b",
    # a row, a column or versions the parse did not take in: "row 2, image 3" half read
    r"\b(?:rows?|columns?)\b",
    r"\b(?:[0-9]+|one|two|three|four|five|six|seven|eight|nine|ten|a) versions?\b",
    r"\b(?:next to|beside|around|above|below|under|underneath|near|between|left of|right of)"
    r"\s+(?:the\s+)?\x01",
)
# Cues that mean "all of them but": the rest of the images are the targets ("除了第二张", "all but
# the last"); other negation cues only take images out ("不要改左边那张").
ALL_BUT = re.compile(
    r"^(?:除了|除去|除开|除却)|\b(?:except(?: for)?|excluding|other than|but|apart from)\b"
)
# A line and what is counted in it: "第二排 second one", "third row 第一个" / "the rightmost in
# the bottom row".
LINE_BEFORE = re.compile(
    r"^\s*(?:的|里的|中的|里面的|里面|里边的|里边|当中的|当中|之中的|里|中|,|，)?\s*$"
)
LINE_AFTER = re.compile(r"^\s*(?:in|of|on|from|在)\s*$")
# "all but the last", "everything except the corners": "but" right after a batch word is a cue
BUT_AFTER_BATCH = r"|(?<=\x01 )but\b"
