"""Gateway variants side by side on the pass-through (SPEC §14), one Starlette upstream.

Every variant's gateway runs at once in front of the same upstream; each round loads the
upstream directly, then each variant in turn (the order rotates every round), for `--seconds`.
Per variant it prints the median of its round ratios (gateway req/s ÷ the round's direct
req/s) and the gateway process's CPU time per request (utime + stime from /proc ÷ requests),
the figure other work on the machine disturbs least.

    .venv/bin/python bench/passthrough_alt.py --variants current,base [--base-tree DIR]

Variants: `current` (this tree, `memory-gateway serve`), `base` (the tree at `--base-tree`,
e.g. `git archive` of an older commit), `twowrites` (this tree, each response's head and
body written separately as uvicorn does), `asyncio` (this tree on the asyncio loop, not
uvloop), `httpx` (this tree, `upstream.client = "httpx"`), `granian` (this tree on granian's
ASGI server, importable from `GRANIAN_PATH`, e.g. a `pip install --target` folder).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, cpu_seconds, gateway_process, load, starlette_upstream  # noqa: E402
from passthrough import BODY, PATH  # noqa: E402

JSON_TYPE = {"Content-Type": "application/json"}


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its children (granian serves from a worker process)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return cpu_seconds(pid) + sum(tree_cpu_seconds(int(child)) for child in children)


def serve_from(tree: Path) -> list[str]:
    """`memory-gateway serve` with the gateway package imported from `tree`."""
    return ["-c", f"import sys; sys.path.insert(0, {str(tree)!r}); "
                  "from gateway.cli import main; raise SystemExit(main(['serve']))"]


# The search benchmarks' settings (bench/harness.py), which the pass-through does not use: left
# out for every variant, so that a tree older than them (`base`) starts and all run alike.
SEARCH_SETTINGS: dict[str, str | None] = {"MEMORY_GATEWAY_UPSTREAM_ALLOW_PATHS": None,
                                          "MEMORY_GATEWAY_UPSTREAM_FETCHABLE_HOSTS": None}


def variant(name: str, base_tree: Path | None
            ) -> tuple[list[str] | None, dict[str, str | None]]:
    """(the command after the interpreter, extra environment) of a variant."""
    launcher = str(ROOT / "bench" / "serve_variant.py")
    if name == "current":
        return None, SEARCH_SETTINGS
    if name == "base":
        if base_tree is None:
            raise SystemExit("the base variant needs --base-tree")
        return serve_from(base_tree), SEARCH_SETTINGS
    if name == "httpx":
        return None, {**SEARCH_SETTINGS, "MEMORY_GATEWAY_UPSTREAM_CLIENT": "httpx"}
    if name in ("twowrites", "asyncio"):
        return [launcher, name], SEARCH_SETTINGS
    if name == "granian":
        return [launcher, name], {**SEARCH_SETTINGS,
                                  "PYTHONPATH": os.environ.get("GRANIAN_PATH", "")}
    raise SystemExit(f"unknown variant {name!r}")


@contextmanager
def gateways(names: list[str], upstream: str,
             base_tree: Path | None) -> Iterator[dict[str, tuple[str, str, int]]]:
    with ExitStack() as stack:
        running = {}
        for name in names:
            serve, env = variant(name, base_tree)
            url, key, proc = stack.enter_context(gateway_process(upstream, env, serve))
            running[name] = (url, key, proc.pid)
        yield running


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variants", default="current,base")
    parser.add_argument("--base-tree", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    names = args.variants.split(",")
    ratios: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    with starlette_upstream() as upstream, gateways(names, upstream, args.base_tree) as running:
        def run(name: str, seconds: float) -> tuple[float, float]:
            url, key, pid = running[name]
            headers = {**JSON_TYPE, "Authorization": f"Bearer {key}"}
            before = tree_cpu_seconds(pid)
            rate = load(url + PATH, BODY, headers, args.connections, seconds)
            used = tree_cpu_seconds(pid) - before
            return rate, used / (rate * seconds)

        for name in names:
            run(name, 1.0)  # warm-up
        load(upstream + PATH, BODY, JSON_TYPE, args.connections, 1.0)
        for round_no in range(1, args.rounds + 1):
            direct = load(upstream + PATH, BODY, JSON_TYPE, args.connections, args.seconds)
            shift = round_no % len(names)
            line = [f"round {round_no}: direct {direct:7.0f}"]
            for name in names[shift:] + names[:shift]:
                rate, per_request = run(name, args.seconds)
                ratios[name].append(rate / direct)
                cpu[name].append(per_request)
                line.append(f"{name} {rate:7.0f} ({rate / direct:.3f}, {per_request * 1e6:.0f} µs)")
            print("  ".join(line), flush=True)
    first = names[0]
    for name in names:
        ratio, per_request = statistics.median(ratios[name]), statistics.median(cpu[name])
        relative = "" if name == first else (
            f"  CPU/request ÷ {first} "
            f"{statistics.median(c / f for c, f in zip(cpu[name], cpu[first], strict=True)):.3f}")
        print(f"{name:10s} median ratio {ratio:.3f}  CPU {per_request * 1e6:.1f} µs/request"
              f"{relative}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
