"""A driver that breaks under faults is judged in the faults area alone, and its failure replays.

Two promises of the faults suite are checked end to end here: a fault never
reaches another area's verdict (every trial runs on a store of its own and
closes what it opened), and the reproduce line printed for a failing faults
check breaks the same write in the same way again, because the schedule
comes from the driver's own write count and not from a seed.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.catalogue import all_requirements
from runlane_conformance.runner import run_suites

ROOT = Path(__file__).resolve().parents[2]
CERTIFY = Path(sys.executable).parent / "runlane-certify"


@pytest.mark.parametrize(
    "mutant",
    ["replays_after_lost_commit_reply", "leaves_partial_batch", "indexes_outside_the_commit"],
)
def test_a_driver_that_mishandles_faults_fails_only_faults_requirements(mutant: str) -> None:
    result = run_suites(f"tests.mutants.m_faults:{mutant}", seed=0)
    failed = sorted(req.id for req in result.requirements if req.outcome.value == "failed")
    assert failed, f"{mutant} passed every requirement"
    # The differential also crosses faults (issue 34), so its reads requirement may refuse these too.
    allowed = {"model.differential-reads", "model.differential-scans"}
    assert all(rid.startswith("faults.") or rid in allowed for rid in failed), (
        f"{mutant} fails outside faults: {failed}"
    )
    outcomes = {req.id: req.outcome.value for req in result.requirements}
    others = {rid for rid in all_requirements() if not rid.startswith("faults.")}
    assert others <= set(outcomes), f"areas that did not run: {sorted(others - set(outcomes))}"
    assert not result.problems, result.problems


def _fails(argv: list[str]) -> str:
    """Run ``argv`` in the repository (so ``tests.mutants`` imports) and expect exit 1; its stdout."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


def _certify(words: list[str], report: Path) -> dict[str, Any]:
    # The test's own example database (a printed reproduce line already names it).
    if "--examples" not in words:
        words = [*words, "--examples", str(report.parent / "examples")]
    _fails([str(CERTIFY), *words, "--report", str(report)])
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return document


def _failures(document: dict[str, Any]) -> dict[str, list[str]]:
    return {
        entry["id"]: [failure["message"] for failure in entry.get("failures", [])]
        for entry in document["requirements"]
        if entry["outcome"] == "failed"
    }


def test_the_reproduce_line_of_a_failing_faults_check_breaks_the_same_write_the_same_way(
    tmp_path: Path,
) -> None:
    driver = "tests.mutants.m_faults:indexes_outside_the_commit"
    first = _certify(["run", "--driver", driver, "--area", "faults"], tmp_path / "first.json")
    failed = _failures(first)
    assert list(failed) == ["faults.indexes-match-records"], failed
    (entry,) = [e for e in first["requirements"] if e["id"] == "faults.indexes-match-records"]
    words = shlex.split(entry["failures"][0]["reproduce"])
    assert words[:2] == ["runlane-certify", "run"], words
    again = _certify(words[1:], tmp_path / "again.json")
    # The whole message: the fault's kind, the write it broke, the calibrated write count, what the
    # store held afterwards, and how many trials broke the rule.
    assert _failures(again) == failed
    message = failed["faults.indexes-match-records"][0]
    assert message.startswith("AssertionError: connection cut before write 2 "), message

    # The plain pytest line replays the same check, with the same first failing trial.
    # A module:factory driver is imported from the run's folder, so the line starts `python -m pytest`.
    words = shlex.split(entry["failures"][0]["pytest"])
    assert words[:3] == ["python", "-m", "pytest"], words
    output = _fails([sys.executable, *words[1:], "-p", "no:randomly", "-p", "no:xdist"])
    assert message.removeprefix("AssertionError: ") in output, output
