"""Scenes for the resolution table: canvases, version chains, turn results and selections.

A scene is plain data, independent of how the resolver takes its input; the harness in
``tests/resolution_cases/harness.py`` turns it into a resolver call.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

SIZE = 100
GAP = 20


@dataclass(frozen=True)
class Node:
    node_id: str
    asset_id: str
    x: float
    y: float
    width: float = SIZE
    height: float = SIZE
    is_selected: bool | None = None


@dataclass(frozen=True)
class Scene:
    """What the resolver sees on one turn.

    ``chain`` is the version chain of the image in focus, root first; ``results`` the assets of the
    most recent turn, in registration order (they are the focus when there is no chain);
    ``selected_node_ids`` / ``selected_asset_ids`` the request's explicit selection.
    """

    name: str
    nodes: tuple[Node, ...] = ()
    chain: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    selected_node_ids: tuple[str, ...] = ()
    selected_asset_ids: tuple[str, ...] = ()
    uploads: tuple[str, ...] = ()
    extra_assets: tuple[str, ...] = field(default=())
    # the conversation's turns that produced results, oldest first, each turn's results in order
    # (``story``); empty: one turn per version after the root of ``chain``, then ``results``
    turns: tuple[tuple[str, ...], ...] = ()
    # a generated asset's parent where it is not the previous turn's only result
    parents: tuple[tuple[str, str], ...] = ()

    def result_turns(self) -> tuple[tuple[str, ...], ...]:
        if self.turns:
            return self.turns
        turns = tuple((v,) for v in self.chain[1:])
        if self.results and (not turns or turns[-1] != self.results):
            turns = (*turns, self.results)
        return turns

    def asset_ids(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        turns = (a for t in self.turns for a in t)
        for asset_id in (*self.chain, *turns, *self.results, *(n.asset_id for n in self.nodes),
                         *self.uploads, *self.extra_assets):
            seen.setdefault(asset_id, None)
        return tuple(seen)


def row(n: int, name: str | None = None) -> Scene:
    """``n`` images side by side, assets a1..an left to right (listed right to left)."""
    nodes = tuple(Node(f"n{i}", f"a{i}", (i - 1) * (SIZE + GAP), 0) for i in range(n, 0, -1))
    return Scene(name or f"row{n}", nodes=nodes)


def column(n: int) -> Scene:
    """``n`` images stacked, assets a1..an top to bottom."""
    nodes = tuple(Node(f"n{i}", f"a{i}", 0, (i - 1) * (SIZE + GAP)) for i in range(1, n + 1))
    return Scene(f"column{n}", nodes=nodes)


def grid(rows: int, cols: int) -> Scene:
    """A rows x cols grid, asset ``r{row}c{col}`` (1-based), nodes listed column-major."""
    nodes = tuple(
        Node(f"n{r}{c}", f"r{r}c{c}", (c - 1) * (SIZE + GAP), (r - 1) * (SIZE + GAP))
        for c in range(1, cols + 1) for r in range(1, rows + 1)
    )
    return Scene(f"grid{rows}x{cols}", nodes=nodes)


def ragged() -> Scene:
    """Two rows of images of different sizes; sorting by top edge alone reads them wrongly.

    Row 1 (vertical extents 0..300): A tall at left, B small and low, C small and high.
    Row 2 (350..500): D, E (starts above D), F wide and flat. Reading order A B C D E F.
    """
    nodes = (
        Node("nC", "C", 450, 20, 100, 100),
        Node("nE", "E", 150, 350, 90, 150),
        Node("nA", "A", 0, 0, 200, 300),
        Node("nF", "F", 300, 420, 200, 60),
        Node("nB", "B", 250, 120, 150, 100),
        Node("nD", "D", 0, 400, 100, 100),
    )
    return Scene("ragged", nodes=nodes)


def chain(length: int) -> Scene:
    """A version chain v0 (the upload) .. v{length-1} (the latest result, in focus)."""
    versions = tuple(f"v{i}" for i in range(length))
    return Scene(f"chain{length}", chain=versions, results=(versions[-1],))


def results(n: int) -> Scene:
    """The last turn produced ``n`` results r1..rn; no canvas."""
    return Scene(f"results{n}", results=tuple(f"r{i}" for i in range(1, n + 1)))


def with_results(scene: Scene, n: int) -> Scene:
    return replace(scene, name=f"{scene.name}+results{n}",
                   results=tuple(f"r{i}" for i in range(1, n + 1)))


def select_nodes(scene: Scene, *node_ids: str) -> Scene:
    return replace(scene, name=f"{scene.name}+selectedNodeIds", selected_node_ids=node_ids)


def flag_nodes(scene: Scene, *node_ids: str) -> Scene:
    """Selection carried only by ``isSelected`` on the nodes."""
    nodes = tuple(replace(n, is_selected=n.node_id in node_ids) for n in scene.nodes)
    return replace(scene, name=f"{scene.name}+isSelected", nodes=nodes)


def select_assets(scene: Scene, *asset_ids: str) -> Scene:
    return replace(scene, name=f"{scene.name}+selectedAssetIds", selected_asset_ids=asset_ids)


def upload(scene: Scene, *asset_ids: str) -> Scene:
    return replace(scene, name=f"{scene.name}+upload", uploads=asset_ids)


def chain_on_canvas(length: int) -> Scene:
    """A version chain whose latest version is also the only image on the canvas."""
    base = chain(length)
    latest = base.chain[-1]
    return replace(base, name=f"chain{length}+canvas", nodes=(Node("nv", latest, 0, 0),))


def with_chain(scene: Scene, length: int) -> Scene:
    """``scene``'s canvas in a conversation whose focus is a version chain v0..v{length-1}."""
    versions = tuple(f"v{i}" for i in range(length))
    return replace(scene, name=f"{scene.name}+chain{length}", chain=versions,
                   results=(versions[-1],))


def story(*turns: str, name: str | None = None) -> Scene:
    """A conversation's version chain by turns: the upload ``o``, then one turn per argument.

    A turn is its results, space-separated, in order ("t2a t2b t2c"); ``id<parent`` names the
    result it was made from, otherwise it was made from the previous turn's only result (after a
    turn with several results the parent must be named). The last turn is the latest result.
    """
    parsed: list[tuple[str, ...]] = []
    parents: list[tuple[str, str]] = []
    previous: tuple[str, ...] = ("o",)
    for turn in turns:
        ids = []
        for item in turn.split():
            asset_id, _, parent = item.partition("<")
            if not parent:
                if len(previous) != 1:
                    raise ValueError(f"{asset_id}: name the parent after a turn of several")
                parent = previous[0]
            ids.append(asset_id)
            parents.append((asset_id, parent))
        parsed.append(tuple(ids))
        previous = tuple(ids)
    label = name or "story(" + "|".join(turns) + ")"
    return Scene(label, chain=("o",), results=parsed[-1] if parsed else (),
                 turns=tuple(parsed), parents=tuple(parents))
