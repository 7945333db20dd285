"""A competitor that does not finish within its bound leaves a check inconclusive, never failed.

A locking driver may keep a competing transaction waiting; on a busy machine
it may still be waiting when the check's bound runs out. That shows no
violation, so the check has no verdict: ``CompetitorHang`` is a
``CheckInconclusive``, which the plugin marks and the verdict judges
*inconclusive* (denying certification without blaming the driver).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from runlane_conformance.fixtures.evidence import CheckInconclusive, inconclusive_reason
from runlane_conformance.fixtures.interleave import CompetitorHang, compete
from runlane_conformance.suites._hypothesis_support import SearchBudget


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """A competitor blocks on this until the test ends, so no thread outlives it."""
    event = threading.Event()
    yield event
    event.set()


def test_a_competitor_still_running_at_its_bound_is_inconclusive(gate: threading.Event) -> None:
    competitor = compete(lambda: gate.wait(30), grace=0)
    with pytest.raises(CompetitorHang) as caught:
        competitor.settle(timeout=0.05)
    assert isinstance(caught.value, CheckInconclusive), "a hang is no evidence of a violation"
    reason = inconclusive_reason(caught.value)
    assert reason is not None and reason.startswith("inconclusive:"), reason
    assert "--check-timeout" in reason, "the message must say how to get a verdict"


def test_outcome_still_raises_a_hang_rather_than_returning_it_as_the_competitors_error(
    gate: threading.Event,
) -> None:
    competitor = compete(lambda: gate.wait(30), grace=0)
    with pytest.raises(CompetitorHang):
        competitor.outcome(timeout=0.05)


def test_a_competitor_that_finishes_in_time_gives_its_result() -> None:
    assert compete(lambda: 7).settle(timeout=5) == 7


def test_a_search_given_up_on_a_hang_ends_inconclusive_not_failed() -> None:
    budget = SearchBudget(seconds=None)
    budget.give_up("a competing transaction had not finished")
    assert not budget.active(), "later examples must do nothing once the search gave up"
    with pytest.raises(CheckInconclusive):
        budget.raise_if_stopped("random histories")


def test_a_search_that_found_a_counterexample_before_a_hang_still_fails() -> None:
    budget = SearchBudget(seconds=None)
    budget.note_failure("step 1: a lost write")
    budget.give_up("a competing transaction had not finished")
    with pytest.raises(AssertionError) as caught:
        budget.raise_if_stopped("random histories")
    assert not isinstance(caught.value, CheckInconclusive), "a counterexample is evidence: a failure"
