"""The lexicon compiled into the regexes the reference scanner runs: which constructions combine
the words of `gateway/resolution/lexicon.py` into positions, ordinals and the other kinds."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

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
    NUM,
    POSITION_ROWS_ZH,
    POSITIONS_EN,
    POSITIONS_ZH,
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
    zh_rows = _alternation(w for words in POSITION_ROWS_ZH.values() for w in words)
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
        rf"(?:the\s+)?(?:very\s+)?(?P<pos>{en_pos})(?:\s+(?:side|corner|edge|row|column))?\b",
        rf"\bthe\s+(?P<pos>{en_pos})\s+(?P<count>{EN_COUNT})\b(?:\s+{EN_NOUN})?",
        rf"\bthe\s+(?P<count>{EN_COUNT})\s+(?:{EN_NOUN}\s+)?(?:on|at|in)\s+the\s+(?P<pos>{en_pos})"
        r"(?:\s+(?:side|corner|row|column))?\b",
        r"\bthe\s+(?P<pos>leftmost|rightmost|topmost|bottommost|uppermost)\b",
        # "the left or the right one", "the top and bottom images"
        rf"\b(?:the\s+)?(?P<pos>{en_pos})(?=\s+(?:and|or)\s+(?:the\s+)?(?:{en_pos})[\s-]+{EN_IMAGE}\b)",
    ]
    patterns = [Pattern("position", "", _compile(p), 5) for p in zh]
    patterns += [Pattern("position", "", re.compile(p), 5) for p in en]
    patterns.append(Pattern("position", "", _compile(f"(?P<row>{zh_rows})"), 5, plural=True))
    rows_en = r"\bthe\s+(?P<row>top|bottom|upper|lower|first|last)\s+row\b"
    cols_en = r"\bthe\s+(?P<row>left|right|first|last)\s+column\b"
    patterns += [
        Pattern("position", "", re.compile(p), 5, plural=True) for p in (rows_en, cols_en)
    ]
    return patterns


def _ordinal_patterns() -> list[Pattern]:
    noun = f"{ZH_CLASSIFIER}{ZH_NOUN}?"
    zh = [
        (rf"倒数第(?P<rev>{NUM}){ZH_CLASSIFIER}?{ZH_NOUN}?", None),
        (rf"第(?P<n>{NUM}){noun}", None),
        (rf"第(?P<n>{NUM})(?=$|[\s,.;:!?，。；：！？、]|和|与|跟|或|也|都)", None),
        (rf"最后(?:一|那|这)?{noun}|最后面的?那?{noun}", -1),
        (rf"最后的?(?P<last>{BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![之以然最])前(?P<first>{BATCH_NUM})(?:张|个|幅)", None),
        (rf"(?<![之以然最])后(?P<last>{BATCH_NUM})(?:张|个|幅)", None),
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
    return [Pattern("ordinal", "nth", re.compile(p), 4, index=i) for p, i in zh + en]


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
    _simple_patterns() + _ordinal_patterns() + _position_patterns()
)
POSITION_LOOKUP: dict[str, str] = {
    **{w: value for value, words in POSITIONS_ZH.items() for w in words},
    **{w: value for value, words in POSITIONS_EN.items() for w in words},
    **{w: value for value, words in POSITION_ROWS_ZH.items() for w in words},
    **{"左": "left", "右": "right", "上": "top", "下": "bottom", "中": "middle"},
    **{"upper": "top", "lower": "bottom", "first": "top", "last": "bottom"},
}
