"""The pruning and wait-token suites also hold on the smallest limits their flows can work with.

A cleanup pass needs three point reads and three transaction records (the
tombstone, a link and its token), and the suites' own setup must fit the same
limits; a one-result page makes every scan a chain of cursors. The reference
driver is run under exactly those limits, with strong and with lagging indexes.
"""

from __future__ import annotations

import pytest

from runlane_conformance.catalogue import all_requirements
from runlane_conformance.runner import run_suites

SMALLEST = {
    "max_point_reads": "3",
    "max_transaction_records": "3",
    "max_query_results": "1",
    "max_record_bytes": "2048",
    "max_transaction_bytes": "4096",
}


@pytest.mark.parametrize("lag", ["0", "3"])
def test_pruning_and_wait_tokens_certify_on_the_smallest_workable_limits(lag: str) -> None:
    result = run_suites("local", {**SMALLEST, "index_lag": lag}, areas=["pruning", "wait_tokens"], seed=0)
    outcomes = {req.id: req.outcome.value for req in result.requirements}
    failed = {
        req.id: "\n".join(f"{test.nodeid}: {test.message}" for test in req.failures)
        for req in result.requirements
        if req.outcome.value != "passed"
    }
    assert not failed, f"under limits {SMALLEST} (index_lag={lag}): {failed}"
    expected = {rid for rid, req in all_requirements().items() if req.area in ("pruning", "wait_tokens")}
    assert set(outcomes) == expected
