"""Resolution accuracy on the resolution table (tests/resolution_cases), per kind of reference.

Each row is run through `resolve_targets` as the resolve route builds its input and judged:
right (the expected images by an expected mode, or a clarification where one is expected),
asked (a clarification where an answer was expected), silent wrong (images other than the
expected ones, or any image where the rules should have asked: the failure that costs the user a
paid generation) or wrong mode (the right images by another rule). Prints a Markdown table, as in
docs/resolution.md. `--round N` limits it to one round of rows (1: written before the resolver
was read; 2, 3: written after the redesign, each measured once before anything was changed; 4:
found silently wrong in review, added with their fix; 5: every position of the version chain,
written from issue 25 before the resolver was read; 6: written after round 5 passed, measured
once before any change; 7: found while fixing round 6, added with their fix; 8: the ordinal
"the first one" beside a version chain and a negated cell with a count of the rest, written from
issue 55 before the resolver was read again).

    .venv/bin/python bench/resolution_accuracy.py [--round N] [--misses]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.resolution_cases import CASES, KINDS  # noqa: E402
from tests.resolution_cases.harness import run, verdict  # noqa: E402

VERDICTS = ("right", "asked", "silent_wrong", "wrong_mode")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round", type=int, choices=(1, 2, 3, 4, 5, 6, 7, 8))
    parser.add_argument("--misses", action="store_true", help="list every row not answered right")
    args = parser.parse_args()
    rows = [c for c in CASES if args.round is None or c.round == args.round]
    counts: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for case in rows:
        decision = run(case)
        judged = verdict(case, decision)
        counts[case.kind][judged] += 1
        if args.misses and judged != "right":
            print(f"{judged}: [{case.kind}] {case.scene.name}: {case.text!r} -> "
                  f"{decision.mode} {decision.target_asset_ids}", file=sys.stderr)
    print("| kind | rows | right | asked | silent wrong | wrong mode | accuracy |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total: Counter[str] = Counter()
    for kind in KINDS:
        c = counts[kind]
        n = sum(c.values())
        if not n:
            continue
        total.update(c)
        print(f"| {kind} | {n} | " + " | ".join(str(c[v]) for v in VERDICTS)
              + f" | {100 * c['right'] / n:.1f}% |")
    n = sum(total.values())
    print(f"| **all** | {n} | " + " | ".join(str(total[v]) for v in VERDICTS)
          + f" | {100 * total['right'] / n:.1f}% |")
    print(f"\nsilent wrong answers: {total['silent_wrong']} of {n} rows "
          f"({100 * total['silent_wrong'] / n:.2f}%)")


if __name__ == "__main__":
    main()
