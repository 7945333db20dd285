"""A correct driver with small but coherent limits certifies; the checks fit or are gated, never refuse it.

The reference driver is run at limits well below the contract's defaults. The
checks size their own work to what one attempt may hold; where a rule's check
cannot be built at those limits at all the plan gates that one check, and the
set it gates is exactly what ``fixtures.limit_gates`` predicts from the collected
checks' gates (and, where the list is short, the checks spelled out here). Below
core's floor of three point reads and three records the profile is refused by
``profile.limits-leave-core-room`` alone, every other check gated with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runlane_conformance.contract.values import StorageLimits
from runlane_conformance.fixtures.gating import gating_reason
from runlane_conformance.fixtures.limit_gates import (
    CORE_FLOOR_REQUIREMENT,
    core_floor_reason,
    limit_gates_reason,
)
from runlane_conformance.run import certify
from runlane_conformance.run.model import CheckResult, Outcome, RequirementOutcome, RunResult
from runlane_conformance.run.plan import Plan
from runlane_conformance.runner import run_suites
from tests.profiles.certified import assert_certified

PHANTOM = "test_a_phantom_where_a_scan_looked_is_detected_in_both_directions"
BYTES_ONE_PAST = {
    "test_deletes_add_no_bytes",
    "test_transaction_bytes_are_utf8_bytes_of_multibyte_documents",
    "test_replacement_documents_count_toward_transaction_bytes[replacements-only]",
    "test_replacement_documents_count_toward_transaction_bytes[replacements-and-creates]",
}

#: The append byte-boundary check builds creates plus an append at exactly max_transaction_bytes; with
#: these record limits that many bytes cannot be staged beside the head, so the plan gates both cases.
APPEND_BYTES = {
    "test_appended_bytes_count_toward_the_transaction_byte_limit[exactly-the-limit]",
    "test_appended_bytes_count_toward_the_transaction_byte_limit[one-byte-past]",
}


def _phantoms(*pages: str) -> set[str]:
    return {
        f"{PHANTOM}[{direction}-{page}-{end}-end-{bounds}]"
        for direction in ("asc", "desc")
        for page in pages
        for end in ("first", "last")
        for bounds in ("inclusive", "exclusive")
    }


def _short(test: CheckResult) -> str:
    """``function[parameters]`` of a check, without its requirement id."""
    name = test.nodeid.split("::")[-1]
    rid = test.requirement_id or ""
    return name.replace(f"-{rid}]", "]").replace(f"[{rid}]", "")


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Plan]]:
    """The plans the runs in this test build (so a check can compare the gates with the plan's inputs)."""
    plans: list[Plan] = []
    original = certify.build_plan  # type: ignore[attr-defined]

    def capture(*args: object, **kwargs: object) -> Plan:
        plan = original(*args, **kwargs)  # type: ignore[arg-type]
        plans.append(plan)
        return plan

    monkeypatch.setattr(certify, "build_plan", capture)
    yield plans


def _capability_gated(result: RunResult) -> set[str]:
    """The requirements gated because the driver does not offer their capability."""
    return {
        req.id
        for req in result.requirements
        if req.requirement.capability is not None
        and gating_reason(req.requirement.capability, result.facts) is not None
    }


def _limit_gated(result: RunResult) -> set[str]:
    capability_gated = _capability_gated(result)
    return {
        _short(test)
        for test in result.tests
        if test.outcome is Outcome.GATED and test.requirement_id not in capability_gated
    }


def _certify_small(options: dict[str, str], plans: list[Plan]) -> tuple[RunResult, set[str]]:
    result = run_suites("local", options, seed=0)
    assert_certified(result, f"local with small limits {options}")
    limits: StorageLimits = result.profile.limits
    predicted = {
        check.nodeid
        for check in plans[-1].checks
        if check.limit_gates and limit_gates_reason(check.limit_gates, limits) is not None
    }
    gated = {test.nodeid for test in result.tests if test.nodeid in predicted}
    assert all(test.outcome is Outcome.GATED for test in result.tests if test.nodeid in predicted)
    assert gated == predicted
    for test in result.tests:
        if test.outcome is Outcome.GATED:
            assert (test.message or "").startswith("profile: "), test.message
    return result, _limit_gated(result)


def test_five_point_reads_five_results_and_five_records_certify(planned: list[Plan]) -> None:
    """Only checks whose work needs more than these limits are gated: a phantom on a partial page of the
    five scanned entries, and the byte-boundary checks whose one byte more needs one record more."""
    _, gated = _certify_small(
        {
            "max_point_reads": "5",
            "max_query_results": "5",
            "max_transaction_records": "5",
            "max_transaction_bytes": str(5 * 409600),
        },
        planned,
    )
    assert gated == _phantoms("partial") | BYTES_ONE_PAST | APPEND_BYTES


def test_eight_point_reads_three_results_and_five_records_certify(planned: list[Plan]) -> None:
    """With pages of three, the phantom cases needing a page of four or six, the next-page selection and
    the advisory read of four rows after an exclusive one are gated as well; every other check pages
    with what it may."""
    _, gated = _certify_small(
        {
            "max_point_reads": "8",
            "max_query_results": "3",
            "max_transaction_records": "5",
            "max_transaction_bytes": str(5 * 409600),
        },
        planned,
    )
    assert gated == (
        _phantoms("partial", "after-cursor")
        | BYTES_ONE_PAST
        | APPEND_BYTES
        | {
            "test_an_attempt_is_not_kept_from_rows_it_holds_itself[next-page]",
            "test_an_advisory_read_after_an_exclusive_selection_holds_nothing_more[default]",
            "test_an_advisory_read_after_an_exclusive_selection_holds_nothing_more[advisory]",
        }
    )


def test_small_record_and_transaction_byte_limits_certify(planned: list[Plan]) -> None:
    """A 1000-byte record and 2000-byte transaction limit: setup writes split to fit, and only the append
    check whose values one past the record limit would break the byte limit first is gated."""
    _, gated = _certify_small({"max_record_bytes": "1000", "max_transaction_bytes": "2000"}, planned)
    assert gated == {
        "test_appended_records_count_toward_the_record_limit[append-alone]",
        "test_appended_records_count_toward_the_record_limit[with-a-create]",
    }


def test_the_floor_itself_with_pages_of_one_certifies(planned: list[Plan]) -> None:
    """Three point reads, three records and pages of one: the smallest profile core can work with.
    Checks size their batches, reads and pages to it; only those whose rule needs more on one page or
    in one attempt (a phantom on a page of several entries) are gated, the plan naming each; no check
    refuses the driver."""
    result, gated = _certify_small(
        {
            "max_point_reads": "3",
            "max_query_results": "1",
            "max_transaction_records": "3",
            "max_transaction_bytes": str(3 * 409600),
        },
        planned,
    )
    assert _phantoms("full", "partial", "after-cursor") <= gated
    # Checks that size their work from the limits run here rather than being gated: one get() of
    # three positions, batches of two values beside the head, exclusive pages of one.
    for resized in (
        "test_get_returns_one_result_per_position_in_order",
        "test_appended_records_and_head_use_the_canonical_layout",
        "test_a_create_that_loses_its_race_takes_the_whole_batch_with_it",
        "test_rows_are_released_at_commit[read-only]",
    ):
        assert resized not in gated, f"{resized} was gated at the floor although it can size its work to it"
    assert result.requirement(CORE_FLOOR_REQUIREMENT).outcome is RequirementOutcome.PASSED


def test_limits_below_cores_floor_are_refused_by_the_floor_alone() -> None:
    options = {
        "max_point_reads": "2",
        "max_query_results": "2",
        "max_transaction_records": "3",
        "max_transaction_bytes": str(3 * 409600),
    }
    result = run_suites("local", options, seed=0)
    assert not result.certified
    floor = result.requirement(CORE_FLOOR_REQUIREMENT)
    assert floor.outcome is RequirementOutcome.FAILED
    reason = core_floor_reason(result.profile.limits)
    assert reason is not None and "max_point_reads = 2" in reason
    assert reason.removeprefix("profile: ") in (floor.failures[0].message or "")
    others = [test for test in result.tests if test.requirement_id != CORE_FLOOR_REQUIREMENT]
    assert others, "no other check was collected"
    capability_gated = _capability_gated(result)
    for test in others:
        assert test.outcome is Outcome.GATED, (test.nodeid, test.outcome, test.message)
        if test.requirement_id not in capability_gated:
            assert test.message == reason, (test.nodeid, test.message)
