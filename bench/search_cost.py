"""Search cost benchmark (SPEC §14): `/memories/search` vs passing the same page through.

The user owns 10 sessions with 200 attachments each; the fake engine answers a page of 50
episodes over those sessions, each naming a few of the files. Requests/s of the gateway's search
(normalise, one query, match, attach) ÷ requests/s of the same page proxied unchanged.
Target: the search costs at most 2× the pass-through, i.e. ratio ≥ 0.5.

`--path python` measures the pure-Python path (`server.native_search = false`) instead of the C
page scanner. `--stored` makes the attachments inline files the gateway stores (instead of the
client's URIs); `--urls` also sets `server.public_url`, so each of them carries a download `url`.
The page and the sessions do not change between requests, so after the first search the owners'
lookup is answered from memory (it is kept until the database changes).

    .venv/bin/python bench/search_cost.py [--rounds 5] [--seconds 4] [--path scanner|python]
        [--stored [--urls]]
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, fast_upstream, gateway, load, paired_ratios  # noqa: E402

sys.path.insert(0, str(ROOT))
from gateway.search import page_scan  # noqa: E402

SESSIONS = 10
ATTACHMENTS = 200
RESULTS = 50
TARGET = 0.5


def filename(session: int, index: int) -> str:
    return f"session{session}-photo-{index:03d}.png"


def search_page() -> dict:
    episodes = []
    for i in range(RESULTS):
        session = i % SESSIONS
        named = ", ".join(filename(session, (i * 7 + k) % ATTACHMENTS) for k in range(3))
        text = (f"On day {i} the user talked about the trip and shared {named}. " +
                "They discussed the weather, the route and the food at length. " * 6)
        episodes.append({
            "id": f"ep_{i}", "user_id": "bench", "app_id": "default", "project_id": "default",
            "session_id": f"bench-session-{session}", "timestamp": "2026-11-30T00:00:00Z",
            "sender_ids": ["bench"], "summary": text[:120], "subject": "trip",
            "episode": text, "type": "Conversation", "score": 1.0 - i / 100, "atomic_facts": [],
        })
    return {"request_id": "bench", "data": {"episodes": episodes, "profiles": [],
                                            "agent_cases": [], "agent_skills": [],
                                            "unprocessed_messages": []}}


def seed(url: str, key: str, stored: bool, urls: bool) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    tiny = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        for session in range(SESSIONS):
            items = [{"type": "image", "base64": tiny, "name": filename(session, i)} if stored
                     else {"type": "image", "uri": f"https://cdn.example/{filename(session, i)}"}
                     for i in range(ATTACHMENTS)]
            response = client.post("/memories/add", json={
                "session_id": f"bench-session-{session}",
                "messages": [{"role": "user", "sender_id": "bench", "content": items}]})
            response.raise_for_status()
        check = client.post("/memories/search", json={"query": "trip", "user_id": "bench"})
        check.raise_for_status()
        results = check.json()["results"]
        assert len(results) == RESULTS and all(len(r["attachments"]) == 3 for r in results)
        assert all(("url" in a) is urls for r in results for a in r["attachments"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--path", choices=("scanner", "python"), default="scanner")
    parser.add_argument("--stored", action="store_true",
                        help="attachments are files the gateway stores, not the client's URIs")
    parser.add_argument("--urls", action="store_true",
                        help="with --stored: set server.public_url, so each carries a `url`")
    args = parser.parse_args()
    if args.urls and not args.stored:
        parser.error("--urls needs --stored (a client's URI never gets a download url)")
    if args.path == "scanner" and not page_scan.AVAILABLE:
        print("the C page scanner is not built (no C compiler at install?): use --path python")
        return 2
    extra = {"MEMORY_GATEWAY_SERVER_NATIVE_SEARCH": str(args.path == "scanner").lower()}
    if args.urls:
        extra["MEMORY_GATEWAY_SERVER_PUBLIC_URL"] = "https://gateway.example"
    body = b'{"query": "trip", "user_id": "bench"}'
    with tempfile.TemporaryDirectory() as tmp:
        page_file = Path(tmp) / "page.json"
        page_file.write_text(json.dumps(search_page()))
        print(f"page: {RESULTS} results, {page_file.stat().st_size} bytes; "
              f"{SESSIONS} sessions x {ATTACHMENTS} attachments; search path: {args.path}; "
              f"attachments: {'stored' if args.stored else 'client URIs'}"
              f"{' with urls' if args.urls else ''}")
        with fast_upstream(page_file) as upstream, gateway(upstream, extra) as (url, key):
            seed(url, key, args.stored, args.urls)
            auth = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            result = paired_ratios(
                args.rounds,
                lambda: load(url + "/bench/page", body, auth, args.connections, args.seconds),
                lambda: load(url + "/memories/search", body, auth, args.connections,
                             args.seconds),
                ("pass-through", "search"),
            )
    verdict = "meets" if result >= TARGET else "MISSES"
    print(f"median ratio {result:.3f}: search costs {1 / result:.2f}x the pass-through "
          f"({verdict} the ≤ 2x target)")
    return 0 if result >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
