"""The text-reference parser: which images a chat message names, in Chinese and English.

Pure functions over a string, in three steps: normalise the text (`normalise.py`), find every
construction of `patterns.py` in it and read each match into the reference structure
(`construct.py`, `reference.py`), then compose: fold a group or a line with what is counted in it
("选中的第二张", "第三排第二个", "the rightmost in the bottom row"), mark each reference a target,
an exclusion ("不要改选中的", "all but the last") or a source ("像原图一样"), and keep the words
that refer to an image but were not read ("有猫的那张"). `resolver.py` decides what the
references point at.
To add an expression, add its words to `lexicon.py` (a new construction goes in `patterns.py`)
and a row to the table in `tests/resolution_cases/cases.py`.
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import replace

from gateway.resolution.construct import build_references
from gateway.resolution.lexicon import (
    ALL_BUT,
    ANCHOR_AFTER,
    ANCHOR_BEFORE,
    BORROW_AFTER,
    BORROW_BEFORE,
    BREAK,
    BUT_AFTER_BATCH,
    EITHER,
    JOIN,
    LINE_AFTER,
    LINE_BEFORE,
    NEGATION_POST_EN,
    NEGATION_POST_ZH,
    NEGATION_PRE_EN,
    NEGATION_PRE_ZH,
    POST_GAP,
    SCOPE_AFTER,
    SCOPE_BEFORE,
    SOURCE_AFTER,
    SOURCE_EN,
    SOURCE_ZH,
    UNREAD_EN,
    UNREAD_ZH,
)
from gateway.resolution.normalise import normalise_text, parse_number
from gateway.resolution.patterns import PATTERNS
from gateway.resolution.reference import ParsedText, Reference, Role

# the parser's public names; the structure and the normaliser are re-exported from their modules
__all__ = ["ParsedText", "Reference", "Role", "normalise_text", "parse_number", "parse_references"]

_MAX_CUE_GAP = 24
_AFTER_WINDOW = 48  # what SOURCE_AFTER / BORROW_AFTER read after a reference
_SCOPE_KINDS = ("selection", "upload", "batch")
_ANCHOR_KINDS = ("position", "ordinal", "selection", "upload")
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
            built = build_references(pattern, match)
            if built:
                length = match.end() - match.start()
                found.append((-length, pattern.priority, match.start(), built))
    found.sort(key=lambda item: item[:3])
    taken: list[Reference] = []
    used = bytearray(len(text))  # characters already read by a longer (or preferred) match
    for _, _, _, refs in found:
        if not any(any(used[r.start : r.end]) for r in refs):
            taken.extend(refs)
            for r in refs:
                used[r.start : r.end] = b"\x01" * (r.end - r.start)
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
    return ref.kind in _SCOPE_KINDS or (ref.kind == "chain" and ref.value in _GROUP_PLACES)


# chain places that are a turn's results, read as a group ("上上轮的第三张", "你生成的第一张")
_GROUP_PLACES = ("latest", "round", "generated")


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


def _shared_item(text: str, refs: list[Reference]) -> list[Reference]:
    """ "第一排和第三排的第一个": lines listed before an image read inside a line each get it."""
    out = list(refs)
    for i, ref in enumerate(refs):
        line = ref.scope
        if ref.kind not in ("ordinal", "position") or line is None or line.kind != "line":
            continue
        j = i - 1
        while j >= 0 and _is_bare_line(refs[j], line) and _joined(text, refs[j], refs[j + 1]):
            out[j] = replace(ref, start=refs[j].start, end=refs[j].end, scope=refs[j])
            j -= 1
    return out


def _is_bare_line(ref: Reference, like: Reference) -> bool:
    return ref.kind == "line" and ref.axis == like.axis and ref.count is None


def _shared_count(text: str, refs: list[Reference]) -> list[Reference]:
    """ "左上和右下那两张": a count after a list counts the list, not the last item."""
    out = list(refs)
    for i, ref in enumerate(refs):
        if ref.count and i:
            run = _joined_run(text, refs, i, -1, limit=ref.count + 1)
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


def _joined(text: str, left: Reference, right: Reference) -> bool:
    """Whether only "和/and/、/the…" stand between two references (nothing at all is not joined)."""
    gap = text[left.end : right.start]
    return bool(gap) and JOIN.match(gap) is not None


def _joined_run(
    text: str, refs: list[Reference], first: int, step: int, limit: int | None = None
) -> list[int]:
    """Indices of refs[first] and its neighbours joined to it by "和/and/、" only (at most
    `limit` of them)."""
    run = [first]
    j = first
    while 0 <= j + step < len(refs) and (limit is None or len(run) < limit):
        left, right = (refs[j], refs[j + step]) if step > 0 else (refs[j + step], refs[j])
        if not _joined(text, left, right):
            break
        j += step
        run.append(j)
    return run


def _start(ref: Reference) -> int:
    return ref.start


def _reach_forward(text: str, refs: list[Reference], cue_end: int) -> list[int]:
    """The first reference after a cue (and those joined to it), if the cue reaches it."""
    i = bisect_left(refs, cue_end, key=_start)  # refs are disjoint, in text order
    if i == len(refs):
        return []
    gap = text[cue_end : refs[i].start]
    if len(gap) > _MAX_CUE_GAP or BREAK.search(gap):
        return []
    return _joined_run(text, refs, i, 1)


def _reach_backward(text: str, refs: list[Reference], cue_start: int) -> list[int]:
    i = bisect_right(refs, cue_start, key=lambda r: r.end) - 1
    if i < 0 or not POST_GAP.match(text[refs[i].end : cue_start]):
        return []
    return _joined_run(text, refs, i, -1)


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
        after = text[ref.end : ref.end + _AFTER_WINDOW]
        borrowed = BORROW_BEFORE.search(before) and BORROW_AFTER.match(after)
        if borrowed or SOURCE_AFTER.match(after):
            roles[cuable[i].start] = "source"
    pre = NEGATION_PRE_ZH + "|" + NEGATION_PRE_EN + BUT_AFTER_BATCH
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
            for ref in itertools.islice(refs, bisect_left(refs, low, key=_start), None):
                if ref.end > high:
                    break
                if ref.kind == "batch":
                    roles[ref.start] = "excluded"
    out = [replace(r, role=roles.get(r.start, "target")) for r in refs]
    for i in range(1, len(out)):
        if EITHER.match(text[out[i - 1].end : out[i].start]):
            out[i] = replace(out[i], either=True)
    return out, all_but[0]


def _unread(text: str, refs: list[Reference]) -> tuple[str, ...]:
    """Words that refer to an image but no construction read, and two images named side by side
    with words between them that say neither "and" nor "in" ("第二排的左边第二张" read as "the
    left of row 2" plus "the 2nd image"): the parse did not find how they go together."""
    masked = _mask(text, refs)
    unread = [m.group(0) for regex in _UNREAD for m in regex.finditer(masked)]
    named = [r for r in refs if r.role == "target" and not r.weak and r.kind in _NAMING]
    for a, b in zip(named, named[1:], strict=False):
        gap = text[a.end : b.start]
        joined = gap.strip() and (JOIN.match(gap) or EITHER.match(gap))
        if not (joined or BREAK.search(gap)):
            unread.append(text[a.start : b.end])
    return tuple(unread)


_NAMING = ("position", "ordinal", "line", "chain", "selection", "upload")
_UNREAD = tuple(re.compile(fragment) for fragment in (*UNREAD_ZH, *UNREAD_EN))


def parse_references(text: str) -> ParsedText:
    """Every image reference in `text`, in order, compounds folded and roles assigned."""
    normalised = normalise_text(text)
    folded = _fold(normalised, _scan(normalised))
    refs = _shared_count(normalised, _shared_item(normalised, folded))
    with_roles, all_but = _assign_roles(normalised, refs)
    with_roles = _on_the_chain(with_roles)
    return ParsedText(normalised, tuple(with_roles), all_but, _unread(normalised, with_roles))


def _bare(ref: Reference) -> bool:
    return ref.kind == "ordinal" and ref.scope is None and ref.axis is None


def _on_the_chain(refs: list[Reference]) -> list[Reference]:
    """Ordinals that count places of the version chain rather than images, by what they go with:
    a rejection "再往前一版" steps back from ("最后两个都不对" → the last two versions); the second
    of a redirect between versions ("not the first generated one, the second"); and an exclusion
    inside a turn named before it ("第二轮除了第二张" → the 2nd result of that turn)."""
    out = list(refs)
    stepping = any(r.kind == "chain" and r.value == "before" for r in refs)
    for i, ref in enumerate(out):
        if not _bare(ref):
            continue
        before = out[i - 1] if i else None
        if stepping and ref.role == "excluded":
            out[i] = replace(ref, kind="chain", value="version")
        elif (before is not None and ref.role == "target" and before.role == "excluded"
              and ref.count is None and before.kind == "chain" and before.index is not None
              and before.value in ("generated", "version", "round")):
            out[i] = replace(ref, kind="chain", value=before.value)
        elif (ref.role == "excluded" and before is not None and before.role == "target"
              and before.kind == "chain" and before.value in ("round", "generated")
              and before.index is not None):
            out[i] = replace(ref, scope=before)
    return out
