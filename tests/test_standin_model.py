"""The stand-in model (tests/standin_model.py) on the prompts the real engine sent it (recorded in
tests/fixtures/everos-1.5.1/prompts/) and on its embeddings and rerank scores."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from tests.e2e.real_engine_helpers import png
from tests.everos_recordings import load_prompts
from tests.standin_model import DIMENSIONS, _encode_embedding, answer, embed, read_prompt, relevance

PROMPTS = load_prompts()


def _chat(text: str) -> dict[str, object]:
    return {"model": "standin", "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("kind", sorted(PROMPTS))
def test_each_recorded_prompt_is_recognised_as_its_kind(kind: str) -> None:
    assert answer(_chat(PROMPTS[kind]))[0] == kind


# The answers the engine parses as JSON, and a key each must carry (everalgo's parsers).
JSON_ANSWERS = {
    "boundary": "should_wait", "episode": "content", "atomic_facts": "atomic_facts",
    "profile": "explicit_info", "profile_update": "operations", "agent_case_filter": "reason",
    "agent_case": "task_intent", "agent_skill": "operations", "rerank": "ranked",
    "reflect": "content",
}


@pytest.mark.parametrize("kind", sorted(set(JSON_ANSWERS) & set(PROMPTS)))
def test_a_json_answer_has_the_key_the_engine_reads(kind: str) -> None:
    assert JSON_ANSWERS[kind] in json.loads(answer(_chat(PROMPTS[kind]))[1])


def test_an_episode_restates_the_conversation_with_its_file_names() -> None:
    episode = json.loads(answer(_chat(PROMPTS["episode"]))[1])
    assert "[IMAGE: summit.png]" in episode["content"]
    assert "guide said: What a view from the summit!" in episode["content"]


def test_atomic_facts_are_the_sentences_of_the_episode_at_its_time() -> None:
    facts = json.loads(answer(_chat(PROMPTS["atomic_facts"]))[1])["atomic_facts"]
    assert facts["time"] and facts["time"] in PROMPTS["atomic_facts"]
    assert all(fact in PROMPTS["atomic_facts"] for fact in facts["atomic_fact"])


def test_a_profile_holds_only_what_the_target_user_said() -> None:
    profile = json.loads(answer(_chat(PROMPTS["profile"]))[1])
    assert profile["explicit_info"]
    assert all(f["description"].startswith("alice said: ") and "view" not in f["description"]
               for f in profile["explicit_info"])


def test_an_image_is_described_by_its_format_size_and_digest() -> None:
    picture = png(3, 2)
    body = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": PROMPTS["image"]},
        {"type": "image_url", "image_url": {
            "url": "data:image/png;base64," + base64.b64encode(picture).decode()}}]}]}
    assert read_prompt(body).attachments == [("image/png", picture)]
    kind, description = answer(body)
    assert kind == "image" and description.startswith("A 3x2 image/png picture (")


def test_a_web_page_is_read_as_its_text() -> None:
    assert answer(_chat(PROMPTS["html"]))[1] == "Harbour timetable Ferry at 9:15"


def test_an_unknown_prompt_is_answered_with_an_empty_object() -> None:
    assert answer(_chat("Write a poem about the sea.")) == ("unknown", "{}")


def test_embeddings_are_unit_vectors_near_for_shared_words() -> None:
    hike, summit, tax = (embed(t) for t in ("our hike to the summit", "the summit hike",
                                              "quarterly tax return"))
    assert len(hike) == DIMENSIONS
    assert abs(sum(v * v for v in hike) - 1) < 1e-9
    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))
    assert cosine(hike, summit) > 0.6 > cosine(hike, tax)
    assert embed("our hike to the summit") == hike


def test_a_base64_embedding_is_little_endian_float32() -> None:
    vector = embed("summit")
    decoded = struct.unpack(f"<{DIMENSIONS}f", base64.b64decode(_encode_embedding(vector,
                                                                                   "base64")))
    assert [round(v, 6) for v in decoded] == [round(v, 6) for v in vector]


@pytest.mark.parametrize(("query", "document", "score"), [
    ("flight Oslo", "Find the cheapest flight from Paris to Oslo", 1.0),
    ("flight Oslo", "book a flight", 0.5),
    ("flight Oslo", "harbour crane", 0.0),
    ("", "anything", 0.0),
])
def test_rerank_relevance_is_the_share_of_query_words_found(query: str, document: str,
                                                            score: float) -> None:
    assert relevance(query, document) == score
