"""The test suite's time per folder, from pytest's JUnit XML (docs/testing.md, "Re-measure").

Each file given is one run (`pytest ... --junitxml=FILE`); the table has one column pair per
run: the seconds its tests took (setup, call and teardown: a module's shared fixture counts in
its first test) and how many tests ran, per folder (tests/, tests/e2e, tests/reliability, ...).
A last row gives the totals and each run's wall time as pytest reported it. Failed and errored
tests are counted and named below the table: a faster run that fails proves nothing.

    .venv/bin/python bench/suite_times.py /tmp/before.xml /tmp/after.xml

`--modules` gives one row per test module instead of per folder. `--exclude TEXT` (repeatable)
leaves out the tests whose `module::name` contains TEXT, e.g. the modules that build a client
venv on first use (`test_clients_more`, `test_readme_snippets`: a minute or two of pip each,
once per checkout) when one run built them and the other did not.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Run:
    name: str
    wall_s: float = 0.0
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    failed: list[str] = field(default_factory=list)


def folder_of(classname: str) -> str:
    """`tests.e2e.test_clients` (or `tests.test_x.TestClass`) → `tests/e2e` (`tests`)."""
    parts = classname.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join(parts[:index]) or "."
    return "/".join(parts[:-1]) or "."


def module_of(classname: str) -> str:
    """`tests.e2e.test_clients` (or `tests.test_x.TestClass`) → `tests/e2e/test_clients.py`."""
    parts = classname.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join(parts[:index + 1]) + ".py"
    return classname


def read(path: Path, exclude: tuple[str, ...] = (), by_module: bool = False) -> Run:
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    run = Run(path.name, wall_s=sum(float(suite.get("time", 0)) for suite in suites))
    for case in root.iter("testcase"):
        if any(text in f"{case.get('classname')}::{case.get('name')}" for text in exclude):
            continue
        folder = (module_of if by_module else folder_of)(case.get("classname", ""))
        run.seconds[folder] += float(case.get("time", 0))
        run.tests[folder] += 1
        if case.find("failure") is not None or case.find("error") is not None:
            run.failed.append(f"{case.get('classname')}::{case.get('name')}")
    return run


def table(runs: list[Run]) -> str:
    folders = sorted({folder for run in runs for folder in run.seconds})
    width = max([len("folder"), len("total (wall)"), *map(len, folders)])
    head = f"{'folder':<{width}}" + "".join(f" | {run.name[:22]:>22}" for run in runs)
    sub = " " * width + "".join(f" | {'seconds':>12} {'tests':>9}" for _ in runs)
    lines = [head, sub, "-" * len(sub)]
    for folder in folders:
        lines.append(f"{folder:<{width}}" + "".join(
            f" | {run.seconds.get(folder, 0.0):>12.1f} {run.tests.get(folder, 0):>9}"
            for run in runs))
    lines.append("-" * len(sub))
    lines.append(f"{'total':<{width}}" + "".join(
        f" | {sum(run.seconds.values()):>12.1f} {sum(run.tests.values()):>9}" for run in runs))
    lines.append(f"{'total (wall)':<{width}}" + "".join(
        f" | {run.wall_s:>12.1f} {'':>9}" for run in runs))
    for run in runs:
        if run.failed:
            lines.append(f"{run.name}: {len(run.failed)} failed or errored")
            lines.extend(f"  {name}" for name in run.failed)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="+", type=Path, help="pytest --junitxml files, in order")
    parser.add_argument("--exclude", action="append", default=[], metavar="TEXT",
                        help="leave out tests whose module::name contains TEXT")
    parser.add_argument("--modules", action="store_true", help="one row per test module")
    args = parser.parse_args()
    runs = [read(path, tuple(args.exclude), args.modules) for path in args.junit]
    print(table(runs))
    if args.exclude:
        print("left out: tests matching " + ", ".join(map(repr, args.exclude))
              + " (the wall time is the whole run's)")


if __name__ == "__main__":
    main()
