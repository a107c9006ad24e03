"""The C page scanner against the pure-Python alternative (bench/search_alt.py), in one sitting.

Two gateways in front of one fast engine, both seeded as bench/search_cost.py seeds its
gateway: one on the C page scanner, one on msgspec + pyahocorasick. Each round measures, for
each path in turn (the order alternates), the pass-through of the page and the search;
prints every pair and the median ratio of each path, and the alternative's median as a share of
the scanner's. The question (docs/decisions.md): is the alternative within 15 %?

    .venv/bin/python bench/search_cost_alt.py [--rounds 6] [--seconds 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, fast_upstream, gateway, load  # noqa: E402
from search_cost import RESULTS, page_bytes, seed  # noqa: E402

sys.path.insert(0, str(ROOT))
from gateway.search import page_scan  # noqa: E402

WITHIN = 0.15
PATHS = {
    "scanner": None,  # python -m gateway serve
    "msgspec+ahocorasick": [str(ROOT / "bench" / "search_alt.py"), "serve"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if not page_scan.AVAILABLE:
        print("the C page scanner is not built (no C compiler at install?)")
        return 2
    body = b'{"query": "trip", "user_id": "bench"}'
    ratios: dict[str, list[float]] = {name: [] for name in PATHS}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        page_file = Path(tmp) / "page.json"
        page_file.write_bytes(page_bytes())
        print(f"page: {RESULTS} results, {page_file.stat().st_size} bytes")
        upstream = stack.enter_context(fast_upstream(page_file))
        gateways = {}
        for name, serve in PATHS.items():
            url, key = stack.enter_context(gateway(upstream, None, serve))
            seed(url, key, stored=False, urls=False)  # client URIs, as search_cost.py by default
            gateways[name] = (url, {"Content-Type": "application/json",
                                    "Authorization": f"Bearer {key}"})
        order = list(PATHS)
        for round_no in range(1, args.rounds + 1):
            for name in order:
                url, auth = gateways[name]
                base = load(url + "/bench/page", body, auth, args.connections, args.seconds)
                search = load(url + "/memories/search", body, auth, args.connections,
                              args.seconds)
                ratios[name].append(search / base)
                print(f"round {round_no} {name:>20}: pass-through {base:7.0f} req/s  "
                      f"search {search:7.0f} req/s  ratio {search / base:.3f}")
            order.reverse()
    medians = {name: statistics.median(values) for name, values in ratios.items()}
    scanner, alternative = medians["scanner"], medians["msgspec+ahocorasick"]
    share = alternative / scanner
    for name, value in medians.items():
        print(f"median ratio {name}: {value:.3f}")
    verdict = "within" if share >= 1 - WITHIN else "NOT within"
    print(f"alternative / scanner: {share:.2f} ({verdict} {WITHIN:.0%} of the C scanner)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
