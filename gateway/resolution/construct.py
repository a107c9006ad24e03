"""What one construction's match names: the references `patterns.py`'s regexes are turned into,
with numbers read, lines placed, chain places counted and list items split."""

from __future__ import annotations

import re
from dataclasses import replace

from gateway.resolution.lexicon import (
    COUNT_FROM,
    EN_ORD,
    EN_PLURAL,
    LINE_AXIS_EN,
    LINE_AXIS_ZH,
    LINE_PLACE,
)
from gateway.resolution.normalise import parse_number, parse_ordinal_word
from gateway.resolution.patterns import POSITION_LOOKUP, Pattern
from gateway.resolution.reference import Reference


def build_references(pattern: Pattern, match: re.Match[str]) -> list[Reference]:
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
        # an ordinal counts the turn's results; a chain place is taken of the latest result
        value = "results" if pattern.kind == "ordinal" else "latest"
        results = Reference("chain", value, ref.start, ref.end, plural=True)
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
        n = parse_number(item.group(0)) or parse_ordinal_word(item.group(0))
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


_ALONG = {"row": ("left", "right"), "column": ("top", "bottom")}


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
    word = groups["lword"].strip()
    place = LINE_PLACE.get(word)
    end = groups.get("lend")
    # rows are counted from the top or bottom, columns from a side: "the top row from the right"
    # counts something else, which this reading cannot place
    if end is not None and (place is not None or end in _ALONG[axis]):
        return None
    if place is None:
        n = parse_ordinal_word(word)
        if not n:
            return None
        return "nth", -n if end in ("bottom", "right", "end") else n
    if place == "middle":
        return "middle", None
    return "nth", 1 if place == "first" else -1


def _build_line(
    ref: Reference, groups: dict[str, str], match: re.Match[str]
) -> list[Reference | None]:
    if "lcount2" in groups:  # "the two left columns" reads as "the left two columns"
        groups = {**groups, "lword": groups["lword2"], "lcount": groups["lcount2"]}
    elif "ipos2" in groups:  # "middle left": the left image of the middle row
        groups = {**groups, "lword": groups["lword2"], "ipos": groups["ipos2"]}
    implied = match.re.groupindex.keys() & {"rowaxis", "columnaxis"}
    if implied:  # "最下面中间那张": the construction implies a row (or column) without 排/列
        axis = "row" if "rowaxis" in implied else "column"
    else:
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
        # "倒数第二个", "右边第二个" / "从右数第二个" inside the line count from its end
        from_end = "irev" in groups or groups.get("iside") == "右"
        index = (-n if from_end else n) if n else None
        item = Reference("ordinal", "nth", ref.start, ref.end, index=index) if index else None
    elif "iord" in groups:
        n = parse_ordinal_word(groups["iord"])
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
    versions by number from the root (1) or from the end (-1), generated turns by number (none:
    all of them), rounds back from the turn being resolved ("上上轮": -2) or from the first (1)."""
    if ref.value == "parent":
        if ref.index is not None and not {"ups", "dn"} & groups.keys():
            return ref
        depth = 1
        if "ups" in groups:
            depth = len(groups["ups"])
        elif "dn" in groups:
            word = groups["dn"]
            depth = 1 if word in ("a", "one") else parse_number(word) or 0
        return replace(ref, index=-(depth + 1)) if depth > 0 else None
    if ref.value == "round":
        if ref.index is not None and not {"rups", "rdn", "rrev", "rn", "rord"} & groups.keys():
            return ref  # "上一轮之前的"
        if "rups" in groups:
            return replace(ref, index=-len(groups["rups"]))
        word = groups.get("rdn") or groups.get("rrev") or groups.get("rn") or ""
        n = 1 if word in ("a", "one") else parse_number(word) or parse_ordinal_word(
            groups.get("rord", ""))
        if not n or n < 0:
            return None
        return replace(ref, index=n if "rn" in groups or "rord" in groups else -n)
    if ref.value == "version":
        if "vpen" in groups:
            return replace(ref, index=-2)
        if ref.index is not None and not {"vn", "vrev", "vord"} & groups.keys():
            return ref
        n = parse_number(groups.get("vn") or groups.get("vrev") or "") or parse_ordinal_word(
            groups.get("vord") or groups.get("vrev") or ""
        )
        if not n:
            return None
        return replace(ref, index=-abs(n) if "vrev" in groups or n < 0 else n)
    if ref.value == "generated":
        if "gn" not in groups and "gord" not in groups:
            return ref  # "最早生成的" (index 1), "你生成的" (all of them)
        n = parse_number(groups.get("gn", "")) or parse_ordinal_word(groups.get("gord", ""))
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
    if "rfrom" in groups:  # "第二到第四张": from the 2nd, three images
        first, last = parse_number(groups["rfrom"]), parse_number(groups["rto"])
        if not first or not last or last <= first:
            return None
        return replace(ref, index=first, count=last - first + 1, plural=True)
    if "side" in groups:  # "从右数第二个", "third from the right", "second from last"
        n = parse_number(groups.get("n", "")) or parse_ordinal_word(groups.get("ord", ""))
        axis, sign = COUNT_FROM[groups["side"]]
        return replace(ref, index=sign * n, axis=axis) if n and n > 0 else None
    if "n" in groups:
        n = parse_number(groups["n"])
        return replace(ref, index=n) if n else None
    if "ord" in groups:
        n = parse_ordinal_word(groups["ord"])
        return replace(ref, index=n) if n else None
    if "rev" in groups:
        n = parse_ordinal_word(groups["rev"]) or parse_number(groups["rev"])
        return replace(ref, index=-n) if n and n > 0 else None
    if "pen" in groups:
        return replace(ref, index=-2)
    if "first" in groups or "last" in groups:
        n = parse_number(groups.get("first") or groups.get("last", ""))
        if not n:
            return None
        return replace(ref, index=1 if "first" in groups else -1, count=n, plural=n > 1)
    return ref if ref.index is not None else None
