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
