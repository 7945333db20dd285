"""The caller's retry used by the raced checks: bounded, and only where a competitor could race."""

from __future__ import annotations

from typing import Any

import pytest

from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.suites._retries_support import CALLER_ATTEMPTS, RACING, transact_with_retries


class _Losing:
    """A driver whose first ``losses`` transactions end in a typed conflict, then commit."""

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.calls = 0

    def transaction(self, callback: Any) -> Any:
        self.calls += 1
        if self.calls <= self.losses:
            raise StorageConflictError(f"lost attempt {self.calls}")
        return callback(None)


def test_an_uncontended_conflict_propagates_at_once() -> None:
    driver = _Losing(1)
    with pytest.raises(StorageConflictError):
        transact_with_retries(driver, lambda tx: "done", [])  # type: ignore[arg-type]
    assert driver.calls == 1


def test_a_raced_conflict_is_retried_as_a_whole_transaction() -> None:
    driver = _Losing(2)
    assert transact_with_retries(driver, lambda tx: "done", RACING) == "done"  # type: ignore[arg-type]
    assert driver.calls == 3


def test_the_retry_is_bounded_by_a_count() -> None:
    driver = _Losing(CALLER_ATTEMPTS + 5)
    with pytest.raises(StorageConflictError):
        transact_with_retries(driver, lambda tx: "done", RACING)  # type: ignore[arg-type]
    assert driver.calls == CALLER_ATTEMPTS
