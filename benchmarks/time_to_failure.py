"""How long a driver author waits for a failure: start to first found failure, to finished shrink, to replay.

For bugs of different kinds (a typo raising ``TypeError``, absent reads not
validated, a lost update, a cursor and a limit off by one), each a broken
driver from ``tests/mutants`` or defined here, the script runs the pytest
plugin on the one requirement that bug breaks, in the quick profile, exactly
as a driver author would rerun it (``pytest --pyargs runlane_conformance.suites
--runlane-driver ... --runlane-requirement ID``), and reads the output as it
streams:

* *found*: the first failure is known: Hypothesis starts shrinking it (the
  plugin's ``pytest_runlane_shrinking`` hook, implemented by this module when
  loaded with ``-p time_to_failure``), or, for a check without Hypothesis, the
  first failed test is printed;
* *shrunk*: the first failed test is printed (its shrinking is over);
* *total*: the run ended;
* *replayed*: the first failed test printed when the same command runs
  again with the example database the first run filled, which replays the
  saved failure instead of searching.

``--via cli`` times the same bugs through ``runlane-certify run --driver ...
--profile quick --requirement ID -v`` instead, in its supervised child
processes and with its own example database (``--examples``): *found* is the
``shrinking a failure in`` line ``-v`` prints when shrinking starts (or the
first printed failure, for a check without Hypothesis), *shrunk* the first
check printed as failed, *replayed* the same on the second run.

Run from the repository root: ``python benchmarks/time_to_failure.py``
(``--case NAME`` repeatable, ``--seed N``, ``--via pytest|cli``). Nothing in the
test suite is timed; ``tests/test_benchmarks.py`` only checks the table's shape.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
_LOG_VARIABLE = "TIME_TO_FAILURE_LOG"
TARGET_MEDIAN = 10.0
TARGET_MAX = 60.0


class Case(NamedTuple):
    """One bug: its name, the driver that has it, the requirement it breaks."""

    name: str
    driver: str
    requirement: str


CASES = (
    Case("typo TypeError", "time_to_failure:typo_harness", "point_reads.exact-positions"),
    Case("absent read", "tests.mutants.m_conflicts:drops_absent_reads", "model.serial-equivalent-histories"),
    Case("lost update", "tests.mutants.m_model:skips_read_validation", "model.serial-equivalent-histories"),
    Case("cursor off-by-one", "tests.mutants.m_cursors:cursor_skips_one", "cursors.pages-join-to-one-scan"),
    Case(
        "limit off-by-one",
        "tests.mutants.m_limits:accepts_one_past_query_results",
        "limits.query-results-boundary",
    ),
    Case("ghost read", "tests.mutants.m_point_reads:ghost_reads", "point_reads.absent-keys-read-as-none"),
)


class Timing(NamedTuple):
    """Seconds from the start of one pytest run; ``None`` for what never happened."""

    found: float | None
    shrunk: float | None
    total: float
    failed: int


# --- the plugin side (this module loaded with -p time_to_failure) -----------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_runlane_shrinking(item: pytest.Item) -> None:
    """Tell the measuring process when a failure was found and shrinking starts (pytest captures stdout)."""
    log = os.environ.get(_LOG_VARIABLE)
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(f"{time.time()} {item.nodeid}\n")


# --- a driver with a typo, wrapping the tiny example driver -----------------------------------


class _TypoTransaction:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get(self, keys: Sequence[Any]) -> Any:
        wanted = len(keys) + "0"  # type: ignore[operator]  # the typo this driver is measured with
        return self.inner.get(keys)[:wanted]


class _TypoDriver:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.profile = inner.profile

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def transaction(self, callback: Any, *args: Any, **kwargs: Any) -> Any:
        return self.inner.transaction(lambda tx: callback(_TypoTransaction(tx)), *args, **kwargs)


class _TypoStore:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def connect(self, clock: Any = None) -> _TypoDriver:
        return _TypoDriver(self.inner.connect(clock=clock))


class _TypoHarness:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open_store(self) -> _TypoStore:
        return _TypoStore(self.inner.open_store())


def typo_harness(options: dict[str, str]) -> _TypoHarness:
    """The harness of the reference driver with one typo in ``get()``."""
    from runlane_conformance.harness import load_harness

    return _TypoHarness(load_harness("local", options))


# --- measuring --------------------------------------------------------------------------------


def command(case: Case, seed: int, examples: Path) -> list[str]:
    """The pytest command a driver author reruns for ``case``, plus the timing hook."""
    return [
        sys.executable, "-m", "pytest", "-p", "time_to_failure", "-p", "no:randomly",
        "-p", "no:cacheprovider", "-v", "--pyargs", "runlane_conformance.suites",
        "--runlane-driver", case.driver,
        "--runlane-requirement", case.requirement, "--runlane-hypothesis-profile", "quick",
        f"--hypothesis-seed={seed}", "--runlane-examples", str(examples),
    ]  # fmt: skip


def certify_command(case: Case, seed: int, examples: Path) -> list[str]:
    """The ``runlane-certify`` command a driver author runs for ``case`` (``-v``: shrinking is printed)."""
    script = Path(sys.executable).parent / "runlane-certify"
    found = str(script) if script.exists() else shutil.which("runlane-certify")
    if found is None:
        raise SystemExit("time_to_failure: runlane-certify is not installed next to this Python or on PATH")
    return [
        found, "run", "--driver", case.driver, "--profile", "quick", "--requirement", case.requirement,
        "--seed", str(seed), "--examples", str(examples), "-v",
    ]  # fmt: skip


def _cli_failed(line: str) -> bool:
    # -v prints every check's end as "  OUTCOME  requirement  check (seconds)".
    return line.startswith(("  FAILED ", "  ERROR "))


def run_once(case: Case, seed: int, examples: Path, via: str = "pytest") -> Timing:
    """Run ``case`` once (under pytest, or through ``runlane-certify`` with ``via="cli"``), timing the
    output lines as they arrive."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), str(REPO), env.get("PYTHONPATH", "")])
    log = examples.parent / "shrinking.log"
    log.unlink(missing_ok=True)
    env[_LOG_VARIABLE] = str(log)
    started_wall = time.time()
    started = time.perf_counter()
    found = shrunk = None
    failed = 0
    argv = certify_command(case, seed, examples) if via == "cli" else command(case, seed, examples)
    started_cli_found: float | None = None
    with subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if via == "cli":
                if "shrinking a failure in " in line and started_cli_found is None:
                    started_cli_found = time.perf_counter() - started
                if _cli_failed(line):
                    failed += 1
                    if shrunk is None:
                        shrunk = time.perf_counter() - started
            elif " FAILED" in line and "::" in line:
                failed += 1
                if shrunk is None:
                    shrunk = time.perf_counter() - started
    total = time.perf_counter() - started
    if via == "cli":
        found = started_cli_found
    elif log.exists():
        found = min(float(line.split()[0]) for line in log.read_text().splitlines()) - started_wall
    if found is None or (shrunk is not None and shrunk < found):
        found = shrunk  # a check without Hypothesis: found when printed
    return Timing(found, shrunk, total, failed)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed of every run (default 0)")
    parser.add_argument(
        "--via",
        choices=("pytest", "cli"),
        default="pytest",
        help="rerun as a driver author would under pytest (default), or through runlane-certify run",
    )
    args = parser.parse_args(argv)
    cases = [case for case in CASES if not args.case or case.name in args.case]
    unknown = set(args.case) - {case.name for case in CASES}
    if unknown:
        parser.error(f"unknown case {sorted(unknown)}; cases: {', '.join(case.name for case in CASES)}")
    print(f"{'bug':<18} | {'requirement':<36} | found s | shrunk s | total s | replayed s | failed")
    found_times: list[float] = []
    not_failed: list[str] = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="time-to-failure-") as directory:
            examples = Path(directory) / "examples"
            first = run_once(case, args.seed, examples, args.via)
            replay = run_once(case, args.seed, examples, args.via)
        if first.shrunk is not None:
            found_times.append(first.shrunk)
        if not first.failed or not replay.failed:
            not_failed.append(case.name)
        found, shrunk = _seconds(first.found), _seconds(first.shrunk)
        print(
            f"{case.name:<18} | {case.requirement:<36} | {found:>7} | {shrunk:>8} | {first.total:>7.1f} | "
            f"{_seconds(replay.shrunk):>10} | {first.failed}",
            flush=True,
        )
    if found_times:
        median, worst = statistics.median(found_times), max(found_times)
        verdict = "met" if median < TARGET_MEDIAN and worst <= TARGET_MAX else "MISSED"
        print(
            f"target: start to finished shrink, median < {TARGET_MEDIAN:g} s and none over {TARGET_MAX:g} s: "
            f"median {median:.1f} s, max {worst:.1f} s: {verdict}"
        )
    if not_failed:
        print(f"no failure found for: {', '.join(not_failed)} (these bugs no longer fail their checks)")
    return 1 if not_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
