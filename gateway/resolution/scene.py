"""One turn as the resolver sees it (`ResolutionInput`) and what each parsed reference points at
in it: the selection, the canvas, the uploads, the results and the version chains. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from gateway.resolution.canvas import CanvasLayout, CanvasNode, along, canvas_layout
from gateway.resolution.parsing import ParsedText, Reference, parse_references


# The few MediaAsset fields the rules read, as plain data: the rules stay pure, tested by tables.
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
class ResultTurn:
    """One turn of the chat that produced results (`POST /chats/{id}/results`): its number, which
    only orders the turns, and its result assets in registration order."""

    turn: int
    asset_ids: tuple[str, ...]


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
    # the chat's turns that produced results, in any order (their numbers order them)
    result_turns: tuple[ResultTurn, ...] = ()


# ----------------------------------------------------------------------------------------- scene


def unique_ids(ids: Iterable[str | None]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in ids if i is not None))


@dataclass(frozen=True)
class Scene:
    inp: ResolutionInput
    parsed: ParsedText
    layout: CanvasLayout | None
    selection: tuple[str, ...]

    @property
    def refs(self) -> tuple[Reference, ...]:
        return self.parsed.references

    def known(self, ids: Iterable[str | None]) -> tuple[str, ...]:
        return tuple(i for i in unique_ids(ids) if i in self.inp.assets)

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
        """The image in focus; none while the focus is only the first of a turn's several
        results that nothing has picked since (after "give me four variants", "再亮一点" asks)."""
        focus = self.known([self.ws.current_focus_asset_id])
        # `POST …/results` makes the first of the ids it was sent the focus
        generated = self.ws.last_generated_asset_ids
        if focus and len(generated) > 1 and focus[0] == generated[0]:
            if focus[0] not in self.ws.last_resolved_asset_ids:
                return ()
        return focus

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

    def chain(self, asset_id: str) -> tuple[str, ...]:
        """The version chain ending at `asset_id`, root first (parents the chat knows)."""
        chain = [asset_id]
        while (parent := self.parent(chain[-1])) is not None and parent not in chain:
            chain.append(parent)
        return tuple(reversed(chain))

    @cached_property
    def rounds(self) -> tuple[tuple[str, ...], ...]:
        """The chat's turns that produced results, oldest first, each turn's known results."""
        turns = sorted(self.inp.result_turns, key=lambda t: t.turn)
        return tuple(ids for ids in (self.known(t.asset_ids) for t in turns) if ids)

    @cached_property
    def _positions(self) -> dict[str, tuple[tuple[tuple[str, ...], ...], int]]:
        return {}

    @cached_property
    def rejected(self) -> frozenset[str]:
        """The images of the versions the text rejects ("最后两版都不对"), for "再往前一版"."""
        rejected: set[str] = set()
        for other in self.with_role("excluded"):
            if other.kind == "chain" and other.value == "before":
                continue  # "不要再往前一版": what it rejects is read from the others
            if other.kind in ("chain", "selection", "batch"):
                rejected.update(resolve_reference(self, other, plural=True).ids)
        return frozenset(rejected)

    def positions(self, anchor: str) -> tuple[tuple[tuple[str, ...], ...], int]:
        """The version chain `anchor` is on, by turns: its root, then every turn whose results
        descend from that root, oldest first; and the anchor's place in it. Without turns that
        hold the anchor, the anchor's primary-parent path, one version per place."""
        if anchor not in self._positions:
            self._positions[anchor] = self._chain_positions(anchor)
        return self._positions[anchor]

    def _chain_positions(self, anchor: str) -> tuple[tuple[tuple[str, ...], ...], int]:
        root = self.root(anchor)
        places: list[tuple[str, ...]] = [(root,)]
        places += [ids for ids in self.rounds if any(self.root(i) == root for i in ids)]
        at = [k for k, ids in enumerate(places) if anchor in ids]
        if not at:
            lineage = self.chain(anchor)
            return tuple((v,) for v in lineage), len(lineage) - 1
        return tuple(places), at[-1]

    def parent(self, asset_id: str) -> str | None:
        parent = self.inp.assets[asset_id].primary_parent_asset_id
        return parent if parent in self.inp.assets else None

    def with_role(self, role: str) -> tuple[Reference, ...]:
        return tuple(r for r in self.refs if r.role == role)


def build_scene(inp: ResolutionInput) -> Scene:
    selected_nodes = set(inp.selected_node_ids)
    from_canvas = [
        n.assetId for n in inp.canvas_nodes if n.isSelected or n.nodeId in selected_nodes
    ]
    selection = unique_ids([*inp.selected_asset_ids, *from_canvas])
    parsed = parse_references(inp.text)
    layout = canvas_layout(inp.canvas_nodes)
    return Scene(inp, parsed, layout, tuple(i for i in selection if i in inp.assets))


# ------------------------------------------------------------------------- resolving references


@dataclass(frozen=True)
class Match:
    ids: tuple[str, ...] = ()
    tied: bool = False  # several images match words that name one
    problem: str | None = None  # why the words cannot be resolved


def resolve_reference(scene: Scene, ref: Reference, plural: bool) -> Match:
    several = plural or ref.plural or bool(ref.count)
    if ref.kind == "position":
        return _resolve_position(scene, ref, several)
    if ref.kind == "ordinal":
        return _resolve_ordinal(scene, ref)
    if ref.kind == "chain":
        return _resolve_chain(scene, ref, several)
    if ref.kind == "line":
        return _resolve_line(scene, ref, several)
    if ref.kind == "selection":
        if ref.value == "this":  # the selection, else whatever is in focus
            ids = scene.selection or scene.focus or scene.latest
        else:  # the selection, else the one remembered from an earlier turn
            ids = scene.selection or scene.known(scene.ws.selected_asset_ids)
        if not ids:
            return Match(problem=f"the text refers to {ref.describe()} but nothing is selected")
        return Match(ids, tied=ref.value == "this" and len(ids) > 1 and not several)
    if ref.kind == "upload":
        ids = scene.known(scene.inp.uploaded_asset_ids) or scene.known(
            scene.ws.last_uploaded_asset_ids
        )
        if not ids:
            return Match(problem="the text refers to an uploaded image but there is none")
        return Match(ids, tied=len(ids) > 1 and not several)
    if ref.kind == "batch":
        return resolve_batch(scene, ref)
    return Match(problem="the text refers to the other image without saying which it is not")


def _scope_ids(scene: Scene, ref: Reference) -> Match:
    assert ref.scope is not None
    return resolve_reference(scene, ref.scope, plural=True)


def _line_nodes(scene: Scene, line: Reference) -> tuple[CanvasNode, ...] | Match:
    """The nodes of a row or column in order along it, or the Match saying why there are none."""
    if scene.layout is None:
        return Match(problem=f"the text refers to {line.describe()} but no canvas images are known")
    assert line.axis is not None
    nodes = scene.layout.line(line.axis, line.index, line.count or 1)
    if nodes is None:
        lines = scene.layout.rows if line.axis == "row" else scene.layout.columns
        counted = f"{len(lines)} {line.axis}{'' if len(lines) == 1 else 's'}"
        return Match(problem=f"the text refers to {line.describe()} but the canvas has {counted}")
    return nodes


def _resolve_line(scene: Scene, ref: Reference, several: bool) -> Match:
    nodes = _line_nodes(scene, ref)
    if isinstance(nodes, Match):
        return nodes
    ids = scene.known(n.assetId for n in nodes)
    if not ids:
        return Match(problem=f"{ref.describe()} holds no registered asset")
    return Match(ids, tied=len(ids) > 1 and not (several or ref.plural))


def _positioned(scene: Scene, ref: Reference, nodes: tuple[CanvasNode, ...] | None,
                several: bool) -> Match:
    if nodes is None:
        return Match(problem=f"the canvas has no place that is {ref.describe()}")
    ids = scene.known(n.assetId for n in nodes)
    if not ids:
        return Match(problem=f"{ref.describe()} on the canvas is not a registered asset")
    return Match(ids, tied=len(ids) > 1 and not several)


def _resolve_position(scene: Scene, ref: Reference, several: bool) -> Match:
    layout = scene.layout
    if ref.scope is not None and ref.scope.kind == "line":
        # "第二排最左边", "the top of the right column": a position inside one line
        line = _line_nodes(scene, ref.scope)
        if isinstance(line, Match):
            return line
        assert ref.scope.axis is not None
        return _positioned(scene, ref, along(line, ref.scope.axis, ref.value), several)
    if ref.scope is not None:
        scope = _scope_ids(scene, ref)
        if scope.problem:
            return scope
        wanted = set(scope.ids)
        layout = canvas_layout(n for n in scene.inp.canvas_nodes if n.assetId in wanted)
    if layout is None:
        return Match(problem=f"the text refers to {ref.describe()} but no canvas images are known")
    if ref.value == "corners":
        return _positioned(scene, ref, layout.corners(), True)
    if ref.value in ("centre-left", "centre-right"):
        # only a single row has a centre with a left and a right neighbour
        row = layout.rows[0] if len(layout.rows) == 1 else None
        return _positioned(scene, ref, along(row, "row", ref.value) if row else None, several)
    if ref.count:
        nodes = layout.toward(ref.value, ref.count)
        if nodes is None:
            return Match(problem=f"the text names {ref.count} {ref.value} images but whole "
                                 f"rows or columns there do not make {ref.count}")
        return _positioned(scene, ref, nodes, True)
    ids = scene.known(n.assetId for n in layout.at(ref.value))
    if not ids:
        return Match(problem=f"{ref.describe()} on the canvas is not a registered asset")
    return Match(ids, tied=len(ids) > 1 and not several)


def _counted_line(scene: Scene, ref: Reference) -> tuple[CanvasNode, ...] | Match:
    """What "第一排倒数第二个" or "third from the right" counts: the named line, or for a count
    from a side the canvas's only row (column); several rows make "from the right" ambiguous."""
    if ref.scope is not None:
        if ref.scope.kind != "line":
            return Match(problem=f"{ref.describe()} is counted only on the canvas or in a line")
        if ref.axis is not None and ref.axis != ref.scope.axis:
            return Match(problem=f"{ref.describe()} does not run along {ref.scope.describe()}")
        return _line_nodes(scene, ref.scope)
    if scene.layout is None:
        return Match(problem=f"the text refers to {ref.describe()} but no canvas images are known")
    lines = scene.layout.rows if ref.axis == "row" else scene.layout.columns
    if len(lines) != 1:
        across = "rows" if ref.axis == "row" else "columns"
        return Match(problem=f"the canvas has {len(lines)} {across} and the text does not say in "
                             f"which to count {ref.describe()}")
    return lines[0]


def _resolve_ordinal(scene: Scene, ref: Reference) -> Match:
    sequence: list[str | None]
    if ref.axis is not None or (ref.scope is not None and ref.scope.kind == "line"):
        line = _counted_line(scene, ref)
        if isinstance(line, Match):
            return line
        sequence = [n.assetId if n.assetId in scene.inp.assets else None for n in line]
    elif ref.scope is not None:
        scope = _scope_ids(scene, ref)
        if scope.problem:
            return scope
        on_canvas = [n.assetId for n in scene.layout.reading_order] if scene.layout else []
        sequence = [*unique_ids(i for i in on_canvas if i in scope.ids), *scope.ids]
        sequence = list(unique_ids(sequence))
    elif scene.layout is not None:
        sequence = [
            n.assetId if n.assetId in scene.inp.assets else None for n in scene.layout.reading_order
        ]
    elif scene.inp.last_multi_result_ids or scene.inp.latest_result_ids:
        group = scene.inp.last_multi_result_ids or scene.inp.latest_result_ids
        first = _first_version(scene, ref, group)
        if first is not None:
            return first
        sequence = [i if i in scene.inp.assets else None for i in group]
    else:
        return Match(problem=f"the text refers to {ref.describe()} but there is nothing to count")
    index, count = ref.index or 1, ref.count or 1
    start = index - 1 if index > 0 else len(sequence) + index + 1 - count
    if start < 0 or start + count > len(sequence):
        there = f"there {'is' if len(sequence) == 1 else 'are'} only {image_count(len(sequence))}"
        return Match(problem=f"the text refers to {ref.describe()} but {there}")
    picked = sequence[start : start + count]
    if any(i is None for i in picked):
        return Match(problem=f"{ref.describe()} is not a registered asset")
    return Match(unique_ids(picked))


def _first_version(scene: Scene, ref: Reference, group: tuple[str, ...]) -> Match | None:
    """ "the first one" with no canvas, in a chat whose image in focus is a version chain: the
    chain's first version (its root), not the first of a one-image result; when a turn of several
    results makes "the first of them" fit as well, both readings tie (the text asks)."""
    if ref.index != 1 or (ref.count or 1) != 1:
        return None
    roots = unique_ids(scene.root(a) for a in scene.anchors if scene.root(a) != a)
    if not roots:
        return None  # no chain: the first of the turn's results
    if len(scene.known(scene.inp.last_multi_result_ids)) > 1:
        return Match(unique_ids([*roots, *scene.known(group[:1])]), tied=True)
    return Match(roots, tied=len(roots) > 1)


def _resolve_chain(scene: Scene, ref: Reference, several: bool) -> Match:
    if ref.value in ("latest", "results"):
        ids = scene.latest or scene.known(scene.ws.last_generated_asset_ids)
        if not ids:
            return Match(problem="the text refers to the latest result but there is none yet")
        if ref.value == "results" and len(ids) == 1 and len(scene.rounds) > 1:
            # "the first output" after several turns: the chat's results, if one a turn
            if any(len(turn) > 1 for turn in scene.rounds):
                return Match(problem="the text counts results but does not say of which turn")
            ids = tuple(turn[0] for turn in scene.rounds)
        if ref.count and ref.count != len(ids):
            return Match(problem=f"the text refers to {ref.count} latest results but the latest "
                                 f"turn produced {image_count(len(ids))}")
        return Match(ids, tied=len(ids) > 1 and not several)
    if ref.value == "round":
        return _resolve_round(scene, ref, several)
    if ref.value == "before":
        return _resolve_before(scene, ref, several)
    if ref.scope is not None:
        scope = _scope_ids(scene, ref)
        if scope.problem:
            return scope
        anchors = scope.ids
    else:
        anchors = scene.anchors
    if not anchors:
        return Match(problem=f"the text refers to {ref.describe()} but no image is in focus")
    if ref.value == "root":
        return Match(unique_ids(scene.root(a) for a in anchors))
    picked: list[str] = []
    for anchor in anchors:
        found = _chain_place(scene, anchor, ref)
        if found is None:
            return Match(problem=f"the text refers to {ref.describe()} but the chain of "
                                 f"{anchor} has no such version")
        picked.extend(found)
    ids = unique_ids(picked)
    return Match(ids, tied=len(ids) > 1 and not several)


def _resolve_round(scene: Scene, ref: Reference, several: bool) -> Match:
    """ "上上轮的", "two rounds ago", "第二轮的结果": a turn of the chat counted from the turn being
    resolved (-1 is the latest) or from the first turn that produced results (1)."""
    rounds = scene.rounds or ((scene.latest,) if scene.latest else ())
    index = ref.index or -1
    at = index - 1 if index > 0 else len(rounds) + index
    if not 0 <= at < len(rounds):
        turns = f"{len(rounds)} turn{'' if len(rounds) == 1 else 's'}"
        return Match(problem=f"the text refers to {ref.describe()} but the chat has {turns} "
                             f"with results")
    ids = rounds[at]
    if ref.count and ref.count != len(ids):
        return Match(problem=f"the text refers to {ref.count} images of {ref.describe()} but "
                             f"that turn produced {image_count(len(ids))}")
    return Match(ids, tied=len(ids) > 1 and not several)


def _resolve_before(scene: Scene, ref: Reference, several: bool) -> Match:
    """ "再往前一版", "go back one more", "the one before them": the version just before the
    earliest one the text rejects ("最后两版都不对"), else before the anchor."""
    anchors = scene.anchors
    if not anchors:
        return Match(problem=f"the text refers to {ref.describe()} but no image is in focus")
    rejected = scene.rejected
    places, at = scene.positions(anchors[0])
    spine = set(scene.chain(anchors[0]))
    hit = [k for k, ids in enumerate(places[: at + 1]) if rejected & set(ids)]
    first = (min(hit) if hit else at) - 1
    if first < 0:
        return Match(problem=f"the text refers to {ref.describe()} but the chain has no earlier "
                             f"version")
    ids = _version(places, spine, first)
    return Match(ids, tied=len(ids) > 1 and not several)


def _version(places: tuple[tuple[str, ...], ...], spine: set[str], k: int) -> tuple[str, ...]:
    """The version at place `k`: the result of that turn the anchor descends from, else all its
    results (several: the words must say which)."""
    return tuple(i for i in places[k] if i in spine) or places[k]


def _chain_place(scene: Scene, anchor: str, ref: Reference) -> tuple[str, ...] | None:
    """`ref`'s place on the version chain of `anchor` (`Scene.positions`): parents count back
    from the anchor (-1), versions from the root (1) or back from the anchor (-1), generated
    turns from the root's next place (1); a count takes that many places; a middle needs an odd
    number of places."""
    places, at = scene.positions(anchor)
    spine = set(scene.chain(anchor))
    count = ref.count or 1
    if ref.value == "generated":
        generated = places[1:]
        if ref.index is None:  # "你生成的", "every generated version": all of them in order
            return tuple(i for ids in generated for i in ids) or None
        start = ref.index - 1 if ref.index > 0 else len(generated) + ref.index + 1 - count
        if start < 0 or start + count > len(generated):
            return None
        return tuple(i for ids in generated[start : start + count] for i in ids)
    if ref.value in ("middle", "middle-generated"):  # "the middle version/generated one"
        offset = 1 if ref.value == "middle-generated" else 0
        span = places[offset : at + 1]
        if len(span) < 3 or len(span) % 2 == 0:
            return None
        return _version(places, spine, offset + len(span) // 2)
    if ref.value == "versions":  # "all the versions", "其他版本"
        return tuple(i for k in range(at + 1) for i in _version(places, spine, k))
    if ref.value == "parent":
        first = at + 1 + (ref.index or -2)
    else:
        index = ref.index or 1
        first = index - 1 if index > 0 else at + 1 + index - (count - 1)
    if first < 0 or first + count > at + 1:
        return None
    return tuple(i for k in range(first, first + count) for i in _version(places, spine, k))


def _groups(scene: Scene) -> tuple[tuple[str, ...], ...]:
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


def resolve_batch(scene: Scene, ref: Reference) -> Match:
    """ "这三张" / "all of them": the first group on show with that many (or several) images."""
    for group in _groups(scene):
        if (ref.count and len(group) == ref.count) or (not ref.count and len(group) > 1):
            return Match(group)
    return Match(
        problem=f"the text refers to {ref.describe()} but no such group of images is known"
    )


def complement_pool(scene: Scene) -> tuple[str, ...]:
    if scene.layout is not None:
        return scene.canvas_ids
    return scene.latest if len(scene.latest) > 1 else scene.known(scene.inp.last_multi_result_ids)


def image_count(n: int) -> str:
    return f"{n} image" + ("" if n == 1 else "s")
