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


class FilenameMatcher:
    """Finds which of a set of filenames occur (case-insensitively) in a text.

    Cost is linear in the text: names are indexed by their extension and length; one regular
    expression scan finds every ".ext" occurrence, and each is checked against the few name
    lengths known for that extension. Only names without an extension fall back to a substring
    search.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._by_ext: dict[str, list[tuple[int, set[str]]]] = {}
        self._plain: set[str] = set()
        lengths: dict[str, dict[int, set[str]]] = {}
        for name in names:
            lowered = name.lower()
            if "\x00" in lowered:
                continue  # never matches: a NUL cannot be told from the break between strings
            stem, dot, ext = lowered.rpartition(".")
            if not dot or not ext or not stem:
                if lowered:
                    self._plain.add(lowered)
                continue
            lengths.setdefault("." + ext, {}).setdefault(len(lowered), set()).add(lowered)
        self._by_ext = {ext: sorted(by_length.items()) for ext, by_length in lengths.items()}
        # Keys are "." + the last dot-free segment, so two occurrences never overlap; where one
        # key is a prefix of another (".p", ".png") both are checked at the hit below.
        alternatives = sorted(self._by_ext, key=len, reverse=True)
        self._scan = (
            re.compile("|".join(re.escape(ext) for ext in alternatives)) if alternatives else None
        )
        self._single = len(self._by_ext) == 1

    def __bool__(self) -> bool:
        return bool(self._by_ext or self._plain)

    def find(self, text: str) -> set[str]:
        """The lower-cased names occurring in `text` (which must already be lower-cased)."""
        found = {name for name in self._plain if name in text}
        if self._scan is None:
            return found
        by_ext = self._by_ext
        for hit in self._scan.finditer(text):
            start_of_ext = hit.start()
            for ext, by_length in by_ext.items():
                if not self._single and not text.startswith(ext, start_of_ext):
                    continue
                end = start_of_ext + len(ext)
                for length, candidates in by_length:
                    start = end - length
                    if start < 0:
                        break
                    piece = text[start:end]
                    if piece in candidates:
                        found.add(piece)
        return found
