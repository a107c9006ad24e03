"""Canvas geometry: the image nodes a client draws, grouped into rows and columns, read in
order (rows top to bottom, each left to right) and looked up by position word. Pure."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass


# A canvas node as the rules read it (the client's names); CanvasNodeIn in routes/resolve.py
# checks the request, this stays plain data for the pure rules.
@dataclass(frozen=True)
class CanvasNode:
    nodeId: str
    assetId: str | None
    url: str
    x: float
    y: float
    width: float | None = None
    height: float | None = None
    title: str | None = None
    prompt: str | None = None
    isSelected: bool = False


@dataclass(frozen=True)
class CanvasLayout:
    """Canvas nodes grouped into rows and columns; a row is nodes whose vertical extents overlap."""

    rows: tuple[tuple[CanvasNode, ...], ...]
    columns: tuple[tuple[CanvasNode, ...], ...]

    @property
    def reading_order(self) -> tuple[CanvasNode, ...]:
        """Rows top to bottom, each left to right."""
        return tuple(node for row in self.rows for node in row)

    def at(self, position: str) -> tuple[CanvasNode, ...]:
        """The nodes at a position word's place, in reading order."""
        rows, cols = self.rows, self.columns
        if position in ("left", "right", "top", "bottom"):
            picked = {"left": cols[0], "right": cols[-1], "top": rows[0], "bottom": rows[-1]}
            return self._in_reading_order(picked[position])
        if position == "middle":
            row_pick = (rows[len(rows) // 2],) if len(rows) % 2 else rows
            col_pick = (cols[len(cols) // 2],) if len(cols) % 2 else cols
            in_rows = {id(n) for row in row_pick for n in row}
            return self._in_reading_order(n for col in col_pick for n in col if id(n) in in_rows)
        # a corner is the end of the top/bottom row and of the left/right column; when images of
        # different sizes make those two differ, both are candidates
        vertical, horizontal = position.split("-")
        row = rows[0] if vertical == "top" else rows[-1]
        col = cols[0] if horizontal == "left" else cols[-1]
        return self._in_reading_order(
            (row[0] if horizontal == "left" else row[-1], col[0] if vertical == "top" else col[-1])
        )

    def line(self, axis: str, index: int | None, count: int = 1) -> tuple[CanvasNode, ...] | None:
        """A row (left to right) or a column (top to bottom), numbered from 1 or from the end
        (-1); `None` asks for the middle one; `count` lines from there inwards, in reading order.
        None when the canvas has no such line."""
        lines = self.rows if axis == "row" else self.columns
        if index is None:
            return lines[len(lines) // 2] if len(lines) % 2 and count == 1 else None
        if index == 0 or count > len(lines) or abs(index) > len(lines):
            return None
        first = index - 1 if index > 0 else len(lines) + index - count + 1
        if first < 0 or first + count > len(lines):
            return None
        if count == 1:
            return lines[first]
        return self._in_reading_order(n for line in lines[first : first + count] for n in line)

    def toward(self, position: str, count: int) -> tuple[CanvasNode, ...] | None:
        """The `count` images nearest a side, a whole column (or row) at a time ("右边三个", "the
        top two"), or the `count` in the middle of a single row or column. None when whole
        lines do not add up to that count."""
        if position == "middle":
            line = self.rows[0] if len(self.rows) == 1 else None
            line = line or (self.columns[0] if len(self.columns) == 1 else None)
            if line is None or (len(line) - count) % 2 or count > len(line):
                return None
            skip = (len(line) - count) // 2
            return self._in_reading_order(line[skip : skip + count])
        sides = {"left": self.columns, "right": self.columns[::-1], "top": self.rows,
                 "bottom": self.rows[::-1]}  # fmt: skip
        if position not in sides:
            return None
        picked: list[CanvasNode] = []
        for line in sides[position]:
            picked.extend(line)
            if len(picked) >= count:
                break
        return self._in_reading_order(picked) if len(picked) == count else None

    def corners(self) -> tuple[CanvasNode, ...] | None:
        if len(self.rows) < 2 or len(self.columns) < 2:
            return None
        corners = [self.at(c) for c in ("top-left", "top-right", "bottom-left", "bottom-right")]
        return self._in_reading_order(n for nodes in corners for n in nodes)

    def _in_reading_order(self, nodes: Iterable[CanvasNode]) -> tuple[CanvasNode, ...]:
        wanted = {id(n) for n in nodes}
        return tuple(n for n in self.reading_order if id(n) in wanted)


def along(line: tuple[CanvasNode, ...], axis: str, position: str) -> tuple[CanvasNode, ...] | None:
    """A position inside one row (left, right, middle, centre-left/right) or column (top,
    bottom, middle); two images when the middle of an even line is asked; None for a position
    the line does not have."""
    first, last = ("left", "right") if axis == "row" else ("top", "bottom")
    n = len(line)
    if position == first:
        return line[:1]
    if position == last:
        return line[-1:]
    if position == "middle":
        return line[n // 2 : n // 2 + 1] if n % 2 else line[n // 2 - 1 : n // 2 + 1]
    if position in ("centre-left", "centre-right") and axis == "row" and n >= 4:
        # the neighbour of the centre: of 5 the 2nd/4th, of 4 the 2nd/3rd, of 6 the 3rd/4th
        left = n // 2 - 1
        right = n // 2 + 1 if n % 2 else n // 2
        return (line[left],) if position == "centre-left" else (line[right],)
    return None


@dataclass(frozen=True)
class _Box:
    node: CanvasNode
    left: float
    top: float
    right: float
    bottom: float

    @property
    def cx(self) -> float:
        return (self.left + self.right) / 2

    @property
    def cy(self) -> float:
        return (self.top + self.bottom) / 2


def _finite(value: float | None) -> float | None:
    return value if isinstance(value, int | float) and math.isfinite(value) else None


def _boxes(nodes: Iterable[CanvasNode]) -> list[_Box]:
    nodes = list(nodes)
    widths = [w for n in nodes if (w := _finite(n.width)) is not None and w > 0]
    heights = [h for n in nodes if (h := _finite(n.height)) is not None and h > 0]
    # a node without a size is taken to be as big as its neighbours (the median)
    default_w = statistics.median(widths) if widths else 0.0
    default_h = statistics.median(heights) if heights else 0.0
    boxes = []
    for n in nodes:
        x, y = _finite(n.x) or 0.0, _finite(n.y) or 0.0
        w, h = _finite(n.width), _finite(n.height)
        w = w if w is not None and w > 0 else default_w
        h = h if h is not None and h > 0 else default_h
        boxes.append(_Box(n, x, y, x + w, y + h))
    return boxes


def _bands(
    boxes: list[_Box], lo: Callable[[_Box], float], hi: Callable[[_Box], float]
) -> list[list[_Box]]:
    """Connected groups of overlapping extents along one axis, in axis order."""
    bands: list[list[_Box]] = []
    band_lo = band_hi = 0.0
    for box in sorted(boxes, key=lambda b: (lo(b), hi(b))):
        if bands and (lo(box) < band_hi or lo(box) == band_lo):
            bands[-1].append(box)
            band_hi = max(band_hi, hi(box))
        else:
            bands.append([box])
            band_lo, band_hi = lo(box), hi(box)
    return bands


def canvas_layout(nodes: Iterable[CanvasNode]) -> CanvasLayout | None:
    """Rows and columns of the canvas from node x/y and sizes; None for an empty canvas."""
    boxes = _boxes(nodes)
    if not boxes:
        return None
    rows = _bands(boxes, lambda b: b.top, lambda b: b.bottom)
    cols = _bands(boxes, lambda b: b.left, lambda b: b.right)
    return CanvasLayout(
        rows=tuple(tuple(b.node for b in sorted(r, key=lambda b: (b.cx, b.cy))) for r in rows),
        columns=tuple(tuple(b.node for b in sorted(c, key=lambda b: (b.cy, b.cx))) for c in cols),
    )
