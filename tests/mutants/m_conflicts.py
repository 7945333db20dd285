"""Broken drivers for the conflicts area.

Conflict detection lives inside the reference driver's store (validation at
commit), where a wrapper cannot reach, so these mutants subclass
``LocalStore`` and override one step of validation, versioning or reading.
``store_mutant`` turns such a subclass into a harness factory: the local
harness, with every fresh store built from the subclass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance.catalogue import conflicts
from runlane_conformance.contract.catalog import StorageQueryDirection
from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.values import NewStorageRecord, StoredRecord
from runlane_conformance.local.harness import LocalHarness, LocalStoreHandle, local_harness
from runlane_conformance.local.store import CommitPlan, IndexKey, LocalStore, RangeDependency, StoreConflict
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


def store_mutant(store_class: type[LocalStore]) -> Callable[[Mapping[str, str]], LocalHarness]:
    """A harness factory: the ``local`` harness whose stores are ``store_class`` instances."""

    class MutantHarness(LocalHarness):
        def open_store(self) -> LocalStoreHandle:
            handle = super().open_store()
            handle._store = store_class()
            return handle

    def factory(options: Mapping[str, str]) -> LocalHarness:
        base = local_harness(options)
        return MutantHarness(base.limits, base.max_transaction_attempts)

    return factory


def _written(plan: CommitPlan) -> set[str]:
    return {ekey for ekey, _ in plan.creates} | {ekey for ekey, _ in plan.replaces} | set(plan.deletes)


class DropsAbsentReads(LocalStore):
    """Only keys read as present join the read set; an absence read is never re-checked."""

    def commit(self, plan: CommitPlan) -> None:
        super().commit(replace(plan, reads={k: v for k, v in plan.reads.items() if v is not None}))


class DropsPresentReads(LocalStore):
    """Only keys read as absent join the read set; a record read at a version is never re-checked."""

    def commit(self, plan: CommitPlan) -> None:
        super().commit(replace(plan, reads={k: v for k, v in plan.reads.items() if v is None}))


class ValidatesOnlyWrittenReads(LocalStore):
    """Re-checks only the reads of keys the attempt also writes: read-only dependencies are ignored."""

    def commit(self, plan: CommitPlan) -> None:
        written = _written(plan)
        super().commit(replace(plan, reads={k: v for k, v in plan.reads.items() if k in written}))


class LastWriterWins(LocalStore):
    """Replaces and deletes overwrite whatever is current, without checking the version they were read at."""

    def commit(self, plan: CommitPlan) -> None:
        rewritten = {ekey for ekey, _ in plan.replaces} | set(plan.deletes)
        super().commit(replace(plan, reads={k: v for k, v in plan.reads.items() if k not in rewritten}))


class IgnoresRanges(LocalStore):
    """Scanned index ranges (including empty pages) are not validated at commit."""

    def commit(self, plan: CommitPlan) -> None:
        super().commit(replace(plan, ranges=()))


class _IdentityRange(RangeDependency):
    """A scanned range that matches an index entry's partition by object identity, not by equality."""

    def covers(self, entry: IndexKey) -> bool:
        if entry[1] is not self.partition:
            return False
        return super().covers(entry)


class MatchesPartitionsByIdentity(LocalStore):
    """Scanned ranges are validated, but a write counts against one only when its partition is the very
    string object the scan was given (``is`` where ``==`` was meant): a writer that spells the same
    partition with its own string slips a phantom past the scan."""

    def commit(self, plan: CommitPlan) -> None:
        super().commit(replace(plan, ranges=tuple(_IdentityRange(*scanned) for scanned in plan.ranges)))


class BlindCreateOverwrites(LocalStore):
    """A create of a key nobody read is applied even when the key exists, overwriting the record."""

    def _validate(self, plan: CommitPlan) -> None:
        super()._validate(replace(plan, creates=()))


class ReusesVersions(LocalStore):
    """Gives a re-created key the version its first incarnation had, and validates reads by version.

    Each part alone is harmless; together they let a replace from a version
    read before a delete and identical re-create commit (the ABA problem).
    """

    def __init__(self) -> None:
        super().__init__()
        self._first_versions: dict[str, int] = {}

    def _current(self, ekey: str) -> StoredRecord | None:
        chain = self._chains.get(ekey)
        return None if not chain else chain[-1][1]  # type: ignore[no-any-return]

    def _validate(self, plan: CommitPlan) -> None:
        super()._validate(replace(plan, reads={}))
        for ekey, seen in plan.reads.items():
            current = self._current(ekey)
            if (seen is None) != (current is None) or (
                seen is not None and current is not None and seen.version != current.version
            ):
                raise StoreConflict(f"record {ekey} changed")

    def _apply(self, writes: Sequence[tuple[str, NewStorageRecord | None]]) -> None:
        # One write at a time, so each can be numbered on its own; all of it runs under the store lock.
        top = self._version
        for ekey, new in writes:
            first = self._first_versions.get(ekey)
            if new is not None and first is not None and self._current(ekey) is None:
                self._version = first - 1
            super()._apply([(ekey, new)])
            if new is not None and first is None:
                self._first_versions[ekey] = self._version
            top = max(top, self._version)
            self._version = top


class ReadsLatest(LocalStore):
    """Point reads see the latest commit instead of the attempt's snapshot (read-only work is unchecked)."""

    def read(self, snapshot: int, ekeys: Sequence[str]) -> list[StoredRecord | None]:
        return super().read(self.latest_seq(), ekeys)


class ScansLatest(LocalStore):
    """Index scans see the latest commit while point reads keep the attempt's snapshot."""

    def scan(self, snapshot: int, *args: Any, **kwargs: Any) -> Any:
        return super().scan(self.latest_seq(), *args, **kwargs)


MUTANTS = [
    Mutant(
        "drops-absent-reads",
        "tests.mutants.m_conflicts:drops_absent_reads",
        conflicts.ABSENT_READ,
        "keys read as absent are not validated at commit",
    ),
    Mutant(
        "drops-present-reads",
        "tests.mutants.m_conflicts:drops_present_reads",
        conflicts.PRESENT_READ,
        "records read as present are not validated at commit",
    ),
    Mutant(
        "ignores-read-only-dependencies",
        "tests.mutants.m_conflicts:validates_only_written_reads",
        conflicts.READ_ONLY_DEPENDENCY,
        "only reads of keys the attempt writes are validated",
    ),
    Mutant(
        "last-writer-wins",
        "tests.mutants.m_conflicts:last_writer_wins",
        conflicts.LOST_UPDATE,
        "replace/delete do not check the version they were read at",
    ),
    Mutant(
        "reuses-versions",
        "tests.mutants.m_conflicts:reuses_versions",
        conflicts.VERSIONS_NEVER_REUSED,
        "a re-created key restarts at version 1 and validation compares versions",
    ),
    Mutant(
        "blind-create-overwrites",
        "tests.mutants.m_conflicts:blind_create_overwrites",
        conflicts.BLIND_CREATE,
        "a create of an existing unread key overwrites it",
    ),
    Mutant(
        "reads-latest-not-snapshot",
        "tests.mutants.m_conflicts:reads_latest",
        conflicts.READ_SKEW,
        "point reads see the latest commit, so a read-only attempt can mix states",
    ),
    Mutant(
        "ignores-query-ranges",
        "tests.mutants.m_conflicts:ignores_ranges",
        conflicts.INDEX_PHANTOM,
        "scanned index ranges are not validated at commit",
    ),
    Mutant(
        "scan-partition-matched-by-identity",
        "tests.mutants.m_conflicts:matches_partitions_by_identity",
        conflicts.INDEX_PHANTOM,
        "a scanned range conflicts with a write only when the write's partition is the same string object",
    ),
    Mutant(
        "point-reads-latest-not-snapshot",
        "tests.mutants.m_conflicts:reads_latest",
        conflicts.INDEX_MOVE,
        "point reads see the latest commit, so a candidate's point read disagrees with its scan",
    ),
    Mutant(
        "ignores-read-only-dependencies-random",
        "tests.mutants.m_conflicts:validates_only_written_reads",
        conflicts.SERIALIZABLE,
        "only reads of keys the attempt writes are validated (caught by the interleaving property)",
    ),
    Mutant(
        "ignores-query-ranges-random",
        "tests.mutants.m_conflicts:ignores_ranges",
        conflicts.SERIALIZABLE,
        "scanned index ranges are not validated (caught by the interleaving property)",
    ),
    Mutant(
        "reads-latest-not-snapshot-random",
        "tests.mutants.m_conflicts:reads_latest",
        conflicts.SERIALIZABLE,
        "point reads ignore the attempt's snapshot (caught by the interleaving property)",
    ),
]

drops_absent_reads = store_mutant(DropsAbsentReads)
drops_present_reads = store_mutant(DropsPresentReads)
validates_only_written_reads = store_mutant(ValidatesOnlyWrittenReads)
last_writer_wins = store_mutant(LastWriterWins)
ignores_ranges = store_mutant(IgnoresRanges)
matches_partitions_by_identity = store_mutant(MatchesPartitionsByIdentity)
blind_create_overwrites = store_mutant(BlindCreateOverwrites)
reuses_versions = store_mutant(ReusesVersions)
reads_latest = store_mutant(ReadsLatest)
scans_latest = store_mutant(ScansLatest)


class _PerThreadCalls(LocalStore):
    """Remembers, per thread, what the current attempt's latest read call was (the local driver runs an
    attempt's reads and its commit on the caller's thread, and opens its snapshot at the first read)."""

    def __init__(self) -> None:
        super().__init__()
        self._calls = threading.local()

    def open_snapshot(self) -> int:
        self._calls.latest = None
        self._calls.read = set()
        return super().open_snapshot()

    def read(self, snapshot: int, ekeys: Sequence[str]) -> list[StoredRecord | None]:
        self._calls.latest = ("get", frozenset(ekeys))
        return super().read(snapshot, ekeys)

    def scan(self, snapshot: int, *args: Any, **kwargs: Any) -> Any:
        self._calls.latest = ("scan", frozenset())
        return super().scan(snapshot, *args, **kwargs)


class KeepsLatestReadCall(_PerThreadCalls):
    """The dependency set holds only what the attempt's latest get() or query_candidates() call read."""

    def commit(self, plan: CommitPlan) -> None:
        latest = getattr(self._calls, "latest", None)
        if latest is None:
            super().commit(plan)
            return
        kind, ekeys = latest
        if kind == "get":
            plan = replace(plan, reads={k: v for k, v in plan.reads.items() if k in ekeys}, ranges=())
        else:
            plan = replace(plan, reads={}, ranges=tuple(plan.ranges)[-1:])
        super().commit(plan)


class RereadsLatest(_PerThreadCalls):
    """A key's first read in an attempt comes from its snapshot; reading it again fetches the latest."""

    def read(self, snapshot: int, ekeys: Sequence[str]) -> list[StoredRecord | None]:
        seen: set[str] = getattr(self._calls, "read", set())
        at_snapshot = super().read(snapshot, ekeys)
        latest = super().read(self.latest_seq(), ekeys)
        out: list[StoredRecord | None] = []
        for ekey, old, new in zip(ekeys, at_snapshot, latest, strict=True):
            out.append(new if ekey in seen else old)
            seen.add(ekey)
        self._calls.read = seen
        return out


class ScansDescendingAsAscending(LocalStore):
    """A descending page's scanned range is recorded as if the scan had run ascending."""

    def scan(self, snapshot: int, *args: Any, **kwargs: Any) -> Any:
        page = super().scan(snapshot, *args, **kwargs)
        return page._replace(dependency=page.dependency._replace(direction=StorageQueryDirection.ASCENDING))


MUTANTS += [
    Mutant(
        "keeps-latest-read-call-after-a-scan",
        "tests.mutants.m_conflicts:keeps_latest_read_call",
        conflicts.SCAN_ATTEMPT_WIDE,
        "only the latest call's reads are validated, so a range scanned first is forgotten at commit",
    ),
    Mutant(
        "point-read-and-scan-see-different-commits",
        "tests.mutants.m_conflicts:scans_latest",
        conflicts.READ_THEN_SCAN,
        "index scans read the latest commit, point reads the attempt's snapshot",
    ),
    Mutant(
        "keeps-latest-read-call",
        "tests.mutants.m_conflicts:keeps_latest_read_call",
        conflicts.ATTEMPT_WIDE,
        "only the latest get()/query_candidates() call's reads are validated at commit",
    ),
    Mutant(
        "keeps-latest-read-call-random",
        "tests.mutants.m_conflicts:keeps_latest_read_call",
        conflicts.SERIALIZABLE,
        "only the latest read call's reads are validated (caught by the interleaving property's classics)",
    ),
    Mutant(
        "rereads-latest",
        "tests.mutants.m_conflicts:rereads_latest",
        conflicts.REPEATABLE_READS,
        "a key read again in the same attempt is fetched from the latest commit, not the snapshot",
    ),
    Mutant(
        "snapshot-isolation-only",
        "tests.mutants.m_conflicts:validates_only_written_reads",
        conflicts.READ_ONLY_ANOMALY,
        "first-committer-wins on written keys only (snapshot isolation), seen through three transactions",
    ),
    Mutant(
        "descending-scan-recorded-ascending",
        "tests.mutants.m_conflicts:scans_descending_as_ascending",
        conflicts.INDEX_PHANTOM,
        "a descending page's scanned range is validated as if it had been scanned ascending",
    ),
]

keeps_latest_read_call = store_mutant(KeepsLatestReadCall)
rereads_latest = store_mutant(RereadsLatest)
scans_descending_as_ascending = store_mutant(ScansDescendingAsAscending)


# -- absence that only protects a create of the same key -------------------------------------------------


class _UntrackedAbsence(WrappedTransaction):
    """Looks keys up outside the attempt first and tracks only those found: an absent read protects
    nothing except, through the conditional insert, a create of that same key."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        looked_up = self.driver.store.inner.connect().transaction(lambda tx: tx.get(keys))
        present = [key for key, found in zip(keys, looked_up, strict=True) if found is not None]
        tracked = dict(zip([key.encoded for key in present], self.inner.get(present), strict=True))
        return [tracked.get(key.encoded) for key in keys]


absence_protects_only_creates = mutant_harness(transaction_class=_UntrackedAbsence)

MUTANTS += [
    Mutant(
        "absence-protects-only-creates",
        "tests.mutants.m_conflicts:absence_protects_only_creates",
        conflicts.ABSENT_READ,
        "keys read as absent are not dependencies unless the attempt creates them itself",
    ),
]


# -- reads of the latest commit, validated only when the callback returns ------------------------------


class _LatestReads(WrappedTransaction):
    """Answers point reads from the latest commit (a side read), keeping the versions it handed out."""

    def __init__(self, inner: Any, driver: Any, seen: dict[str, Any]) -> None:
        super().__init__(inner, driver)
        self.seen = seen

    def get(self, keys: Sequence[Any]) -> list[Any]:
        self.inner.get(keys)  # the attempt's own read keeps its sealing rules and its write dependencies
        latest: list[Any] = self.driver.inner.transaction(lambda side: side.get(keys))
        for key, record in zip(keys, latest, strict=True):
            self.seen.setdefault(key.encoded, (key, None if record is None else record.version))
        return latest

    def create(self, record: Any) -> None:
        self.seen["wrote"] = True
        self.inner.create(record)

    def replace(self, current: Any, record: Any) -> None:
        self.seen["wrote"] = True
        self.inner.replace(current, record)

    def delete(self, current: Any) -> None:
        self.seen["wrote"] = True
        self.inner.delete(current)


class ValidatesOnlyOnReturn(WrappedDriver):
    """An optimistic driver without snapshots: reads see the latest commit and a read-only attempt is
    validated when its callback returns (and replayed when stale; writing attempts are validated by the
    wrapped commit), but a callback that raised is rolled back and its error passed on without looking
    at whether its reads still held."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        for _ in range(16):
            seen: dict[str, Any] = {}
            value: T = self.inner.transaction(lambda tx, seen=seen: callback(_LatestReads(tx, self, seen)))
            if seen.pop("wrote", False):
                return value  # the wrapped attempt validated its writes against its snapshot
            keys = [key for key, _version in seen.values()]
            now = self.inner.transaction(lambda side, keys=keys: side.get(keys)) if keys else []
            versions = [version for _key, version in seen.values()]
            if versions == [None if record is None else record.version for record in now]:
                return value
        raise StorageConflictError("gave up after 16 stale attempts")


validates_only_on_return = mutant_harness(ValidatesOnlyOnReturn)

MUTANTS += [
    Mutant(
        "errors-on-stale-reads-escape",
        "tests.mutants.m_conflicts:validates_only_on_return",
        conflicts.READ_SKEW,
        "reads see the latest commit and are validated when the callback returns, but an error the "
        "callback raised on a view mixing two commits reaches the caller",
    ),
]
