"""Broken drivers for the faults area: each wraps the reference driver's in-process fault hook and
mishandles a fault in one way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from runlane_conformance import StorageCommitUnknownError, StorageUnavailableError
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


class ReplaysAfterLostCommitReply(WrappedDriver):
    """Treats a lost commit reply as a lost race and runs the callback again (the redis-py trap)."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        seen = 0 if self.hook is None else len(self.hook.faults)
        result = super().transaction(callback)
        if self.hook is not None and len(self.hook.faults) > seen:
            return super().transaction(callback)  # "the EXEC failed, so replay": the first one had committed
        return result


class ReportsSuccessWithoutCommitting(WrappedDriver):
    """Swallows an unavailable store and returns what the callback returned, though nothing committed."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        returned: list[T] = []

        def attempt(tx: Any) -> T:
            value = callback(self.transaction_class(tx, self))
            returned.append(value)
            return value

        try:
            return self.inner.transaction(attempt)  # type: ignore[no-any-return]
        except StorageUnavailableError:
            if returned:
                return returned[-1]
            raise


class _Staging(WrappedTransaction):
    """Remembers the records the attempt staged for creation."""

    def create(self, record: Any) -> None:
        self.driver.staged.append(record)  # type: ignore[attr-defined]
        self.inner.create(record)


class LeavesPartialBatch(WrappedDriver):
    """When the commit breaks, still stores the first record of a multi-record batch on its own."""

    transaction_class = _Staging

    def transaction(self, callback: Callable[[Any], T]) -> T:
        self.staged: list[Any] = []
        try:
            return super().transaction(callback)
        except StorageUnavailableError:
            staged = list(self.staged)
            if len(staged) > 1:
                self.inner.transaction(lambda tx: tx.create(staged[0]))
            raise


class UnusableAfterFault(WrappedDriver):
    """Once a transaction fails on a fault, refuses every later transaction on this instance."""

    broken = False

    def transaction(self, callback: Callable[[Any], T]) -> T:
        if self.broken:
            raise StorageUnavailableError("this instance lost its connection and never reconnects")
        try:
            return super().transaction(callback)
        except (StorageUnavailableError, StorageCommitUnknownError):
            self.broken = True
            raise


class LeaksConnectionErrors(WrappedDriver):
    """Lets a broken connection reach the caller as a plain ConnectionError instead of a contract error."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageUnavailableError as error:
            raise ConnectionError(f"connection reset: {error}") from None


replays_after_lost_commit_reply = mutant_harness(ReplaysAfterLostCommitReply)
reports_success_without_committing = mutant_harness(ReportsSuccessWithoutCommitting)
leaves_partial_batch = mutant_harness(LeavesPartialBatch)
unusable_after_fault = mutant_harness(UnusableAfterFault)
leaks_connection_errors = mutant_harness(LeaksConnectionErrors)

MUTANTS = [
    Mutant(
        "replays_after_lost_commit_reply",
        "tests.mutants.m_faults:replays_after_lost_commit_reply",
        "faults.no-replay-after-possible-commit",
        "replays the callback after a commit whose reply was lost, applying the work twice",
    ),
    Mutant(
        "reports_success_without_committing",
        "tests.mutants.m_faults:reports_success_without_committing",
        "faults.outcome-matches-store",
        "returns the callback's value after a fault although nothing committed",
    ),
    Mutant(
        "leaves_partial_batch",
        "tests.mutants.m_faults:leaves_partial_batch",
        "faults.no-partial-writes",
        "stores part of a multi-record batch after the commit breaks",
    ),
    Mutant(
        "unusable_after_fault",
        "tests.mutants.m_faults:unusable_after_fault",
        "faults.usable-after-fault",
        "never works again after one fault",
    ),
    Mutant(
        "leaks_connection_errors",
        "tests.mutants.m_faults:leaks_connection_errors",
        "faults.failures-are-typed",
        "raises a plain ConnectionError instead of StorageUnavailableError",
    ),
]
