"""A deterministic stand-in for the OpenAI-compatible model endpoints the real EverOS engine calls.

`python -m tests.standin_model PORT` serves `POST /v1/chat/completions` (every prompt of the
engine's algorithm packages: boundary detection, episodes, atomic facts, profiles, profile and
skill clustering, agent cases and skills, multimodal parsing of images, documents, web pages and
audio, and the search-time rerank and retrieval prompts), `POST /v1/embeddings` (1024-dimension
hashed bag-of-words vectors, so texts that share words are near), `POST /v1/rerank` (the
cross-encoder API the engine's `vllm` rerank provider speaks, scored by shared words) and
`GET /calls` (each request it has answered, in order, with its kind and prompt, for tests).

Every answer is derived from the prompt's own input and nothing else: an episode restates the
conversation it was given (file names included), an atomic fact is a sentence of the episode, an
image is described by its format, size and digest. The same prompt always gets the same answer.
A prompt it does not recognise is answered with an empty JSON object and recorded as `unknown`;
one it recognises but cannot read gets a 500 and an `error` in its record, so a test can tell
when the engine asks something new.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

DIMENSIONS = 1024
MODEL = "standin"

_WORD = re.compile(r"\w+", re.UNICODE)
# `[N] [time] speaker: text` (boundary), `[time] speaker: text` (atomic facts) and
# `[time] speaker(user_id:ID): text` (profile) lines.
_SPOKEN_LINE = re.compile(r"\s*(?:\[\d+\]\s*)?\[[^\]]*\]\s*([^:]+?)(?:\(user_id:([^)]*)\))?: (.*)")


# ── Embeddings ──────────────────────────────────────────────────────────────────────────────────


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """A unit vector with one weight per distinct lower-cased word, at a position its hash picks."""
    vector = [0.0] * dimensions
    words = [w.lower() for w in _WORD.findall(text)] or ["\x00empty"]
    for word in words:
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest, "big") % dimensions] += 1.0
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector]


def relevance(query: str, document: str) -> float:
    """The share of the query's distinct words that the document contains."""
    wanted = {w.lower() for w in _WORD.findall(query)}
    found = {w.lower() for w in _WORD.findall(document)}
    return round(len(wanted & found) / len(wanted), 4) if wanted else 0.0


def _encode_embedding(vector: list[float], encoding_format: str) -> list[float] | str:
    # The openai SDK asks for base64 (float32, little-endian) unless told otherwise.
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return vector


# ── Reading a prompt ────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Prompt:
    text: str  # every text part of every message, joined
    attachments: list[tuple[str, bytes]]  # (mime, bytes) of each data-URL part

    def after(self, marker: str) -> str:
        """The text after the last occurrence of `marker` ('' when absent)."""
        at = self.text.rfind(marker)
        return self.text[at + len(marker):] if at >= 0 else ""

    def between(self, start: str, end: str) -> str:
        rest = self.after(start)
        stop = rest.find(end)
        return rest[:stop] if stop >= 0 else rest


def read_prompt(body: dict[str, Any]) -> Prompt:
    texts: list[str] = []
    attachments: list[tuple[str, bytes]] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                texts.append(str(part.get("text") or ""))
                continue
            url = (part.get("image_url") or {}).get("url") or ""
            if part.get("type") == "input_audio":
                audio = part.get("input_audio") or {}
                url = f"data:audio/{audio.get('format', 'wav')};base64,{audio.get('data', '')}"
            match = re.match(r"data:([^;,]*)(;base64)?,(.*)", url, re.DOTALL)
            if match:
                mime, encoded, data = match.groups()
                attachments.append((mime, base64.b64decode(data) if encoded else data.encode()))
    return Prompt("\n".join(texts), attachments)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?。！？])\s+|\n+", text)
    return [part.strip() for part in parts if part.strip()]


def _first_words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])


def _lines_of_speech(block: str, *, by_id: bool = False) -> list[tuple[str, str]]:
    """(speaker, text) of each message of a rendered conversation, in any of the renderings the
    prompts use: the episode prompt's pseudo-JSON objects, or `[time] speaker: text` lines;
    `by_id`: the speaker's `user_id` where the line gives one."""
    objects = re.findall(r'"speaker": (.*?),\n\s*"content": (.*?)\n\s*\}', block, re.DOTALL)
    if objects:
        return [(speaker.strip(), " ".join(text.split())) for speaker, text in objects]
    spoken: list[tuple[str, str]] = []
    for line in block.splitlines():
        match = _SPOKEN_LINE.match(line)
        if match:
            name, user_id, text = match.groups()
            spoken.append(((user_id if by_id and user_id else name).strip(), text.strip()))
        elif spoken and line.strip():  # a message's text continues on the next line
            speaker, text = spoken[-1]
            spoken[-1] = (speaker, f"{text} {line.strip()}")
    return spoken


def _narrate(spoken: list[tuple[str, str]]) -> str:
    return " ".join(f"{speaker} said: {text}" for speaker, text in spoken)


# ── Answers, one per prompt kind ────────────────────────────────────────────────────────────────


def _boundary_batch(prompt: Prompt) -> str:
    # One episode per batch: the engine closes it when the session is flushed.
    return _json({"reasoning": "All messages continue one conversation.", "boundaries": [],
                  "should_wait": False})


def _boundary_step(prompt: Prompt) -> str:
    return _json({"reasoning": "The new messages continue the conversation.", "should_end": False,
                  "confidence": 1.0, "topic_summary": ""})


def _episode(prompt: Prompt) -> str:
    start = prompt.between("Conversation start time: ", "\n").strip()
    spoken = _lines_of_speech(prompt.between("Conversation content:", "Custom instructions:"))
    speakers = list(dict.fromkeys(speaker for speaker, _ in spoken))
    first = spoken[0][1] if spoken else ""
    title = f"Conversation of {' and '.join(speakers) or 'nobody'}: {_first_words(first, 8)}"
    content = f"On {start}, {_narrate(spoken)}" if spoken else f"On {start}, nothing was said."
    return _json({"title": title, "content": content})


def _atomic_facts_from_text(prompt: Prompt) -> str:
    text = prompt.between('- EPISODE_TEXT: "', '"\n- TIME: "')
    time = prompt.between('- TIME: "', '"').strip() or "unknown time"
    key = "event_log" if "EVENT_LOG" in prompt.text and "atomic_facts" not in prompt.text else (
        "atomic_facts")
    return _json({key: {"time": time, "atomic_fact": _sentences(text)}})


def _atomic_facts_from_conversation(prompt: Prompt) -> str:
    time = prompt.between("Conversation start time: ", "\n").strip() or "unknown time"
    spoken = _lines_of_speech(prompt.between("Conversation content:\n", "**CRITICAL"))
    return _json({"atomic_facts": {"time": time,
                                   "atomic_fact": [f"{s} said: {t}" for s, t in spoken]}})


def _profile_facts(conversation: str, user: str) -> list[dict[str, str]]:
    """What the target user said (by `user_id`), at most three statements."""
    said = [text for speaker, text in _lines_of_speech(conversation, by_id=True) if speaker == user]
    return [{"category": "statement", "description": f"{user} said: {text}", "evidence": text}
            for text in said[:3]]


def _profile_initial(prompt: Prompt) -> str:
    user = prompt.between("**TARGET USER: ", "**").strip()
    facts = _profile_facts(prompt.after("【Original Conversation】"), user)
    return _json({"explicit_info": facts, "implicit_traits": []})


def _profile_update(prompt: Prompt) -> str:
    user = prompt.between("**TARGET USER: ", "**").strip()
    existing = prompt.between("【Current User Profile】", "【Conversation Records】")
    facts = _profile_facts(prompt.between("【Conversation Records】", "【Task】"), user)
    operations: list[dict[str, Any]] = [
        {"action": "add", "type": "explicit_info", "data": fact}
        for fact in facts if _json(fact["description"])[1:-1] not in existing
    ]
    return _json({"operations": operations or [{"action": "none"}],
                  "update_note": f"{len(operations)} new statements"})


def _profile_compact(prompt: Prompt) -> str:
    at = prompt.text.find('{\n  "explicit_info"')
    profile = json.JSONDecoder().raw_decode(prompt.text, at)[0] if at >= 0 else {}
    limit = int(prompt.between("to **", " items").strip() or 30)
    explicit = list(profile.get("explicit_info", []))[:limit]
    implicit = list(profile.get("implicit_traits", []))[:max(0, limit - len(explicit))]
    return _json({"explicit_info": explicit, "implicit_traits": implicit})


def _cluster_assignment(prompt: Prompt) -> str:
    # A new cluster unless the geometry already merged it (the engine asks only below its
    # similarity threshold).
    return _json({"idx": -1, "reason": "no existing cluster shares the task"})


def _trajectory(prompt: Prompt, marker: str) -> list[dict[str, Any]]:
    at = prompt.text.find("[", prompt.text.rfind(marker))
    try:
        messages = json.JSONDecoder().raw_decode(prompt.text, at)[0] if at >= 0 else []
    except json.JSONDecodeError:
        return []
    return [m for m in messages if isinstance(m, dict)]


def _tool_names(messages: list[dict[str, Any]]) -> list[str]:
    return [call.get("function", {}).get("name", "tool")
            for m in messages for call in m.get("tool_calls") or []]


def _case_filter(prompt: Prompt) -> str:
    tools = _tool_names(_trajectory(prompt, "Conversation:"))
    return _json({"has_exploration": bool(tools), "has_user_correction": False,
                  "reason": f"{len(tools)} tool calls toward the result"})


def _case_compress(prompt: Prompt) -> str:
    messages = _trajectory(prompt, "Pre-processed trajectory:")
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    answers = [str(m.get("content") or "") for m in messages
               if m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls")]
    steps = []
    for number, message in enumerate((m for m in messages if m.get("tool_calls")), start=1):
        for call in message["tool_calls"]:
            function = call.get("function", {})
            steps.append(f"{number}. {function.get('name')}\n   - Tried: {function.get('name')}"
                         f"({function.get('arguments', '')})")
    outcome = answers[-1] if answers else ""
    return _json({
        "task_intent": _first_words(users[0], 50) if users else "",
        "approach": "\n".join(steps) + f"\n\nOutcome: {outcome}",
        "key_insight": f"Used {', '.join(dict.fromkeys(_tool_names(messages)))} in turn.",
        "quality_score": 0.8,
    })


def _tool_pre_compress(prompt: Prompt) -> str:
    # The same messages back: the shape the engine checks, nothing invented.
    return _json({"compressed_messages": _trajectory(prompt, "messages")})


def _skill_extract(prompt: Prompt) -> str:
    marker = "[New AgentCase(s) to integrate]\n"
    cases = json.JSONDecoder().raw_decode(prompt.after(marker))[0] if marker in prompt.text else []
    case = cases[0] if cases else {}
    intent = str(case.get("task_intent", ""))
    existing = prompt.between("[Existing skills for this cluster]", "[Task]")
    if '"index": 0' in existing:  # an existing skill of this cluster: confirm it
        return _json({"operations": [{"action": "update", "index": 0, "data": {"confidence": 0.6}}],
                      "update_note": "the case confirms skill 0"})
    approach = [line for line in str(case.get("approach", "")).splitlines() if line.strip()]
    content = "\n".join(["## Steps", *approach, "## Pitfalls", "- none seen", "## Outcome",
                         f"- {intent}"])
    return _json({"operations": [{"action": "add", "data": {
        "name": _first_words(intent, 10) or "skill", "description": intent[:400] or "a skill",
        "content": content, "confidence": 0.5}}], "update_note": "new problem pattern"})


def _skill_maturity(prompt: Prompt) -> str:
    return _json({"completeness": 4, "executability": 4, "evidence": 4, "clarity": 4,
                  "reason": "fixed score"})


def _rerank(prompt: Prompt) -> str:
    query = prompt.between("User query:\n", "\n\nCandidates")
    at = prompt.text.find("[", prompt.text.find("\n", prompt.text.rfind("Candidates (")))
    candidates = json.JSONDecoder().raw_decode(prompt.text, at)[0] if at >= 0 else []
    ranked = [{"id": str(c.get("id")), "score": relevance(query, _json(
                   {k: v for k, v in c.items() if k not in ("id", "score")}))}
              for c in candidates if isinstance(c, dict)]
    return _json({"ranked": sorted(ranked, key=lambda r: (-r["score"], r["id"]))})


def _sufficiency(prompt: Prompt) -> str:
    return _json({"is_sufficient": True, "reasoning": "the documents were retrieved for the query",
                  "key_information_found": [], "missing_information": []})


def _multi_query(prompt: Prompt) -> str:
    return _json({"queries": [], "reasoning": "nothing is missing"})


def _refined_query(prompt: Prompt) -> str:
    return ""  # the engine falls back to the original query


def _search_decider(prompt: Prompt) -> str:
    return _json({"core": [0], "next_queries": []})


def _image(prompt: Prompt) -> str:
    mime, data = prompt.attachments[0] if prompt.attachments else ("", b"")
    size = ""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        size = f"{width}x{height} "
    return f"A {size}{mime or 'image'} picture ({len(data)} bytes, sha256 {_digest(data)})."


def _document(prompt: Prompt) -> str:
    mime, data = prompt.attachments[0] if prompt.attachments else ("", b"")
    strings = [s.decode("latin-1") for s in re.findall(rb"\(([^()]*)\)\s*Tj", data)]
    text = " ".join(strings) or f"({len(data)} bytes, sha256 {_digest(data)})"
    return f"{mime or 'document'}: {text}"


def _html(prompt: Prompt) -> str:
    markup = prompt.after("\n---\n")
    return " ".join(re.sub(r"<[^>]+>", " ", markup).split())


def _audio(prompt: Prompt) -> str:
    mime, data = prompt.attachments[0] if prompt.attachments else ("", b"")
    return f"A {mime or 'audio'} recording ({len(data)} bytes, sha256 {_digest(data)})."


def _image_merge(prompt: Prompt) -> str:
    parts = re.split(r"=== Part \d+ ===\n", prompt.after("OCR results"))
    return "\n".join(part.strip() for part in parts[1:] if part.strip())


def _numbered(block: str) -> list[str]:
    return [m.strip() for m in re.split(r"(?m)^\d+\. ", block) if m.strip()]


def _reflect(prompt: Prompt) -> str:
    # The episodes one after the other (an update: the current narrative, then the new ones).
    if "Current narrative:" in prompt.text:
        parts = [prompt.between("Current narrative:\n", "\n\nNew episodes"),
                 *_numbered(prompt.between("(chronologically ordered):\n", "\n\nUpdate the"))]
    else:
        parts = _numbered(prompt.after("Episodes:\n"))
    return _json({"content": " ".join(p.strip() for p in parts if p.strip()),
                  "title": f"Merged: {_first_words(parts[0], 8)}" if parts else "Merged"})


Answer = Callable[[Prompt], str]

# (kind, a phrase only that prompt contains, answer); the first match wins, so more specific
# phrases come first. The phrases are quoted from the engine's algorithm packages.
PROMPT_KINDS: list[tuple[str, str, Answer]] = [
    ("image_merge", "Below are OCR results from different parts of the same long image",
     _image_merge),
    ("image", "Read this image and return its content", _image),
    ("document", "Read this document and return its content", _document),
    ("html", "Read this HTML content extracted from a web page", _html),
    ("audio", "This is a voice message sent by a user", _audio),
    ("boundary", "find all natural \"episode boundaries\"", _boundary_batch),
    ("boundary_step", "determine if the newly added dialogue should end the current episode",
     _boundary_step),
    ("episode", "episodic memory generation expert", _episode),
    ("atomic_facts", "- EPISODE_TEXT: \"", _atomic_facts_from_text),
    ("atomic_facts_conversation", "called \"CONVERSATION_TEXT\"", _atomic_facts_from_conversation),
    ("profile_compact", "Please compact the profile to", _profile_compact),
    ("profile_update", "You are a user profile updater", _profile_update),
    ("profile", "You are a \"User Profile Analyst\"", _profile_initial),
    ("cluster_assignment", "\"idx\": <existing_idx or -1>", _cluster_assignment),
    ("agent_case_filter", "You judge whether an agent interaction is worth extracting",
     _case_filter),
    ("agent_case", "distilling agent interaction trajectories into concise experience records",
     _case_compress),
    ("tool_pre_compress", "You are a tool call compression expert", _tool_pre_compress),
    ("agent_skill", "extracting reusable problem-solving strategies", _skill_extract),
    ("agent_skill_failure", "extracting failure insights and partial progress", _skill_extract),
    ("agent_skill_maturity", "quality evaluator for agent skill documents", _skill_maturity),
    ("rerank", "{\"ranked\": [{\"id\": \"<candidate_id>\"", _rerank),
    ("sufficiency", "Assess whether the retrieved documents provide sufficient information",
     _sufficiency),
    ("multi_query", "generate 2-3 complementary queries", _multi_query),
    ("refined_query", "Generate a refined query that targets the missing information",
     _refined_query),
    ("search_decider", "You steer a multi-round memory search", _search_decider),
    ("reflect", "You are a memory consolidation assistant", _reflect),
    ("reflect", "You are updating an existing memory narrative", _reflect),
]


def classify(prompt: Prompt) -> tuple[str, Answer]:
    for kind, phrase, respond in PROMPT_KINDS:
        if phrase in prompt.text:
            return kind, respond
    return "unknown", lambda prompt: "{}"


def answer(body: dict[str, Any]) -> tuple[str, str]:
    """(kind, content) for one chat-completions request body."""
    prompt = read_prompt(body)
    kind, respond = classify(prompt)
    return kind, respond(prompt)


# ── The server ──────────────────────────────────────────────────────────────────────────────────


def _completion(content: str, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    format_ = body.get("response_format") or {}
    if format_.get("type") == "json_schema":  # structured outputs: the SDK parses `content`
        message["refusal"] = None
    return {
        "id": "chatcmpl-" + hashlib.sha256(content.encode()).hexdigest()[:24],
        "object": "chat.completion", "created": 0, "model": body.get("model") or MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def standin_app() -> Starlette:
    calls: list[dict[str, str]] = []

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        prompt = read_prompt(body)
        kind, respond = classify(prompt)
        call = {"kind": kind, "prompt": prompt.text}
        calls.append(call)
        try:
            content = respond(prompt)
        except Exception as exc:  # a prompt whose shape changed: fail the call, visibly
            call["error"] = repr(exc)
            return JSONResponse({"error": {"message": f"stand-in: {exc!r}"}}, 500)
        return JSONResponse(_completion(content, body))

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dimensions = int(body.get("dimensions") or DIMENSIONS)
        encoding = body.get("encoding_format") or "float"
        calls.append({"kind": "embedding"})
        return JSONResponse({
            "object": "list", "model": body.get("model") or MODEL,
            "data": [{"object": "embedding", "index": i,
                      "embedding": _encode_embedding(embed(str(t), dimensions), encoding)}
                     for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        })

    async def rerank(request: Request) -> JSONResponse:
        body = await request.json()
        query = str(body.get("query") or "")
        calls.append({"kind": "rerank_documents"})
        return JSONResponse({"model": body.get("model") or MODEL, "results": [
            {"index": i, "relevance_score": relevance(query, str(document))}
            for i, document in enumerate(body.get("documents") or [])]})

    async def seen(request: Request) -> JSONResponse:
        return JSONResponse(calls)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/v1/rerank", rerank, methods=["POST"]),
        Route("/calls", seen, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ])


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(standin_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
