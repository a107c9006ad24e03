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

from gateway.resolution.lexicon import (
    ANCHOR_AFTER,
    ANCHOR_BEFORE,
    BORROW_AFTER,
    BORROW_BEFORE,
    BREAK,
    EITHER,
    EN_PLURAL,
    JOIN,
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
    Kind,
)
from gateway.resolution.patterns import PATTERNS, POSITION_LOOKUP, Pattern

Role = Literal["target", "excluded", "source"]

_MAX_CUE_GAP = 24
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


def normalise_text(text: str) -> str:
    """NFKC (full-width digits and punctuation become ASCII), lower case, single spaces."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text).strip()


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


def _build(pattern: Pattern, match: re.Match[str]) -> Reference | None:
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
    value = POSITION_LOOKUP.get(key)
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
    for pattern in PATTERNS:
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
        borrowed = BORROW_BEFORE.search(before) and BORROW_AFTER.match(after)
        if borrowed or SOURCE_AFTER.match(after):
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
        if EITHER.match(text[out[i - 1].end : out[i].start]):
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
