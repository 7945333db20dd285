"""Limits too large for a check to build are gated by the plan, never skipped from a check's body.

A driver may advertise any coherent limits. Where a check cannot build its work
at the advertised values (a million point reads in one attempt, a 100 MB
record), the plan gates that one check with a ``profile:`` reason naming the
limit, before anything runs; the check's fixture reaches the same decision from
the same function. So a correct driver with huge limits certifies, and the
report says which rules went unexercised at which values.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runlane_conformance.contract.values import StorageLimits
from runlane_conformance.fixtures.limit_gates import (
    GATES,
    Size,
    limit_gate_reason,
    page,
    reads,
    records,
    values,
)
from runlane_conformance.fixtures.limit_plans import lease_floor, plan_distinct_keys, split_sizes
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.run.model import Outcome, RequirementOutcome
from runlane_conformance.runner import run_suites
from tests.profiles.certified import assert_certified

HUGE = {
    "max_point_reads": "200000",
    "max_query_results": "200000",
    "max_transaction_records": "200000",
    "max_record_bytes": "100000000",
    "max_transaction_bytes": "200000000",
}


def test_a_driver_advertising_limits_beyond_a_checks_reach_certifies() -> None:
    result = run_suites("local", HUGE, seed=0)
    assert_certified(result, "local with huge limits")
    gated = [
        test
        for req in result.requirements
        for test in req.tests
        if test.outcome is Outcome.GATED and "beyond what a check builds" in (test.message or "")
    ]
    assert gated, "no check was gated by the huge limits (the gates did not apply)"
    for test in gated:
        assert (test.message or "").startswith("profile: "), test.message


def test_limit_gated_checks_still_run_at_the_default_limits() -> None:
    result = run_suites("local", {}, areas=["limits"], seed=0)
    assert all(req.outcome is RequirementOutcome.PASSED for req in result.requirements), [
        (req.id, req.outcome.value, req.reason) for req in result.requirements
    ]


def test_every_gate_allows_the_contracts_default_limits() -> None:
    limits = StorageLimits()
    assert {name: limit_gate_reason(name, limits) for name in GATES} == dict.fromkeys(GATES)


@st.composite
def coherent_limits(draw: st.DrawFn) -> StorageLimits:
    records = draw(st.integers(1, 3_000))
    record_bytes = draw(st.integers(1, 2_000_000))
    transaction_bytes = draw(st.integers(record_bytes, max(record_bytes, min(records * record_bytes, 10**8))))
    return StorageLimits(
        max_point_reads=draw(st.integers(1, 3_000)),
        max_query_results=draw(st.integers(1, 3_000)),
        max_transaction_records=records,
        max_record_bytes=record_bytes,
        max_transaction_bytes=transaction_bytes,
    )


@settings(max_examples=100, deadline=None)
@given(limits=coherent_limits())
def test_a_gate_lets_a_check_run_only_where_its_work_can_be_built(limits: StorageLimits) -> None:
    leases = Leases(environment=f"env-{uuid.uuid4().hex[:8]}")
    if limit_gate_reason("keys-past-limit", limits) is None:
        assert plan_distinct_keys(leases, limits.max_transaction_records + 1, limits) is not None
    if limit_gate_reason("bytes-at-limit", limits) is None:
        assert (
            split_sizes(
                limits.max_transaction_bytes,
                lease_floor(leases),
                limits.max_record_bytes,
                limits.max_transaction_records,
            )
            is not None
        )
    if limit_gate_reason("record-bytes", limits) is None:
        assert lease_floor(leases) <= limits.max_record_bytes


#: Limits well below the contract's defaults, that a real store may well advertise (a page cap of 25).
MODEST = {
    "max_point_reads": "25",
    "max_query_results": "25",
    "max_transaction_records": "25",
    "max_record_bytes": "16384",
    "max_transaction_bytes": "262144",
}


def test_a_driver_advertising_modest_limits_certifies() -> None:
    """The suites' own scans and batches stay inside what the driver advertises: a correct driver with
    a 25-result page is not refused for the checks' page size of 100."""
    result = run_suites("local", MODEST, seed=0)
    assert_certified(result, "local with modest limits")


@st.composite
def sizes(draw: st.DrawFn) -> Size:
    wanted = draw(st.integers(1, 8))
    limits = draw(
        st.sampled_from(
            [("max_point_reads",), ("max_query_results",), ("max_transaction_records",), READS_AND_RECORDS]
        )
    )
    return Size(limits, wanted, draw(st.integers(1, wanted)), draw(st.integers(0, 3)))


READS_AND_RECORDS = ("max_point_reads", "max_transaction_records")


@settings(max_examples=200, deadline=None)
@given(limits=coherent_limits(), size=sizes())
def test_a_size_is_gated_exactly_where_it_cannot_fit_and_otherwise_fits_every_limit_it_counts_in(
    limits: StorageLimits, size: Size
) -> None:
    """A check's size and its gate are one declaration: the plan gates the check (naming the limit)
    exactly where the size would fall below its least, and elsewhere the size fits beside what else
    the attempt spends of each limit it is counted in."""
    reason = limit_gate_reason(size.gate, limits)
    if reason is not None:
        assert reason.startswith("profile: ") and any(name in reason for name in size.limits), reason
        with pytest.raises(AssertionError, match="its gate"):
            size.of(limits)
        return
    chosen = size.of(limits)
    assert size.least <= chosen <= size.wanted
    for name in size.limits:
        assert chosen + size.beside <= getattr(limits, name)
    assert chosen == size.wanted or any(chosen + size.beside == getattr(limits, name) for name in size.limits)


def test_sizes_that_fit_cores_floor_never_gate() -> None:
    floor = StorageLimits(
        max_point_reads=3, max_query_results=1, max_transaction_records=3, max_transaction_bytes=3 * 409600
    )
    for size in (values(3, least=2), reads(5, least=1, beside=2), page(4), records(3, beside=2)):
        assert limit_gate_reason(size.gate, floor) is None, size
    assert limit_gate_reason(page(2, least=2).gate, floor) == (
        "profile: max_query_results = 1 is below the 2 results on one page this check needs"
    )
