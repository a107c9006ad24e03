"""The resolution table (issue 13): scenes, texts and the images they mean."""

from .cases import CASES, KINDS, Case

__all__ = ["CASES", "KINDS", "Case"]
