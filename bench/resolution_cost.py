"""Resolver cost per call (SPEC §14, issue 13): `resolve_targets` in process on a 9-image canvas.

Every phrasing of the resolution table that is asked of the 3x3 grid (ordinals, rows and
columns, counts from either end, sets, lists, exclusions, mixed language, traditional script)
plus the same canvas with a selection, a version chain in focus, a four-result turn and a
chain of four turns one of which produced three results (issue 25), each
resolved many times; the per-call times give p50 and p99. Target: p99 < 2 ms. Two clocks:
the thread's CPU time (the resolver's own cost, unmoved by other processes on a shared machine)
and wall time (what a caller waits, including time the scheduler gives to others). Then the
slowest of the longest texts the route accepts, made of one reference word repeated.

    .venv/bin/python bench/resolution_cost.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.resolution.resolver import ResolutionInput, resolve_targets  # noqa: E402
from tests.resolution_cases import CASES  # noqa: E402
from tests.resolution_cases.harness import resolution_input  # noqa: E402
from tests.resolution_cases.scenes import grid, story  # noqa: E402

TARGET_P99_MS = 2.0


def inputs() -> list[ResolutionInput]:
    canvas = grid(3, 3)
    texts = sorted({c.text for c in CASES})  # every phrasing, on the 9-image canvas
    with_state = [
        dataclasses.replace(canvas, selected_node_ids=("n22",)),
        dataclasses.replace(canvas, chain=("v0", "v1", "v2"), results=("v2",)),
        dataclasses.replace(canvas, results=("x1", "x2", "x3", "x4")),
        # a version chain by turns, one of them with three results
        dataclasses.replace(story("t1", "t2a t2b t2c", "t3<t2b", "t4"), nodes=canvas.nodes),
    ]
    out = [resolution_input(canvas, t) for t in texts]
    out += [resolution_input(scene, t) for scene in with_state for t in texts[::7]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    calls = inputs()
    for inp in calls:  # warm up: compiled patterns, the script converter's tables
        resolve_targets(inp)
    cpu: list[float] = []  # the resolver's own cost: CPU time of this thread
    wall: list[float] = []  # what a caller waits, other processes' load included
    gc.disable()
    try:
        for _ in range(args.rounds):
            for inp in calls:
                start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
                resolve_targets(inp)
                cpu.append((time.thread_time_ns() - start_cpu) / 1e6)
                wall.append((time.perf_counter_ns() - start) / 1e6)
    finally:
        gc.enable()
    print(f"calls: {len(cpu)} ({len(calls)} inputs x {args.rounds} rounds), 9-image canvas, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, times in (("cpu", cpu), ("wall", wall)):
        times.sort()
        p50, p99 = statistics.median(times), times[int(len(times) * 0.99) - 1]
        met = "met" if p99 < TARGET_P99_MS else "NOT met"
        print(f"{name:5} p50 {p50:.3f} ms   p99 {p99:.3f} ms   max {times[-1]:.3f} ms   "
              f"(target p99 < {TARGET_P99_MS} ms: {met})")
    worst = max(_longest_texts(), key=lambda item: item[1])
    print(f"longest text the route accepts ({MAX_TEXT:,} characters of repeated reference "
          f"words), slowest: {worst[0]!r} x{MAX_TEXT // len(worst[0])}: {worst[1]:.0f} ms")


MAX_TEXT = 20_000  # gateway/routes/resolve.py MAX_TEXT_CHARS
# runs of the words the constructions are built from: every one must stay linear in the text
REPEATED = ("第", "上", "一二三", "1", "the ", "first, ", "第一、", "第一排第二个", "左边和",
            "不要左边的，", "all but the last ", "像原图一样", "top-left 的那个 ",
            "有猫的那张", "上上轮的", "倒数第三版", "两步之前的", "你生成的第一张",
            "最后两版都不对，再往前一版，", "not the newest, the one before it, ")  # fmt: skip


def _longest_texts() -> list[tuple[str, float]]:
    canvas = resolution_input(
        dataclasses.replace(story("t1", "t2a t2b t2c", "t3<t2b", "t4"), nodes=grid(3, 3).nodes), ""
    )
    out = []
    for word in REPEATED:
        inp = dataclasses.replace(canvas, text=(word * (MAX_TEXT // len(word) + 1))[:MAX_TEXT])
        start = time.thread_time_ns()
        resolve_targets(inp)
        out.append((word, (time.thread_time_ns() - start) / 1e6))
    return out


if __name__ == "__main__":
    main()
