"""Model disambiguation: when the rules end in a tie, ask the configured model to pick one.

Runs only with `[llm]` configured and only among `Decision.tied_candidate_ids`. The model sees
the turn's text and compact candidate summaries and must answer
`{"assetId", "confidence", "needsClarification"}`; anything else (timeout, malformed JSON, an id
outside the tie, a low confidence) leaves the clarification decision standing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any

from gateway.llm.client import LlmClient
from gateway.resolution.resolver import Decision, ResolutionInput

log = logging.getLogger("gateway.resolution")

# Below this the model is guessing: asking the user is better than acting on a guess.
MIN_MODEL_CONFIDENCE = 50
MAX_TEXT_CHARS = 2000
MAX_PROMPT_CHARS = 200

SYSTEM_PROMPT = (
    "You decide which image a user's chat message refers to. You get the message and a list of "
    "candidate images (ids with short descriptions: origin, name, generation prompt, canvas "
    "position, role in the chat). Answer with one JSON object and nothing else: "
    '{"assetId": "<one candidate id, or null>", "confidence": <integer 0-100>, '
    '"needsClarification": <true when the message does not say which image>}.'
)


@dataclass(frozen=True)
class ModelChoice:
    asset_id: str
    confidence: int


def candidate_summaries(inp: ResolutionInput, ids: tuple[str, ...]) -> list[dict[str, Any]]:
    """One small object per candidate: what a model needs to tell them apart, nothing more."""
    nodes = {node.assetId: node for node in inp.canvas_nodes if node.assetId}
    order = {asset_id: index for index, asset_id in enumerate(inp.assets)}
    state = inp.working_state
    summaries = []
    for asset_id in ids:
        asset = inp.assets[asset_id]
        summary: dict[str, Any] = {
            "assetId": asset_id,
            "mediaType": asset.media_type,
            "sourceType": asset.source_type,
            "registrationOrder": order[asset_id] + 1,
            "isOriginal": asset.root_asset_id == asset_id,
        }
        if asset.primary_parent_asset_id:
            summary["editedFrom"] = asset.primary_parent_asset_id
        if asset.display_name:
            summary["name"] = asset.display_name
        if asset.prompt:
            summary["prompt"] = asset.prompt[:MAX_PROMPT_CHARS]
        node = nodes.get(asset_id)
        if node is not None:
            summary["canvas"] = {"x": node.x, "y": node.y, "title": node.title}
        roles = [
            role
            for role, ids_with_role in (
                ("uploaded_this_turn", inp.uploaded_asset_ids),
                ("selected", inp.selected_asset_ids),
                ("latest_result", inp.latest_result_ids),
                ("current_focus", (state.current_focus_asset_id,)),
                ("last_resolved", state.last_resolved_asset_ids),
            )
            if asset_id in ids_with_role
        ]
        if roles:
            summary["roles"] = roles
        summaries.append(summary)
    return summaries


def messages_for(inp: ResolutionInput, tied: tuple[str, ...]) -> list[dict[str, str]]:
    question = {"message": inp.text[:MAX_TEXT_CHARS], "candidates": candidate_summaries(inp, tied)}
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": json.dumps(question, ensure_ascii=False)},
    ]


def parse_choice(answer: dict[str, Any] | None, tied: tuple[str, ...]) -> ModelChoice | None:
    """The model's pick, or None when the answer is missing, malformed or declines to pick."""
    if answer is None:
        return None
    asset_id = answer.get("assetId")
    confidence = answer.get("confidence")
    needs_clarification = answer.get("needsClarification")
    if not isinstance(needs_clarification, bool) or needs_clarification:
        return None
    if not isinstance(asset_id, str) or asset_id not in tied:
        return None
    if isinstance(confidence, bool) or not isinstance(confidence, int):
        return None
    if not 0 <= confidence <= 100 or confidence < MIN_MODEL_CONFIDENCE:
        return None
    return ModelChoice(asset_id, confidence)


async def disambiguate(
    llm: LlmClient | None, inp: ResolutionInput, decision: Decision
) -> Decision:
    """The decision, or a `llm_disambiguation` one when the model picks among the tie."""
    tied = tuple(i for i in decision.tied_candidate_ids if i in inp.assets)
    if llm is None or decision.mode != "clarification" or len(tied) < 2:
        return decision
    choice = parse_choice(await llm.chat_json(messages_for(inp, tied)), tied)
    if choice is None:
        log.info("model disambiguation gave no usable answer; asking the user")
        return replace(
            decision, reason=f"{decision.reason} The model could not pick one of them."
        )
    return Decision(
        target_asset_ids=(choice.asset_id,),
        candidate_asset_ids=decision.candidate_asset_ids,
        mode="llm_disambiguation",
        confidence=choice.confidence,
        needs_clarification=False,
        reason=(
            f"{decision.reason} The model picked {choice.asset_id} "
            f"(confidence {choice.confidence})."
        ),
        tied_candidate_ids=tied,
    )
