"""The reference structure a chat message is parsed into: what each mention of an image names
(kind and value, an ordinal's index from either end, a count, the line or group it is read in,
the side it is counted from) and its role (target, excluded, source)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gateway.resolution.lexicon import Kind

Role = Literal["target", "excluded", "source"]


@dataclass(frozen=True)
class Reference:
    """One mention of an image in the text.

    `value` per kind: position → top-left|top-right|bottom-left|bottom-right|left|right|top|bottom|
    middle|centre-left|centre-right|corners; ordinal → "nth" (see `index`); line → nth|middle (a
    row or column, see `axis`); chain → root|parent|version|generated|latest|round|middle|
    middle-generated|versions|before (parents count back
    from the anchor, -2 being its parent; versions from the root, 1, or the end, -1; generated
    turns from the root's next place, 1, all of them without an index; round: a turn of the chat,
    -1 the latest, 1 the first with results; middle / middle-generated; before: the version
    before the ones the text rejects); selection → selected|this; upload → uploaded; batch →
    all; complement → other.
    """

    kind: Kind
    value: str
    start: int
    end: int
    index: int | None = None  # ordinals: 1-based from the start, negative from the end (-1 = last)
    count: int | None = None  # how many images the words name: "这三张", "左边两张", "前两张"
    plural: bool = False  # the words name several images
    weak: bool = False  # "这张", "this one", "都": never outranks the priority order on its own
    role: Role = "target"
    scope: Reference | None = None  # ordinals/positions: the group counted; chain: the anchor
    either: bool = False  # joined to the previous reference by "或 / or": one of them, not both
    # lines: "row" | "column"; ordinals counted from a side: the line they run along
    axis: str | None = None

    def describe(self) -> str:
        """A few English words for reasons: "the left image", "the 2nd image", "the original"."""
        if self.kind == "position":
            text = f"the {self.value} image" + ("s" if self.plural or self.count else "")
        elif self.kind == "ordinal":
            index = self.index or 1
            if self.axis is not None:  # "the 3rd image from the right"
                side = {"row": ("left", "right"), "column": ("top", "bottom")}[self.axis]
                text = f"the {_nth(abs(index))} image from the {side[index < 0]}"
            else:
                text = _describe_ordinal(index, self.count)
        elif self.kind == "chain":
            text = _describe_chain(self.value, self.index)
        elif self.kind == "line":
            place = "middle" if self.value == "middle" else _place(self.index or 1)
            text = f"the {place} {self.axis}"
            if self.count:
                end = "first" if (self.index or 1) > 0 else "last"
                text = f"the {end} {self.count} {self.axis}s"
        elif self.kind == "selection":
            text = "the selected image" if self.value == "selected" else "this image"
        elif self.kind == "upload":
            text = "the uploaded image"
        elif self.kind == "batch":
            text = f"these {self.count} images" if self.count else "all of them"
        else:
            text = "the other image" + ("s" if self.plural else "")
        if self.scope is None:
            return text
        if self.kind == "chain":
            return f"{text} of {self.scope.describe()}"
        groups = {
            "selection": "the selection",
            "upload": "the uploads",
            "chain": "the latest results",
        }
        return f"{text} of {groups.get(self.scope.kind) or self.scope.describe()}"


def _describe_ordinal(index: int, count: int | None) -> str:
    n = count or 1
    if index > 1 and n > 1:  # "第二到第四张"
        return f"the {_nth(index)} to {_nth(index + n - 1)} images"
    if index > 0:
        head = f"the first {n}" if n > 1 else f"the {_nth(index)}"
    else:
        head = (
            f"the last {n}"
            if n > 1
            else ("the last" if index == -1 else f"the {_nth(-index)} to last")
        )
    return head + (" images" if n > 1 else " image")


def _place(index: int) -> str:
    return _nth(index) if index > 0 else ("last" if index == -1 else f"{_nth(-index)} to last")


def _describe_chain(value: str, index: int | None) -> str:
    if value == "root":
        return "the original"
    if value == "parent":
        back = -(index or -2) - 1
        return "the previous version" if back == 1 else f"the version {back} versions back"
    if value == "version":
        return f"the {_place(index or 1)} version"
    if value == "generated":
        return f"the {_nth(index)} generated version" if index else "the generated images"
    if value == "round":
        if index is None or index == -1:
            return "the latest result"
        return f"the results of turn {index}" if index > 0 else f"the results {-index} turns back"
    if value == "middle":
        return "the middle version"
    if value == "middle-generated":
        return "the middle generated version"
    if value == "results":
        return "the results"
    if value == "versions":
        return "every version"
    if value == "before":
        return "the version before"
    return "the latest result"


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class ParsedText:
    text: str  # the normalised text the spans refer to
    references: tuple[Reference, ...]
    all_but: bool = False  # "除了第二张", "all but the last": the rest are the targets
    unread: tuple[str, ...] = ()  # words that refer to an image in a way the parse did not read

    def with_role(self, role: Role) -> tuple[Reference, ...]:
        return tuple(r for r in self.references if r.role == role)
