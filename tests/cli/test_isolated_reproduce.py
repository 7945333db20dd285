"""The reproduce lines of an isolated run work on any machine: no interpreter path, no backend command.

An isolated run serves the driver from ``python -m runlane_conformance.backend``, started with
this machine's interpreter. Its ``pytest:`` line names the driver as the user gave it and asks
for the same isolation (``--runlane-isolation process``), so it can be pasted into a bug report
or a CI log and rerun elsewhere.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation
from runlane_conformance.run.certify import certify_driver

ROOT = Path(__file__).resolve().parents[2]
MUTANT = "tests.mutants.m_append:gap_between_batches"
REQUIREMENT = "append.positions-contiguous"
pytestmark = pytest.mark.timeout(300)


def _machine_bound(words: list[str]) -> list[str]:
    return [word for word in words if word.startswith("/") or sys.executable in word or "backend" in word]


def test_an_isolated_runs_pytest_line_names_the_driver_and_the_isolation_and_no_path_of_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    result = certify_driver(MUTANT, {}, requirements=[REQUIREMENT], seed=3, isolation=Isolation.PROCESS)
    (failure,) = result.requirement(REQUIREMENT).failures
    for line in (
        result.reproduce_pytest(failure),
        result.reproduce_pytest(dataclasses.replace(failure, properties=())),
    ):
        words = shlex.split(line)
        assert _machine_bound(words) == [], line
        assert words[words.index("--runlane-driver") + 1] == MUTANT
        assert words[words.index("--runlane-isolation") + 1] == "process"
    assert "--isolation process" in result.reproduce_command(failure)
