"""A search's C work in process, warm and cold: the scan and answer of search_cost.py's page.

Served, a search's own work runs with the processor's caches holding the interpreter's, the
kernel's and the other processes' data, not the last search's: what `search_cost.py` measures
moves with whatever else the machine runs. This script times the two C calls a search makes
(`page_scan.scan`, then the answer with matching, `Page.render`) on the same page and the same
ten sessions' matchers, in one process per checkout:

- warm: the minimum over runs of 200 calls in a row (everything the calls touch in cache);
- cold: the median of single calls, each after 4 MiB of other memory was written (the page,
  the matchers' tables and the answer's buffer out of the first two cache levels), which is
  what a served search pays (docs/decisions.md, "A search's C work, warm and cold").

`--no-match` makes the answer without matchers (no attachments: what matching costs is the
difference). `--baseline CHECKOUT` also runs another checkout of the project (built in place),
alternating the rounds of both, so the figures of both are measured under the same load.

    .venv/bin/python bench/search_parts.py [--rounds 5] [--no-match] [--baseline CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT  # noqa: E402

WARM_RUNS, WARM_CALLS, COLD_CALLS = 15, 200, 1500
EVICT_BYTES = 4 << 20


def child(tree: str, match: bool) -> dict[str, float]:
    """One round in this process, with `tree`'s gateway imported: microseconds a call."""
    sys.path.insert(0, tree)  # before search_cost, which puts this checkout's in the path
    from gateway.search import page_scan  # noqa: I001
    from gateway.search.index import _build
    from search_cost import ATTACHMENTS, SESSIONS, filename, page_bytes

    if not page_scan.AVAILABLE:
        raise SystemExit(f"{tree}: the C page scanner is not built")
    assert Path(page_scan.__file__).resolve().is_relative_to(Path(tree).resolve())
    matchers = {}
    if match:
        for s in range(SESSIONS):
            rows = [{"id": f"att_{s}_{i}", "name": filename(s, i), "content_type": "image/png",
                     "internal_uri": f"https://cdn.example/{filename(s, i)}",
                     "source": "memory_add_uri"} for i in range(ATTACHMENTS)]
            matchers[f"bench-session-{s}"] = _build(1, rows).native
    body = page_bytes()
    page = page_scan.scan(body, False)
    assert page is not None
    out, attached = page.render(matchers, None)
    assert attached == (150 if match else 0), attached
    clock = time.perf_counter
    warm_scan = warm_answer = float("inf")
    for _ in range(WARM_RUNS):
        started = clock()
        for _ in range(WARM_CALLS):
            page_scan.scan(body, False)
        warm_scan = min(warm_scan, (clock() - started) / WARM_CALLS)
        started = clock()
        for _ in range(WARM_CALLS):
            page.render(matchers, None)
        warm_answer = min(warm_answer, (clock() - started) / WARM_CALLS)
    other, zeros = bytearray(EVICT_BYTES), bytes(EVICT_BYTES)
    scans, answers = [], []
    for _ in range(COLD_CALLS):
        other[:] = zeros
        started = clock()
        cold = page_scan.scan(body, False)
        scanned = clock()
        assert cold is not None
        cold.render(matchers, None)
        answers.append(clock() - scanned)
        scans.append(scanned - started)
    return {"warm scan": warm_scan * 1e6, "warm answer": warm_answer * 1e6,
            "cold scan": statistics.median(scans) * 1e6,
            "cold answer": statistics.median(answers) * 1e6}


def run_child(tree: Path, match: bool) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", str(tree)]
    if not match:
        command.append("--no-match")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-match", action="store_true",
                        help="answer without matchers (no matching, no attachments)")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also run this checkout, alternating rounds with this one")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, not args.no_match)))
        return 0
    trees = {"this checkout": ROOT}
    if args.baseline:
        trees[f"baseline {args.baseline}"] = Path(args.baseline).resolve()
    measured: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    print(f"bench/search_cost.py's page, {'no matchers' if args.no_match else 'matched'}; "
          f"warm: minimum of {WARM_RUNS} runs of {WARM_CALLS}; cold: median of {COLD_CALLS} "
          f"calls, each after {EVICT_BYTES >> 20} MiB written")
    for round_no in range(1, args.rounds + 1):
        order = list(trees.items())
        for name, tree in order if round_no % 2 else reversed(order):
            figures = run_child(tree, not args.no_match)
            measured[name].append(figures)
            print(f"round {round_no} {name}: " +
                  ", ".join(f"{k} {v:.2f} us" for k, v in figures.items()))
    medians: dict[str, dict[str, float]] = {}
    for name, rounds in measured.items():
        medians[name] = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        fig = medians[name]
        print(f"{name}: median warm scan {fig['warm scan']:.2f} + answer "
              f"{fig['warm answer']:.2f} = {fig['warm scan'] + fig['warm answer']:.2f} us; "
              f"cold scan {fig['cold scan']:.2f} + answer {fig['cold answer']:.2f} = "
              f"{fig['cold scan'] + fig['cold answer']:.2f} us")
    if args.baseline:
        this, base = medians["this checkout"], medians[f"baseline {args.baseline}"]
        print("this checkout ÷ baseline: " + ", ".join(
            f"{k} {this[k] / base[k]:.3f}" for k in this))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
