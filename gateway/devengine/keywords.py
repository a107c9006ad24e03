"""Keyword scoring, the dev engine's stand-in for the engine's recall (BM25 and vectors).

Lowercased word tokens match whole tokens; CJK runs (no spaces to split on) match as
substrings, by character bigrams. Score = share of query terms found, in [0, 1]. Pure.
"""

from __future__ import annotations

import re

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]+")


# Function words would make every episode a weak match; a query of only these keeps them.
STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have how i in is it me my "
    "of on or our so that the their them they this to was we were what when where which "
    "who why will with you your".split()
)


class KeywordQuery:
    def __init__(self, query: str) -> None:
        self.words: set[str] = set()
        self.grams: set[str] = set()
        for token in _TOKEN.findall(query.lower()):
            if _CJK_RUN.fullmatch(token):
                self.grams.update(token[i : i + 2] for i in range(max(len(token) - 1, 1)))
            else:
                self.words.add(token)
        if self.grams or self.words - STOPWORDS:
            self.words -= STOPWORDS

    @property
    def empty(self) -> bool:
        return not (self.words or self.grams)

    def score(self, text: str) -> float:
        if self.empty:
            return 0.0
        lowered = text.lower()
        doc_words = {t for t in _TOKEN.findall(lowered) if not _CJK_RUN.fullmatch(t)}
        hits = len(self.words & doc_words) + sum(1 for gram in self.grams if gram in lowered)
        return round(hits / (len(self.words) + len(self.grams)), 4)
