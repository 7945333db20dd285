"""The smallest correct Runlane storage driver: a dict guarded by one lock.

Every transaction holds the store's lock from its first call to its end, so
attempts run one after another and never conflict. That makes it trivially
serializable (and slow under contention): it is here to show the shape of a
driver, not to be fast. It offers neither append nor exclusive candidates, so
those suites skip with a ``profile:`` reason.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from runlane_conformance import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageAttemptEndedError,
    StorageCandidateMode,
    StorageConflictError,
    StorageDuplicateMutationError,
    StorageIndexReference,
    StorageKeyChangeError,
    StorageProfile,
    StorageQueryDirection,
    StorageRecordKey,
    StorageRecordVersion,
    StorageSealedError,
    StorageTransactionMeter,
    StorageUnsupportedError,
    StoredRecord,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    parse_new_storage_record,
)
from runlane_conformance.contract.cursors import is_after_cursor

T = TypeVar("T")


class TinyStore:
    """The shared state of every instance on one store."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.records: dict[str, StoredRecord] = {}
        self.versions = itertools.count(1)


class TinyTransaction:
    def __init__(self, store: TinyStore, profile: StorageProfile, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._meter = StorageTransactionMeter(profile.limits)
        self._clock = clock
        self._now: datetime | None = None
        self._sealed = False
        self._ended = False
        self._read: dict[str, StorageRecordVersion | None] = {}
        self._writes: dict[str, StoredRecord | None] = {}

    def _check_open(self, reading: bool = False) -> None:
        if self._ended:
            raise StorageAttemptEndedError("this transaction attempt has ended")
        if reading and self._sealed:
            raise StorageSealedError("reads are not allowed after now() or the first mutation")

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        self._check_open(reading=True)
        keys = list(keys)
        self._meter.add_point_reads(keys)
        results = []
        for key in keys:
            record = self._store.records.get(key.encoded)
            self._read[key.encoded] = None if record is None else record.version
            results.append(record)
        return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        self._check_open(reading=True)
        if mode is not StorageCandidateMode.ADVISORY:
            raise StorageUnsupportedError("tiny driver does not offer exclusive candidates")
        self._meter.check_query(command)
        return scan(self._store, command)

    def now(self) -> datetime:
        self._check_open()
        self._sealed = True
        if self._now is None:
            self._now = self._clock()
        return self._now

    def _stage(
        self, key: StorageRecordKey, record: StoredRecord | None, new: NewStorageRecord | None
    ) -> None:
        if key.encoded in self._writes:
            raise StorageDuplicateMutationError(f"{key} is already mutated in this attempt")
        self._meter.add_write(key, new)
        self._sealed = True
        self._writes[key.encoded] = record

    def create(self, record: NewStorageRecord) -> None:
        self._check_open()
        new = parse_new_storage_record(record)
        if self._read.get(new.key.encoded) is not None:
            raise StorageDuplicateMutationError(f"{new.key} was read as present; create needs it absent")
        if new.key.encoded in self._store.records:
            raise StorageConflictError(f"{new.key} already exists")
        self._stage(new.key, StoredRecord.committed(new, self._version()), new)

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        self._check_open()
        new = parse_new_storage_record(record)
        self._check_current(current)
        if new.key != current.key:
            raise StorageKeyChangeError("a replacement cannot change the key")
        self._stage(new.key, StoredRecord.committed(new, self._version()), new)

    def delete(self, current: StoredRecord) -> None:
        self._check_open()
        self._check_current(current)
        self._stage(current.key, None, None)

    def append(self, command: object) -> None:
        raise StorageUnsupportedError("tiny driver does not offer append")

    def _check_current(self, current: StoredRecord) -> None:
        if self._read.get(current.key.encoded) != current.version:
            raise StorageKeyChangeError(f"{current.key} at that version was not read by this attempt")

    def _version(self) -> StorageRecordVersion:
        return StorageRecordVersion(str(next(self._store.versions)))

    def commit(self) -> None:
        for encoded, record in self._writes.items():
            if record is None:
                del self._store.records[encoded]
            else:
                self._store.records[encoded] = record

    def end(self) -> None:
        self._ended = True


def scan(store: TinyStore, command: QueryRecordsCommand) -> QueryRecordsResult:
    """Every matching index entry in contract order, one page from the cursor on (a full scan: tiny)."""
    start = decode_storage_query_cursor(command)
    descending = command.direction is StorageQueryDirection.DESCENDING
    matches = sorted(
        (
            (entry.sort, encoded, record.key)
            for encoded, record in store.records.items()
            for entry in record.indexes
            if entry.index is command.index
            and entry.partition == command.partition
            and command.range.contains(entry.sort)
        ),
        reverse=descending,
    )
    if start is not None:
        matches = [m for m in matches if is_after_cursor(m[0], m[1], start, command.direction)]
    page = [StorageIndexReference(key, sort) for sort, _, key in matches[: command.limit]]
    cursor = None
    if len(matches) > command.limit:
        cursor = encode_storage_query_cursor(command, page[-1])
    return QueryRecordsResult(tuple(page), cursor)


class TinyDriver:
    def __init__(self, store: TinyStore, clock: Callable[[], datetime] | None) -> None:
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))
        self.profile = StorageProfile()

    def transaction(self, callback: Callable[[TinyTransaction], T]) -> T:
        with self._store.lock:
            tx = TinyTransaction(self._store, self.profile, self._clock)
            try:
                result = callback(tx)
                tx.commit()
                return result
            finally:
                tx.end()

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        with self._store.lock:
            StorageTransactionMeter(self.profile.limits).check_query(command)
            return scan(self._store, command)

    def close(self) -> None:
        pass


class TinyStoreHandle:
    def __init__(self) -> None:
        self._store = TinyStore()

    def connect(self, *, clock: Callable[[], datetime] | None = None) -> TinyDriver:
        return TinyDriver(self._store, clock)

    def address(self) -> None:
        return None

    def close(self) -> None:
        self._store.records.clear()


class TinyHarness:
    def open_store(self) -> TinyStoreHandle:
        return TinyStoreHandle()

    def attach(self, address: object) -> TinyStoreHandle:
        raise ValueError("the tiny driver's stores live in one process and have no address")

    def close(self) -> None:
        pass


def harness(options: Mapping[str, str]) -> TinyHarness:
    """The entry point: the tiny driver takes no options."""
    if options:
        raise ValueError(f"the tiny driver takes no options, got {sorted(options)}")
    return TinyHarness()
