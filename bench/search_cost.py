"""Search cost benchmark (SPEC §14): `/memories/search` vs passing the same page through.

The user owns 10 sessions with 200 attachments each; the fake engine answers a page of 50
episodes over those sessions, each naming a few of the files. Requests/s of the gateway's search
(normalise, one query, match, attach) ÷ requests/s of the same page proxied unchanged.
Target (SPEC §14): the search costs at most 1.5× the pass-through (ratio ≥ 0.667), aiming at 1.1×.

`--path python` measures the pure-Python path (`server.native_search = false`) instead of the C
page scanner. `--stored` makes the attachments inline files the gateway stores (instead of the
client's URIs); `--urls` also sets `server.public_url`, so each of them carries a download `url`.
The page and the sessions do not change between requests, so after the first search the owners'
lookup is answered from memory (it is kept until the database changes).

Two figures per pair: requests/s of the search ÷ requests/s of the pass-through, and the
gateway's CPU time per search ÷ its CPU time per pass-through request (from /proc, over each
load run): what a search costs the gateway, the figure that moves least when other processes
share the machine.

`--writes` measures the SPEC's second case, a write between every two searches: while the
searches run, another process (this script) claims a fresh session for another user in the
gateway's database at half the rate the searches ran at without it, as another user's add
would (with the gateway's own `synchronous = NORMAL`: no fsync per commit). Each write moves
the database's "sessions" generation, so the next request reads the generations and the
session change log again (migrations/0014); the search's own sessions did not change, so it
keeps its lookup (target: at most 2x the pass-through). The writes cost the gateway no CPU of
their own: what it pays is that read.

`--baseline CHECKOUT` also runs a gateway from another checkout of the project (another
commit, built in place) beside this one, in front of the same engine, and alternates the pairs of
both in one run: the two medians are measured under the same load. `--alternative` does the same
with a gateway whose page path is the pure-Python alternative on msgspec and pyahocorasick
(bench/msgspec_search.py; `pip install msgspec pyahocorasick`), the C scanner's retirement
question: is its figure within 15 % of the scanner's?

    .venv/bin/python bench/search_cost.py [--rounds 5] [--seconds 4] [--path scanner|python]
        [--stored [--urls]] [--writes] [--baseline CHECKOUT] [--alternative]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, fast_upstream, gateway_process, load, median  # noqa: E402

sys.path.insert(0, str(ROOT))
from gateway.search import page_scan  # noqa: E402

SESSIONS = 10
ATTACHMENTS = 200
RESULTS = 50
TARGET = 1 / 1.5  # SPEC §14: search costs at most 1.5x the pass-through
WRITES_TARGET = 1 / 2  # ... and at most 2x with a write between every two searches
ALTERNATIVE = "msgspec+ahocorasick"  # --alternative: retire the C scanner if within 15 %
WITHIN = 0.15


def filename(session: int, index: int) -> str:
    return f"session{session}-photo-{index:03d}.png"


def search_page() -> dict[str, Any]:
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


def engine_json(value: Any) -> bytes:
    """`value` as EverOS writes an answer: Starlette's JSONResponse, compact separators and UTF-8
    (no whitespace between tokens, non-ASCII characters as they are)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def page_bytes() -> bytes:
    """The search page as the engine sends it."""
    return engine_json(search_page())


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
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also measure a gateway run from this checkout, in the same run")
    parser.add_argument("--urls", action="store_true",
                        help="with --stored: set server.public_url, so each carries a `url`")
    parser.add_argument("--alternative", action="store_true",
                        help="also a gateway on the msgspec + pyahocorasick page path")
    parser.add_argument("--writes", action="store_true",
                        help="a write between every two searches (another user's new session)")
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
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        page_file = Path(tmp) / "page.json"
        page_file.write_bytes(page_bytes())
        print(f"page: {RESULTS} results, {page_file.stat().st_size} bytes; "
              f"{SESSIONS} sessions x {ATTACHMENTS} attachments; search path: {args.path}; "
              f"attachments: {'stored' if args.stored else 'client URIs'}"
              f"{' with urls' if args.urls else ''}")
        upstream = stack.enter_context(fast_upstream(page_file))
        gateways: dict[str, list[str] | None] = {"this checkout": None}
        if args.baseline:
            gateways[f"baseline {args.baseline}"] = [
                "-c", f"import sys; sys.path.insert(0, {str(Path(args.baseline).resolve())!r}); "
                "from gateway.cli import main; sys.argv = ['gateway', 'serve']; "
                "raise SystemExit(main())"]
        if args.alternative:
            gateways[ALTERNATIVE] = [str(ROOT / "bench" / "msgspec_search.py"), "serve"]
        measured: dict[str, list[tuple[float, float]]] = {}
        runs = []
        for name, serve in gateways.items():
            url, key, proc = stack.enter_context(gateway_process(upstream, extra, serve))
            seed(url, key, args.stored, args.urls)
            auth = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            runs.append((name, url, auth, proc.pid, database_of(proc.pid)))
        target = WRITES_TARGET if args.writes else TARGET
        for round_no in range(1, args.rounds + 1):
            for name, url, auth, pid, database in runs if round_no % 2 else reversed(runs):
                base = measure(url + "/bench/page", body, auth, pid, args)
                if args.writes:
                    alone = measure(url + "/memories/search", body, auth, pid, args)
                    with writing(database, alone[0] / 2):
                        searched = measure(url + "/memories/search", body, auth, pid, args)
                else:
                    searched = measure(url + "/memories/search", body, auth, pid, args)
                ratio, cost = searched[0] / base[0], searched[1] / base[1]
                measured.setdefault(name, []).append((ratio, cost))
                print(f"round {round_no} {name}: pass-through {base[0]:7.0f} req/s "
                      f"{base[1] * 1e6:6.0f} us CPU/req, search {searched[0]:7.0f} req/s "
                      f"{searched[1] * 1e6:6.0f} us CPU/req; ratio {ratio:.3f}, CPU {cost:.2f}x")
    for name, pairs in measured.items():
        ratio, cost = median([p[0] for p in pairs]), median([p[1] for p in pairs])
        verdict = "meets" if cost <= 1 / target else "MISSES"
        print(f"{name}: median requests/s ratio {ratio:.3f} (search {1 / ratio:.2f}x the "
              f"pass-through's time); median CPU per request: search {cost:.2f}x the "
              f"pass-through ({verdict} the <= {1 / target:.1f}x target"
              f"{' with writes' if args.writes else ''})")
    if args.alternative:
        share = (median([p[1] for p in measured["this checkout"]])
                 / median([p[1] for p in measured[ALTERNATIVE]]))
        print(f"CPU per search, the scanner's ÷ the alternative's: {share:.2f} "
              f"({'within' if share >= 1 - WITHIN else 'NOT within'} {WITHIN:.0%})")
    return 0 if median([p[1] for p in measured["this checkout"]]) <= 1 / target else 1


def database_of(pid: int) -> str:
    """The gateway's SQLite file, from its environment."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    prefix = b"MEMORY_GATEWAY_STORAGE_DATABASE="
    return next(item[len(prefix):].decode() for item in environ if item.startswith(prefix))


@contextmanager
def writing(database: str, per_second: float) -> Iterator[None]:
    """Another user's new session claimed in `database` `per_second` times a second, from
    this process (as another gateway process's add would), until the block ends."""
    stop = threading.Event()

    def write() -> None:
        conn = sqlite3.connect(database, timeout=5, isolation_level=None)
        conn.execute("PRAGMA synchronous = NORMAL")  # as the gateway's own connections write
        written, started = 0, time.monotonic()
        try:
            while not stop.is_set():
                conn.execute("INSERT INTO memory_sessions (app_id, project_id, session_id, "
                             "user_id, created_at) VALUES ('default', 'default', ?, 'writer', 0)",
                             (f"written-{time.monotonic_ns()}-{written}",))
                written += 1
                pause = started + written / per_second - time.monotonic()
                if pause > 0:
                    stop.wait(pause)
        finally:
            conn.close()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, body: bytes, auth: dict[str, str], pid: int,
            args: argparse.Namespace) -> tuple[float, float]:
    """(requests/s, the gateway's CPU seconds per request) of one load run."""
    cpu, started = cpu_seconds(pid), time.monotonic()
    rate = load(url, body, auth, args.connections, args.seconds)
    elapsed, used = time.monotonic() - started, cpu_seconds(pid) - cpu
    return rate, used / max(1.0, rate * elapsed)

if __name__ == "__main__":
    raise SystemExit(main())
