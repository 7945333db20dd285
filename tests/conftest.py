"""Prints the mutant kill table (mutant -> requirement -> killed) at the end of the run.

Each kill-table test records its row as a user property of its report. Reports
reach the process that prints the summary whether the tests ran in it or in
pytest-xdist workers, which is why the rows travel that way and not through a
module-level list (a worker's list never reaches the controller).
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from types import ModuleType
from typing import Any

import pytest

#: The user-property name under which a kill-table test reports its row.
KILL_TABLE_ROW = "kill_table_row"
#: Names the session's directory of shared runs (kept in step with ``tests/shared_runs.py``, which this
#: module does not import: it would load the runner before pytest configured the plugins).
SHARED_RUNS_ENV = "RUNLANE_TESTS_SHARED_RUNS"

_rows: list[tuple[str, str, str]] = []
_owned: list[str] = []


def example_package(module: str, example: str) -> ModuleType:
    """Import an example driver package a test needs, or skip naming the command that installs it.

    Under ``CI=true`` a missing example fails instead: CI installs every example, so its absence there
    is a broken set-up, not a reason to test less.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        reason = f"examples/{example} is not installed (pip install -e examples/{example})"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"{reason} and CI=true")
        pytest.skip(reason)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``pytest -n``, hand tests out by work stealing rather than in fixed chunks.

    A few tests here take a minute (whole certifications of locking drivers, scaffolds); with
    xdist's default ``load`` schedule the worker that draws them finishes minutes after the
    others went idle. Work stealing lets an idle worker take the queue of a busy one, which
    halved the suite's wall time on two cores. A ``--dist`` other than the default is left alone.
    """
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


def pytest_runtest_logreport(report: Any) -> None:
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == KILL_TABLE_ROW:
            mutant, requirement, verdict = value
            _rows.append((str(mutant), str(requirement), str(verdict)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _rows:
        return
    terminalreporter.section("mutant kill table")
    width = max(len(name) for name, _, _ in _rows)
    req_width = max(len(req) for _, req, _ in _rows)
    terminalreporter.write_line(f"{'mutant'.ljust(width)}  {'requirement'.ljust(req_width)}  killed")
    for name, requirement, verdict in sorted(_rows, key=lambda row: (row[1], row[0])):
        terminalreporter.write_line(f"{name.ljust(width)}  {requirement.ljust(req_width)}  {verdict}")
    killed = sum(1 for _, _, verdict in _rows if verdict == "yes")
    terminalreporter.write_line(f"{killed}/{len(_rows)} mutants killed by their intended requirement")


def pytest_configure(config: pytest.Config) -> None:
    """Make the session's directory of shared runs (``tests/shared_runs.py``) before xdist starts its
    workers, which inherit the variable naming it. An inner pytest session (pytester) finds it set and
    leaves it alone."""
    if os.environ.get(SHARED_RUNS_ENV):
        return
    directory = tempfile.mkdtemp(prefix="runlane-shared-runs-")
    os.environ[SHARED_RUNS_ENV] = directory
    _owned.append(directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _owned:
        directory = _owned.pop()
        os.environ.pop(SHARED_RUNS_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)
