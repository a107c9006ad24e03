"""Which image a chat turn means: the fixed-priority target resolver of SPEC §12.

Pure: no I/O, no model, no clock. `resolve_targets` gets everything in a `ResolutionInput` and
returns a `Decision`; the words it understands live in `gateway/reference_parsing.py`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from gateway.reference_parsing import Reference, parse_references

MODES = (
    "explicit_selection",
    "current_upload",
    "text_reference",
    "working_memory",
    "latest_result",
    "llm_disambiguation",  # set by the caller when a model picks among tied candidates
    "clarification",
)
FOCUS_POLICIES = ("auto", "selected", "latest_result", "original")
MAX_CANDIDATES = 9

# Confidence per rule: explicit acts high, text references high when unique, memory medium,
# the latest result lower, clarification low.
CONFIDENCE = {
    "selection": 95,
    "selection_narrowed": 90,
    "selection_over_text": 80,
    "upload": 90,
    "upload_over_text": 80,
    "text": 90,
    "text_several_refs": 85,
    "text_batch": 85,
    "text_complement": 75,
    "text_negation_only": 70,
    "memory_focus": 65,
    "memory_resolved": 60,
    "memory_generated": 55,
    "memory_uploaded": 50,
    "latest_preferred": 70,
    "latest": 45,
    "clarify_tie": 30,
    "clarify": 10,
}


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
class AssetInfo:
    id: str
    root_asset_id: str
    primary_parent_asset_id: str | None
    source_type: str
    media_type: str
    created_at_ms: int
    display_name: str | None = None
    prompt: str | None = None


@dataclass(frozen=True)
class WorkingState:
    current_focus_asset_id: str | None
    selected_asset_ids: tuple[str, ...]
    last_uploaded_asset_ids: tuple[str, ...]
    last_generated_asset_ids: tuple[str, ...]
    last_referenced_asset_ids: tuple[str, ...]
    last_resolved_asset_ids: tuple[str, ...]
    active_canvas_node_ids: tuple[str, ...]
    turn_count: int


@dataclass(frozen=True)
class ResolutionInput:
    text: str
    uploaded_asset_ids: tuple[str, ...]
    # contextPayload.selectedAssetIds plus the assetIds of selected canvas nodes
    selected_asset_ids: tuple[str, ...]
    selected_node_ids: tuple[str, ...]
    focus_policy: str  # auto|selected|latest_result|original
    canvas_nodes: tuple[CanvasNode, ...]
    # every asset of this user's chat known to the caller; ids outside it are never returned
    assets: Mapping[str, AssetInfo]
    working_state: WorkingState
    latest_result_ids: tuple[str, ...]  # the most recent turn result, registration order
    last_multi_result_ids: tuple[str, ...]  # the most recent turn with several results


@dataclass(frozen=True)
class Decision:
    target_asset_ids: tuple[str, ...]
    candidate_asset_ids: tuple[str, ...]
    mode: str
    confidence: int
    needs_clarification: bool
    reason: str
    # set when mode == "clarification" because several candidates tie; a model may pick one
    tied_candidate_ids: tuple[str, ...] = ()


# --------------------------------------------------------------------------------- canvas layout


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


# ----------------------------------------------------------------------------------------- scene


def _unique(ids: Iterable[str | None]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in ids if i is not None))


@dataclass(frozen=True)
class _Scene:
    inp: ResolutionInput
    refs: tuple[Reference, ...]
    layout: CanvasLayout | None
    selection: tuple[str, ...]

    def known(self, ids: Iterable[str | None]) -> tuple[str, ...]:
        return tuple(i for i in _unique(ids) if i in self.inp.assets)

    @property
    def ws(self) -> WorkingState:
        return self.inp.working_state

    @property
    def canvas_ids(self) -> tuple[str, ...]:
        return self.known(n.assetId for n in self.layout.reading_order) if self.layout else ()

    @property
    def latest(self) -> tuple[str, ...]:
        return self.known(self.inp.latest_result_ids)

    @property
    def focus(self) -> tuple[str, ...]:
        return self.known([self.ws.current_focus_asset_id])

    @property
    def anchors(self) -> tuple[str, ...]:
        """What "the original" / "the previous version" is taken of, even a negated selection."""
        ws = self.ws
        for group in (
            self.selection,
            self.focus,
            self.latest,
            self.known(ws.last_resolved_asset_ids),
            self.known(ws.last_generated_asset_ids),
            self.known(ws.last_uploaded_asset_ids),
        ):
            if group:
                return group
        return ()

    def root(self, asset_id: str) -> str:
        asset = self.inp.assets[asset_id]
        if asset.root_asset_id in self.inp.assets:
            return asset.root_asset_id
        seen = {asset_id}
        while (parent := self.parent(asset.id)) is not None and parent not in seen:
            asset = self.inp.assets[parent]
            seen.add(parent)
        return asset.id

    def parent(self, asset_id: str) -> str | None:
        parent = self.inp.assets[asset_id].primary_parent_asset_id
        return parent if parent in self.inp.assets else None

    def with_role(self, role: str) -> tuple[Reference, ...]:
        return tuple(r for r in self.refs if r.role == role)


def _scene(inp: ResolutionInput) -> _Scene:
    selected_nodes = set(inp.selected_node_ids)
    from_canvas = [
        n.assetId for n in inp.canvas_nodes if n.isSelected or n.nodeId in selected_nodes
    ]
    selection = _unique([*inp.selected_asset_ids, *from_canvas])
    refs = parse_references(inp.text).references
    layout = canvas_layout(inp.canvas_nodes)
    return _Scene(inp, refs, layout, tuple(i for i in selection if i in inp.assets))


# ------------------------------------------------------------------------- resolving references


@dataclass(frozen=True)
class _Match:
    ids: tuple[str, ...] = ()
    tied: bool = False  # several images match words that name one
    problem: str | None = None  # why the words cannot be resolved


_SELECTED = Reference("selection", "selected", 0, 0, plural=True)


def _resolve(scene: _Scene, ref: Reference, plural: bool) -> _Match:
    several = plural or ref.plural or bool(ref.count)
    if ref.kind == "position":
        return _resolve_position(scene, ref, several)
    if ref.kind == "ordinal":
        return _resolve_ordinal(scene, ref)
    if ref.kind == "chain":
        return _resolve_chain(scene, ref, several)
    if ref.kind == "selection":
        if ref.value == "this":  # the selection, else whatever is in focus
            ids = scene.selection or scene.focus or scene.latest
        else:  # the selection, else the one remembered from an earlier turn
            ids = scene.selection or scene.known(scene.ws.selected_asset_ids)
        if not ids:
            return _Match(problem=f"the text refers to {ref.describe()} but nothing is selected")
        return _Match(ids, tied=ref.value == "this" and len(ids) > 1 and not several)
    if ref.kind == "upload":
        ids = scene.known(scene.inp.uploaded_asset_ids) or scene.known(
            scene.ws.last_uploaded_asset_ids
        )
        if not ids:
            return _Match(problem="the text refers to an uploaded image but there is none")
        return _Match(ids, tied=len(ids) > 1 and not several)
    if ref.kind == "batch":
        return _resolve_batch(scene, ref)
    return _Match(problem="the text refers to the other image without saying which it is not")


def _scope_ids(scene: _Scene, ref: Reference) -> _Match:
    assert ref.scope is not None
    return _resolve(scene, ref.scope, plural=True)


def _resolve_position(scene: _Scene, ref: Reference, several: bool) -> _Match:
    layout = scene.layout
    if ref.scope is not None:
        scope = _scope_ids(scene, ref)
        if scope.problem:
            return scope
        wanted = set(scope.ids)
        layout = canvas_layout(n for n in scene.inp.canvas_nodes if n.assetId in wanted)
    if layout is None:
        return _Match(problem=f"the text refers to {ref.describe()} but no canvas images are known")
    ids = scene.known(n.assetId for n in layout.at(ref.value))
    if not ids:
        return _Match(problem=f"{ref.describe()} on the canvas is not a registered asset")
    if ref.count and ref.count != len(ids):
        return _Match(
            problem=f"the text names {ref.count} {ref.value} images but {len(ids)} are there"
        )
    return _Match(ids, tied=len(ids) > 1 and not several)


def _resolve_ordinal(scene: _Scene, ref: Reference) -> _Match:
    sequence: list[str | None]
    if ref.scope is not None:
        scope = _scope_ids(scene, ref)
        if scope.problem:
            return scope
        on_canvas = [n.assetId for n in scene.layout.reading_order] if scene.layout else []
        sequence = [*_unique(i for i in on_canvas if i in scope.ids), *scope.ids]
        sequence = list(_unique(sequence))
    elif scene.layout is not None:
        sequence = [
            n.assetId if n.assetId in scene.inp.assets else None for n in scene.layout.reading_order
        ]
    elif scene.inp.last_multi_result_ids or scene.inp.latest_result_ids:
        group = scene.inp.last_multi_result_ids or scene.inp.latest_result_ids
        sequence = [i if i in scene.inp.assets else None for i in group]
    else:
        return _Match(problem=f"the text refers to {ref.describe()} but there is nothing to count")
    index, count = ref.index or 1, ref.count or 1
    start = index - 1 if index > 0 else len(sequence) + index + 1 - count
    if start < 0 or start + count > len(sequence):
        there = f"there {'is' if len(sequence) == 1 else 'are'} only {_count(len(sequence))}"
        return _Match(problem=f"the text refers to {ref.describe()} but {there}")
    picked = sequence[start : start + count]
    if any(i is None for i in picked):
        return _Match(problem=f"{ref.describe()} is not a registered asset")
    return _Match(_unique(picked))


def _resolve_chain(scene: _Scene, ref: Reference, several: bool) -> _Match:
    if ref.value == "latest":
        ids = scene.latest or scene.known(scene.ws.last_generated_asset_ids)
        if not ids:
            return _Match(problem="the text refers to the latest result but there is none yet")
        return _Match(ids, tied=len(ids) > 1 and not several)
    if ref.scope is not None:
        scope = _scope_ids(scene, ref)
        if scope.problem:
            return scope
        anchors = scope.ids
    else:
        anchors = scene.anchors
    if not anchors:
        return _Match(problem=f"the text refers to {ref.describe()} but no image is in focus")
    if ref.value == "root":
        return _Match(_unique(scene.root(a) for a in anchors))
    parents = _unique(scene.parent(a) for a in anchors)
    if not parents:
        return _Match(problem="the text refers to the previous version but the image has none")
    return _Match(parents)


def _groups(scene: _Scene) -> tuple[tuple[str, ...], ...]:
    ws = scene.ws
    return (
        scene.selection,
        scene.canvas_ids,
        scene.latest,
        scene.known(scene.inp.last_multi_result_ids),
        scene.known(ws.last_resolved_asset_ids),
        scene.known(ws.last_generated_asset_ids),
        scene.known(ws.last_uploaded_asset_ids),
    )


def _resolve_batch(scene: _Scene, ref: Reference) -> _Match:
    """ "这三张" / "all of them": the first group on show with that many (or several) images."""
    for group in _groups(scene):
        if (ref.count and len(group) == ref.count) or (not ref.count and len(group) > 1):
            return _Match(group)
    return _Match(
        problem=f"the text refers to {ref.describe()} but no such group of images is known"
    )


def _complement_pool(scene: _Scene) -> tuple[str, ...]:
    if scene.layout is not None:
        return scene.canvas_ids
    return scene.latest if len(scene.latest) > 1 else scene.known(scene.inp.last_multi_result_ids)


# ---------------------------------------------------------------------------------- decisions


def _decision(
    mode: str, targets: Iterable[str], pool: Iterable[str], confidence: int, reason: str
) -> Decision:
    targets = _unique(targets)
    candidates = _unique([*targets, *pool])[: max(MAX_CANDIDATES, len(targets))]
    return Decision(targets, candidates, mode, confidence, False, reason)


def _clarify(scene: _Scene, excluded: set[str], reason: str, tied: Iterable[str] = ()) -> Decision:
    tied = tuple(i for i in _unique(tied) if i not in excluded)[:MAX_CANDIDATES]
    if tied:
        return Decision((), tied, "clarification", CONFIDENCE["clarify_tie"], True, reason, tied)
    newest = sorted(scene.inp.assets.values(), key=lambda a: (-a.created_at_ms, a.id))
    for pool in (scene.canvas_ids, scene.latest, _unique(a.id for a in newest)):
        left = tuple(i for i in pool if i not in excluded)
        if left:
            return Decision(
                (), left[:MAX_CANDIDATES], "clarification", CONFIDENCE["clarify"], True, reason
            )
    return Decision((), (), "clarification", CONFIDENCE["clarify"], True, reason)


def _count(n: int) -> str:
    return f"{n} image" + ("" if n == 1 else "s")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _strong_targets(scene: _Scene) -> list[Reference]:
    return [
        r for r in scene.with_role("target") if not r.weak and r.kind not in ("batch", "complement")
    ]


def _excluded_ids(scene: _Scene) -> set[str]:
    excluded: set[str] = set()
    for ref in scene.with_role("excluded"):
        if ref.kind not in ("batch", "complement"):
            excluded.update(_resolve(scene, ref, plural=True).ids)
    return excluded


def _narrow(scene: _Scene, refs: list[Reference], group: Reference) -> _Match | None:
    """Positions/ordinals read inside the selection or the uploads: "选中的几张里左边那张"."""
    narrowers = [
        r
        for r in refs
        if r.kind in ("ordinal", "position") and (r.scope is None or r.scope.kind == group.kind)
    ]
    if not narrowers:
        return None
    matches = [_resolve(scene, replace(r, scope=r.scope or group), plural=False) for r in narrowers]
    if any(m.problem for m in matches):
        return None
    return _Match(_unique(i for m in matches for i in m.ids), tied=any(m.tied for m in matches))


def _relative_to_selection(ref: Reference) -> bool:
    """ "原图", "选中那张的上一个版本": the original or previous version *of* the selection."""
    relative = ref.kind == "chain" and ref.value in ("root", "parent")
    return relative and (ref.scope is None or ref.scope.kind == "selection")


def _by_selection(scene: _Scene, excluded: set[str]) -> Decision | None:
    selection = scene.selection
    if not selection:
        return None
    if scene.inp.focus_policy == "selected":
        reason = f"focusPolicy 'selected' forces the selection ({_count(len(selection))})."
        return _decision(
            "explicit_selection", selection, selection, CONFIDENCE["selection"], reason
        )
    if any(r.kind == "selection" for r in scene.with_role("excluded")):
        return None  # "不要改选中的，改原图": the text redirects away from the selection
    remaining = tuple(i for i in selection if i not in excluded)
    if not remaining:
        return None
    refs = _strong_targets(scene)
    if any(_relative_to_selection(r) for r in refs):
        return _by_text(
            scene, excluded
        )  # "改原图" with a selection: the original *of* the selection
    if len(remaining) > 1:
        narrowed = _narrow(scene, refs, _SELECTED)
        if narrowed is not None and narrowed.tied:
            return _clarify(
                scene, excluded, "The text matches several of the selected images.", narrowed.ids
            )
        if narrowed is not None and narrowed.ids:
            reason = f"The text narrows the selection to {_count(len(narrowed.ids))}."
            return _decision(
                "explicit_selection",
                narrowed.ids,
                remaining,
                CONFIDENCE["selection_narrowed"],
                reason,
            )
    others = [r for r in refs if r.kind != "selection"]
    if others:
        reason = (
            f"The request selects {_count(len(remaining))}; the selection outranks the text's "
            f"reference to {others[0].describe()}."
        )
        return _decision(
            "explicit_selection", remaining, remaining, CONFIDENCE["selection_over_text"], reason
        )
    reason = f"The request selects {_count(len(remaining))}."
    return _decision("explicit_selection", remaining, remaining, CONFIDENCE["selection"], reason)


def _by_upload(scene: _Scene, excluded: set[str]) -> Decision | None:
    if any(r.kind == "upload" for r in scene.with_role("excluded")):
        return None
    uploads = tuple(i for i in scene.known(scene.inp.uploaded_asset_ids) if i not in excluded)
    if not uploads:
        return None
    refs = _strong_targets(scene)
    if len(uploads) > 1:
        group = Reference("upload", "uploaded", 0, 0, plural=True)
        narrowed = _narrow(scene, [r for r in refs if r.kind == "ordinal"], group)
        if narrowed is not None and narrowed.ids:
            reason = f"The text picks {_count(len(narrowed.ids))} of this turn's uploads."
            return _decision("current_upload", narrowed.ids, uploads, CONFIDENCE["upload"], reason)
    others = [r for r in refs if r.kind != "upload"]
    if others:
        reason = (
            f"This turn uploaded {_count(len(uploads))}; uploads outrank the text's reference "
            f"to {others[0].describe()}."
        )
        return _decision("current_upload", uploads, uploads, CONFIDENCE["upload_over_text"], reason)
    reason = f"This turn uploaded {_count(len(uploads))}."
    return _decision("current_upload", uploads, uploads, CONFIDENCE["upload"], reason)


def _by_text(scene: _Scene, excluded: set[str]) -> Decision | None:
    refs = _strong_targets(scene)
    batches = [r for r in scene.with_role("target") if r.kind == "batch"]
    complements = [r for r in scene.with_role("target") if r.kind == "complement"]
    plural = bool(batches) or any(r.plural for r in refs)
    pool = scene.canvas_ids or scene.latest
    targets: list[str] = []
    for ref in refs:
        match = _resolve(scene, ref, plural)
        if match.problem:
            return _clarify(scene, excluded, _sentence(match.problem))
        ids = [i for i in match.ids if i not in excluded]
        if match.tied and len(ids) > 1:
            return _clarify(
                scene,
                excluded,
                f"The text refers to {ref.describe()}, which matches {_count(len(ids))}.",
                ids,
            )
        targets.extend(ids)
    if refs and not targets:
        return _clarify(scene, excluded, "The text excludes every image it names.")
    if any(r.either for r in refs) and len(_unique(targets)) > 1:
        return _clarify(scene, excluded, "The text names several images as alternatives.", targets)
    # "the other one" with nothing else named: other than the selection or the focus
    current = set() if excluded or targets else set(scene.selection or scene.focus)
    for ref in complements:
        pool = _complement_pool(scene)
        rest = [i for i in pool if i not in excluded and i not in targets and i not in current]
        if not rest:
            return _clarify(scene, excluded, "The text refers to the other image but none is left.")
        if len(rest) > 1 and not ref.plural:
            return _clarify(
                scene,
                excluded,
                f"The text refers to the other image, which matches {_count(len(rest))}.",
                rest,
            )
        targets.extend(rest)
    if targets:
        described = " and ".join(r.describe() for r in [*refs, *complements])
        key = "text" if len(refs) == 1 and not complements else "text_several_refs"
        key = "text_complement" if complements and not refs else key
        return _decision(
            "text_reference", targets, pool, CONFIDENCE[key], f"The text refers to {described}."
        )
    if batches:
        strong = [r for r in batches if not r.weak]
        match = _resolve_batch(scene, strong[0] if strong else batches[0])
        ids = [i for i in match.ids if i not in excluded]
        if ids:
            reason = f"The text refers to {(strong or batches)[0].describe()} ({_count(len(ids))})."
            return _decision("text_reference", ids, pool, CONFIDENCE["text_batch"], reason)
        if strong:
            return _clarify(
                scene, excluded, _sentence(match.problem or "The text's batch is empty")
            )
    if excluded:
        rest = [i for i in _complement_pool(scene) if i not in excluded]
        if len(rest) == 1:
            reason = "The text excludes the other images, leaving one."
            return _decision("text_reference", rest, pool, CONFIDENCE["text_negation_only"], reason)
    return None


def _originals(scene: _Scene, ids: Iterable[str]) -> tuple[str, ...]:
    if scene.inp.focus_policy != "original":
        return tuple(ids)
    return _unique(scene.root(i) for i in ids)


def _policy_note(scene: _Scene) -> str:
    return (
        " (focusPolicy 'original': its chain root)" if scene.inp.focus_policy == "original" else ""
    )


def _by_working_memory(scene: _Scene, excluded: set[str]) -> Decision | None:
    ws = scene.ws
    steps = (
        (scene.focus, "the current focus", "memory_focus", False),
        (
            scene.known(ws.last_resolved_asset_ids),
            "the last resolved images",
            "memory_resolved",
            False,
        ),
        (
            scene.known(ws.last_generated_asset_ids),
            "the last generated image",
            "memory_generated",
            True,
        ),
        (
            scene.known(ws.last_uploaded_asset_ids),
            "the last uploaded image",
            "memory_uploaded",
            True,
        ),
    )
    for ids, name, key, single in steps:
        left = [i for i in ids if i not in excluded]
        if not left:
            continue
        targets = _originals(scene, left)
        if single and len(targets) > 1:
            return _clarify(
                scene, excluded, f"Working memory holds several candidates for {name}.", targets
            )
        reason = (
            f"No usable reference in the text; working memory gives {name}{_policy_note(scene)}."
        )
        return _decision(
            "working_memory", targets, [*scene.focus, *scene.latest], CONFIDENCE[key], reason
        )
    return None


def _by_latest_result(scene: _Scene, excluded: set[str]) -> Decision | None:
    left = [i for i in scene.latest if i not in excluded]
    if not left:
        return None
    targets = _originals(scene, left)
    if len(targets) > 1:
        return _clarify(
            scene,
            excluded,
            f"The latest turn produced {_count(len(targets))} and nothing picks one.",
            targets,
        )
    preferred = scene.inp.focus_policy == "latest_result"
    reason = f"No usable reference in the text; using the latest result{_policy_note(scene)}."
    key = "latest_preferred" if preferred else "latest"
    return _decision("latest_result", targets, scene.latest, CONFIDENCE[key], reason)


def resolve_targets(inp: ResolutionInput) -> Decision:
    """The images this turn means, by the fixed priority of SPEC §12 (see docs/resolution.md)."""
    scene = _scene(inp)
    excluded = _excluded_ids(scene)
    rules = [_by_selection, _by_upload, _by_text, _by_working_memory, _by_latest_result]
    if inp.focus_policy == "latest_result":
        rules = [_by_selection, _by_upload, _by_text, _by_latest_result, _by_working_memory]
    for rule in rules:
        decision = rule(scene, excluded)
        if decision is not None:
            return decision
    return _clarify(
        scene, excluded, "Nothing in the request, the text or the working state points at an image."
    )
