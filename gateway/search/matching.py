"""Pure functions of search (SPEC §9): raw walking and filename matching."""

from __future__ import annotations

import re
from collections.abc import Iterable

SKIPPED_KEY = "base64"


def walk_strings(raw: object) -> list[str]:
    """Every string value in dicts and lists, depth first, except values under a `base64` key.

    Iterative (no recursion limit) and typed by exact JSON types: this runs over every result of
    every search page.
    """
    out: list[str] = []
    stack: list[object] = [raw]
    push, pop, append = stack.append, stack.pop, out.append
    while stack:
        node = pop()
        kind = type(node)
        if kind is str:
            append(node)  # type: ignore[arg-type]
        elif kind is dict:
            for key, value in node.items():  # type: ignore[attr-defined]
                if key != SKIPPED_KEY:
                    value_kind = type(value)
                    if value_kind is str:
                        append(value)
                    elif value_kind is dict or value_kind is list:
                        push(value)
        elif kind is list or kind is tuple:
            for value in node:  # type: ignore[attr-defined]
                value_kind = type(value)
                if value_kind is str:
                    append(value)
                elif value_kind is dict or value_kind is list:
                    push(value)
    return out


def searchable_text(raw: object) -> str:
    """The strings of `raw` lower-cased and joined by NUL, so a match never spans two strings."""
    return "\x00".join(walk_strings(raw)).lower()


# A trie edge's key: the character's code point shifted past every state number, or'ed with the
# state (the state in the low bits, which Python's dict hashes by)
SHIFT = 32


class FilenameMatcher:
    """Finds which of a set of filenames occur (case-insensitively) in a text.

    An Aho-Corasick automaton over all the names, so the cost is linear in the text whatever
    the names are (with or without an extension, long, many, overlapping), plus one step per
    name found. At the root, a regular expression skips to the next character that starts a
    name. A state's chain of names ending where it ends is walked only until a name already
    found: the rest of that chain was found with it. The trie's edges are one dict of ints
    (one dict per state would cost as much in the garbage collector as in the build).
    """

    def __init__(self, names: Iterable[str]) -> None:
        goto: dict[int, int] = {}
        children: list[list[int]] = [[]]
        ends: list[str | None] = [None]
        for name in names:
            lowered = name.lower()
            if not lowered or "\x00" in lowered:
                continue  # never matches: a NUL cannot be told from the break between strings
            state = 0
            for char in lowered:
                key = ord(char) << SHIFT | state
                following = goto.get(key)
                if following is None:
                    following = goto[key] = len(ends)
                    children[state].append(key)
                    children.append([])
                    ends.append(None)
                state = following
            ends[state] = lowered
        fail = [0] * len(ends)
        # per state: the deepest state ending a name among it and its suffixes, -1 for none
        report = [-1] * len(ends)
        queue = [goto[key] for key in children[0]]
        for state in queue:  # breadth first: a state's suffixes are done before it
            for key in children[state]:
                code, following = key >> SHIFT << SHIFT, goto[key]
                suffix = fail[state]
                target = goto.get(code | suffix)
                while target is None and suffix:
                    suffix = fail[suffix]
                    target = goto.get(code | suffix)
                fail[following] = target if target is not None else 0
                queue.append(following)
            report[state] = state if ends[state] is not None else report[fail[state]]
        self._goto, self._fail, self._report, self._ends = goto, fail, report, ends
        starts = sorted({chr(key >> SHIFT) for key in children[0]})
        self._start = re.compile("[" + "".join(f"\\U{ord(c):08x}" for c in starts) + "]"
                                 ) if starts else None

    def __bool__(self) -> bool:
        return self._start is not None

    def find(self, text: str) -> set[str]:
        """The lower-cased names occurring in `text` (which must already be lower-cased)."""
        found: set[str] = set()
        if self._start is None:
            return found
        goto, fail, report, ends = self._goto.get, self._fail, self._report, self._ends
        search = self._start.search
        state, at, size = 0, 0, len(text)
        while at < size:
            if not state:
                hit = search(text, at)
                if hit is None:
                    break
                at = hit.start()
            code = ord(text[at]) << SHIFT
            at += 1
            following = goto(code | state)
            while following is None and state:
                state = fail[state]
                following = goto(code | state)
            state = following or 0
            reported = report[state]
            while reported >= 0:
                name = ends[reported]
                if name in found:
                    break
                found.add(name)  # type: ignore[arg-type]
                reported = report[fail[reported]]
        return found


def matched_string(raw: object, name: str) -> str | None:
    """The first string of `raw` in which `name` occurs by the rule above (every string but those
    under `base64`, case-insensitively), or None: what the operator console shows as the text a
    search result's attachment matched on."""
    matcher = FilenameMatcher([name])
    if not matcher:
        return None
    for text in walk_strings(raw):
        if matcher.find(text.lower()):
            return text
    return None
