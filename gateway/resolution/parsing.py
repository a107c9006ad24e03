"""The text-reference parser: which images a chat message names, in Chinese and English.

Pure functions over a string. `gateway/resolution/resolver.py` decides what the references
point at; this module only finds them, folds compounds ("选中的第二张", "the original of the left
one") and marks each as a target, an exclusion ("不要改选中的", "not the left one") or a
source ("像原图一样").
To add an expression, add its words to `gateway/resolution/lexicon.py` (a new construction goes in
`gateway/resolution/patterns.py`) and a row to `tests/test_resolution_rules.py`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from opencc_purepy import OpenCC

from gateway.resolution.lexicon import (
    ALL_BUT,
    ANCHOR_AFTER,
    ANCHOR_BEFORE,
    BORROW_AFTER,
    BORROW_BEFORE,
    BREAK,
    COUNT_FROM,
    EITHER,
    EN_ORD,
    EN_PLURAL,
    JOIN,
    LINE_AXIS_EN,
    LINE_AXIS_ZH,
    LINE_PLACE,
    NEGATION_POST_EN,
    NEGATION_POST_ZH,
    NEGATION_PRE_EN,
    NEGATION_PRE_ZH,
    NUM_WORDS,
    ORDINAL_WORDS,
    POST_GAP,
    SCOPE_AFTER,
    SCOPE_BEFORE,
    SOURCE_AFTER,
    SOURCE_EN,
    SOURCE_ZH,
    UNREAD_EN,
    UNREAD_ZH,
    Kind,
)
from gateway.resolution.patterns import PATTERNS, POSITION_LOOKUP, Pattern

Role = Literal["target", "excluded", "source"]

_MAX_CUE_GAP = 24
LINE_BEFORE = re.compile(r"^\s*(?:的|里的|中的|里面的|当中的|里|中|,|，)?\s*$")
LINE_AFTER = re.compile(r"^\s*(?:in|of|on|from|在)\s*$")
# "all but the last", "everything except the corners": the cue follows a batch word
_BUT_AFTER_BATCH = r"|(?<=\x01 )but\b"
_SCOPE_KINDS = ("selection", "upload", "batch")
_ANCHOR_KINDS = ("position", "ordinal", "selection", "upload")


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
    # lines: "row" | "column"; ordinals counted from a side: the line they run along
    axis: str | None = None

    def describe(self) -> str:
        """A few English words for reasons: "the left image", "the 2nd image", "the original"."""
        if self.kind == "position":
            text = f"the {self.value} image" + ("s" if self.plural or self.count else "")
        elif self.kind == "ordinal":
            text = _describe_ordinal(self.index or 1, self.count)
            if self.axis is not None:
                side = {"row": ("left", "right"), "column": ("top", "bottom")}[self.axis]
                text += f" from the {side[(self.index or 1) < 0]}"
        elif self.kind == "chain":
            text = _describe_chain(self.value, self.index)
        elif self.kind == "line":
            place = "middle" if self.value == "middle" else _place(self.index or 1)
            text = f"the {place} {self.axis}"
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


def _place(index: int) -> str:
    return _nth(index) if index > 0 else ("last" if index == -1 else f"{_nth(-index)} to last")


def _describe_chain(value: str, index: int | None) -> str:
    if value == "root":
        return "the original"
    if value == "parent":
        back = -(index or -2) - 1
        return "the previous version" if back == 1 else f"the version {back} back"
    if value == "version":
        return f"the {_place(index or 1)} version"
    if value == "generated":
        return f"the {_nth(index or 1)} generated version"
    return "the latest result"


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_TO_SIMPLIFIED = OpenCC("t2s")
_CJK = "\u3400-\u9fff"
_DIGIT_SPACE = re.compile(rf"(?<=[{_CJK}])\s+(?=[0-9])|(?<=[0-9])\s+(?=[{_CJK}])")


def normalise_text(text: str) -> str:
    """NFKC (full-width digits and punctuation become ASCII), traditional script to simplified,
    lower case, single spaces, none between Chinese and digits ("第 10 个" is "第10个")."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    text = _TO_SIMPLIFIED.convert(text)
    return _DIGIT_SPACE.sub("", re.sub(r"\s+", " ", text).strip())


def parse_number(word: str) -> int | None:
    """ "3", "三", "十二", "两", "three" → int; None when it is not a small number."""
    if word.isascii() and word.isdigit():
        return int(word) if len(word) <= 4 else None
    if word in NUM_WORDS:
        return NUM_WORDS[word]
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
    if word in ORDINAL_WORDS:
        return ORDINAL_WORDS[word]
    digits = re.match(r"^([0-9]+)(?:st|nd|rd|th)$", word)
    return parse_number(digits.group(1)) if digits else None


def _build(pattern: Pattern, match: re.Match[str]) -> list[Reference]:
    """The references one match names: usually one, a list ("第1、3、5张") several."""
    groups = {k: v for k, v in match.groupdict().items() if v}
    plural = pattern.plural or bool(EN_PLURAL.search(match.group(0)))
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
            return []
        if count > 1:
            ref = replace(ref, count=count, plural=True)
    built: list[Reference | None]
    if pattern.kind == "line":
        built = _build_line(ref, groups, match)
    elif "list" in groups:
        built = _build_list(ref, match)
    elif pattern.kind == "position":
        built = [_build_position(ref, groups)]
    elif pattern.kind == "ordinal":
        built = [_build_ordinal(ref, groups)]
    elif pattern.kind == "chain":
        built = [_build_chain(ref, groups)]
    else:
        built = [ref]
    refs = [r for r in built if r is not None]
    if pattern.results:  # "第三个结果", "the third variant": counted among the turn's results
        results = Reference("chain", "latest", ref.start, ref.end, plural=True)
        refs = [replace(r, scope=results) for r in refs]
    return refs if len(refs) == len(built) else []


_LIST_ITEM = re.compile(rf"[0-9]+|[零一二两三四五六七八九十百]+|\b(?:{EN_ORD}|last)\b")


def _build_list(
    ref: Reference, match: re.Match[str], axis: str | None = None
) -> list[Reference | None]:
    """One reference per item of "第1、3、5张" / "first, third and fifth" / "第一和第三排"; each
    spans its own item (the first from the match start, the last to its end)."""
    group = "llist" if ref.kind == "line" else "list"
    offset = match.start(group)
    items = list(_LIST_ITEM.finditer(match.group(group)))
    refs: list[Reference | None] = []
    for i, item in enumerate(items):
        n = parse_number(item.group(0)) or _parse_ordinal_word(item.group(0))
        start = match.start() if i == 0 else offset + item.start()
        if i and match.string[start - 1] == "第":  # "第一和第三张": the item is "第三"
            start -= 1
        end = match.end() if i == len(items) - 1 else offset + item.end()
        if ref.kind == "line":
            refs.append(replace(ref, value="nth", start=start, end=end, index=n, axis=axis,
                                plural=True) if n else None)
        else:
            refs.append(replace(ref, start=start, end=end, index=n, plural=False) if n else None)
    return refs


def _line_index(groups: dict[str, str], axis: str) -> tuple[str, int | None] | None:
    """(value, index) of a row or column: ("nth", 2), ("nth", -1) for the last, ("middle", None)."""
    if "lrev" in groups:
        n = parse_number(groups["lrev"])
        return ("nth", -n) if n else None
    if "lfromn" in groups:
        n = parse_number(groups["lfromn"])
        along, sign = COUNT_FROM[groups["lfrom"]]
        # rows are counted from the top or bottom (a column's direction), columns from a side
        if not n or along == axis:
            return None
        return "nth", sign * n
    if "ln" in groups:
        n = parse_number(groups["ln"])
        return ("nth", n) if n else None
    word = groups["lword"]
    place = LINE_PLACE.get(word)
    if place is None:
        n = _parse_ordinal_word(word)
        if not n:
            return None
        end = groups.get("lend")
        return "nth", -n if end in ("bottom", "right", "end") else n
    if place == "middle":
        return "middle", None
    return "nth", 1 if place == "first" else -1


def _build_line(
    ref: Reference, groups: dict[str, str], match: re.Match[str]
) -> list[Reference | None]:
    if "lword2" in groups:  # "the two left columns" reads as "the left two columns"
        groups = {**groups, "lword": groups["lword2"], "lcount": groups["lcount2"]}
    axis_word = groups["axis"]
    axis = LINE_AXIS_ZH.get(axis_word) or LINE_AXIS_EN[axis_word]
    if "llist" in groups:
        return _build_list(ref, match, axis)
    where = _line_index(groups, axis)
    if where is None:
        return [None]
    line = replace(ref, value=where[0], index=where[1], axis=axis, plural=True)
    if "lcount" in groups:  # "最左边两列", "the top two rows": that many lines from that side
        count = parse_number(groups["lcount"])
        if not count or where[0] != "nth":
            return [None]
        return [replace(line, count=count) if count > 1 else line]
    item: Reference | None
    if "irev" in groups or "in" in groups:
        n = parse_number(groups.get("irev") or groups["in"])
        index = (-n if "irev" in groups else n) if n else None
        item = Reference("ordinal", "nth", ref.start, ref.end, index=index) if index else None
    elif "iord" in groups:
        n = _parse_ordinal_word(groups["iord"])
        index = (-n if "ilast" in groups else n) if n else None
        item = Reference("ordinal", "nth", ref.start, ref.end, index=index) if index else None
    elif "ipos" in groups:
        value = POSITION_LOOKUP.get(re.sub(r"[\s-]+", " ", groups["ipos"]))
        item = Reference("position", value, ref.start, ref.end) if value else None
    else:  # the whole line, or "第二排那张": one image of it
        return [replace(line, plural="single" not in groups)]
    return [replace(item, scope=replace(line, start=ref.start, end=ref.end))] if item else [None]


def _build_chain(ref: Reference, groups: dict[str, str]) -> Reference | None:
    """Places of the version chain: parents by depth ("上上个版本": index -3, the anchor being -1),
    versions by number from the root (1) or from the end (-1), generated versions by number."""
    if ref.value == "parent":
        depth = 1
        if "ups" in groups:
            depth = len(groups["ups"])
        elif "dn" in groups:
            word = groups["dn"]
            depth = 1 if word in ("a", "one") else parse_number(word) or 0
        return replace(ref, index=-(depth + 1)) if depth > 0 else None
    if ref.value == "version":
        if "vpen" in groups:
            return replace(ref, index=-2)
        n = parse_number(groups.get("vn") or groups.get("vrev") or "") or _parse_ordinal_word(
            groups.get("vord") or groups.get("vrev") or ""
        )
        if not n:
            return None
        return replace(ref, index=-abs(n) if "vrev" in groups or n < 0 else n)
    if ref.value == "generated":
        n = parse_number(groups.get("gn", "")) or _parse_ordinal_word(groups.get("gord", ""))
        return replace(ref, index=n) if n and n > 0 else None
    return ref


def _build_position(ref: Reference, groups: dict[str, str]) -> Reference | None:
    word = groups.get("pos") or groups.get("row", "")
    key = re.sub(r"[\s-]+", " ", word)
    value = POSITION_LOOKUP.get(key)
    if value is None:
        return None
    return replace(ref, value=value, plural=ref.plural or "row" in groups)


def _build_ordinal(ref: Reference, groups: dict[str, str]) -> Reference | None:
    if "side" in groups:  # "从右数第二个", "third from the right", "second from last"
        n = parse_number(groups.get("n", "")) or _parse_ordinal_word(groups.get("ord", ""))
        axis, sign = COUNT_FROM[groups["side"]]
        return replace(ref, index=sign * n, axis=axis) if n and n > 0 else None
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


_SCRIPTS = {"cjk": re.compile("[\u3400-\u9fff]"), "latin": re.compile("[a-z]")}


def _scan(text: str) -> list[Reference]:
    found: list[tuple[int, int, int, list[Reference]]] = []
    scripts = {name for name, regex in _SCRIPTS.items() if regex.search(text)}
    for pattern in PATTERNS:
        if not pattern.needs <= scripts:
            continue
        for match in pattern.regex.finditer(text):
            if match.end() == match.start():
                continue
            built = _build(pattern, match)
            if built:
                length = match.end() - match.start()
                found.append((-length, pattern.priority, match.start(), built))
    found.sort(key=lambda item: item[:3])
    taken: list[Reference] = []
    for _, _, _, refs in found:
        if all(r.end <= o.start or r.start >= o.end for r in refs for o in taken):
            taken.extend(refs)
    return sorted(taken, key=lambda r: r.start)


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
    # "第二排 second one", "third row 第一个" / "the rightmost in the bottom row"
    if a.kind == "line" and b.kind in counted and b.scope is None and LINE_BEFORE.match(gap):
        return replace(b, start=a.start, scope=a)
    if a.kind in counted and a.scope is None and b.kind == "line" and LINE_AFTER.match(gap):
        return replace(a, end=b.end, scope=b)
    if _is_group(a) and not a.weak and b.kind in counted and SCOPE_BEFORE.match(gap):
        return replace(b, start=a.start, scope=a)
    if a.kind in counted and _is_group(b) and not b.weak and SCOPE_AFTER.match(gap):
        return replace(a, end=b.end, scope=b)
    relative = ("root", "parent")
    if _is_anchor(a) and b.kind == "chain" and b.value in relative and ANCHOR_BEFORE.match(gap):
        # "左边那张的原图" is one reference; "左边那张原图" (no 的) is two
        if gap.strip() or text[a.end - 1] == "的":
            return replace(b, start=a.start, scope=a)
    if a.kind == "chain" and a.value in relative and _is_anchor(b) and ANCHOR_AFTER.match(gap):
        return replace(a, end=b.end, scope=b)
    return None


def _shared_count(text: str, refs: list[Reference]) -> list[Reference]:
    """ "左上和右下那两张": a count after a list counts the list, not the last item."""
    out = list(refs)
    for i, ref in enumerate(refs):
        if ref.count and i:
            run = _joined_run(text, refs, i, -1)
            if len(run) == ref.count:
                out[i] = replace(ref, count=None, plural=False)
    return out


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
        if not JOIN.match(text[left.end : right.start]):
            break
        j += step
        run.append(j)
    return run


def _reach_forward(text: str, refs: list[Reference], cue_end: int) -> list[int]:
    for i, ref in enumerate(refs):
        if ref.start < cue_end:
            continue
        gap = text[cue_end : ref.start]
        if len(gap) > _MAX_CUE_GAP or BREAK.search(gap):
            return []
        return _joined_run(text, refs, i, 1)
    return []


def _reach_backward(text: str, refs: list[Reference], cue_start: int) -> list[int]:
    for i in range(len(refs) - 1, -1, -1):
        ref = refs[i]
        if ref.end > cue_start:
            continue
        if not POST_GAP.match(text[ref.end : cue_start]):
            return []
        return _joined_run(text, refs, i, -1)
    return []


def _assign_roles(text: str, refs: list[Reference]) -> tuple[list[Reference], bool]:
    """Each reference's role, and whether the text asks for all images but the excluded ones."""
    masked = _mask(text, refs)
    roles: dict[int, Role] = {}
    all_but = [False]
    # Batch words are fillers for cue reach, never excluded themselves.
    cuable = [r for r in refs if r.kind != "batch"]
    for _, end, _ in _cues(masked, SOURCE_ZH + "|" + SOURCE_EN, None):
        for i in _reach_forward(text, cuable, end):
            roles[cuable[i].start] = "source"
    for i, ref in enumerate(cuable):
        before = text[max(0, ref.start - 8) : ref.start]
        after = text[ref.end :]
        borrowed = BORROW_BEFORE.search(before) and BORROW_AFTER.match(after)
        if borrowed or SOURCE_AFTER.match(after):
            roles[cuable[i].start] = "source"
    pre = NEGATION_PRE_ZH + "|" + NEGATION_PRE_EN + _BUT_AFTER_BATCH
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
        if hits and ALL_BUT.search(masked[start:end]):
            all_but[0] = True
        if hits:
            # batch words inside a negated stretch ("其他的都不变") go with it
            low = min(start, cuable[hits[0]].start, cuable[hits[-1]].start)
            high = max(end, cuable[hits[0]].end, cuable[hits[-1]].end)
            for ref in refs:
                if ref.kind == "batch" and low <= ref.start and ref.end <= high:
                    roles[ref.start] = "excluded"
    out = [replace(r, role=roles.get(r.start, "target")) for r in refs]
    for i in range(1, len(out)):
        if EITHER.match(text[out[i - 1].end : out[i].start]):
            out[i] = replace(out[i], either=True)
    return out, all_but[0]


@dataclass(frozen=True)
class ParsedText:
    text: str  # the normalised text the spans refer to
    references: tuple[Reference, ...]
    all_but: bool = False  # "除了第二张", "all but the last": the rest are the targets
    unread: tuple[str, ...] = ()  # words that refer to an image in a way the parse did not read

    def with_role(self, role: Role) -> tuple[Reference, ...]:
        return tuple(r for r in self.references if r.role == role)


def _unread(text: str, refs: list[Reference]) -> tuple[str, ...]:
    masked = _mask(text, refs)
    return tuple(m.group(0) for regex in _UNREAD for m in regex.finditer(masked))


_UNREAD = tuple(re.compile(fragment) for fragment in (*UNREAD_ZH, *UNREAD_EN))


def parse_references(text: str) -> ParsedText:
    """Every image reference in `text`, in order, compounds folded and roles assigned."""
    normalised = normalise_text(text)
    refs = _shared_count(normalised, _fold(normalised, _scan(normalised)))
    with_roles, all_but = _assign_roles(normalised, refs)
    return ParsedText(normalised, tuple(with_roles), all_but, _unread(normalised, refs))
