"""Runs a table row through the resolver the way `POST /chats/{id}/resolve` builds its input."""

from __future__ import annotations

from collections.abc import Callable

from gateway.resolution.resolver import (
    AssetInfo,
    CanvasNode,
    Decision,
    ResolutionInput,
    ResultTurn,
    WorkingState,
    resolve_targets,
)

from .cases import Case
from .scenes import Scene


def _assets(scene: Scene) -> dict[str, AssetInfo]:
    """Every asset of the scene, in registration order; chain versions edited from each other."""
    assets: dict[str, AssetInfo] = {}
    root = scene.chain[0] if scene.chain else None
    parents = dict(scene.parents)
    previous: str | None = None
    for t, asset_id in enumerate(scene.asset_ids()):
        if asset_id in parents:
            assets[asset_id] = AssetInfo(asset_id, root or asset_id, parents[asset_id],
                                         "generated", "image", 1000 + t)
        elif asset_id in scene.chain:
            parent = previous if asset_id != root else None
            previous = asset_id
            assets[asset_id] = AssetInfo(asset_id, root or asset_id, parent,
                                         "upload" if parent is None else "generated", "image",
                                         1000 + t)
        else:
            source = "generated" if asset_id in scene.results else "upload"
            assets[asset_id] = AssetInfo(asset_id, asset_id, None, source, "image", 1000 + t)
    return assets


def resolution_input(scene: Scene, text: str) -> ResolutionInput:
    nodes = tuple(
        CanvasNode(n.node_id, n.asset_id, f"https://cdn.example/{n.asset_id}.png", n.x, n.y,
                   n.width, n.height, None, None, bool(n.is_selected))
        for n in scene.nodes
    )
    wanted = set(scene.selected_node_ids)
    selected = [*scene.selected_asset_ids,
                *(n.assetId for n in nodes if n.assetId and (n.isSelected or n.nodeId in wanted))]
    results = scene.results
    # as `POST /chats/{id}/results` leaves it: the results are the latest and, the first, the focus
    state = WorkingState(
        current_focus_asset_id=results[0] if results else None,
        selected_asset_ids=(),
        last_uploaded_asset_ids=scene.chain[:1],
        last_generated_asset_ids=results,
        last_referenced_asset_ids=(),
        last_resolved_asset_ids=(),
        active_canvas_node_ids=(),
        turn_count=len(scene.chain) + 1,
    )
    return ResolutionInput(
        text=text,
        uploaded_asset_ids=scene.uploads,
        selected_asset_ids=tuple(dict.fromkeys(selected)),
        selected_node_ids=scene.selected_node_ids,
        focus_policy="auto",
        canvas_nodes=nodes,
        assets=_assets(scene),
        working_state=state,
        latest_result_ids=results,
        last_multi_result_ids=next((t for t in reversed(scene.result_turns()) if len(t) > 1), ()),
        result_turns=tuple(ResultTurn(k, ids) for k, ids in enumerate(scene.result_turns(), 1)),
    )


def run(case: Case, resolve: Callable[[ResolutionInput], Decision] = resolve_targets) -> Decision:
    return resolve(resolution_input(case.scene, case.text))


def verdict(case: Case, decision: Decision) -> str:
    """right | asked (clarification where an answer was expected) | silent_wrong | wrong_mode."""
    if case.expected is None:
        return "right" if decision.mode == "clarification" else "silent_wrong"
    if decision.mode == "clarification":
        return "asked"
    if sorted(decision.target_asset_ids) != sorted(case.expected):
        return "silent_wrong"
    return "right" if decision.mode in case.modes else "wrong_mode"
