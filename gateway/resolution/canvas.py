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
        vertical, horizontal = position.split("-")
        row = rows[0] if vertical == "top" else rows[-1]
        col_ids = {id(n) for n in (cols[0] if horizontal == "left" else cols[-1])}
        corner = [n for n in row if id(n) in col_ids]
        if not corner:  # ragged layout: the extreme node of that row
            corner = [row[0] if horizontal == "left" else row[-1]]
        return self._in_reading_order(corner)

    def _in_reading_order(self, nodes: Iterable[CanvasNode]) -> tuple[CanvasNode, ...]:
        wanted = {id(n) for n in nodes}
        return tuple(n for n in self.reading_order if id(n) in wanted)


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
