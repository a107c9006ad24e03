"""Pure functions: raw walking, filename matching, label normalisation, reference parsing."""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Iterable, Iterator

LABEL_MAX_CODE_POINTS = 24
DEFAULT_LABEL = "图片"
_DROPPED_PUNCTUATION = frozenset(string.punctuation) - frozenset("-_.")


def _clean_label(text: str | None) -> str:
    """SPEC §10's label rule on one candidate; "" when nothing is left."""
    if not text:
        return ""
    kept = "".join(
        ch
        for ch in text
        if ch not in _DROPPED_PUNCTUATION and unicodedata.category(ch) != "Cc"
    )
    # str.split() folds every Unicode whitespace run and trims both ends in one step; the cut
    # can end on a space, so trim once more after it.
    folded = " ".join(kept.split())
    return folded[:LABEL_MAX_CODE_POINTS].rstrip()


def normalise_label(label: str | None, fallback_name: str | None, reference_id: str) -> str:
    """The label shown for an attachment (SPEC §10).

    Trim; drop control characters (tab and newline included) and ASCII punctuation other than
    `-` `_` `.`; fold whitespace runs to one space; cut to 24 code points. When nothing is left,
    the referenced object's own name normalised the same way, then its id, then "图片".
    """
    for candidate in (label, fallback_name):
        cleaned = _clean_label(candidate)
        if cleaned:
            return cleaned
    return reference_id if reference_id.strip() else DEFAULT_LABEL


# --- raw walking and filename matching (SPEC §9) ---------------------------------------------

SKIPPED_KEY = "base64"


def walk_strings(raw: object) -> Iterator[str]:
    """Every string value in dicts and lists, depth first, except values under a `base64` key."""
    stack: list[object] = [raw]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for key, value in node.items():
                if key != SKIPPED_KEY:
                    stack.append(value)
        elif isinstance(node, list | tuple):
            stack.extend(node)


def searchable_text(raw: object) -> str:
    """The strings of `raw` lower-cased and joined by NUL, so a match never spans two strings."""
    return "\x00".join(walk_strings(raw)).lower()


class FilenameMatcher:
    """Finds which of a set of filenames occur (case-insensitively) in a text.

    Cost is linear in the text: names are indexed by their extension and length, so the text is
    scanned once for dots and each dot is checked against the few (extension, length) pairs known;
    only names without an extension fall back to a substring search.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self._by_ext: dict[str, dict[int, set[str]]] = {}
        self._plain: set[str] = set()
        for name in names:
            lowered = name.lower()
            stem, dot, ext = lowered.rpartition(".")
            if not dot or not ext or not stem or "\x00" in lowered:
                if lowered:
                    self._plain.add(lowered)
                continue
            self._by_ext.setdefault(ext, {}).setdefault(len(lowered), set()).add(lowered)

    def __bool__(self) -> bool:
        return bool(self._by_ext or self._plain)

    def find(self, text: str) -> set[str]:
        """The lower-cased names occurring in `text` (which must already be lower-cased)."""
        found = {name for name in self._plain if name in text}
        if not self._by_ext:
            return found
        by_ext = self._by_ext
        dot = text.find(".")
        while dot != -1:
            for ext, lengths in by_ext.items():
                if text.startswith(ext, dot + 1):
                    end = dot + 1 + len(ext)
                    for length, names in lengths.items():
                        start = end - length
                        if start >= 0 and text[start:end] in names:
                            found.add(text[start:end])
            dot = text.find(".", dot + 1)
        return found
