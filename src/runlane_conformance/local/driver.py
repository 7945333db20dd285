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

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from ..contract.catalog import StorageCandidateMode
from ..contract.cursors import decode_storage_query_cursor, encode_storage_query_cursor
from ..contract.encodings import storage_tuple_codec
from ..contract.errors import (
    StorageAttemptEndedError,
    StorageConcurrentUseError,
    StorageConflictError,
    StorageDuplicateMutationError,
    StorageKeyChangeError,
    StorageLimitError,
    StorageLimitName,
    StorageSealedError,
    StorageUsageError,
    StorageValidationError,
    create_storage_limit_error,
)
from ..contract.limits import StorageTransactionMeter, check_storage_record_size
from ..contract.protocols import Clock, StorageTransaction
from ..contract.records import parse_new_storage_record
from ..contract.streams import AppendRecordsCommand, measure_storage_append, parse_append_records_command
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
from . import operator
from .store import CommitPlan, LocalStore, RangeDependency, StoreConflict

__all__ = ["LocalStorageDriver", "LocalTransaction", "create_local_storage_driver", "local_profile"]

T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def local_profile(limits: StorageLimits | None = None) -> StorageProfile:
    """The profile every local driver advertises (with ``limits`` replacing the defaults)."""
    return StorageProfile(
        durability=StorageDurability.PROCESS,
        clock_authority=StorageClockAuthority.CLIENT,
        index_consistency=StorageIndexConsistency.STRONG,
        limits=StorageLimits() if limits is None else limits,
        exclusive_candidates=True,
        append=True,
    )


class _AttemptMeter(StorageTransactionMeter):
    """The shared meter, fed keys this driver has already encoded (the counting rules are the base's)."""

    def add_encoded_point_reads(self, ekeys: Sequence[str]) -> None:
        total = self.point_reads + len(ekeys)
        if total > self.limits.max_point_reads:
            raise create_storage_limit_error(StorageLimitName.POINT_READS, self.limits.max_point_reads, total)
        self.point_reads = total
        self._touch(ekeys)

    def add_encoded_write(self, ekey: str, record: NewStorageRecord | None) -> None:
        size = 0 if record is None else check_storage_record_size(record, self.limits)
        self._touch((ekey,))
        self._add_bytes(size)


class LocalTransaction:
    """One attempt of a transaction callback against a ``LocalStore``.

    Every method first claims the attempt with a non-blocking lock, so two
    threads using one attempt at once get ``StorageConcurrentUseError``
    instead of being silently serialised, and any call after the attempt
    ended gets ``StorageAttemptEndedError``.
    """

    def __init__(self, store: LocalStore, limits: StorageLimits, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._meter = _AttemptMeter(limits)
        self._use = threading.Lock()
        self._token = store.new_token()
        self._ended = False
        self._sealed = False
        self._snapshot: int | None = None
        self._now: datetime | None = None
        self._reads: dict[str, StoredRecord | None] = {}
        self._handed: dict[int, str] = {}  # id of each record get() returned -> its encoded key
        self._ranges: list[RangeDependency] = []
        self._creates: list[tuple[str, NewStorageRecord]] = []
        self._replaces: list[tuple[str, NewStorageRecord]] = []
        self._deletes: list[str] = []
        self._mutated: set[str] = set()
        self._held: set[str] = set()
        self._limit_error: StorageLimitError | None = None
        self._append: AppendRecordsCommand | None = None
        self._stream_keys: tuple[str, str] | None = None  # (head key, record key prefix) once appended

    # -- guard -----------------------------------------------------------------------------------

    def _enter(self) -> None:
        if self._ended:
            raise StorageAttemptEndedError("this transaction attempt has ended; it cannot be used again")
        if not self._use.acquire(blocking=False):
            raise StorageConcurrentUseError("this transaction attempt is already in use by another thread")
        if self._ended:
            self._use.release()
            raise StorageAttemptEndedError("this transaction attempt has ended; it cannot be used again")

    def _leave(self) -> None:
        self._use.release()

    def _require_unsealed(self, operation: str) -> None:
        if self._sealed:
            raise StorageSealedError(
                f"{operation}() after now() or a mutation: the read set of this attempt is sealed"
            )

    def _ensure_snapshot(self) -> int:
        if self._snapshot is None:
            self._snapshot = self._store.open_snapshot()
        return self._snapshot

    def _metered(self, action: Callable[[], None]) -> None:
        try:
            action()
        except StorageLimitError as error:
            self._limit_error = error
            raise

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Read each key at this attempt's snapshot, keeping positions and duplicates."""
        self._enter()
        try:
            if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
                raise StorageValidationError("get() takes a sequence of StorageRecordKey")
            keys = tuple(keys)
            for key in keys:
                if not isinstance(key, StorageRecordKey):
                    raise StorageValidationError(f"{key!r} is not a StorageRecordKey")
            self._require_unsealed("get")
            ekeys = [key.encoded for key in keys]
            self._metered(lambda: self._meter.add_encoded_point_reads(ekeys))
            records = self._store.read(self._ensure_snapshot(), ekeys)
            reads = self._reads
            handed = self._handed
            for ekey, record in zip(ekeys, records, strict=True):
                reads[ekey] = record
                if record is not None:
                    handed[id(record)] = ekey
            return records
        finally:
            self._leave()

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references; the scanned range joins the read set.

        In exclusive mode rows held by another live attempt (on any instance)
        are skipped and every returned row is held until this attempt ends.
        """
        self._enter()
        try:
            if not isinstance(command, QueryRecordsCommand):
                raise StorageValidationError("query_candidates() takes a QueryRecordsCommand")
            try:
                mode = StorageCandidateMode(mode)
            except ValueError as error:
                raise StorageValidationError(f"unknown candidate mode {mode!r}") from error
            self._require_unsealed("query_candidates")
            self._metered(lambda: self._meter.check_query(command))
            position = decode_storage_query_cursor(command)
            exclusive = mode is StorageCandidateMode.EXCLUSIVE
            page = self._store.scan(
                self._ensure_snapshot(),
                command.index.value,
                command.partition,
                command.range,
                command.direction,
                position,
                command.limit,
                self._token if exclusive else None,
            )
            if exclusive:
                self._held.update(ekey for ekey, _reference in page.items)
            self._ranges.append(page.dependency)
            return _page_result(command, page.items)
        finally:
            self._leave()

    def now(self) -> datetime:
        """The attempt's time: sampled once from the clock, then frozen. Seals the read set."""
        self._enter()
        try:
            if self._now is None:
                sampled = self._clock()
                if not isinstance(sampled, datetime) or sampled.utcoffset() is None:
                    raise StorageValidationError("the clock must return a timezone-aware datetime")
                self._now = sampled
            self._sealed = True
            return self._now
        finally:
            self._leave()

    # -- mutations -------------------------------------------------------------------------------

    def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert; it commits only while the key is still absent."""
        self._enter()
        try:
            parsed = parse_new_storage_record(record)
            ekey = parsed.key.encoded
            self._check_mutable(ekey, parsed.key)
            if self._reads.get(ekey) is not None:
                raise StorageDuplicateMutationError(
                    f"{parsed.key} was read as present in this attempt, so it cannot be created"
                )
            self._metered(lambda: self._meter.add_encoded_write(ekey, parsed))
            self._creates.append((ekey, parsed))
            self._mutated.add(ekey)
            self._sealed = True
        finally:
            self._leave()

    def _owned_by_append(self, ekey: str) -> bool:
        owned = self._stream_keys
        return owned is not None and (ekey == owned[0] or ekey.startswith(owned[1]))

    def _check_mutable(self, ekey: str, key: StorageRecordKey) -> None:
        if ekey in self._mutated:
            raise StorageDuplicateMutationError(f"{key} is already mutated in this attempt")
        if self._owned_by_append(ekey):
            raise StorageDuplicateMutationError(
                f"{key} belongs to the stream partition this attempt appends to; the append owns it"
            )

    def _check_current(self, current: StoredRecord, operation: str) -> str:
        if not isinstance(current, StoredRecord):
            raise StorageValidationError(f"{operation}() needs the StoredRecord this attempt read")
        ekey = self._handed.get(id(current))
        if ekey is None or self._reads.get(ekey) is not current:
            ekey = current.key.encoded
        read = self._reads.get(ekey)
        if read is None or read.version != current.version:
            raise StorageKeyChangeError(
                f"{operation}() of {current.key} at version {current.version}: "
                "this attempt did not read that record at that version"
            )
        self._check_mutable(ekey, current.key)
        return ekey

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """Stage a replacement of exactly ``current``, moving all its index entries."""
        self._enter()
        try:
            parsed = parse_new_storage_record(record)
            if isinstance(current, StoredRecord) and current.key != parsed.key:
                raise StorageKeyChangeError(
                    f"a replacement cannot change the key {current.key} to {parsed.key}"
                )
            ekey = self._check_current(current, "replace")
            self._metered(lambda: self._meter.add_encoded_write(ekey, parsed))
            self._replaces.append((ekey, parsed))
            self._mutated.add(ekey)
            self._sealed = True
        finally:
            self._leave()

    def delete(self, current: StoredRecord) -> None:
        """Stage a delete of exactly ``current``, removing all its index entries."""
        self._enter()
        try:
            ekey = self._check_current(current, "delete")
            self._metered(lambda: self._meter.add_encoded_write(ekey, None))
            self._deletes.append(ekey)
            self._mutated.add(ekey)
            self._sealed = True
        finally:
            self._leave()

    def append(self, command: AppendRecordsCommand) -> None:
        """Stage one ordered batch; positions are allocated only when the attempt commits.

        The attempt may not also point-read or mutate that stream partition's
        head or records, and may stage only one batch. Appending seals the
        read set like any mutation.
        """
        self._enter()
        try:
            parsed = parse_append_records_command(command)
            if self._append is not None:
                raise StorageDuplicateMutationError("an attempt may stage only one append batch")
            layout = parsed.layout
            head = layout.head_key(parsed.partition).encoded
            prefix = storage_tuple_codec.encode((layout.record_table.value, parsed.partition)) + "/"
            if any(ekey == head or ekey.startswith(prefix) for ekey in self._mutated):
                raise StorageDuplicateMutationError(
                    f"this attempt already mutated {parsed.stream.value}/{parsed.partition}; "
                    "it cannot also append to it"
                )
            if any(ekey == head or ekey.startswith(prefix) for ekey in self._reads):
                raise StorageUsageError(
                    f"this attempt point-read {parsed.stream.value}/{parsed.partition}; "
                    "an appending attempt may not depend on the stream it appends to"
                )
            limits = self._meter.limits
            self._metered(lambda: measure_storage_append(parsed, limits).charge(self._meter))
            self._append = parsed
            self._stream_keys = (head, prefix)
            self._sealed = True
        finally:
            self._leave()

    # -- ending ----------------------------------------------------------------------------------

    def _end(self) -> None:
        if not self._use.acquire(blocking=False):
            self._ended = True
            self._store.rollback(self._token, self._snapshot, self._held)
            raise StorageConcurrentUseError(
                "the callback returned while another thread was using its attempt"
            )
        self._ended = True
        self._use.release()

    def _rollback(self) -> None:
        self._ended = True
        self._store.rollback(self._token, self._snapshot, self._held)

    def _commit(self) -> None:
        """Validate and apply; raises ``StoreConflict`` when the attempt must be replayed."""
        self._end()
        if self._limit_error is not None:
            self._store.rollback(self._token, self._snapshot, self._held)
            raise self._limit_error
        if not self._mutated and self._append is None:
            self._store.rollback(self._token, self._snapshot, self._held)
            return
        self._store.commit(
            CommitPlan(
                token=self._token,
                snapshot=self._snapshot,
                reads=self._reads,
                ranges=self._ranges,
                creates=self._creates,
                replaces=self._replaces,
                deletes=self._deletes,
                held=self._held,
                append=self._append,
            )
        )


def _page_result(
    command: QueryRecordsCommand, items: Sequence[tuple[str, StorageIndexReference]]
) -> QueryRecordsResult:
    references = tuple(reference for _ekey, reference in items)
    cursor = None
    if references and len(references) == command.limit:
        cursor = encode_storage_query_cursor(command, references[-1])
    return QueryRecordsResult(references, cursor)


class LocalStorageDriver:
    """One instance over a ``LocalStore``. Instances over one store see each other's commits."""

    def __init__(
        self,
        store: LocalStore,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 16,
    ) -> None:
        if type(max_transaction_attempts) is not int or max_transaction_attempts < 1:
            raise StorageValidationError("max_transaction_attempts must be a positive integer")
        if limits is not None and not isinstance(limits, StorageLimits):
            raise StorageValidationError("limits must be StorageLimits")
        self._store = store
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = local_profile(limits)
        self._max_attempts = max_transaction_attempts
        self._closed = False

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    @property
    def store(self) -> LocalStore:
        """The shared store (for bulk loading in benchmarks and fixtures)."""
        return self._store

    @property
    def max_transaction_attempts(self) -> int:
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
        for _attempt in range(self._max_attempts):
            attempt = LocalTransaction(self._store, limits, self._clock)
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
        return _page_result(command, page.items)

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
