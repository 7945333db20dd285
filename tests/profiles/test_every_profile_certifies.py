"""A correct driver certifies under every profile the contract allows, not only the reference one's.

Each driver here wraps the reference driver and changes one mechanic honestly
(see ``drivers``): every clock authority, both durabilities, both index
consistencies, every combination of the optional capabilities, and a driver
that hands out the same cached frozen record twice. A full run must certify
each, and the gating the plan chose must follow the advertised profile: a
requirement is gated exactly when its capability is not offered.
"""

from __future__ import annotations

import pytest

from runlane_conformance import StorageClockAuthority, StorageDurability, StorageIndexConsistency
from runlane_conformance.fixtures.gating import gating_reason
from runlane_conformance.run.model import RequirementOutcome, RunResult
from tests.profiles.certified import assert_certified
from tests.profiles.drivers import COMBINATIONS
from tests.shared_runs import suites_run

DRIVER = "tests.profiles.drivers:"

# A whole certification per test: the default 120 s per test is too short on a loaded machine, where
# an interrupted in-process run reads as a failure rather than as the slow machine it is.
pytestmark = pytest.mark.timeout(900)


def _certify(driver: str, options: dict[str, str] | None = None) -> RunResult:
    # Shared: tests/mutants/test_kill_table.py judges the same runs of the reference driver.
    result = suites_run(driver, options or {}, seed=0)
    assert_certified(result, driver)
    for req in result.requirements:
        capability = req.requirement.capability
        reason = None if capability is None else gating_reason(capability, result.facts)
        gated = req.outcome is RequirementOutcome.GATED
        assert gated == (reason is not None), (
            f"{req.id} is {req.outcome.value} although its capability {capability!r} is "
            f"{'not ' if reason else ''}offered by {driver}"
        )
    return result


@pytest.mark.parametrize(
    ("name", "authority"),
    [
        ("server_sampled", StorageClockAuthority.SERVER_SAMPLED),
        ("transaction_authoritative", StorageClockAuthority.TRANSACTION_AUTHORITATIVE),
    ],
)
def test_a_store_owned_clock_certifies(name: str, authority: StorageClockAuthority) -> None:
    result = _certify(DRIVER + name)
    assert result.profile.clock_authority is authority
    own = {
        StorageClockAuthority.SERVER_SAMPLED: "profile.server-sampled-time-is-the-stores",
        StorageClockAuthority.TRANSACTION_AUTHORITATIVE: "profile.authoritative-time-follows-what-was-read",
    }[authority]
    assert result.requirement(own).outcome is RequirementOutcome.PASSED


def test_the_client_clock_certifies() -> None:
    result = _certify("local")
    assert result.profile.clock_authority is StorageClockAuthority.CLIENT
    assert result.requirement("wait_tokens.timeout-boundary-by-injected-clock").outcome is (
        RequirementOutcome.PASSED
    )


def test_a_durable_store_certifies() -> None:
    result = _certify(DRIVER + "durable")
    assert result.profile.durability is StorageDurability.DURABLE
    assert result.requirement("profile.durable-survives-reconnect").outcome is RequirementOutcome.PASSED


def test_eventual_indexes_certify() -> None:
    result = _certify("local", {"index_lag": "3"})
    assert result.profile.index_consistency is StorageIndexConsistency.EVENTUAL


def test_a_driver_handing_out_one_cached_frozen_record_certifies() -> None:
    result = _certify(DRIVER + "caching")
    assert result.requirement("point_reads.defensive-copies-out").outcome is RequirementOutcome.PASSED


@pytest.mark.parametrize("name", sorted(COMBINATIONS))
def test_every_combination_of_optional_capabilities_certifies(name: str) -> None:
    append, exclusive, operator_reads = COMBINATIONS[name]
    result = _certify(DRIVER + name)
    offered = set(result.facts.offered())
    assert ("append" in offered, "exclusive_candidates" in offered, "operator_reads" in offered) == (
        append,
        exclusive,
        operator_reads,
    )


@pytest.mark.timeout(1800)
def test_a_store_wide_lock_with_exclusive_candidates_reaches_every_capability_level() -> None:
    """Whole-store locking is a legitimate way to be serializable (the scaffold's own style): a check
    that waits inside an attempt for a competitor the lock blocks, or that demands the competitor's
    optimistic outcome, refuses it. Offering every optional capability, it must reach the top level."""
    result = _certify(DRIVER + "store_locked")
    assert str(result.level) == "core+append+exclusive+faults"
    assert {"append", "exclusive_candidates", "operator_reads", "faults"} <= set(result.facts.offered())
    assert result.requirement("exclusive_selection.advisory-never-holds").outcome is RequirementOutcome.PASSED


def test_small_but_coherent_limits_certify() -> None:
    """Ten point reads, ten results a page and eleven records an attempt: checks that read a whole key
    universe, a long request or a delete batch split them to fit, rather than failing with a limit
    error a correct driver is right to raise."""
    _certify("local", {"max_point_reads": "10", "max_query_results": "10", "max_transaction_records": "11"})
