"""Correct drivers that take the contract's freedoms certify at the level they honestly claim.

The twin of ``tests/mutants``: a check that refuses one of these drivers refuses a correct driver
(see ``tests/correct/drivers.py`` and ``docs/correct-drivers.md``).
"""

from __future__ import annotations

import pytest

from runlane_conformance.runner import run_suites
from tests.mutants.runner import requirement_outcomes
from tests.profiles.certified import assert_certified

CORPUS = "tests.correct.drivers:"


@pytest.mark.parametrize(
    ("driver", "level"),
    [
        (CORPUS + "durable_eventual", "core+append+exclusive+faults"),
        (CORPUS + "coarse_conflicts", "core+append+exclusive+faults"),
        (CORPUS + "opaque_versions", "core+append+exclusive+faults"),
    ],
)
def test_a_correct_driver_taking_a_freedom_certifies_at_its_honest_level(driver: str, level: str) -> None:
    result = run_suites(driver, {}, seed=0)
    assert_certified(result, driver)
    assert str(result.level) == level


@pytest.mark.parametrize(
    ("driver", "requirement"),
    [
        ("tests.locking.drivers:harness", "exclusive_selection.advisory-never-holds"),
        (CORPUS + "store_lock_authoritative", "exclusive_selection.advisory-never-holds"),
        (CORPUS + "store_lock_authoritative", "profile.authoritative-time-follows-what-was-read"),
        (CORPUS + "durable_eventual", "profile.durable-survives-reconnect"),
    ],
)
def test_a_competitor_the_driver_makes_wait_or_an_index_that_lags_is_no_violation(
    driver: str, requirement: str
) -> None:
    outcomes, messages = requirement_outcomes(driver, requirements=[requirement])
    assert outcomes == {requirement: "passed"}, messages
