"""A correct asyncio driver written as one (optimistic), served through ``runlane_conformance.aio``.

Not a port of a synchronous driver (``tests.mutants.async_wrapping`` is that): every store and
instance lives on the adapter's event loop, every attempt call is a coroutine that runs to its end
without awaiting, so each read, each scan and each commit is atomic with respect to every other
coroutine on the loop, with no lock at all. Attempts never wait for one another; instead:

* an attempt remembers what it saw: each point read (key -> record or absent), answering a re-read
  of the same key from it, and each candidate page (the command and the page it returned);
* at commit, in one step on the loop, every point read is compared with the current record and
  every page is scanned again; if all are unchanged, the attempt's reads are exactly what a
  transaction running alone at this instant would read, so applying its staged writes here is a
  serializable commit. Otherwise the attempt is rolled back and the callback replayed;
* a callback that raises is checked the same way first: if what it read had already gone stale its
  error may come from a view no serial order shows, so the attempt is replayed rather than the
  error passed on. ``CallbackAborted`` (the adapter's stand-in for an interrupt) is never replayed.

Client clock, strong indexes, process durability, no optional capabilities.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from runlane_tiny_driver import scan as _tiny_scan  # type: ignore[import-untyped]

from runlane_conformance import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageAttemptRules,
    StorageCandidateMode,
    StorageConflictError,
    StorageProfile,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTransactionMeter,
    StorageUnsupportedError,
    StoredRecord,
)
from runlane_conformance.aio import CallbackAborted, async_harness

T = TypeVar("T")


def scan(store: object, command: QueryRecordsCommand) -> QueryRecordsResult:
    """One page of ``store.records``'s index entries: the tiny example's full scan, certified in CI."""
    page = _tiny_scan(store, command)
    assert isinstance(page, QueryRecordsResult)
    return page


#: Attempts before a transaction that keeps losing to other writers gives up with ``StorageConflictError``.
MAX_ATTEMPTS = 64


@dataclass
class AsyncStore:
    """The committed state every instance of one store shares (on the loop: no lock needed)."""

    records: dict[str, StoredRecord] = field(default_factory=dict)
    versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))


class AsyncAttempt:
    """One attempt: the contract's rules from ``StorageAttemptRules``, the reads it must revalidate."""

    def __init__(self, store: AsyncStore, profile: StorageProfile, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._rules = StorageAttemptRules(profile.limits, clock)
        self._pages: list[tuple[QueryRecordsCommand, QueryRecordsResult]] = []

    async def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        with self._rules:
            keys = self._rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            # A key this attempt already read answers as it did then: reads are repeatable.
            seen, records = self._rules.reads, self._store.records
            results = [seen[ekey] if ekey in seen else records.get(ekey) for ekey in ekeys]
            self._rules.record_reads(ekeys, results)
            return results

    async def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        with self._rules:
            if self._rules.begin_query(command, mode) is not StorageCandidateMode.ADVISORY:
                raise StorageUnsupportedError("this async driver does not offer exclusive candidates")
            page = scan(self._store, command)
            self._pages.append((command, page))
            return page

    async def now(self) -> datetime:
        with self._rules:
            return self._rules.now()

    async def create(self, record: NewStorageRecord) -> None:
        with self._rules:
            self._rules.stage_create(record)

    async def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        with self._rules:
            self._rules.stage_replace(current, record)

    async def delete(self, current: StoredRecord) -> None:
        with self._rules:
            self._rules.stage_delete(current)

    async def append(self, command: object) -> None:
        raise StorageUnsupportedError("this async driver does not offer append")

    def still_valid(self) -> bool:
        """Whether every read of this attempt would read the same now (called without awaiting)."""
        records = self._store.records
        for ekey, seen in self._rules.reads.items():
            current = records.get(ekey)
            if current is not seen and (current is None or seen is None or current.version != seen.version):
                return False
        return all(scan(self._store, command) == page for command, page in self._pages)

    def commit(self) -> bool:
        """Apply the staged writes if the reads still hold, in one step; ``False``: replay."""
        rules = self._rules
        rules.end_for_commit()
        rules.check_within_limits()
        if not self.still_valid():
            return False
        records = self._store.records
        for ekey, new in rules.creates:
            if ekey in records:  # a blind create (the key was not read): it lost, as the contract says
                raise StorageConflictError(f"{new.key} already exists")
        for ekey, new in rules.creates:
            records[ekey] = StoredRecord.committed(new, self._version())
        for ekey, _current, new in rules.replaces:
            records[ekey] = StoredRecord.committed(new, self._version())
        for ekey, _current in rules.deletes:
            del records[ekey]
        return True

    def _version(self) -> StorageRecordVersion:
        return StorageRecordVersion(str(next(self._store.versions)))

    def end(self) -> None:
        self._rules.end()


class AsyncNativeDriver:
    """One instance; optimistic attempts validated at commit (see the module docstring)."""

    def __init__(self, store: AsyncStore, clock: Callable[[], datetime] | None) -> None:
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))
        self.profile = StorageProfile()

    async def transaction(self, callback: Callable[[AsyncAttempt], Awaitable[T]]) -> T:
        for _ in range(MAX_ATTEMPTS):
            attempt = AsyncAttempt(self._store, self.profile, self._clock)
            try:
                result = await callback(attempt)
            except CallbackAborted:
                attempt.end()
                raise
            except Exception:
                stale = not attempt.still_valid()
                attempt.end()
                if stale:
                    continue
                raise
            try:
                if attempt.commit():
                    return result
            finally:
                attempt.end()
        raise StorageConflictError(f"gave up after {MAX_ATTEMPTS} attempts lost to other writers")

    async def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        StorageTransactionMeter(self.profile.limits).check_query(command)
        return scan(self._store, command)

    async def close(self) -> None:
        pass


class AsyncNativeStoreHandle:
    def __init__(self) -> None:
        self._store = AsyncStore()

    async def connect(self, *, clock: Callable[[], datetime] | None = None) -> AsyncNativeDriver:
        return AsyncNativeDriver(self._store, clock)

    def address(self) -> None:
        return None

    async def close(self) -> None:
        self._store.records.clear()


class AsyncNativeHarness:
    async def open_store(self) -> AsyncNativeStoreHandle:
        return AsyncNativeStoreHandle()

    async def attach(self, address: object) -> AsyncNativeStoreHandle:
        raise ValueError("this async driver's stores live in one process and have no address")

    async def close(self) -> None:
        pass


async def _factory(options: Mapping[str, str]) -> AsyncNativeHarness:
    if options:
        raise ValueError(f"this async driver takes no options, got {sorted(options)}")
    return AsyncNativeHarness()


#: The entry point: the async harness bridged to the synchronous one the suites call.
harness: Callable[[Mapping[str, str]], Any] = async_harness(_factory)
