"""An experiment: the search page path in pure Python on kept libraries (msgspec, pyahocorasick).

The same interface as gateway/search/page_scan.py (`scan`, `matcher`), so a gateway can run it
in place of the C page scanner (`python bench/msgspec_search.py serve`, served beside the
scanner by `bench/search_cost.py --alternative`). msgspec splits the EverOS envelope into each
item's raw bytes and decodes only the fields a result needs; one Aho-Corasick automaton per
session finds the names in each item's lower-cased bytes; a hit counts when it lies inside a
string value (quote parity, not a key). Items with an escape, non-ASCII bytes, a `base64` or
`metadata` key, and engines' own shapes (native answers) go to the Python path, as the C
scanner's odd pages do. It does not check repeated keys (the C scanner does), so its cost is a
lower bound for an exact version.
`python bench/msgspec_search.py cost` prints each path's cost per page, in process.

Needs `pip install msgspec pyahocorasick` (not dependencies of the gateway).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import ahocorasick
import msgspec

_GROUPS = (
    ("episodes", "episode"), ("profiles", "profile"), ("agent_cases", "agent_case"),
    ("agent_skills", "agent_skill"), ("unprocessed_messages", "unprocessed_message"),
)


class _Groups(msgspec.Struct):  # type: ignore[misc,unused-ignore]
    episodes: list[msgspec.Raw] | None = None
    profiles: list[msgspec.Raw] | None = None
    agent_cases: list[msgspec.Raw] | None = None
    agent_skills: list[msgspec.Raw] | None = None
    unprocessed_messages: list[msgspec.Raw] | None = None


class _Envelope(msgspec.Struct):  # type: ignore[misc,unused-ignore]
    data: _Groups | None = None


class _Fields(msgspec.Struct):  # type: ignore[misc,unused-ignore]
    """The fields a normalised result reads (gateway/search/items.py's `result`)."""

    id: Any = None
    memory_id: Any = None
    episode_id: Any = None
    message_id: Any = None
    episode: Any = None
    summary: Any = None
    memory: Any = None
    content: Any = None
    text: Any = None
    description: Any = None
    score: Any = None
    relativity: Any = None
    session_id: Any = None
    created_at: Any = None
    timestamp: Any = None
    app_id: Any = None
    project_id: Any = None


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_FIELDS = msgspec.json.Decoder(_Fields)
_ENCODE = msgspec.json.Encoder().encode
_ODD_IDS = (float, bool)  # the C scanner leaves these to the Python path too
_INFINITY = float("inf")


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _text(f: _Fields) -> str | None:
    for value in (f.episode, f.summary, f.memory, f.content, f.text, f.description):
        if isinstance(value, str):
            return value
    return None


# How names are found in an item's bytes: "ahocorasick" (one automaton per session), or
# "regex" (the Python path's scan for ".ext", then the few name lengths known for it).
MATCH = os.environ.get("BENCH_ALT_MATCH", "ahocorasick")


class Matcher:
    """One session's names (lower-cased, sorted) with their (uri number, attachment JSON)."""

    def __init__(self, names: list[str], entries: list[list[tuple[int, bytes]]]) -> None:
        self.entries = entries
        # pyahocorasick's wheels are built for str keys: bytes go in as latin-1 (one char each)
        encoded = [
            (index, name.encode("utf-8", "surrogatepass").decode("latin-1"))
            for index, name in enumerate(names) if "\x00" not in name
        ]
        self.live = bool(encoded)
        self.automaton = ahocorasick.Automaton()
        for index, name in encoded:
            self.automaton.add_word(name, (index, len(name)))
        if self.live:
            self.automaton.make_automaton()
        self.by_ext: dict[str, dict[int, dict[str, int]]] = {}
        self.plain: dict[str, int] = {}
        for index, name in encoded:
            stem, dot, ext = name.rpartition(".")
            if dot and ext and stem:
                self.by_ext.setdefault("." + ext, {}).setdefault(len(name), {})[name] = index
            else:
                self.plain[name] = index
        alternatives = sorted(self.by_ext, key=len, reverse=True)
        self.scan = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        self.hits = self._hits_ahocorasick if MATCH == "ahocorasick" else self._hits_regex

    def _hits_ahocorasick(self, text: str) -> list[tuple[int, int, int]]:
        return [(index, end + 1 - length, end) for end, (index, length) in
                self.automaton.iter(text)]

    def _hits_regex(self, text: str) -> list[tuple[int, int, int]]:
        out = []
        for name, index in self.plain.items():
            start = text.find(name)
            while start >= 0:
                out.append((index, start, start + len(name) - 1))
                start = text.find(name, start + 1)
        if self.scan is not None:
            for hit in self.scan.finditer(text):
                at = hit.start()
                for ext, by_length in self.by_ext.items():
                    if not text.startswith(ext, at):
                        continue
                    end = at + len(ext)
                    for length, candidates in by_length.items():
                        index = candidates.get(text[max(0, end - length):end], -1)
                        if index >= 0:
                            out.append((index, end - length, end - 1))
        return out

    def attachments(self, lowered: bytes) -> list[msgspec.Raw]:
        found: set[int] = set()
        for index, start, end in self.hits(lowered.decode("latin-1")):
            if index in found:
                continue
            # inside a string: an odd number of quotes before it (no escapes on this path)
            if lowered.count(b'"', 0, start) % 2 == 0:
                continue
            close = lowered.find(b'"', end + 1)
            after = lowered[close + 1:close + 40].lstrip() or lowered[close + 1:].lstrip()
            if after.startswith(b":"):
                continue  # a key, not a value
            found.add(index)
        out: list[msgspec.Raw] = []
        seen: set[int] = set()
        for index in sorted(found):
            for number, attachment in self.entries[index]:
                if number not in seen:
                    seen.add(number)
                    out.append(msgspec.Raw(attachment))
        return out


class Page:
    def __init__(self, items: list[tuple[str, bytes, _Fields]]) -> None:
        self.items = items
        self.sessions = {sid for _, _, f in items if (sid := self._session(f))}

    @staticmethod
    def _session(f: _Fields) -> str | None:
        value = f.session_id
        return value if isinstance(value, str) and value else None

    def scopes(self) -> list[tuple[str | None, str | None, str | None]]:
        return [
            (self._session(f),
             f.app_id if isinstance(f.app_id, str) and f.app_id else None,
             f.project_id if isinstance(f.project_id, str) and f.project_id else None)
            for _, _, f in self.items
        ]

    def render(
        self, matchers: Mapping[str, Matcher], dropped: AbstractSet[int] | None
    ) -> tuple[bytes, int]:
        results: list[dict[str, Any]] = []
        matched = 0
        for position, (item_type, raw, f) in enumerate(self.items):
            if dropped and position in dropped:
                continue
            session = self._session(f)
            matcher = matchers.get(session) if session else None
            attachments = (
                matcher.attachments(raw.lower()) if matcher is not None and matcher.live else []
            )
            matched += len(attachments)
            identifier = _first(f.id, f.memory_id, f.episode_id, f.message_id)
            results.append({
                "id": str(identifier) if identifier is not None
                else f"{item_type}:{len(results)}",
                "type": item_type,
                "content": _text(f),
                "score": _first(f.score, f.relativity),
                "session_id": session,
                "created_at": _first(f.created_at, f.timestamp),
                "raw": msgspec.Raw(raw),
                "attachments": attachments,
            })
        return _ENCODE({"results": results, "total": len(results)}), matched


def scan(body: bytes, native: bool) -> Page | None:
    """A page this path answers exactly as the Python path would, or None."""
    if native or not body.isascii():  # non-ASCII: case folding and UTF-8 checks are Python's
        return None
    try:
        envelope = _ENVELOPE.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    data = envelope.data
    if data is None:
        return None
    items: list[tuple[str, bytes, _Fields]] = []
    present = False
    for group, item_type in _GROUPS:
        raws = getattr(data, group)
        if raws is None:
            continue
        present = True
        for raw in raws:
            item = bytes(raw)
            if (b"\\" in item or b'"base64"' in item
                    or b'"metadata"' in item or item[:1] != b"{"):
                return None
            try:
                fields = _FIELDS.decode(item)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return None
            if isinstance(fields.id, _ODD_IDS) or isinstance(fields.score, float) and (
                    fields.score != fields.score or abs(fields.score) == _INFINITY):
                return None
            items.append((item_type, item, fields))
    return Page(items) if present else None


def matcher(names: list[str], entries: list[list[tuple[int, bytes]]]) -> Matcher:
    return Matcher(names, entries)


def install() -> None:
    """Put this path where the gateway looks for the C page scanner."""
    from gateway.search import page_scan

    page_scan.AVAILABLE = True
    page_scan.scan = scan  # type: ignore[assignment,unused-ignore]
    page_scan.matcher = matcher  # type: ignore[assignment,unused-ignore]


def page_cost(repeat: int = 7, number: int = 200) -> dict[str, float]:
    """µs per bench page (bench/search_cost.py's) for each path, page to answer bytes, the
    matchers built beforehand; the best of `repeat` runs (the least disturbed by other load)."""
    import json
    import timeit
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from search_cost import ATTACHMENTS, SESSIONS, filename, page_bytes

    from gateway.search import page_scan
    from gateway.search.answers import python_answer, scanned_answer
    from gateway.search.index import _build
    from gateway.search.items import find_items
    from gateway.serving import jsonio

    body = page_bytes()
    rows = {
        f"bench-session-{s}": [
            {"id": f"att_{s}_{i}", "name": filename(s, i), "content_type": "image/png",
             "internal_uri": f"https://cdn.example/{filename(s, i)}", "source": "memory_add_uri"}
            for i in range(ATTACHMENTS)
        ] for s in range(SESSIONS)
    }
    c_scan = page_scan.scan
    c_matchers = {sid: _build(1, r) for sid, r in rows.items()}
    install()
    alt_matchers = {sid: _build(1, r) for sid, r in rows.items()}
    none: frozenset[tuple[str, str, str]] = frozenset()

    def c_path() -> tuple[bytes, int]:
        return scanned_answer(c_scan(body, False), none, c_matchers)

    def alt_path() -> tuple[bytes, int]:
        return scanned_answer(scan(body, False), none, alt_matchers)

    def python_path() -> tuple[bytes, int]:
        answer = jsonio.loads(body)
        items = find_items(answer)
        return python_answer(answer, items, False, none, alt_matchers)

    answers = {json.dumps(json.loads(path()[0]), sort_keys=True)
               for path in (c_path, alt_path, python_path)}
    assert len(answers) == 1, "the three paths must give the same answer"
    return {
        name: min(timeit.repeat(path, number=number, repeat=repeat)) / number * 1e6
        for name, path in (("scanner", c_path), ("msgspec+ahocorasick", alt_path),
                           ("python", python_path))
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        install()
        from gateway.cli import main

        raise SystemExit(main(["serve"]))
    if sys.argv[1:] == ["cost"]:
        for name, micros in page_cost().items():
            print(f"{name:>20}: {micros:7.0f} µs per page (match={MATCH})")
        raise SystemExit(0)
    print("usage: python bench/msgspec_search.py serve|cost  (a gateway on this path | µs a page)")
    raise SystemExit(2)
