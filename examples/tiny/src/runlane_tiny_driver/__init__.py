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
    StorageAttemptRules,
    StorageCandidateMode,
    StorageConflictError,
    StorageIndexReference,
    StorageProfile,
    StorageQueryDirection,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTransactionMeter,
    StorageUnsupportedError,
    StoredRecord,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    is_after_cursor,
)

T = TypeVar("T")


class TinyStore:
    """The shared state of every instance on one store."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.records: dict[str, StoredRecord] = {}
        self.versions = itertools.count(1)


class TinyTransaction:
    """One attempt. ``StorageAttemptRules`` keeps the contract's attempt rules; this class keeps the dict."""

    def __init__(self, store: TinyStore, profile: StorageProfile, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._rules = StorageAttemptRules(profile.limits, clock)

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        with self._rules:
            keys = self._rules.begin_get(keys)
            results = [self._store.records.get(key.encoded) for key in keys]
            self._rules.record_reads([key.encoded for key in keys], results)
            return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        with self._rules:
            if self._rules.begin_query(command, mode) is not StorageCandidateMode.ADVISORY:
                raise StorageUnsupportedError("tiny driver does not offer exclusive candidates")
            return scan(self._store, command)

    def now(self) -> datetime:
        with self._rules:
            return self._rules.now()

    def create(self, record: NewStorageRecord) -> None:
        with self._rules:
            self._rules.stage_create(record)

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        with self._rules:
            self._rules.stage_replace(current, record)

    def delete(self, current: StoredRecord) -> None:
        with self._rules:
            self._rules.stage_delete(current)

    def append(self, command: object) -> None:
        raise StorageUnsupportedError("tiny driver does not offer append")

    def commit(self) -> None:
        """Apply every staged mutation; the store's lock is held, so checking first keeps it atomic."""
        rules = self._rules
        rules.end_for_commit()
        rules.check_within_limits()
        records = self._store.records
        for ekey, new in rules.creates:
            if ekey in records:
                raise StorageConflictError(f"{new.key} already exists")
        for ekey, new in rules.creates:
            records[ekey] = StoredRecord.committed(new, self._version())
        for ekey, _current, new in rules.replaces:
            records[ekey] = StoredRecord.committed(new, self._version())
        for ekey, _current in rules.deletes:
            del records[ekey]

    def _version(self) -> StorageRecordVersion:
        return StorageRecordVersion(str(next(self._store.versions)))

    def end(self) -> None:
        self._rules.end()


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
