"""The label shown for a message's attachment (SPEC §10): a pure rule, below every floor that
stores or shows one."""

from __future__ import annotations

import string
import unicodedata

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
