"""Which image a chat turn means: the fixed-priority target resolver of SPEC §12.

Pure: no I/O, no model, no clock. `resolve_targets` gets everything in a `ResolutionInput` and
returns a `Decision`. What each reference points at is `gateway/resolution/scene.py`, the canvas
geometry `gateway/resolution/canvas.py`, and the words it understands
`gateway/resolution/parsing.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from gateway.resolution.canvas import CanvasLayout, CanvasNode, canvas_layout
from gateway.resolution.parsing import Reference
from gateway.resolution.scene import (
    AssetInfo,
    Match,
    ResolutionInput,
    ResultTurn,
    Scene,
    WorkingState,
    build_scene,
    complement_pool,
    image_count,
    resolve_batch,
    resolve_reference,
    unique_ids,
)

# The resolver's public names; the input types and the canvas are re-exported from their modules.
__all__ = [
    "CONFIDENCE",
    "FOCUS_POLICIES",
    "MAX_CANDIDATES",
    "MODES",
    "AssetInfo",
    "CanvasLayout",
    "CanvasNode",
    "Decision",
    "ResolutionInput",
    "ResultTurn",
    "WorkingState",
    "canvas_layout",
    "resolve_targets",
]

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
class Decision:
    target_asset_ids: tuple[str, ...]
    candidate_asset_ids: tuple[str, ...]
    mode: str
    confidence: int
    needs_clarification: bool
    reason: str
    # set when mode == "clarification" because several candidates tie; a model may pick one
    tied_candidate_ids: tuple[str, ...] = ()


_SELECTED = Reference("selection", "selected", 0, 0, plural=True)
_ALL = Reference("batch", "all", 0, 0, plural=True)


# ---------------------------------------------------------------------------------- decisions


def _decision(
    mode: str, targets: Iterable[str], pool: Iterable[str], confidence: int, reason: str
) -> Decision:
    targets = unique_ids(targets)
    candidates = unique_ids([*targets, *pool])[: max(MAX_CANDIDATES, len(targets))]
    return Decision(targets, candidates, mode, confidence, False, reason)


def _clarify(scene: Scene, excluded: set[str], reason: str, tied: Iterable[str] = ()) -> Decision:
    tied = tuple(i for i in unique_ids(tied) if i not in excluded)[:MAX_CANDIDATES]
    if tied:
        return Decision((), tied, "clarification", CONFIDENCE["clarify_tie"], True, reason, tied)
    newest = sorted(scene.inp.assets.values(), key=lambda a: (-a.created_at_ms, a.id))
    for pool in (scene.canvas_ids, scene.latest, unique_ids(a.id for a in newest)):
        left = tuple(i for i in pool if i not in excluded)
        if left:
            return Decision(
                (), left[:MAX_CANDIDATES], "clarification", CONFIDENCE["clarify"], True, reason
            )
    return Decision((), (), "clarification", CONFIDENCE["clarify"], True, reason)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _strong_targets(scene: Scene) -> list[Reference]:
    return [
        r for r in scene.with_role("target") if not r.weak and r.kind not in ("batch", "complement")
    ]


def _excluded_ids(scene: Scene) -> tuple[set[str], str | None]:
    """The images the text takes out, and why, if one it counts or places is not there."""
    excluded: set[str] = set()
    for ref in scene.with_role("excluded"):
        if ref.kind not in ("batch", "complement"):
            match = resolve_reference(scene, ref, plural=True)
            if match.problem and ref.kind in ("ordinal", "position", "line"):
                return excluded, match.problem  # "除了第六张" of five: which did they mean?
            excluded.update(match.ids)
    return excluded, None


def _narrow(scene: Scene, refs: list[Reference], group: Reference) -> Match | None:
    """Positions/ordinals read inside the selection or the uploads: "选中的几张里左边那张"."""
    narrowers = [
        r
        for r in refs
        if r.kind in ("ordinal", "position") and (r.scope is None or r.scope.kind == group.kind)
    ]
    if not narrowers:
        return None
    matches = [
        resolve_reference(scene, replace(r, scope=r.scope or group), plural=False)
        for r in narrowers
    ]
    if any(m.problem for m in matches):
        return None
    return Match(unique_ids(i for m in matches for i in m.ids), tied=any(m.tied for m in matches))


def _relative_to_selection(ref: Reference) -> bool:
    """ "原图", "选中那张的上一个版本": the original or previous version *of* the selection."""
    relative = ref.kind == "chain" and ref.value in ("root", "parent")
    return relative and (ref.scope is None or ref.scope.kind == "selection")


def _by_selection(scene: Scene, excluded: set[str]) -> Decision | None:
    selection = scene.selection
    if not selection:
        return None
    if scene.inp.focus_policy == "selected":
        reason = f"focusPolicy 'selected' forces the selection ({image_count(len(selection))})."
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
            reason = f"The text narrows the selection to {image_count(len(narrowed.ids))}."
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
            f"The request selects {image_count(len(remaining))}; the selection outranks the text's "
            f"reference to {others[0].describe()}."
        )
        return _decision(
            "explicit_selection", remaining, remaining, CONFIDENCE["selection_over_text"], reason
        )
    reason = f"The request selects {image_count(len(remaining))}."
    return _decision("explicit_selection", remaining, remaining, CONFIDENCE["selection"], reason)


def _by_upload(scene: Scene, excluded: set[str]) -> Decision | None:
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
            reason = f"The text picks {image_count(len(narrowed.ids))} of this turn's uploads."
            return _decision("current_upload", narrowed.ids, uploads, CONFIDENCE["upload"], reason)
    others = [r for r in refs if r.kind != "upload"]
    if others:
        reason = (
            f"This turn uploaded {image_count(len(uploads))}; uploads outrank the text's reference "
            f"to {others[0].describe()}."
        )
        return _decision("current_upload", uploads, uploads, CONFIDENCE["upload_over_text"], reason)
    reason = f"This turn uploaded {image_count(len(uploads))}."
    return _decision("current_upload", uploads, uploads, CONFIDENCE["upload"], reason)


def _by_text(scene: Scene, excluded: set[str]) -> Decision | None:
    if scene.parsed.unread:
        # a reference the rules only half understand: asking costs less than a wrong image
        words = ", ".join(f"'{w.strip()}'" for w in scene.parsed.unread)
        return _clarify(scene, excluded, f"The text refers to an image by words the rules "
                                         f"cannot read ({words}).")
    refs = _strong_targets(scene)
    batches = [r for r in scene.with_role("target") if r.kind == "batch"]
    if scene.parsed.all_but and not refs and not batches:  # "除了第二张", "all but the last"
        batches = [_ALL]
    complements = [r for r in scene.with_role("target") if r.kind == "complement"]
    # "第二轮除了第二张": what the rest is taken from names several
    plural = bool(batches) or any(r.plural for r in refs) or scene.parsed.all_but
    pool = scene.canvas_ids or scene.latest
    targets: list[str] = []
    for ref in refs:
        match = resolve_reference(scene, ref, plural)
        if match.problem:
            return _clarify(scene, excluded, _sentence(match.problem))
        ids = [i for i in match.ids if i not in excluded]
        if match.tied and len(ids) > 1:
            return _clarify(
                scene,
                excluded,
                f"The text refers to {ref.describe()}, which matches {image_count(len(ids))}.",
                ids,
            )
        targets.extend(ids)
    if refs and not targets:
        return _clarify(scene, excluded, "The text excludes every image it names.")
    if any(r.either for r in refs) and len(unique_ids(targets)) > 1:
        return _clarify(scene, excluded, "The text names several images as alternatives.", targets)
    # "the other one" with nothing else named: other than the selection or the focus
    current = set() if excluded or targets else set(scene.selection or scene.focus)
    for ref in complements:
        pool = complement_pool(scene)
        rest = [i for i in pool if i not in excluded and i not in targets and i not in current]
        if not rest:
            return _clarify(scene, excluded, "The text refers to the other image but none is left.")
        if ref.count and ref.count != len(rest):  # "除了左上角那张，其他两张" of four
            return _clarify(scene, excluded, f"The text counts {ref.count} other images but "
                                             f"{image_count(len(rest))} are left.", rest)
        if len(rest) > 1 and not ref.plural:
            return _clarify(
                scene,
                excluded,
                f"The text refers to the other image, which matches {image_count(len(rest))}.",
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
        match = resolve_batch(scene, strong[0] if strong else batches[0])
        ids = [i for i in match.ids if i not in excluded]
        if ids:
            named = (strong or batches)[0].describe()
            reason = f"The text refers to {named} ({image_count(len(ids))})."
            return _decision("text_reference", ids, pool, CONFIDENCE["text_batch"], reason)
        if strong:
            return _clarify(
                scene, excluded, _sentence(match.problem or "The text's batch is empty")
            )
    if excluded:
        rest = [i for i in complement_pool(scene) if i not in excluded]
        if len(rest) == 1:
            reason = "The text excludes the other images, leaving one."
            return _decision("text_reference", rest, pool, CONFIDENCE["text_negation_only"], reason)
    return None


def _originals(scene: Scene, ids: Iterable[str]) -> tuple[str, ...]:
    if scene.inp.focus_policy != "original":
        return tuple(ids)
    return unique_ids(scene.root(i) for i in ids)


def _policy_note(scene: Scene) -> str:
    return (
        " (focusPolicy 'original': its chain root)" if scene.inp.focus_policy == "original" else ""
    )


def _by_working_memory(scene: Scene, excluded: set[str]) -> Decision | None:
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
            registered = list(scene.inp.assets)  # a tie lists them in registration order
            tied = sorted(targets, key=registered.index)
            return _clarify(
                scene, excluded, f"Working memory holds several candidates for {name}.", tied
            )
        reason = (
            f"No usable reference in the text; working memory gives {name}{_policy_note(scene)}."
        )
        return _decision(
            "working_memory", targets, [*scene.focus, *scene.latest], CONFIDENCE[key], reason
        )
    return None


def _by_latest_result(scene: Scene, excluded: set[str]) -> Decision | None:
    left = [i for i in scene.latest if i not in excluded]
    if not left:
        return None
    targets = _originals(scene, left)
    if len(targets) > 1:
        return _clarify(
            scene,
            excluded,
            f"The latest turn produced {image_count(len(targets))} and nothing picks one.",
            targets,
        )
    preferred = scene.inp.focus_policy == "latest_result"
    reason = f"No usable reference in the text; using the latest result{_policy_note(scene)}."
    key = "latest_preferred" if preferred else "latest"
    return _decision("latest_result", targets, scene.latest, CONFIDENCE[key], reason)


def resolve_targets(inp: ResolutionInput) -> Decision:
    """The images this turn means, by the fixed priority of SPEC §12 (see docs/resolution.md)."""
    scene = build_scene(inp)
    excluded, problem = _excluded_ids(scene)
    if problem is not None:
        return _clarify(scene, excluded, _sentence(problem))
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
