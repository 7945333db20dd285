"""Eventual indexes without a settle hook: the checks that must wait for them end inconclusive.

A check that compares index pages with what it wrote needs to know when an eventual index has caught
up; the harness tells it through the store handle's optional ``settle(timeout=...)``. Without the
hook such a check cannot tell a slow index from a wrong one. That is no evidence against the driver
(it is correct) and none for it: the check is inconclusive, never failed and never gated, so the run
is not certified and says what to add to get a verdict.
"""

from __future__ import annotations

from runlane_conformance.run.model import Outcome, RequirementOutcome
from runlane_conformance.run.verdict import UNSETTLED_MESSAGE
from runlane_conformance.runner import run_suites


def test_checks_that_need_caught_up_indexes_are_inconclusive_without_a_settle_hook() -> None:
    result = run_suites("tests.profiles.drivers:unsettled", {}, areas=["cursors", "limits"], seed=0)
    outcomes = {req.id: req.outcome for req in result.requirements}
    failed = [
        (req.id, [t.message for t in req.tests if t.outcome is Outcome.FAILED])
        for req in result.requirements
        if req.outcome is RequirementOutcome.FAILED
    ]
    assert not failed, f"a correct driver failed for lagging indexes it had no way to settle: {failed}"
    unfinished = [t for req in result.requirements for t in req.tests if t.outcome is Outcome.INCONCLUSIVE]
    assert unfinished, "no check needed the settle hook (the case this test is about did not arise)"
    assert all(t.message == UNSETTLED_MESSAGE for t in unfinished)
    assert RequirementOutcome.INCONCLUSIVE in outcomes.values()
    assert not result.certified
