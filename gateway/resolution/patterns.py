"""The lexicon compiled into the regexes the reference scanner runs: which constructions combine
the words of `gateway/resolution/lexicon.py` into positions, ordinals and the other kinds."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from re import _parser as _regex_parser  # type: ignore[attr-defined]
from typing import Any

from gateway.resolution.lexicon import (
    BATCH_EN,
    BATCH_NUM,
    BATCH_ZH,
    CHAIN_EN,
    CHAIN_ZH,
    COMPLEMENT_EN,
    COMPLEMENT_ZH,
    EN_COUNT,
    EN_IMAGE,
    EN_NOUN,
    EN_ORD,
    LINE_PLACE,
    NUM,
    NUM_WORDS,
    POSITIONS_EN,
    POSITIONS_ZH,
    RESULT_HEAD_EN,
    RESULT_HEAD_ZH,
    SELECTION_EN,
    SELECTION_ZH,
    THIS_EN,
    THIS_ZH,
    UPLOAD_EN,
    UPLOAD_ZH,
    ZH_CLASSIFIER,
    ZH_NOUN,
    Kind,
)


def _char_script(code: int) -> str | None:
    if 0x3400 <= code <= 0x9FFF:
        return "cjk"
    return "latin" if chr(code).isascii() and chr(code).isalpha() else None


def _required(items: Any) -> frozenset[str]:
    """The scripts (cjk, latin) every match of a parsed regex must contain a character of.

    Conservative: an optional part, a lookaround or a class mixing scripts requires nothing.
    """
    need: set[str] = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            script = _char_script(av)
            need |= {script} if script else set()
        elif name == "IN":
            scripts = set()
            for member, value in av:
                if str(member) == "LITERAL":
                    scripts.add(_char_script(value))
                elif str(member) == "RANGE":
                    scripts |= {_char_script(value[0]), _char_script(value[1])}
                else:
                    scripts.add(None)
            if len(scripts) == 1 and None not in scripts:
                need |= scripts  # type: ignore[arg-type]
        elif name == "BRANCH":
            need |= frozenset.intersection(*(_required(branch) for branch in av[1]))
        elif name == "SUBPATTERN":
            need |= _required(av[-1])
        elif name == "ATOMIC_GROUP":
            need |= _required(av)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and av[0] >= 1:
            need |= _required(av[2])
    return frozenset(need)


def required_scripts(regex: re.Pattern[str]) -> frozenset[str]:
    return _required(_regex_parser.parse(regex.pattern, regex.flags))


@dataclass(frozen=True)
class Pattern:
    kind: Kind
    value: str  # "" means: read it from the match (positions, ordinals)
    regex: re.Pattern[str]
    priority: int  # breaks ties between overlapping matches of equal length
    index: int | None = None
    count: int | None = None
    plural: bool = False
    weak: bool = False
    results: bool = False  # an ordinal that counts the most recent turn's results

    @cached_property
    def needs(self) -> frozenset[str]:
        """Scripts a text must contain for this pattern to be worth running on it."""
        return required_scripts(self.regex)


def _alternation(fragments: Iterable[str]) -> str:
    # Longest first so a longer phrase wins; ties in text order, so the pattern (and what it
    # matches) never depends on the hash seed.
    return "|".join(sorted(set(fragments), key=lambda fragment: (-len(fragment), fragment)))


def _en(fragment: str) -> str:
    # spaces in English fragments match any run of spaces or hyphens
    return r"\b(?:" + fragment.replace(" ", r"[\s-]+") + r")\b"


def _compile(fragment: str) -> re.Pattern[str]:
    return re.compile(fragment)


def _position_patterns() -> list[Pattern]:
    zh_pos = _alternation(w for words in POSITIONS_ZH.values() for w in words)
    en_pos = _alternation(w.replace(" ", "[\\s-]+") for ws in POSITIONS_EN.values() for w in ws)
    after_de = (
        r"(?=$|[\s,.;:!?，。；：！？、)）]|和|与|跟|及|以|还|也|都|再|改|换|变|调|弄|做|修|去|删|"
        r"放|重|生|用|加|保|别|不|就|要|请|给|让|转|原|上一|前一|最初|那|这)"
    )
    zh = [
        rf"(?P<pos>{zh_pos})(?:的)?(?:那|这)?(?P<count>{BATCH_NUM}|一)?{ZH_CLASSIFIER}{ZH_NOUN}?",
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
        rf"(?:the\s+)?(?:very\s+)?(?P<pos>{en_pos})(?:\s+(?:side|corner|edge))?\b"
        r"(?!\s+(?:row|column)s?\b)",
        rf"\bthe\s+(?P<pos>{en_pos})\s+(?P<count>{EN_COUNT})\b(?:\s+{EN_NOUN})?",
        rf"\bthe\s+(?P<count>{EN_COUNT})\s+(?:{EN_NOUN}\s+)?(?:on|at|in)\s+the\s+(?P<pos>{en_pos})"
        r"(?:\s+(?:side|corner|row|column))?\b",
        r"\bthe\s+(?P<pos>leftmost|rightmost|topmost|bottommost|uppermost)\b",
        # "the left or the right one", "the top and bottom images"
        rf"\b(?:the\s+)?(?P<pos>{en_pos})(?=\s+(?:and|or)\s+(?:the\s+)?(?:{en_pos})[\s-]+{EN_IMAGE}\b)",
    ]
    # Chinese mixed with English: an English position with a Chinese head ("top-left 的那个",
    # "left 那张") and a Chinese position with an English head ("the 最右边 one").
    zh += [
        rf"\b(?P<pos>{en_pos})\s*(?:的)?\s*(?:那|这)?(?P<count>{BATCH_NUM}|一)?{ZH_CLASSIFIER}{ZH_NOUN}?",
        rf"\b(?P<pos>{en_pos})\s*的{after_de}",
        rf"(?P<pos>{zh_pos})(?:的)?\s*(?:(?:that|this|the)\s+)?{EN_IMAGE}\b",
        # the whole message is a position: "中间偏左", "centre-right"
        rf"^(?P<pos>{zh_pos})(?:的|那张|那个)?$",
        rf"^(?:the\s+)?(?P<pos>{en_pos})(?:[\s-]+most)?(?:\s+{EN_IMAGE})?[.!]?$",
        rf"(?P<pos>{_alternation(POSITIONS_ZH['corners'])})(?:上|里)?(?:的)?(?:那|这)?"
        rf"(?:{BATCH_NUM}|几)?{ZH_CLASSIFIER}?{ZH_NOUN}?",
    ]
    en += [
        # "the top of the right column", "the rightmost in the bottom row": read with the line
        rf"\bthe\s+(?P<pos>{en_pos})(?:[\s-]*most)?(?:\s+{EN_IMAGE})?(?=\s+(?:in|of|on)\s+the\b)",
        r"\b(?:the\s+)?(?:four\s+)?(?P<pos>corners)\b(?:\s+(?:ones|images|pictures|photos))?",
    ]
    # a bare place right after an exclusion cue: "除了左上角，…", "all but the top-left, …"
    excluded = (
        r"(?:(?<=除了)|(?<=除去)|(?<=除开)|(?<=\bbut )|(?<=\bexcept )|(?<=\bexcept for )"
        r"|(?<=\bexcluding )|(?<=\bother than )|(?<=\bapart from ))"
        rf"\s*(?:the\s+)?(?P<pos>{zh_pos}|{en_pos})(?:的)?(?=\s*(?:$|[,.;:!?，。；：！？、]))"
    )
    zh.append(excluded)
    patterns = [Pattern("position", "", _compile(p), 5) for p in zh]
    patterns += [Pattern("position", "", re.compile(p), 5) for p in en]
    return patterns


# ---------------------------------------------------------------------------------- lines
#
# A row or a column, named by number from either end or by place, alone ("最下面一排", "the whole
# second column", a set) or with the image inside it ("第三排第二个", "third row, second picture").

_LINE_PLACE_ZH = _alternation(w for w in LINE_PLACE if not w.isascii())
_LINE_PLACE_EN = _alternation(w for w in LINE_PLACE if w.isascii())
_EN_ORD_LAST = f"{EN_ORD}|last"


def _line_patterns() -> list[Pattern]:
    zh_pos = _alternation(w for words in POSITIONS_ZH.values() for w in words)
    en_pos = _alternation(w.replace(" ", "[\\s-]+") for ws in POSITIONS_EN.values() for w in ws)
    from_side = r"从(?P<lfrom>上|下|左|右|顶|底)(?:边|面|部)?(?:往|向)?(?:上|下|左|右)?数?起?的?"
    zh_line = (
        rf"(?:整个|整)?(?:倒数第(?P<lrev>{NUM})|{from_side}第(?P<lfromn>{NUM})|第(?P<ln>{NUM})"
        rf"|(?P<lword>{_LINE_PLACE_ZH}|\b(?:{_LINE_PLACE_EN})\s*)(?:的)?(?:那|这)?"
        rf"(?:一|(?P<lcount>{BATCH_NUM}))?)(?P<axis>排|行|列)"
    )
    zh_item = (
        rf"(?:的|里的|中的|里面的|里面|里|中|,|，)?\s*(?:倒数第(?P<irev>{NUM})"
        rf"|(?:从?(?P<iside>左|右)(?:边|面|侧)?(?:往(?:左|右))?(?:数起?|起)?的?)?第(?P<in>{NUM})"
        rf"|(?P<ipos>{zh_pos}))(?:的)?(?:那|这)?一?{ZH_CLASSIFIER}?{ZH_NOUN}?"
        rf"|(?:的)?(?P<single>(?:那|这)一?{ZH_CLASSIFIER}){ZH_NOUN}?"
    )
    en_line = (
        rf"\b(?:the\s+)?(?:whole\s+|entire\s+)?(?P<lword>{EN_ORD}|{_LINE_PLACE_EN})(?:[\s-]*most)?"
        rf"\s+(?P<axis>row|column)s?(?:\s+from\s+the\s+(?P<lend>top|bottom|left|right|end))?"
    )
    en_numbered = (
        rf"\b(?P<axis>row|column)\s*#?\s*(?P<ln>[0-9]+|{'|'.join(NUM_WORDS)})\b"
    )
    en_item = (
        rf"(?:\s*,\s*|\s+)(?:the\s+)?(?:(?P<iord>{_EN_ORD_LAST})(?:[\s-]+(?:to[\s-]+)?(?P<ilast>last))?"
        rf"|(?P<ipos>{en_pos})(?:[\s-]*most)?|(?:image|picture|photo|pic|one)\s*#?\s*(?P<in>[0-9]+))"
        rf"(?:\s+{EN_IMAGE})?\b"
    )
    zh_list = (
        rf"第(?P<llist>(?:{NUM})(?:(?:和|、|跟|与|,|，)第?(?:{NUM})){{1,9}})(?P<axis>排|行|列)"
    )
    en_count = (
        rf"\b(?:the\s+)?(?:(?P<lword>{_LINE_PLACE_EN})(?:[\s-]*most)?\s+(?P<lcount>{EN_COUNT})"
        rf"|(?P<lcount2>{EN_COUNT})\s+(?P<lword2>{_LINE_PLACE_EN})(?:[\s-]*most)?)"
        r"\s+(?P<axis>row|column)s\b"
    )
    en_list = (
        rf"\b(?:the\s+)?(?P<llist>(?:{EN_ORD})(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+)(?:the\s+)?"
        rf"(?:{_EN_ORD_LAST})){{1,9}})\s+(?P<axis>row|column)s\b"
    )
    # a place of a row then a place along it, or of a column then along it: "最下面中间那张",
    # "上面左边那张", "左边中间那张", "the top middle one", "the bottom centre image"
    tail = rf"(?:的)?(?:那|这)?一?{ZH_CLASSIFIER}?{ZH_NOUN}?"
    row_then = (
        r"(?P<lword>最上面|最上边|上面|上边|顶部|最下面|最下边|下面|下边|底部|中间)(?:一排)?的?"
        rf"(?P<ipos>最左边|左边|最右边|右边|正中间|中间){tail}(?P<rowaxis>)"
    )
    column_then = (
        r"(?P<lword>最左边|左边|最左|最右边|右边|最右)(?:一列)?的?"
        rf"(?P<ipos>最上面|上面|最下面|下面|正中间|中间){tail}(?P<columnaxis>)"
    )
    en_then = (
        r"\b(?:the\s+)?(?:(?P<lword>top|bottom|upper|lower)[\s-]+(?P<ipos>middle|center|centre)"
        r"|(?P<lword2>middle)[\s-]+(?P<ipos2>left|right))(?:[\s-]+(?:one|image|picture|photo))?\b"
        r"(?P<rowaxis>)"
    )
    return [
        Pattern("line", "", _compile(row_then), 5, plural=True),
        Pattern("line", "", _compile(column_then), 5, plural=True),
        Pattern("line", "", re.compile(en_then), 5, plural=True),
        Pattern("line", "", _compile(zh_line + f"(?:{zh_item})?"), 5, plural=True),
        Pattern("line", "", re.compile(en_line + f"(?:{en_item})?"), 5, plural=True),
        Pattern("line", "", re.compile(en_numbered + f"(?:{en_item})?"), 5, plural=True),
        Pattern("line", "", _compile(zh_list), 5, plural=True),
        Pattern("line", "", re.compile(en_list), 5, plural=True),
        Pattern("line", "", re.compile(en_count), 5, plural=True),
    ]


def _ordinal_patterns() -> list[Pattern]:
    noun = f"{ZH_CLASSIFIER}{ZH_NOUN}?"
    zh = [
        (rf"倒数第(?P<rev>{NUM}){ZH_CLASSIFIER}?{ZH_NOUN}?", None),
        (rf"第(?P<n>{NUM}){noun}", None),
        (rf"第(?P<n>{NUM})(?=$|[\s,.;:!?，。；：！？、]|和|与|跟|或|也|都)", None),
        (rf"最后(?:一|那|这)?{noun}|最后面的?那?{noun}", -1),
        (rf"头一{noun}", 1),  # "头一张", "頭一張": the first
        (rf"最后的?(?P<last>{BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![之以然最])前(?P<first>{BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![之以然最])后(?P<last>{BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![原底参母源初始贴])图(?P<n>{NUM})(?!样|下|点|些|起|直|定|致|般|共|模|标|层)", None),
        (rf"(?P<n>{NUM})号(?:图片|图像|图|作品)", None),
        # "把3号调亮": a number with 号 before a verb or a boundary ("3号色", "12月3号" are not)
        (rf"(?<![月0-9])(?P<n>{NUM})号(?=$|[\s,.;!?，。；！？]|(?:那|这)(?:张|幅)|的|调|改|换|再|变|加|去|删|用)",
         None),
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
    side_zh = r"(?:从)?(?P<side>左|右|上|下|顶|底)(?:边|面|侧|部)?(?:往(?:左|右|上|下))?"
    en_head = r"(?:one|image|picture|photo|pic)"
    counted = [
        # counting from a side: "从右数第二个", "右边第二个", "third from the right",
        # "second from last"
        (rf"{side_zh}(?:数起?|起)的?第(?P<n>{NUM}){ZH_CLASSIFIER}?{ZH_NOUN}?", None),
        (rf"(?P<side>左|右)(?:边|面|侧)的?第(?P<n>{NUM}){ZH_CLASSIFIER}{ZH_NOUN}?", None),
        (rf"\b(?:the\s+)?(?P<ord>{EN_ORD})(?:[\s-]+{en_head})?[\s-]+from[\s-]+(?:the[\s-]+)?"
         r"(?P<side>left|right|top|bottom|end|last)\b", None),
        # lists sharing one head: "第1、3、5张", "1st and 3rd", "first, third and fifth"
        (rf"第(?P<list>(?:{NUM})(?:(?:、|,|，|和|跟|与)第?(?:{NUM})){{1,9}})"
         rf"{ZH_CLASSIFIER}{ZH_NOUN}?", None),
        (rf"\b(?:the\s+)?(?P<list>(?:{EN_ORD})(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+)(?:the\s+)?"
         rf"(?:{EN_ORD}|last)){{1,9}})(?:\s+{EN_NOUN})?\b", None),
        # Chinese mixed with English: "third 那张", "last 那个", "first 和 last", "第二个 picture"
        (rf"\b(?P<ord>{EN_ORD}|last)\s*(?:的)?\s*(?:那|这)?一?{ZH_CLASSIFIER}{ZH_NOUN}?", None),
        (rf"\b(?P<ord>{EN_ORD}|last)\b(?=\s*(?:和|跟|与|、))", None),
        (rf"(?<=[和跟与、])\s*(?P<ord>{EN_ORD}|last)\b", None),
        (rf"第(?P<n>{NUM}){ZH_CLASSIFIER}?\s*{EN_NOUN}\b", None),
    ]
    ranges = [
        (rf"第(?P<rfrom>{NUM})(?:张|个|幅)?(?:到|至|-|~)第?(?P<rto>{NUM}){ZH_CLASSIFIER}{ZH_NOUN}?",
         None),
        (r"\b(?:images?|pictures?|photos?|pics?|the)\s+#?(?P<rfrom>[0-9]{1,4})\s*(?:to|through|-)\s*"
         r"#?(?P<rto>[0-9]{1,4})\b", None),
    ]
    counted += ranges
    results = [
        (rf"第(?P<n>{NUM})(?:个|张|幅)?\s*(?:{RESULT_HEAD_ZH}|{RESULT_HEAD_EN}\b)", None),
        (rf"倒数第(?P<rev>{NUM})(?:个|张|幅)?(?:{RESULT_HEAD_ZH})", None),
        (rf"最后一?(?:个|张|幅)?(?:{RESULT_HEAD_ZH})", -1),
        (rf"\b(?P<ord>{EN_ORD}|last)\s*(?:的)?\s*(?:那|这)?一?(?:个|张)?\s*"
         rf"(?:{RESULT_HEAD_ZH}|{RESULT_HEAD_EN}\b)", None),
        (rf"\b(?:the\s+)?(?P<ord>{EN_ORD}|last)[\s-]+{RESULT_HEAD_EN}\b", None),
        (rf"\b(?:the\s+)?(?P<list>(?:{EN_ORD})(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+)(?:the\s+)?"
         rf"(?:{EN_ORD}|last)){{1,9}})\s+{RESULT_HEAD_EN}\b", None),
        (r"\b(?:variant|variation|result|output|option|candidate)\s*#?\s*"
         r"(?P<n>[0-9]+|one|two|three|four|five|six|seven|eight|nine)\b", None),
    ]
    patterns = [Pattern("ordinal", "nth", re.compile(p), 4, index=i) for p, i in zh + en + counted]
    patterns += [
        Pattern("ordinal", "nth", re.compile(p), 3, index=i, results=True) for p, i in results
    ]
    return patterns


# --------------------------------------------------------------------------- the version chain


def _chain_position_patterns() -> list[Pattern]:
    """Every place of a version chain: "上上个版本", "two versions back", "第3版", "the first
    generated version", "the second-to-last version" (the plain root/parent/latest words are
    lexicon entries)."""
    en_n = rf"{EN_COUNT}|one|a"
    parent = [
        r"(?P<ups>(?:上|前){2,6})一?(?:个|版)?(?:版本|版|\s*version\b)",
        rf"(?P<dn>{NUM})个版本(?:之前|以前|前)",
        rf"\b(?P<dn>{en_n})\s+versions?\s+(?:back|ago|before|earlier|prior)\b",
        rf"\b(?:go(?:ing)?\s+)?back\s+(?P<dn>{en_n})\s+versions?\b",
        r"上一?个\s*version\b",
    ]
    version = [
        rf"第(?P<vn>{NUM})个?(?:版本|版)(?![本画面图])",
        rf"倒数第(?P<vrev>{NUM})个?(?:版本|版)",
        rf"\bversion\s*#?\s*(?P<vn>[0-9]+|{'|'.join(NUM_WORDS)})\b",
        rf"\bthe\s+(?P<vord>{EN_ORD}|last)\s+version\b",
        rf"\bthe\s+(?P<vrev>{EN_ORD})[\s-]+(?:to[\s-]+)?last\s+version\b",
        r"\bthe\s+(?P<vpen>penultimate)\s+version\b",
    ]
    generated = [
        rf"第(?P<gn>{NUM})(?:个|次|张)(?:生成|编辑|修改|改)(?:后|之后|以后|完)?"
        rf"(?:的?(?:版本|那张|那幅|图片|图|结果)|{_ZH_IMAGE_END})",
        rf"\bthe\s+(?P<gord>{EN_ORD})\s+(?:generated|edited)\s+(?:version|image|one|picture)\b",
        rf"\bthe\s+(?P<gord>{EN_ORD})\s+(?:edit|generation)\b",
    ]
    # "最早那版", "原来的那个版本": a word for the start of the chain with a head
    root = (
        r"(?:最早|最初|最开始|一开始|原来|原始|初始)的?(?:那|这)?一?"
        r"(?:张|幅|版|个版本|版本|图片|图)"
    )
    mixed = [
        (root, "root"),
        (r"\boriginal\s*(?:的)?\s*(?:那|这)?一?(?:张|幅|个)(?:图)?", "root"),
        (r"\blatest\s*(?:的)?\s*(?:那|这)?一?(?:张|幅|个)(?:图)?", "latest"),
    ]
    patterns = [Pattern("chain", "parent", re.compile(p), 0) for p in parent]
    patterns += [Pattern("chain", "version", re.compile(p), 0) for p in version]
    patterns += [Pattern("chain", "generated", re.compile(p), 0) for p in generated]
    patterns += [Pattern("chain", value, re.compile(p), 0) for p, value in mixed]
    patterns += _chain_turn_patterns()
    return patterns


# what may follow a chain word in Chinese: "的", "那张", "的三张", "的图", "的结果"
_ZH_TAIL = (
    rf"(?:的?(?:(?P<count>{BATCH_NUM}|几)(?:张|幅|个)|(?:那|这)?一?(?:张|幅|个|版))?"
    r"(?:图片|图像|照片|图|结果)?)?"
)
_GAVE = r"(?:uploaded|sent(?:\s+you)?|gave\s+you|shared|attached)"
# after a chain word that is also content ("我一开始给你的要求", "第一次改的时候"): an image head,
# or 的 where the reference ends
_ZH_IMAGE_END = (
    r"(?:的?(?:那|这)?一?(?:张|幅|版)(?:图片|图像|照片|图)?|的?(?:图片|图像|照片|图|结果)|"
    r"的?(?=$|[\s,.;:!?，。；：！？、]|第|前|最|倒数|再|改|调|换|变|都|也|就|吧|呢|和|跟|与|或|"
    r"不|里|中|[a-z]))"
)
_EN_THING = r"(?:one|image|picture|photo|pic|version|result|output|attempt|try|edit|go)"


def _chain_turn_patterns() -> list[Pattern]:
    """The chain by turns (issue 25): rounds counted from the turn being resolved ("上上轮",
    "two rounds ago") or from the first ("第二轮的结果"); steps back ("退两步"); the original
    however it is named ("我一开始给你的那张", "the picture I began with"); the first or n-th
    generated turn ("最早生成的", "your first attempt"); the middle of the chain; counts of versions
    ("最近两版", "the first two versions"), every version; and "再往前一版" / "go back one more"
    (the version before the ones the text rejects)."""
    en_n = rf"{EN_COUNT}|one|a"
    zh_step = r"(?:往回退|往前退|往回|往前|回退|退回|后退|倒退|退)"
    rules: list[tuple[str, str, int | None, bool]] = [
        # rounds: -1 the latest turn, 1 the first that produced results
        (rf"(?P<rups>上{{2,6}})一?轮{_ZH_TAIL}", "round", None, False),
        (rf"(?P<rdn>{NUM})轮(?:之前|以前|前){_ZH_TAIL}", "round", None, False),
        (rf"倒数第(?P<rrev>{NUM})轮{_ZH_TAIL}", "round", None, False),
        (rf"上一?轮(?:之前|以前)(?:那轮)?{_ZH_TAIL}", "round", -2, False),
        (rf"第(?P<rn>{NUM})轮(?:生成)?{_ZH_TAIL}", "round", None, False),
        (rf"\b(?:the\s+(?:one|image|picture|result)s?\s+(?:from\s+)?)?(?P<rdn>{en_n})\s+"
         r"(?:rounds?|turns?)\s+(?:back|ago|before|earlier)\b", "round", None, False),
        (rf"\b(?:the\s+(?:results?|images?|pictures?|outputs?)\s+(?:of|from)\s+)?"
         rf"the\s+(?P<rord>{EN_ORD})\s+(?:round|turn)(?:'s)?(?:\s+(?:results?|images?|"
         r"outputs?))?\b", "round", None, False),
        (rf"第(?P<rn>{NUM})轮\s*(?=[a-z])", "round", None, False),
        (rf"最新(?:的)?(?P<count>{BATCH_NUM})(?:张|幅|个)(?:图片|图)?", "latest", None, False),
        # steps back from the anchor
        (rf"{zh_step}(?P<dn>{NUM})步(?!讲|说|来说|想|海阔){_ZH_TAIL}", "parent", None, False),
        (rf"(?P<dn>{NUM})步(?:之前|以前|前){_ZH_TAIL}", "parent", None, False),
        (r"\bthe\s+(?:version|one|image|picture)\s+(?:just|right|immediately)\s+before\s+"
         r"(?:this|that|it)(?:\s+(?:one|version|image))?\b", "parent", None, False),
        (r"\bthe\s+one\s+before(?=\s*(?:[,.;!?]|$))", "parent", None, False),
        (rf"\b(?:go(?:ing)?\s+)?back\s+(?P<dn>{en_n})\s+steps?\b", "parent", None, False),
        (rf"\b(?P<dn>{en_n})\s+steps?\s+(?:back|ago|before|earlier)\b", "parent", None, False),
        (r"\bthe\s+(?:one|image|picture|version)\s+before\s+the\s+(?:newest|latest|last|"
         r"most\s+recent)(?:\s+(?:one|image|picture|version|result))?\b", "parent", -2, True),
        (r"最新(?:的|那)?(?:一?(?:版|张|个))?(?:的)?(?:前一版|前一张|前一个|前面(?:那|一)版)",
         "parent", -2, True),
        # the original however the user names it
        (r"我?(?:一开始|最开始|刚开始|开始时|最早|最初|起初|起先|当初|原本)(?:时)?(?:给你|发给你|"
         rf"传给你|发|上传|传|给){_ZH_IMAGE_END}", "root", None, False),
        (r"\bthe\s+(?:one|image|picture|photo|pic|file)\s+(?:that\s+)?i\s+(?:first\s+)?"
         r"(?:began|begin|started|start)\s+(?:with|from)\b", "root", None, False),
        (rf"\bthe\s+(?:(?P<first>first)\s+)?(?:one|image|picture|photo|pic|file)\s+(?:that\s+)?"
         rf"i\s+(?(first)|(?:first|originally)\s+){_GAVE}\b", "root", None, False),
        (rf"\bthe\s+(?:one|image|picture|photo|pic|file)\s+(?:that\s+)?i\s+{_GAVE}\s+"
         r"(?:first|at\s+the\s+(?:start|beginning))\b", "root", None, False),
        (r"\bwhat\s+i\s+(?:gave|sent|showed)\s+you\s+(?:at\s+the\s+(?:start|beginning)|"
         r"first|originally|in\s+the\s+beginning)\b", "root", None, False),
        (r"我?(?:一开始|最开始|最早)(?:给你|发给你)的?\s*(?=[a-z])", "root", None, False),
        # the first (n-th) generated turn, all of them
        (rf"(?:最早|最先|最初|第一次)(?:生成|做|画|改|出)(?:后|之后|以后|完)?(?:的?(?P<count>{BATCH_NUM}|几)"
         rf"(?:张|幅|个)|{_ZH_IMAGE_END})", "generated", 1, False),
        (rf"第(?P<gn>{NUM})(?:个|次)\s*(?:generated?|edit(?:ed)?|made)\s*的?{_ZH_TAIL}",
         "generated", None, False),
        (rf"\b(?P<gord>{EN_ORD})\s+(?:generated|edited)\s*(?:的)?\s*(?:那|这)?一?(?:张|幅|个)",
         "generated", None, False),
        (r"\bthe\s+(?:earliest|oldest)\s+(?:generated\s+|edited\s+)?(?:result|output|"
         r"generation|attempt|try|edit)s?\b", "generated", 1, False),
        (r"\bthe\s+(?:earliest|oldest)\s+(?:generated|edited)\s+(?:one|image|picture|photo|"
         r"version)\b", "generated", 1, False),
        (rf"\bthe\s+(?P<gord>{EN_ORD})\s+(?:result|image|picture|one|version|photo)s?\s+"
         r"(?:that\s+)?you\s+(?:made|generated|created|produced|did|drew|rendered)\b",
         "generated", None, False),
        (rf"\byour\s+(?P<gord>{EN_ORD})\s+{_EN_THING}\b", "generated", None, False),
        (rf"前(?P<count>{BATCH_NUM})次(?:生成|编辑|修改|改)的?(?:版本|图片|图|结果)?",
         "generated", 1, False),
        (r"(?:你|您)(?:生成|做|画|出|改)的(?:图片|图)?(?:里|中|当中|里面)?(?:的)?(?=第|前|最后|倒数)",
         "generated", None, True),
        (r"\b(?:every|all(?:\s+of)?(?:\s+the)?)\s+(?:generated|edited)\s+(?:versions?|images?|"
         r"ones|results|pictures)\b", "generated", None, True),
        (r"所有(?:的)?(?:生成|改)的?(?:版本|图片|图|结果)|(?:生成|改)的所有版本", "generated", None,
         True),
        # the middle of the chain
        (r"(?:正)?中间(?:的|那)?(?:一|个|那个)?(?:版本|版)", "middle", None, False),
        (r"\bthe\s+(?:middle|central)\s+version\b", "middle", None, False),
        (r"\bthe\s+version\s+in\s+the\s+middle\b", "middle", None, False),
        (r"\bthe\s+middle\s+(?:one\s+)?(?:of|among)\s+(?:all\s+)?the\s+versions\b", "middle",
         None, False),
        (r"\bmiddle\s*(?:的)?\s*(?:那|这)?个?\s*(?:version\b|版本|版)", "middle", None, False),
        (r"\bthe\s+middle\s+(?:generated|edited)\s+(?:one|image|version|picture)\b",
         "middle-generated", None, False),
        # versions from either end, counts of versions, every version
        (r"\bthe\s+last[\s-]+but[\s-]+one\s+version\b", "version", -2, False),
        (rf"\bthe\s+(?P<vrev>{EN_ORD})\s+version\s+from\s+the\s+end\b", "version", None,
         False),
        (rf"倒数第(?P<vrev>{NUM})个?\s*version\b", "version", None, False),
        (rf"(?:最近|最后|最新)的?(?P<count>{BATCH_NUM})(?:个)?(?:版本|版)", "version", -1, False),
        (rf"(?:最早|最初|最前面|前)的?(?P<count>{BATCH_NUM})(?:个)?(?:版本|版)", "version", 1,
         False),
        (rf"\bthe\s+(?:last|latest|most\s+recent)\s+(?P<count>{EN_COUNT})\s+versions\b",
         "version", -1, False),
        (rf"\bthe\s+first\s+(?P<count>{EN_COUNT})\s+versions\b", "version", 1, False),
        (rf"\bthe\s+(?P<count>{EN_COUNT})\s+(?:most\s+recent|latest|last|newest)\s+versions\b",
         "version", -1, False),
        (rf"\bthe\s+(?P<vrev>{EN_ORD})\s+(?:newest|latest|most\s+recent)"
         r"(?:\s+(?:one|version|image|picture|result))?\b", "version", None, False),
        (r"\b(?:all(?:\s+of)?(?:\s+the)?|every)\s+versions?\b", "versions", None, True),
        (r"所有(?:的)?版本|全部(?:的)?版本|每(?:一)?个版本|每一版|其他(?:的)?(?:几个)?版本|"
         r"其余(?:的)?版本|之前的(?:所有|全部)?版本都", "versions", None, True),
        # one further back than the versions the text rejects
        (r"再往前一?(?:版|个|张|步)|再前一(?:版|个|张)|往前再一(?:版|个|张)|再往回一(?:版|个|张|步)",
         "before", None, False),
        (r"\b(?:go\s+)?back\s+one\s+more\b|\bone\s+(?:more|further)\s+back\b|"
         r"\bthe\s+(?:one|version)\s+before\s+(?:them|those|these)\b", "before", None, False),
    ]
    patterns = []
    for regex, value, index, plural_or_latest in rules:
        if value == "parent" and plural_or_latest:  # anchored on the latest result
            patterns.append(Pattern("chain", value, re.compile(regex), 0, index=index,
                                    results=True))
        else:
            patterns.append(Pattern("chain", value, re.compile(regex), 0, index=index,
                                    plural=plural_or_latest))
    return patterns


def _simple_patterns() -> list[Pattern]:
    patterns: list[Pattern] = []
    for value, words in CHAIN_ZH.items():
        patterns.append(Pattern("chain", value, _compile(_alternation(words)), 0))
    for value, words in CHAIN_EN.items():
        patterns.append(Pattern("chain", value, re.compile(_en(_alternation(words))), 0))
    for fragment in SELECTION_ZH:
        patterns.append(Pattern("selection", "selected", _compile(fragment), 2))
    for fragment in SELECTION_EN:
        patterns.append(Pattern("selection", "selected", re.compile(_en(fragment)), 2))
    mixed_selected = r"\bselected\s*(?:的)\s*(?:那|这)?(?:几|些)?(?:张|幅|个)?(?:图片|图)?"
    patterns.append(Pattern("selection", "selected", re.compile(mixed_selected), 2))
    patterns.append(Pattern("selection", "this", _compile(_alternation(THIS_ZH)), 2, weak=True))
    this_en = re.compile(_en(_alternation(THIS_EN)))
    patterns.append(Pattern("selection", "this", this_en, 2, weak=True))
    for fragment in UPLOAD_ZH:
        patterns.append(Pattern("upload", "uploaded", _compile(fragment), 1))
    for fragment in UPLOAD_EN:
        patterns.append(Pattern("upload", "uploaded", re.compile(_en(fragment)), 1))
    for fragment, count, plural, weak in BATCH_ZH:
        patterns.append(Pattern("batch", "all", _compile(fragment), 6, None, count, plural, weak))
    for fragment, count, plural, weak in BATCH_EN:
        regex = re.compile(_en(fragment))
        patterns.append(Pattern("batch", "all", regex, 6, None, count, plural, weak))
    for fragment, plural in COMPLEMENT_ZH:
        patterns.append(Pattern("complement", "other", _compile(fragment), 3, plural=plural))
    for fragment, plural in COMPLEMENT_EN:
        patterns.append(
            Pattern("complement", "other", re.compile(_en(fragment)), 3, plural=plural)
        )
    return patterns


PATTERNS: tuple[Pattern, ...] = tuple(
    _simple_patterns()
    + _chain_position_patterns()
    + _ordinal_patterns()
    + _position_patterns()
    + _line_patterns()
)
for _pattern in PATTERNS:  # derive each pattern's scripts at import, not on the first request
    _pattern.needs  # noqa: B018
POSITION_LOOKUP: dict[str, str] = {
    **{w: value for value, words in POSITIONS_ZH.items() for w in words},
    **{w: value for value, words in POSITIONS_EN.items() for w in words},
    **{"左": "left", "右": "right", "上": "top", "下": "bottom", "中": "middle"},
    **{"upper": "top", "lower": "bottom", "first": "top", "last": "bottom"},
}
