"""Correct drivers that take the contract's freedoms certify at the level they honestly claim.

The twin of ``tests/mutants``: a check that refuses one of these drivers refuses a correct driver
(see ``tests/correct/drivers.py`` and ``docs/correct-drivers.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation
from runlane_conformance.run.model import RequirementOutcome, RunResult
from tests.mutants.runner import requirement_outcomes
from tests.profiles.certified import assert_certified
from tests.shared_runs import certified

CORPUS = "tests.correct.drivers:"
ROOT = Path(__file__).resolve().parents[2]


def _outcomes(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {req.id: (req.outcome.value, req.reason) for req in result.requirements}


@pytest.mark.timeout(2400)
@pytest.mark.parametrize(
    ("driver", "level"),
    [
        (CORPUS + "durable_eventual", "core+append+exclusive+faults"),
        (CORPUS + "coarse_conflicts", "core+append+exclusive+faults"),
        (CORPUS + "opaque_versions", "core+append+exclusive+faults"),
        # Lock-style: competitors wait for a store-wide lock (taken when the attempt starts) or for
        # per-key locks (wait-die); both offer exclusive candidates and a transaction-authoritative clock.
        (CORPUS + "store_lock_authoritative", "core+append+exclusive+faults"),
        (CORPUS + "key_locks", "core+append+exclusive+faults"),
    ],
)
def test_a_correct_driver_taking_a_freedom_certifies_at_its_honest_level_in_both_modes(
    driver: str, level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full quick run next to the checks and one behind the backend (``--isolation process``): each
    certifies at the driver's honest level, with the same outcome and reason for every requirement."""
    monkeypatch.chdir(ROOT)
    in_process = certified(driver, {}, seed=0, isolation=Isolation.NONE)
    assert_certified(in_process, driver)
    assert str(in_process.level) == level
    isolated = certified(driver, {}, seed=0, isolation=Isolation.PROCESS)
    assert_certified(isolated, driver)
    assert str(isolated.level) == level
    expected, got = _outcomes(in_process), _outcomes(isolated)
    differing = {rid: (outcome, got.get(rid)) for rid, outcome in expected.items() if got.get(rid) != outcome}
    assert got == expected, f"in process vs isolated: {differing}"


def test_a_competitor_a_lock_makes_wait_is_no_violation_of_advisory_exclusivity() -> None:
    driver, requirement = "tests.locking.drivers:harness", "exclusive_selection.advisory-never-holds"
    outcomes, messages = requirement_outcomes(driver, requirements=[requirement])
    assert outcomes == {requirement: "passed"}, messages


@pytest.mark.timeout(2400)
@pytest.mark.parametrize(
    ("driver", "requirement"),
    [
        (CORPUS + "store_lock_authoritative", "exclusive_selection.advisory-never-holds"),
        (CORPUS + "store_lock_authoritative", "profile.authoritative-time-follows-what-was-read"),
        (CORPUS + "store_lock_authoritative", "operator_reads.committed-run-visible-at-once"),
        (CORPUS + "key_locks", "operator_reads.committed-run-visible-at-once"),
        (CORPUS + "durable_eventual", "profile.durable-survives-reconnect"),
    ],
)
def test_a_competitor_the_driver_makes_wait_or_an_index_that_lags_is_no_violation(
    driver: str, requirement: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The requirement's checks passed (ran, and were not gated off) in the full runs of both modes.

    Those are the runs the test above judges (``tests.shared_runs``: the same seed, so the same checks
    with the same examples as a run of this requirement alone), taken from it rather than run again.
    """
    monkeypatch.chdir(ROOT)
    for isolation in (Isolation.NONE, Isolation.PROCESS):
        outcome = certified(driver, {}, seed=0, isolation=isolation).requirement(requirement)
        assert outcome.outcome is RequirementOutcome.PASSED, (
            isolation,
            outcome.outcome,
            outcome.reason,
            [f"{test.nodeid}: {test.message}" for test in outcome.failures],
        )
