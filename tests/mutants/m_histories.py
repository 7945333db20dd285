"""Broken drivers for the histories area: each lets one anomaly class into a concurrent history.

The store-level ones patch the reference driver's shared store (its
optimistic validation and snapshot reads cannot be broken from outside a
commit), each in the cheapest way a driver author gets that rule wrong:

* ``unconditional-writes``: the versions of records it writes are not
  checked at commit (reads are, which looks careful): lost updates;
* ``first-committer-wins``: only written keys are validated (snapshot
  isolation): write skew;
* ``unvalidated-scans``: index ranges are not validated: phantoms;
* ``reads-latest-committed``: every get() reads the latest commit instead of
  the attempt's snapshot (read committed): read skew in read-only attempts;
* ``commits-raising-callbacks``: a callback that raises still has its writes
  committed (the error is re-raised after): others read aborted writes;
* ``corrupts-records-midway``: after a number of transactions on one store,
  every read fails with an untyped error, as a store whose pages went bad
  would: the workload cannot finish (``skewed-then-corrupt`` is the same
  failure on a snapshot-isolation store, for the suite's own test that the
  history recorded before the failure is still judged).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance.catalogue import histories
from runlane_conformance.contract.errors import StorageError
from tests.mutants.catalog import Mutant
from tests.mutants.m_model import _PatchedStoreDriver
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


def _written(plan: Any) -> set[str]:
    return {ekey for ekey, _ in plan.replaces} | set(plan.deletes)


class UnconditionalWrites(_PatchedStoreDriver):
    def patch(self, local: Any) -> None:
        original = local._validate

        def validate(plan: Any) -> None:
            written = _written(plan)
            original(replace(plan, reads={k: v for k, v in plan.reads.items() if k not in written}))

        local._validate = validate


class FirstCommitterWins(_PatchedStoreDriver):
    def patch(self, local: Any) -> None:
        original = local._validate

        def validate(plan: Any) -> None:
            written = _written(plan)
            original(replace(plan, reads={k: v for k, v in plan.reads.items() if k in written}))

        local._validate = validate


class UnvalidatedScans(_PatchedStoreDriver):
    def patch(self, local: Any) -> None:
        original = local._validate

        def validate(plan: Any) -> None:
            original(replace(plan, ranges=()))

        local._validate = validate


class ReadsLatestCommitted(_PatchedStoreDriver):
    def patch(self, local: Any) -> None:
        original = local.read

        def read(snapshot: int, ekeys: Sequence[str]) -> list[Any]:
            return original(local.latest_seq(), ekeys)  # type: ignore[no-any-return]

        local.read = read


class CommitsRaisingCallbacks(WrappedDriver):
    def transaction(self, callback: Callable[[Any], T]) -> T:
        failures: list[Exception] = []

        def body(tx: Any) -> Any:
            try:
                return callback(self.transaction_class(tx, self))
            except StorageError:
                raise
            except Exception as error:  # the bug: the attempt's staged writes commit anyway
                failures.append(error)
                return None

        result = self.inner.transaction(body)
        if failures:
            raise failures[-1]
        return result  # type: ignore[no-any-return]


#: Transactions a corrupting store serves before its reads start to fail (the quick profile runs 240).
HEALTHY_TRANSACTIONS = 120


class CorruptsRecordsMidway(WrappedDriver):
    healthy = HEALTHY_TRANSACTIONS

    def transaction(self, callback: Callable[[Any], T]) -> T:
        shared = self.store.shared
        shared["transactions"] = shared.get("transactions", 0) + 1
        return super().transaction(callback)


class CorruptReads(WrappedTransaction):
    def get(self, keys: Sequence[Any]) -> list[Any]:
        if self.driver.store.shared.get("transactions", 0) > self.driver.healthy:
            raise ValueError("stored document failed to decode: page checksum mismatch")
        return super().get(keys)


class SkewedThenCorrupt(FirstCommitterWins):
    healthy = 2 * HEALTHY_TRANSACTIONS - 40  # late enough for write skew to show first

    def transaction(self, callback: Callable[[Any], T]) -> T:
        shared = self.store.shared
        shared["transactions"] = shared.get("transactions", 0) + 1
        return super().transaction(callback)


MUTANTS = [
    Mutant(
        "histories-unconditional-writes",
        "tests.mutants.m_histories:unconditional_writes",
        histories.LOST_UPDATES,
        "validates the records an attempt only read, never the versions it replaces or deletes",
    ),
    Mutant(
        "histories-first-committer-wins",
        "tests.mutants.m_histories:first_committer_wins",
        histories.WRITE_SKEW,
        "validates only the keys an attempt writes (snapshot isolation)",
    ),
    Mutant(
        "histories-unvalidated-scans",
        "tests.mutants.m_histories:unvalidated_scans",
        histories.PREDICATE_SKEW,
        "does not validate the index ranges an attempt scanned",
    ),
    Mutant(
        "histories-reads-latest-committed",
        "tests.mutants.m_histories:reads_latest_committed",
        histories.READ_SKEW,
        "each get() reads the latest commit rather than the attempt's snapshot (read committed)",
    ),
    Mutant(
        "histories-commits-raising-callbacks",
        "tests.mutants.m_histories:commits_raising_callbacks",
        histories.COMMITTED_READS,
        "commits the staged writes of a callback that raised, then re-raises its error",
    ),
    Mutant(
        "histories-corrupts-records-midway",
        "tests.mutants.m_histories:corrupts_records_midway",
        histories.WORKLOAD_ENDS,
        "after some transactions every read fails with an untyped error (a store whose pages went bad)",
    ),
]

unconditional_writes = mutant_harness(UnconditionalWrites)
first_committer_wins = mutant_harness(FirstCommitterWins)
unvalidated_scans = mutant_harness(UnvalidatedScans)
reads_latest_committed = mutant_harness(ReadsLatestCommitted)
commits_raising_callbacks = mutant_harness(CommitsRaisingCallbacks)
corrupts_records_midway = mutant_harness(CorruptsRecordsMidway, transaction_class=CorruptReads)
skewed_then_corrupt = mutant_harness(SkewedThenCorrupt, transaction_class=CorruptReads)
