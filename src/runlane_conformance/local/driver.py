"""The local reference driver: attempts, optimistic validation and replay.

``LocalStorageDriver.transaction(callback)`` runs ``callback`` against a
``LocalTransaction`` (one attempt). The attempt reads from an immutable
snapshot of the shared ``LocalStore`` taken at its first read, records every
dependency (point reads present or absent, scanned index ranges), stages
mutations without touching the store, and asks the store to validate and
apply everything in one critical section when the callback returns. A lost
validation rolls the attempt back and replays the callback on a fresh
snapshot, up to ``max_transaction_attempts`` times.

Read-only attempts commit without validation: they saw one committed state
(the snapshot), and every writing attempt is validated against the latest
state at its commit point, so the snapshot is a prefix of a serial order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from ..contract.attempt import StorageAttemptRules
from ..contract.catalog import StorageCandidateMode
from ..contract.cursors import decode_storage_query_cursor, encode_storage_query_cursor
from ..contract.errors import (
    StorageConflictError,
    StorageUnavailableError,
    StorageUsageError,
    StorageValidationError,
)
from ..contract.limits import StorageTransactionMeter
from ..contract.protocols import Clock, StorageTransaction
from ..contract.streams import AppendRecordsCommand
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageClockAuthority,
    StorageDurability,
    StorageIndexConsistency,
    StorageIndexReference,
    StorageLimits,
    StorageProfile,
    StorageRecordKey,
    StoredRecord,
)
from ..faults.plan import FaultHook, InjectedFault
from . import operator
from .store import CommitPlan, LocalStore, RangeDependency, StoreConflict

__all__ = [
    "FaultyLocalTransaction",
    "LocalStorageDriver",
    "LocalTransaction",
    "create_local_storage_driver",
    "local_profile",
]

T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def local_profile(limits: StorageLimits | None = None, *, eventual: bool = False) -> StorageProfile:
    """The profile every local driver advertises (with ``limits`` replacing the defaults).

    ``eventual`` is for a store whose indexes lag (``index_lag``): its scans
    may trail its commits, so it must not promise strong indexes.
    """
    return StorageProfile(
        durability=StorageDurability.PROCESS,
        clock_authority=StorageClockAuthority.CLIENT,
        index_consistency=StorageIndexConsistency.EVENTUAL if eventual else StorageIndexConsistency.STRONG,
        limits=StorageLimits() if limits is None else limits,
        exclusive_candidates=True,
        append=True,
    )


class LocalTransaction:
    """One attempt of a transaction callback against a ``LocalStore``.

    ``StorageAttemptRules`` keeps the contract's attempt rules (one thread at
    a time, nothing after the end, sealing, the frozen ``now()``, what may be
    mutated, append ownership, metering) together with the reads and the
    staged work; this class adds the snapshot, the scanned ranges and the
    exclusive holds, and hands everything to the store at commit.
    """

    def __init__(self, store: LocalStore, limits: StorageLimits, clock: Clock) -> None:
        self._store = store
        self._rules = StorageAttemptRules(limits, clock)
        self._token = store.new_token()
        self._snapshot: int | None = None
        self._ranges: list[RangeDependency] = []
        self._held: set[str] = set()

    @property
    def _reads(self) -> dict[str, StoredRecord | None]:
        """The attempt's read set (encoded key -> record seen, ``None`` when absent)."""
        return self._rules.reads

    @property
    def _meter(self) -> StorageTransactionMeter:
        """The attempt's meter (replaceable, so test doubles can wrap or swap it)."""
        return self._rules.meter

    @_meter.setter
    def _meter(self, meter: StorageTransactionMeter) -> None:
        self._rules.meter = meter

    def _ensure_snapshot(self) -> int:
        if self._snapshot is None:
            self._snapshot = self._store.open_snapshot()
        return self._snapshot

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Read each key at this attempt's snapshot, keeping positions and duplicates."""
        rules = self._rules
        with rules:
            keys = rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            records = self._store.read(self._ensure_snapshot(), ekeys)
            rules.record_reads(ekeys, records)
            return records

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references; the scanned range joins the read set.

        In exclusive mode rows held by another live attempt (on any instance)
        are skipped and every returned row is held until this attempt ends.
        """
        with self._rules:
            exclusive = self._rules.begin_query(command, mode) is StorageCandidateMode.EXCLUSIVE
            position = None if command.cursor is None else decode_storage_query_cursor(command)
            page = self._store.scan(
                self._ensure_snapshot(),
                command.index,
                command.partition,
                command.range,
                command.direction,
                position,
                command.limit,
                self._token if exclusive else None,
            )
            if exclusive:
                self._held.update(page.ekeys)
            self._ranges.append(page.dependency)
            return _page_result(command, page.references)

    def now(self) -> datetime:
        """The attempt's time: sampled once from the clock, then frozen. Seals the read set."""
        with self._rules:
            return self._rules.now()

    # -- mutations -------------------------------------------------------------------------------

    def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert; it commits only while the key is still absent."""
        with self._rules:
            self._rules.stage_create(record)

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """Stage a replacement of exactly ``current``, moving all its index entries."""
        with self._rules:
            self._rules.stage_replace(current, record)

    def delete(self, current: StoredRecord) -> None:
        """Stage a delete of exactly ``current``, removing all its index entries."""
        with self._rules:
            self._rules.stage_delete(current)

    def append(self, command: AppendRecordsCommand) -> None:
        """Stage one ordered batch; positions are allocated only when the attempt commits.

        The attempt may not also point-read or mutate that stream partition's
        head or records, and may stage only one batch. Appending seals the
        read set like any mutation.
        """
        with self._rules:
            self._rules.stage_append(command)

    # -- ending ----------------------------------------------------------------------------------

    def _rollback(self) -> None:
        self._rules.end()
        self._store.rollback(self._token, self._snapshot, self._held)

    def _commit(self) -> None:
        """Validate and apply; raises ``StoreConflict`` when the attempt must be replayed."""
        rules = self._rules
        try:
            rules.end_for_commit()
            rules.check_within_limits()
        except BaseException:
            self._store.rollback(self._token, self._snapshot, self._held)
            raise
        if not rules.mutated and rules.append is None:  # read-only: nothing to validate or write
            self._store.rollback(self._token, self._snapshot, self._held)
            return
        self._store.commit(
            CommitPlan(
                token=self._token,
                snapshot=self._snapshot,
                reads=rules.reads,
                ranges=self._ranges,
                creates=rules.creates,
                replaces=[(ekey, new) for ekey, _current, new in rules.replaces],
                deletes=[ekey for ekey, _current in rules.deletes],
                held=self._held,
                append=rules.append,
            )
        )


class FaultyLocalTransaction(LocalTransaction):
    """An attempt whose exchanges with the store (each read, the commit) go through a ``FaultHook``.

    Only instances opened with ``connect_with_faults`` use it, so the normal
    path pays nothing for it. It shows how a driver keeps the fault rules:

    * a read that fails leaves the attempt broken: the read raises
      ``StorageUnavailableError``, and the attempt can no longer commit even if
      the callback swallows that error;
    * a commit that fails before the store applied it rolls back and raises
      ``StorageUnavailableError`` (nothing committed, so retrying is safe);
    * a commit whose answer is lost after the store applied it is resolved,
      not guessed: in-process, the store call having returned proves the
      commit, so the attempt counts as committed and is never replayed.
    """

    def __init__(self, store: LocalStore, limits: StorageLimits, clock: Clock, hook: FaultHook) -> None:
        super().__init__(store, limits, clock)
        self._hook = hook
        self._broken: InjectedFault | None = None

    def _exchange(self, action: Callable[[], T]) -> T:
        if self._broken is not None:
            raise StorageUnavailableError(f"this attempt's connection to the store failed: {self._broken}")
        try:
            return self._hook.round_trip(action)
        except InjectedFault as fault:
            self._broken = fault
            raise StorageUnavailableError(f"the store could not be read: {fault}") from fault

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        return self._exchange(lambda: LocalTransaction.get(self, keys))

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        return self._exchange(lambda: LocalTransaction.query_candidates(self, command, mode=mode))

    def _commit(self) -> None:
        if self._broken is not None:
            self._rollback()
            raise StorageUnavailableError(
                f"nothing was committed: this attempt's connection to the store failed: {self._broken}"
            )
        if not self._rules.mutated and self._rules.append is None:
            LocalTransaction._commit(self)  # read-only: no exchange with the store
            return
        applied: list[bool] = []

        def commit() -> None:
            LocalTransaction._commit(self)
            applied.append(True)

        try:
            self._hook.round_trip(commit)
        except InjectedFault as fault:
            if applied:
                return  # the store applied the commit; only its answer was lost
            self._rollback()
            raise StorageUnavailableError(f"nothing was committed: {fault}") from fault


def _page_result(
    command: QueryRecordsCommand, references: tuple[StorageIndexReference, ...]
) -> QueryRecordsResult:
    cursor = None
    if references and len(references) == command.limit:
        cursor = encode_storage_query_cursor(command, references[-1])
    # Built without QueryRecordsResult's own normalisation: ``references`` is already a tuple.
    result = object.__new__(QueryRecordsResult)
    result.__dict__.update(items=references, cursor=cursor)
    return result


class LocalStorageDriver:
    """One instance over a ``LocalStore``. Instances over one store see each other's commits."""

    def __init__(
        self,
        store: LocalStore,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 16,
        faults: FaultHook | None = None,
    ) -> None:
        if type(max_transaction_attempts) is not int or max_transaction_attempts < 1:
            raise StorageValidationError("max_transaction_attempts must be a positive integer")
        if limits is not None and not isinstance(limits, StorageLimits):
            raise StorageValidationError("limits must be StorageLimits")
        self._faults = faults
        self._store = store
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = local_profile(limits, eventual=store.index_lag > 0)
        self._max_attempts = max_transaction_attempts
        self._closed = False

    @property
    def profile(self) -> StorageProfile:
        """The local profile: process durability, client clock, strong indexes, exclusive and append."""
        return self._profile

    @property
    def store(self) -> LocalStore:
        """The shared store (for bulk loading in benchmarks and fixtures)."""
        return self._store

    @property
    def max_transaction_attempts(self) -> int:
        """How many attempts one transaction gets before ``StorageConflictError``."""
        return self._max_attempts

    def _check_open(self) -> None:
        if self._closed:
            raise StorageUsageError("this local driver instance was closed")

    def transaction(self, callback: Callable[[StorageTransaction], T]) -> T:
        """Run ``callback`` in attempts until one commits and return that attempt's value.

        A conflict replays the callback on a fresh snapshot; after
        ``max_transaction_attempts`` lost attempts ``StorageConflictError`` is
        raised. An exception from the callback rolls the attempt back and
        propagates unchanged, without replay.
        """
        self._check_open()
        limits = self._profile.limits
        reason = "no attempt was made"
        faults = self._faults
        for _attempt in range(self._max_attempts):
            attempt = (
                LocalTransaction(self._store, limits, self._clock)
                if faults is None
                else FaultyLocalTransaction(self._store, limits, self._clock, faults)
            )
            try:
                result = callback(attempt)
            except BaseException:
                attempt._rollback()
                raise
            try:
                attempt._commit()
            except StoreConflict as conflict:
                reason = str(conflict)
                continue
            return result
        raise StorageConflictError(
            f"transaction gave up after {self._max_attempts} conflicting attempts; last: {reason}"
        )

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory page from the latest committed state, outside any transaction."""
        self._check_open()
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        position = decode_storage_query_cursor(command)
        store = self._store
        snapshot = store.open_snapshot()
        try:
            page = store.scan(
                snapshot,
                command.index.value,
                command.partition,
                command.range,
                command.direction,
                position,
                command.limit,
            )
        finally:
            store.rollback(0, snapshot, ())
        return _page_result(command, page.references)

    # -- OperatorReadDriver ----------------------------------------------------------------------

    def get_run(self, environment: str, run_id: str) -> StoredRecord | None:
        """The visible run record, or ``None`` if it is absent or tombstoned."""
        self._check_open()
        return operator.get_run(self._store, environment, run_id)

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> operator.OperatorPage:
        """Visible runs of an environment, newest first, one consistent snapshot per page."""
        self._check_open()
        return operator.list_runs(self._store, self._profile.limits, environment, limit=limit, cursor=cursor)

    def list_run_events(
        self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
    ) -> operator.OperatorPage:
        """A visible run's events in sequence order; empty once the run is tombstoned."""
        self._check_open()
        return operator.list_run_events(
            self._store, self._profile.limits, environment, run_id, limit=limit, cursor=cursor
        )

    def close(self) -> None:
        """Close this instance; the store and other instances are unaffected."""
        self._closed = True


def create_local_storage_driver(
    *,
    clock: Clock | None = None,
    limits: StorageLimits | None = None,
    max_transaction_attempts: int = 16,
) -> LocalStorageDriver:
    """A reference driver on a new private in-process store.

    ``clock`` replaces the UTC wall clock behind ``now()``; ``limits``
    replaces the whole default limits profile (100 point reads, 100 query
    results, 100 transaction records, 400 KiB per record, 4 MiB per
    transaction); ``max_transaction_attempts`` bounds replays after conflicts.
    """
    return LocalStorageDriver(
        LocalStore(), clock=clock, limits=limits, max_transaction_attempts=max_transaction_attempts
    )
