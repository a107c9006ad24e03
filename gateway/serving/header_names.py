"""Header names kept lowered by spelling, for the hot paths that lower every name of every
head (the native upstream client's request heads, `serve`'s response heads).

A gateway's heads carry the same few names request after request, so a dictionary lookup by
the name as spelt (its hash kept with it) is cheaper than lowering it again. Each table is
bounded: only names of up to `LONGEST` characters are kept (a client's or an engine's long
made-up names would otherwise pin up to a head's size each), and a table that reaches `KEPT`
names starts again empty.
"""

from __future__ import annotations

from typing import TypeVar

Name = TypeVar("Name", str, bytes)

LONGEST = 64
KEPT = 1024


def remember(table: dict[Name, Name], name: Name, lowered: Name) -> None:
    """Keep `lowered` for `name` in `table`, within the bounds (callers look up with
    `table.get(name)` themselves: that stays inline on the hot path)."""
    if len(name) > LONGEST:
        return
    if len(table) >= KEPT:
        table.clear()
    table[name] = lowered
