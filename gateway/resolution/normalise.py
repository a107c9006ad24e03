"""Text as the reference parser reads it: NFKC (full-width digits and letters become ASCII),
traditional Chinese script as simplified (OpenCC's t2s tables), lower case, single spaces; and
the numbers and ordinals inside it, Chinese, English and digits."""

from __future__ import annotations

import re
import unicodedata

from opencc_purepy import OpenCC

from gateway.resolution.lexicon import NUM_WORDS, ORDINAL_WORDS

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


def parse_ordinal_word(word: str) -> int | None:
    if word in ORDINAL_WORDS:
        return ORDINAL_WORDS[word]
    digits = re.match(r"^([0-9]+)(?:st|nd|rd|th)$", word)
    return parse_number(digits.group(1)) if digits else None
