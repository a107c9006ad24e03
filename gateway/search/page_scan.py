"""The C accelerator for search pages (gateway/search/_pagescan_c/), when it was built.

`scan(body, native)` returns a page the accelerator can answer exactly as the Python path in
gateway/search/items.py and gateway/search/index.py would, or None for anything else (invalid or
unusual JSON, odd ids, repeated keys the answer reads): the Python path then runs and gives the
answer or the error. tests/test_page_scan.py checks the two agree.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

Page = Any
Matcher = Any

_native: ModuleType | None
try:
    from gateway.search import _pagescan as _native
except ImportError:  # built only where a C compiler was present at install
    _native = None

AVAILABLE = _native is not None


def scan(body: bytes, native: bool) -> Page | None:
    """A scanned page, or None when the Python path must answer."""
    return _native.scan(body, native) if _native is not None else None


def matcher(names: list[str], entries: list[list[tuple[int, bytes]]],
            probe: bool = True) -> Matcher | None:
    """One session's names (lower-cased, sorted) and their (uri number, JSON) attachments.
    Names are found by probing a hash table of them where they allow it (SPEC §14: few lengths
    per first byte), else by the automaton; `probe=False`: the automaton alone."""
    return _native.Matcher(names, entries, probe) if _native is not None else None
