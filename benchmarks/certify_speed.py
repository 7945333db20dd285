"""How fast ``runlane-certify`` is, row by row, against the aims of issue 23.

Each row runs one ``runlane-certify`` command line ``--repeat`` times (default 3)
and prints the median CPU time (user + system of the command and every process
it waited for, from ``getrusage(RUSAGE_CHILDREN)``) and the median wall time,
then compares the row's aim with the figure the aim is about:

* ``version`` / ``help`` / ``run-help``: ``--version``, ``--help`` and ``run --help``, CPU <= 0.3 s;
* ``fixed``: a run of one cheap requirement (two checks), CPU <= 1 s (what every run pays
  besides its checks: the CLI, one supervised child, its probe and collection);
* ``point_reads``: the point_reads area (no aim; the issue's reference row);
* ``quick`` / ``quick-w2``: the quick profile on ``local``, wall <= 5 s serial, <= 3 s with two workers;
* ``default-w2``: the default profile on ``local`` with two workers, wall <= 12 s;
* ``first-failure``: the quick profile on a broken ``local`` (``tests.mutants.m_point_reads:ghost_reads``),
  wall from start to the first printed failure, <= 3 s;
* ``sqlite`` / ``postgres`` / ``redis``: the quick profile on each example driver with
  ``--workers auto``, wall <= 20 s, and the same serially (``sqlite-serial`` ...: no aim, it shows
  what ``auto`` saves); only when the example is installed and its server answers (otherwise the
  row says why it was skipped).

Wall times depend on the machine's load, so the load average is printed with
them; compare CPU times across changes. Whether ``PYTHONDONTWRITEBYTECODE`` is set is
printed too: it decides whether anything outside the toolkit's private bytecode cache
is compiled afresh on each start. Run from the repository root:
``python benchmarks/certify_speed.py`` (``--row NAME`` repeatable, ``--repeat N``,
``--postgres-dsn``, ``--redis-url``). Nothing in the test suite is timed;
``tests/test_benchmarks.py`` only runs the cheapest row once and checks the table's shape.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
MUTANT = "tests.mutants.m_point_reads:ghost_reads"


class Aim(NamedTuple):
    """What a row must stay under: ``metric`` is ``cpu`` or ``wall`` (or ``first`` for first failure)."""

    metric: str
    seconds: float


class Row(NamedTuple):
    """One benchmark row: its name, the ``runlane-certify`` arguments, its aim and what it needs."""

    name: str
    args: tuple[str, ...]
    aim: Aim | None
    needs: str = ""


class Sample(NamedTuple):
    """One run of a row: CPU and wall seconds, and seconds to the first printed failure if any."""

    cpu: float
    wall: float
    first_failure: float | None
    exit_code: int


def rows(postgres_dsn: str, redis_url: str) -> tuple[Row, ...]:
    """Every row, in the order the table prints them."""
    quick = ("run", "--driver", "local", "--profile", "quick")
    return (
        Row("version", ("--version",), Aim("cpu", 0.3)),
        Row("help", ("--help",), Aim("cpu", 0.3)),
        Row("run-help", ("run", "--help"), Aim("cpu", 0.3)),
        Row(
            "fixed",
            ("run", "--driver", "local", "--requirement", "point_reads.exact-positions"),
            Aim("cpu", 1.0),
        ),
        Row("point_reads", ("run", "--driver", "local", "--area", "point_reads"), None),
        Row("quick", quick, Aim("wall", 5.0)),
        Row("quick-w2", (*quick, "--workers", "2"), Aim("wall", 3.0)),
        Row(
            "default-w2",
            ("run", "--driver", "local", "--profile", "default", "--workers", "2"),
            Aim("wall", 12.0),
        ),
        Row(
            "first-failure",
            ("run", "--driver", MUTANT, "--profile", "quick", "-v", "--maxfail", "1"),
            Aim("first", 3.0),
        ),
        *_example_rows("sqlite", ("run", "--driver", "sqlite", "--profile", "quick")),
        *_example_rows(
            "postgres",
            ("run", "--driver", "postgres", "--option", f"dsn={postgres_dsn}", "--profile", "quick"),
        ),
        *_example_rows(
            "redis", ("run", "--driver", "redis", "--option", f"url={redis_url}", "--profile", "quick")
        ),
    )


def _example_rows(name: str, command: tuple[str, ...]) -> tuple[Row, Row]:
    """An example's quick run with ``--workers auto`` (the aim) and serially (to show the speed-up)."""
    return (
        Row(name, (*command, "--workers", "auto"), Aim("wall", 20.0), name),
        Row(f"{name}-serial", command, None, name),
    )


def _answers(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def unavailable(row: Row, postgres_dsn: str, redis_url: str) -> str | None:
    """Why ``row`` cannot run here, or ``None`` when it can."""
    modules = {
        "sqlite": "runlane_sqlite_driver",
        "postgres": "runlane_postgres_driver",
        "redis": "runlane_redis_driver",
    }
    if not row.needs:
        return None
    if importlib.util.find_spec(modules[row.needs]) is None:
        return f"example not installed (pip install -e examples/{row.needs})"
    if row.needs == "postgres" and not _answers(postgres_dsn, 5432):
        return f"no server at {postgres_dsn}"
    if row.needs == "redis" and not _answers(redis_url, 6379):
        return f"no server at {redis_url}"
    return None


def certify_executable() -> list[str]:
    """How to start ``runlane-certify``: the console script beside this interpreter, else on PATH."""
    beside = Path(sys.executable).with_name("runlane-certify")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("runlane-certify")
    if found is None:
        raise SystemExit("certify_speed: runlane-certify is not installed (pip install -e .)")
    return [found]


def _fresh_examples(row: Row, directory: Path) -> list[str]:
    # A failure saved by an earlier repetition would replay at once and flatter the next one.
    return ["--examples", str(directory)] if row.args[:1] == ("run",) else []


def _is_failure_line(line: str) -> bool:
    return line.startswith(("  FAILED ", "  ERROR "))


def run_once(argv: Sequence[str], cwd: Path) -> Sample:
    """Run ``argv`` to its end; CPU is the rusage of waited-for children (rows run one at a time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    first: float | None = None
    with subprocess.Popen(
        list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if first is None and _is_failure_line(line):
                first = time.perf_counter() - started
        code = process.wait()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(cpu, wall, first, code)


def verdict(aim: Aim | None, cpu: float, wall: float, first: float | None) -> str:
    """``met`` or ``MISSED by N s`` for the figure ``aim`` is about; ``-`` for a row without an aim."""
    if aim is None:
        return "-"
    figure = {"cpu": cpu, "wall": wall, "first": first}[aim.metric]
    label = {"cpu": "CPU", "wall": "wall", "first": "first failure"}[aim.metric]
    if figure is None:
        return f"MISSED: no failure printed (aim {label} <= {aim.seconds:g} s)"
    if figure <= aim.seconds:
        return f"met ({label} <= {aim.seconds:g} s)"
    return f"MISSED by {figure - aim.seconds:.2f} s ({label} <= {aim.seconds:g} s)"


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(
    argv: Sequence[str] | None = None, runner: Callable[[Sequence[str], Path], Sample] = run_once
) -> int:
    """Print the table; returns 0 (a missed aim is reported, not an error: this is a measurement)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--row", action="append", default=[], metavar="NAME", help="run only these rows")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the median is shown (default 3)")
    parser.add_argument("--postgres-dsn", default="postgresql://127.0.0.1:5432/test")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    options = parser.parse_args(argv)
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    table = rows(options.postgres_dsn, options.redis_url)
    known = {row.name for row in table}
    unknown = [name for name in options.row if name not in known]
    if unknown:
        parser.error(f"unknown row {', '.join(unknown)} (rows: {', '.join(sorted(known))})")
    chosen = [row for row in table if not options.row or row.name in options.row]
    executable = certify_executable()
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {options.repeat} run(s)"
    )
    print(f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    print(f"{'row':<14}| {'CPU s':>7} | {'wall s':>7} | {'first fail s':>12} | exit | aim")
    with tempfile.TemporaryDirectory(prefix="certify-speed-") as scratch:
        for row in chosen:
            reason = unavailable(row, options.postgres_dsn, options.redis_url)
            if reason is not None:
                print(f"{row.name:<14}| skipped: {reason}")
                continue
            samples = [
                runner(
                    [*executable, *row.args, *_fresh_examples(row, Path(scratch) / f"{row.name}-{index}")],
                    REPO,
                )
                for index in range(options.repeat)
            ]
            cpu = statistics.median(sample.cpu for sample in samples)
            wall = statistics.median(sample.wall for sample in samples)
            first = _median([sample.first_failure for sample in samples])
            codes = sorted({sample.exit_code for sample in samples})
            print(
                f"{row.name:<14}| {cpu:>7.2f} | {wall:>7.2f} | {_cell(first):>12} | "
                f"{','.join(map(str, codes)):>4} | {verdict(row.aim, cpu, wall, first)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
