"""The histories suite end to end: a failing check names the anomaly, prints the witness and saves a
history that the checker, given only the file, judges the same way."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runlane_conformance.history import Anomaly, check_history, load
from runlane_conformance.runner import run_suites


def test_a_failing_check_saves_a_history_that_rechecks_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_suites(
        "tests.mutants.m_histories:first_committer_wins", requirements=["histories.no-write-skew"], seed=0
    )
    (judged,) = result.requirements
    assert judged.outcome.value == "failed"
    message = "\n".join(test.full_message or test.message or "" for test in judged.failures)
    assert "G2-item" in message and "-rw(" in message
    match = re.search(r"history saved to (\S+\.json)", message)
    assert match, message
    saved = Path(match.group(1))
    assert saved.is_file()
    history = load(saved)
    report = check_history(history)
    assert Anomaly.G2_ITEM in report.anomalies
    # The witness printed by the check is the one the file alone gives.
    witness = report.render(history, only=[Anomaly.G2_ITEM]).splitlines()[1:]
    assert all(line in message for line in witness), (witness, message)


def test_a_driver_error_mid_workload_keeps_the_history_and_names_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot-isolation store whose reads start failing: write skew is still named, the error is its own
    failure, and the checks the partial history cannot decide are inconclusive, never passed."""
    monkeypatch.chdir(tmp_path)
    result = run_suites(
        "tests.mutants.m_histories:skewed_then_corrupt",
        requirements=[
            "histories.no-write-skew",
            "histories.no-lost-updates",
            "histories.transactions-end-as-the-contract-allows",
        ],
        seed=0,
    )
    outcomes = {judged.requirement.id: judged for judged in result.requirements}
    skew = outcomes["histories.no-write-skew"]
    assert skew.outcome.value == "failed"
    skew_text = "\n".join(test.full_message or test.message or "" for test in skew.failures)
    assert "G2-item" in skew_text and "stopped early on a driver error" in skew_text
    assert outcomes["histories.no-lost-updates"].outcome.value == "inconclusive"
    ended = outcomes["histories.transactions-end-as-the-contract-allows"]
    assert ended.outcome.value == "failed"
    text = "\n".join(test.full_message or test.message or "" for test in ended.failures)
    assert "page checksum mismatch" in text and "G2-item" in text
    match = re.search(r"history saved to (\S+\.json)", text)
    assert match, text
    assert Anomaly.G2_ITEM in check_history(load(Path(match.group(1)))).anomalies
