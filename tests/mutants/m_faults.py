"""Broken drivers for the faults area: each wraps the reference driver's in-process fault hook and
mishandles a fault in one way.

The derived-state mutants (index, stream head, limits) misbehave only after
a fault on an instance opened behind the hook, so they keep every other
area's rules and fail exactly one ``faults.*`` requirement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from runlane_conformance import (
    AppendRecordsCommand,
    StorageCommitUnknownError,
    StorageLimitName,
    StorageTransaction,
    StorageUnavailableError,
    create_storage_limit_error,
    materialize_storage_append,
    read_storage_stream_position,
)
from runlane_conformance.catalogue import faults
from tests.mutants.catalog import Mutant
from tests.mutants.m_mutations import with_stale
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
    """Remembers the records the attempt staged for creation, and its append."""

    def create(self, record: Any) -> None:
        self.driver.staged.append(record)  # type: ignore[attr-defined]
        self.inner.create(record)

    def append(self, command: Any) -> None:
        self.driver.appended.append(command)  # type: ignore[attr-defined]
        self.inner.append(command)


class _StagingDriver(WrappedDriver):
    """Collects what every attempt of one ``transaction()`` call staged, for the mutants below."""

    transaction_class = _Staging

    def transaction(self, callback: Callable[[Any], T]) -> T:
        self.staged: list[Any] = []
        self.appended: list[AppendRecordsCommand] = []
        return super().transaction(callback)


class LeavesPartialBatch(_StagingDriver):
    """When the commit breaks, still stores the first record of a multi-record batch on its own."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageUnavailableError:
            staged = list(self.staged)
            if len(staged) > 1:
                self.inner.transaction(lambda tx: tx.create(staged[0]))
            raise


class IndexesOutsideTheCommit(_StagingDriver):
    """Writes a create's index entries ahead of the commit, so a broken commit leaves them behind.

    The orphaned entries are kept the way the lazy-index mutants keep stale
    ones (in the store's shared state) and show in every later query.
    """

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageUnavailableError:
            orphans = self.store.shared.setdefault("stale", [])
            orphans.extend((record.key, entry) for record in self.staged for entry in record.indexes)
            raise

    def query(self, command: Any) -> Any:
        return with_stale(self, command, self.inner.query(command))


def _advance_head(tx: StorageTransaction, command: AppendRecordsCommand) -> None:
    """Move the stream's head past ``command``'s batch without writing the batch."""
    (head,) = tx.get([command.layout.head_key(command.partition)])
    placed = materialize_storage_append(
        command, read_storage_stream_position(command.stream, command.partition, head)
    )
    if head is None:
        tx.create(placed.head)
    else:
        tx.replace(head, placed.head)


class BumpsHeadBeforeCommit(_StagingDriver):
    """Allocates an append's positions (moves the head) on its own before the commit, like a sequence.

    When the commit then breaks, the head stays moved past positions no
    record holds, and the next append leaves a gap.
    """

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageUnavailableError:
            if self.appended:
                last = self.appended[-1]
                self.inner.transaction(lambda tx: _advance_head(tx, last))
            raise


class _CountsReads(WrappedTransaction):
    """Meters point reads on the driver's books, where a failed attempt's reads are never taken off."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.reads = 0

    def get(self, keys: Any) -> list[Any]:
        driver: CarriesUsageAfterFault = self.driver  # type: ignore[assignment]
        self.reads += len(keys)
        driver.last_reads = self.reads
        total = driver.carried + self.reads
        limit = driver.profile.limits.max_point_reads
        if total > limit:
            raise create_storage_limit_error(StorageLimitName.POINT_READS, limit, total)
        return super().get(keys)


class CarriesUsageAfterFault(WrappedDriver):
    """Keeps a failed attempt's point reads counted against every later transaction on the instance.

    Like a connection-level meter that is reset only after a commit, so the
    reads of an attempt a fault broke stay on it.
    """

    transaction_class = _CountsReads
    carried = 0
    last_reads = 0

    def transaction(self, callback: Callable[[Any], T]) -> T:
        self.last_reads = 0
        try:
            return super().transaction(callback)
        except (StorageUnavailableError, StorageCommitUnknownError):
            self.carried += self.last_reads
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
indexes_outside_the_commit = mutant_harness(IndexesOutsideTheCommit)
bumps_head_before_commit = mutant_harness(BumpsHeadBeforeCommit)
carries_usage_after_fault = mutant_harness(CarriesUsageAfterFault)


class KeepsHoldsAfterFault(WrappedDriver):
    """Releases an attempt's exclusive holds on commit and on a callback error, but not when the
    connection broke: the rows stay held by an attempt that no longer exists."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[Any] = []

        def run(tx: Any) -> T:
            attempts.append(tx)
            return callback(self.transaction_class(tx, self))

        try:
            return self.inner.transaction(run)  # type: ignore[no-any-return]
        except (StorageUnavailableError, StorageCommitUnknownError):
            for attempt in attempts:
                for ekey in attempt._held:  # the reference attempt's own hold set
                    attempt._store._holds.setdefault(ekey, attempt._token)
            raise


keeps_holds_after_fault = mutant_harness(KeepsHoldsAfterFault)

MUTANTS = [
    Mutant(
        "replays_after_lost_commit_reply",
        "tests.mutants.m_faults:replays_after_lost_commit_reply",
        faults.NO_REPLAY_AFTER_POSSIBLE_COMMIT,
        "replays the callback after a commit whose reply was lost, applying the work twice",
    ),
    Mutant(
        "reports_success_without_committing",
        "tests.mutants.m_faults:reports_success_without_committing",
        faults.OUTCOME_MATCHES_STORE,
        "returns the callback's value after a fault although nothing committed",
    ),
    Mutant(
        "leaves_partial_batch",
        "tests.mutants.m_faults:leaves_partial_batch",
        faults.NO_PARTIAL_WRITES,
        "stores part of a multi-record batch after the commit breaks",
    ),
    Mutant(
        "unusable_after_fault",
        "tests.mutants.m_faults:unusable_after_fault",
        faults.USABLE_AFTER_FAULT,
        "never works again after one fault",
    ),
    Mutant(
        "leaks_connection_errors",
        "tests.mutants.m_faults:leaks_connection_errors",
        faults.FAILURES_ARE_TYPED,
        "raises a plain ConnectionError instead of StorageUnavailableError",
    ),
    Mutant(
        "indexes_outside_the_commit",
        "tests.mutants.m_faults:indexes_outside_the_commit",
        faults.INDEXES_MATCH_RECORDS,
        "writes a create's index entries before the commit, leaving them behind when the commit breaks",
    ),
    Mutant(
        "bumps_head_before_commit",
        "tests.mutants.m_faults:bumps_head_before_commit",
        faults.STREAM_HEAD_FOLLOWS_RECORDS,
        "moves a stream's head before the commit, so a broken commit leaves a gap in the positions",
    ),
    Mutant(
        "carries_usage_after_fault",
        "tests.mutants.m_faults:carries_usage_after_fault",
        faults.LIMITS_NOT_INFLATED,
        "keeps a failed attempt's point reads counted against the instance's later transactions",
    ),
    Mutant(
        "keeps_holds_after_fault",
        "tests.mutants.m_faults:keeps_holds_after_fault",
        faults.HOLDS_RELEASED,
        "rows an attempt held exclusively stay held after a fault broke the attempt",
    ),
]
