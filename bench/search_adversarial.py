"""Filename matching on adversarial pages (SPEC §13, §14): cost per byte against an ordinary page.

In process, for each page: the search answer made from the engine's bytes (the C page scanner,
or the Python path with `--path python`: parse, find the items, match, write), with the
sessions' matchers built beforehand, as the gateway keeps them. Each round times every page
beside the ordinary one (in turns, the ordinary first, then the page first); each figure is the
median over the rounds of the pair's ratio of times per byte, printed with the page's median
time per byte. Target: every page within 2x of the ordinary one.

Pages (each over one session's names):
- ordinary: bench/search_cost.py's page, 50 episodes naming 3 of 200 files each;
- no-extension: 2,000 names of 200 characters without an extension, over two letters, and 50
  episodes of text made of pieces of those names (the automaton goes deep and falls back);
- many-dots: 2,000 names made of dotted segments ("a.b.a.b…", 40-200 characters), text of
  dots and segments (a hit at nearly every byte for an extension index);
- long-text: the page of issue 23: one message holding a 200 KB text and 2,000 items with
  200-character names without an extension, each starting with 150 characters of the text's
  repeated phrase (a substring search per name goes deep at every position);
- prose: not adversarial, but what users write: 50 episodes of 700 common English words, one
  in a hundred replaced by one of some 200 names as cameras, receipts and screenshots spell them
  ("IMG_4821.jpg", "receipt-water.pdf", "Screenshot 2026-11-03 at 10.01.02.png").

Also printed: the time to build each session's matchers, and the issue's page end to end.
With `--http`, the issue's case through real processes: a gateway in front of a fast engine
that answers the issue's page; one add of the 2,000 items and the 200 KB text to the user's
session, then one search while another client polls `/healthz` in a loop: the search's time,
how many `/healthz` answers came back during it, and the longest of them.

    .venv/bin/python bench/search_adversarial.py [--rounds 25] [--path scanner|python] [--http]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, fast_upstream, gateway  # noqa: E402
from search_cost import ATTACHMENTS, engine_json, filename, search_page  # noqa: E402

sys.path.insert(0, str(ROOT))
from gateway.search import page_scan  # noqa: E402
from gateway.search.answers import python_answer, scanned_answer  # noqa: E402
from gateway.search.index import SessionMatcher, _build  # noqa: E402
from gateway.search.items import find_items  # noqa: E402
from gateway.serving import jsonio  # noqa: E402

WITHIN = 2.0
SESSION = "bench-session-0"
NAMES = 2000


def rows(names: list[str]) -> list[dict[str, str]]:
    return [{"id": f"att_{n}", "name": name, "content_type": "application/octet-stream",
             "internal_uri": f"https://cdn.example/{n}", "source": "memory_add_uri"}
            for n, name in enumerate(names)]


def episodes(texts: list[str]) -> bytes:
    items = [{"id": f"ep_{i}", "user_id": "bench", "app_id": "default", "project_id": "default",
              "session_id": SESSION, "timestamp": "2026-11-30T00:00:00Z", "summary": text[:120],
              "episode": text, "type": "Conversation", "score": 1.0 - i / 100}
             for i, text in enumerate(texts)]
    return engine_json({"request_id": "bench", "data": {
        "episodes": items, "profiles": [], "agent_cases": [], "agent_skills": [],
        "unprocessed_messages": []}})


def ordinary() -> tuple[bytes, list[str]]:
    page = search_page()
    for item in page["data"]["episodes"]:
        item["session_id"] = SESSION  # one session holding all the names the page names
    names = [filename(s, i) for s in range(10) for i in range(ATTACHMENTS)]
    return engine_json(page), names


def no_extension(rng: random.Random) -> tuple[bytes, list[str]]:
    names = ["".join(rng.choice("ab") for _ in range(200)) for _ in range(NAMES)]
    texts = []
    for _ in range(50):
        pieces = [rng.choice(names)[: rng.randint(20, 199)] for _ in range(6)]
        texts.append("".join(pieces))
    return episodes(texts), names


def many_dots(rng: random.Random) -> tuple[bytes, list[str]]:
    def dotted(size: int) -> str:
        return ".".join(rng.choice("ab") for _ in range(size // 2))

    names = [dotted(rng.randint(40, 200)) for _ in range(NAMES)]
    texts = [".".join(rng.choice(["a", "b", "", "ab"]) for _ in range(450)) for _ in range(50)]
    return episodes(texts), names


# The text repeats a phrase, and every name starts with 150 characters of it: a search
# for each name at each position of the text goes 150 characters deep before it fails.
PHRASE = "shared-report-"


def long_text_names(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz0123456789-_"
    shared = (PHRASE * 20)[:150]
    return [shared + f"{i:04d}" + "".join(rng.choice(letters) for _ in range(46))
            for i in range(NAMES)]


def long_text_body(names: list[str], rng: random.Random) -> bytes:
    text = (PHRASE * 20_000)[:200_000]
    content = [{"type": "text", "text": text}] + [
        {"type": "file", "name": name, "uri": f"https://cdn.example/{n}"}
        for n, name in enumerate(names)]
    message = {"message_id": "m1", "user_id": "bench", "app_id": "default",
               "project_id": "default", "session_id": SESSION, "sender_id": "bench",
               "role": "user", "timestamp": "2026-11-30T00:00:00Z", "content": content}
    return engine_json({"request_id": "bench", "data": {
        "episodes": [], "profiles": [], "agent_cases": [], "agent_skills": [],
        "unprocessed_messages": [message]}})


PROSE_WORDS = (
    "the a of and to in is you that it he was for on are as with his they I at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her would "
    "make like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part"
).split()


def prose(rng: random.Random) -> tuple[bytes, list[str]]:
    names = ([f"IMG_{rng.randint(1000, 9999)}.jpg" for _ in range(80)]
             + [f"receipt-{word}.pdf" for word in rng.sample(PROSE_WORDS, 40)]
             + [f"Screenshot 2026-11-{day:02d} at 10.{minute:02d}.02.png"
                for day in range(1, 30) for minute in range(3)])
    texts = []
    for _ in range(50):
        words = [rng.choice(names) if rng.random() < 0.01 else rng.choice(PROSE_WORDS)
                 for _ in range(700)]
        texts.append(" ".join(words).capitalize() + ".")
    return episodes(texts), names


def answer_with(path: str) -> Callable[[bytes, dict[str, SessionMatcher]], tuple[bytes, int]]:
    def scanner(body: bytes, matchers: dict[str, SessionMatcher]) -> tuple[bytes, int]:
        page = page_scan.scan(body, False)
        assert page is not None, "the scanner left the page to the Python path"
        return scanned_answer(page, set(), matchers)

    def python(body: bytes, matchers: dict[str, SessionMatcher]) -> tuple[bytes, int]:
        answer = jsonio.loads(body)
        return python_answer(answer, find_items(answer), False, set(), matchers)

    return scanner if path == "scanner" else python


def timed(work: Callable[[], Any], repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        work()
    return (time.perf_counter() - started) / repeat


def in_process(rounds: int, path: str) -> bool:
    rng = random.Random(23)
    long_names = long_text_names(rng)
    pages = {"ordinary": ordinary(), "no-extension": no_extension(rng),
             "many-dots": many_dots(rng),
             "long-text": (long_text_body(long_names, rng), long_names),
             "prose": prose(rng)}
    answer = answer_with(path)
    prepared = {}
    print(f"search path: {path}")
    for name, (body, names) in pages.items():
        started = time.perf_counter()
        matchers = {SESSION: _build(1, rows(names))}
        built = time.perf_counter() - started
        _, matched = answer(body, matchers)
        prepared[name] = (body, matchers)
        print(f"{name:13s} {len(body):8d} bytes, {len(names)} names of "
              f"{min(map(len, names))}-{max(map(len, names))} characters, {matched} attached; "
              f"matchers built in {built * 1000:7.1f} ms")
    # Each page is timed beside the ordinary one, in turns (ordinary first, then the page first),
    # and its figure is the median of those pairs' ratios: on a shared machine other work comes
    # and goes over tenths of a second, and a ratio of two medians taken apart in time moves
    # with it, while the two halves of a pair share what runs beside them.
    per_byte: dict[str, list[float]] = {name: [] for name in pages}
    ratios: dict[str, list[float]] = {name: [] for name in pages}
    others = [name for name in pages if name != "ordinary"]

    def measure(name: str) -> float:
        body, matchers = prepared[name]
        repeat = max(1, 2_000_000 // len(body)) if path == "scanner" else 3
        figure = timed(functools.partial(answer, body, matchers), repeat) / len(body)
        per_byte[name].append(figure)
        return figure

    for round_no in range(rounds):
        for name in others if round_no % 2 == 0 else reversed(others):
            if round_no % 2 == 0:
                ordinary_figure = measure("ordinary")
                figure = measure(name)
            else:
                figure = measure(name)
                ordinary_figure = measure("ordinary")
            ratios[name].append(figure / ordinary_figure)
    ok = True
    for name in pages:
        median = statistics.median(per_byte[name])
        ratio = statistics.median(ratios[name]) if ratios[name] else 1.0
        ok &= ratio <= WITHIN
        body = prepared[name][0]
        pairs = f" (median of {len(ratios[name])} pairs)" if ratios[name] else ""
        print(f"{name:13s} {median * 1e9:7.2f} ns/byte ({median * len(body) * 1000:8.3f} ms a "
              f"page), {ratio:5.2f}x the ordinary page per byte{pairs}")
    verdict = "meets" if ok else "MISSES"
    print(f"{verdict} the target: every page within {WITHIN:.0f}x of the ordinary one per byte")
    return ok


async def _probe(url: str, stop: asyncio.Event, waits: list[float]) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        while not stop.is_set():
            started = time.perf_counter()
            (await client.get("/healthz")).raise_for_status()
            waits.append(time.perf_counter() - started)


async def _search_while_probing(url: str, key: str) -> tuple[float, list[float]]:
    import httpx

    stop, waits = asyncio.Event(), list[float]()
    probe = asyncio.create_task(_probe(url, stop, waits))
    await asyncio.sleep(0.5)
    waits.clear()  # only the waits during the search
    async with httpx.AsyncClient(base_url=url, timeout=300,
                                 headers={"Authorization": f"Bearer {key}"}) as client:
        started = time.perf_counter()
        response = await client.post("/memories/search", json={"query": "trip", "user_id": "bench"})
        took = time.perf_counter() - started
    response.raise_for_status()
    assert len(response.json()["results"][0]["attachments"]) == NAMES
    stop.set()
    await probe
    return took, waits


def over_http(path: str) -> None:
    import httpx

    rng = random.Random(23)
    names = long_text_names(rng)
    body = long_text_body(names, rng)
    extra = {"MEMORY_GATEWAY_SERVER_NATIVE_SEARCH": str(path == "scanner").lower()}
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "page.json"
        page_file.write_bytes(body)
        with fast_upstream(page_file) as upstream, gateway(upstream, extra) as (url, key):
            message = json.loads(body)["data"]["unprocessed_messages"][0]
            with httpx.Client(base_url=url, timeout=300,
                              headers={"Authorization": f"Bearer {key}"}) as client:
                client.post("/memories/add", json={
                    "session_id": SESSION, "messages": [
                        {"role": "user", "sender_id": "bench", "content": message["content"]}],
                }).raise_for_status()
            took, waits = asyncio.run(_search_while_probing(url, key))
    print(f"HTTP, issue 23's page ({len(body)} bytes, {NAMES} names): search {took * 1000:.0f} "
          f"ms (the first: the session's matchers built); {len(waits)} /healthz answers during "
          f"it, the longest {max(waits, default=0) * 1000:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--path", choices=("scanner", "python"), default="scanner")
    parser.add_argument("--http", action="store_true", help="also the issue's case end to end")
    args = parser.parse_args()
    if args.path == "scanner" and not page_scan.AVAILABLE:
        print("the C page scanner is not built (no C compiler at install?): use --path python")
        return 2
    ok = in_process(args.rounds, args.path)
    if args.http:
        over_http(args.path)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
