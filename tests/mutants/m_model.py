"""Broken drivers for the model area: anomalies only a history of transactions reveals.

(A store that skips only index-range validation is not listed: with one
competitor per step its phantoms are rarely distinguishable from a serial
order within the quick profile's budget, so its kill would be a coin toss.)

These patch the reference driver's store (``runlane_conformance.local``)
because its optimistic validation cannot be broken from outside: a wrapper
never sees the commit point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from runlane_conformance.catalogue import model
from runlane_conformance.contract.catalog import StorageQueryDirection
from runlane_conformance.contract.values import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageIndexReference,
    StorageQueryRange,
    StorageRangeBound,
)
from tests.mutants.catalog import Mutant
from tests.mutants.m_cursors import RescanDriver, RescanTransaction
from tests.mutants.wrapping import WrappedDriver, WrappedStore, WrappedTransaction, mutant_harness


class _PatchedStoreDriver(WrappedDriver):
    """Patches the shared local store once, the first time an instance connects to it."""

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        local = inner.store
        if not store.shared.get("patched"):
            store.shared["patched"] = True
            self.patch(local)

    def patch(self, local: Any) -> None:
        raise NotImplementedError


class SkipsReadValidation(_PatchedStoreDriver):
    """Commits without checking what the attempt read: lost updates and write skew go through."""

    def patch(self, local: Any) -> None:
        original = local._validate

        def validate(plan: Any) -> None:
            original(replace(plan, reads={}, ranges=()))

        local._validate = validate


MUTANTS = [
    Mutant(
        "skips-read-validation",
        "tests.mutants.m_model:skips_read_validation",
        model.SERIALIZABLE,
        "commits attempts whose reads changed (lost update)",
    ),
]

skips_read_validation = mutant_harness(SkipsReadValidation)


# -- the differential workload and its relations -------------------------------------------------------------


class InstanceCacheTransaction(WrappedTransaction):
    """Answers a point read from its instance's cache of records it read or wrote before."""

    driver: CachesReadsPerInstance

    def get(self, keys: Sequence[Any]) -> list[Any]:
        cache = self.driver.cache
        missing = [key for key in keys if key.encoded not in cache]
        fresh = (
            dict(zip((key.encoded for key in missing), self.inner.get(missing), strict=True))
            if missing
            else {}
        )
        answer = [cache[key.encoded] if key.encoded in cache else fresh[key.encoded] for key in keys]
        for key, record in fresh.items():
            if record is not None:
                cache[key] = record
        return answer

    def replace(self, current: Any, record: Any) -> None:
        self.driver.cache.pop(record.key.encoded, None)
        self.inner.replace(current, record)

    def delete(self, current: Any) -> None:
        self.driver.cache.pop(current.key.encoded, None)
        self.inner.delete(current)


class CachesReadsPerInstance(WrappedDriver):
    """Keeps each record it read in a per-instance cache and never asks the store again: what another
    instance commits later stays invisible to this one (a read-through cache without invalidation)."""

    transaction_class = InstanceCacheTransaction

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self.cache: dict[str, Any] = {}


class DescendingContinuationSkipsOne(RescanDriver):
    """Continues a descending scan one entry too far: the second and later descending pages each lose
    the entry right after the cursor (an off-by-one in the descending seek only)."""

    def resume(self, emitted: list[StorageIndexReference], start: int) -> int:
        return start + 1 if self.descending else start

    def rescan(self, scan: Any, command: QueryRecordsCommand) -> QueryRecordsResult:
        self.descending = command.direction is StorageQueryDirection.DESCENDING
        return super().rescan(scan, command)


class DescendingIgnoresExclusiveLower(RescanDriver):
    """Treats an exclusive lower bound as inclusive, but only when scanning descending (the descending
    plan was written separately and compares with >= where the ascending one uses >)."""

    def inner_range(self, command: QueryRecordsCommand) -> StorageQueryRange:
        lower = command.range.lower
        if (
            command.direction is StorageQueryDirection.DESCENDING
            and lower is not None
            and not lower.inclusive
        ):
            return StorageQueryRange(StorageRangeBound(lower.value, True), command.range.upper)
        return command.range


MUTANTS += [
    Mutant(
        "caches-reads-per-instance",
        "tests.mutants.m_model:caches_reads_per_instance",
        model.DIFFERENTIAL_READS,
        "answers point reads from a per-instance cache that another instance's commits never invalidate",
    ),
    Mutant(
        "descending-continuation-skips-one",
        "tests.mutants.m_model:descending_continuation_skips_one",
        model.DIFFERENTIAL_SCANS,
        "loses the first entry of every descending continuation page",
    ),
    Mutant(
        "descending-ignores-exclusive-lower",
        "tests.mutants.m_model:descending_ignores_exclusive_lower",
        model.SCAN_RELATIONS,
        "applies an exclusive lower bound as inclusive in descending scans only",
    ),
]

caches_reads_per_instance = mutant_harness(CachesReadsPerInstance)
descending_continuation_skips_one = mutant_harness(
    DescendingContinuationSkipsOne, transaction_class=RescanTransaction
)
descending_ignores_exclusive_lower = mutant_harness(
    DescendingIgnoresExclusiveLower, transaction_class=RescanTransaction
)
