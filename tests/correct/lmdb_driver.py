"""A Runlane storage driver on LMDB, written from ``docs/writing-a-driver.md`` as a new author would.

LMDB lets one write transaction run at a time per environment, across threads and processes. This
driver opens one for every attempt and keeps it from the first call to the end, so attempts never
overlap and never conflict: a *lock-style* driver, like ``examples/tiny`` with a real database under
it. That makes every selection exclusive already, so it offers exclusive candidates: a competing
selector waits for the write transaction and then sees every row the first one did not delete. It
does not offer append.

What it keeps, and where:

* records, in the ``records`` database: encoded key -> JSON of version, document text, index entries;
* index entries, in the ``index`` database, keyed so that LMDB's byte order is the contract's order
  within one index and partition: ``index NUL json(partition) NUL sort NUL encoded-key`` (canonical
  sorts and JSON hold no NUL, and UTF-8 byte order is code point order);
* a version counter and one commit marker per committed attempt, in ``meta``.

Faults: ``connect_with_faults(hook)`` sends every exchange with the store (opening the write
transaction, each read, each scan, the commit) through ``hook.round_trip``. A broken exchange before
the commit aborts the write transaction and raises ``StorageUnavailableError``; a broken commit is
resolved by looking for the attempt's marker on a new read transaction (present: the attempt's value
is returned; absent: ``StorageUnavailableError``), and when that look is refused too the outcome is
``StorageCommitUnknownError``. Nothing is ever replayed after a possible commit.

``runlane-certify run --driver tests.correct.lmdb_driver:harness`` certifies it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import lmdb

from runlane_conformance import (
    Clock,
    FaultHook,
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageAttemptRules,
    StorageCandidateMode,
    StorageCommitUnknownError,
    StorageConflictError,
    StorageDurability,
    StorageIndexEntry,
    StorageIndexReference,
    StorageProfile,
    StorageQueryDirection,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTransactionMeter,
    StorageUnavailableError,
    StorageUnsupportedError,
    StoredRecord,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    is_after_cursor,
    parse_storage_document,
    storage_record_key_codec,
)

T = TypeVar("T")

#: Enough address space for any check's store; LMDB only uses the pages it writes.
MAP_SIZE = 1 << 30
_VERSION = b"version"


def _profile() -> StorageProfile:
    return StorageProfile(durability=StorageDurability.DURABLE, exclusive_candidates=True, append=False)


class LmdbStore:
    """One LMDB environment and its three databases, shared by every instance in this process.

    LMDB forbids opening one environment twice in a process, so ``open_environment`` hands out the
    same object to every handle on a path and closes it with the last one.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.env = lmdb.open(path, map_size=MAP_SIZE, max_dbs=4, subdir=True)
        self.records = self.env.open_db(b"records")
        self.index = self.env.open_db(b"index")
        self.meta = self.env.open_db(b"meta")
        self.users = 0


_open: dict[str, LmdbStore] = {}
_open_lock = threading.Lock()


def open_environment(path: str) -> LmdbStore:
    with _open_lock:
        store = _open.get(path)
        if store is None:
            store = _open[path] = LmdbStore(path)
        store.users += 1
        return store


def release_environment(store: LmdbStore) -> None:
    with _open_lock:
        store.users -= 1
        if store.users == 0:
            _open.pop(store.path, None)
            store.env.close()


def _index_key(index: str, partition: str, sort: str = "", ekey: str | None = None) -> bytes:
    prefix = f"{index}\x00{json.dumps(partition)}\x00"
    return (prefix if ekey is None else f"{prefix}{sort}\x00{ekey}").encode()


def _entry_key(entry: StorageIndexEntry, ekey: str) -> bytes:
    return _index_key(entry.index.value, entry.partition, entry.sort, ekey)


def _decode(ekey: str, raw: bytes | memoryview) -> StoredRecord:
    row = json.loads(bytes(raw))
    table, ident = storage_record_key_codec.decode_parts(ekey)
    return StoredRecord(
        StorageRecordKey(table, ident),  # type: ignore[arg-type]
        StorageRecordVersion(str(row["v"])),
        parse_storage_document(row["d"]),
        tuple(StorageIndexEntry(index, partition, sort) for index, partition, sort in row["i"]),
    )


def _encode(record: NewStorageRecord, version: int) -> bytes:
    entries = [[entry.index.value, entry.partition, entry.sort] for entry in record.indexes]
    return json.dumps({"v": version, "d": record.document.text, "i": entries}).encode()


class _Broken(Exception):
    """Internal: an exchange with the store failed like a broken connection."""


class LmdbTransaction:
    """One attempt inside one LMDB write transaction; ``StorageAttemptRules`` keeps the contract's rules."""

    def __init__(self, driver: LmdbDriver, txn: lmdb.Transaction) -> None:
        self._driver = driver
        self._txn = txn
        self._rules = StorageAttemptRules(driver.profile.limits, driver.clock)
        self.broken: BaseException | None = None

    def _exchange(self, action: Callable[[], T]) -> T:
        if self.broken is not None:
            raise StorageUnavailableError("the connection to the LMDB store broke earlier in this attempt")
        try:
            return self._driver.round_trip(action)
        except ConnectionError as error:
            self.broken = error
            raise StorageUnavailableError("the connection to the LMDB store broke") from error

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        with self._rules:
            keys = self._rules.begin_get(keys)
            store = self._driver.store
            ekeys = [key.encoded for key in keys]

            def read() -> list[StoredRecord | None]:
                found = [(ekey, self._txn.get(ekey.encode(), db=store.records)) for ekey in ekeys]
                return [None if raw is None else _decode(ekey, raw) for ekey, raw in found]

            results = self._exchange(read)
            self._rules.record_reads(ekeys, results)
            return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        with self._rules:
            chosen = self._rules.begin_query(command, mode)
            # Under the one write transaction nobody else can read or write until this attempt ends, so
            # every returned row is held: exclusive selection needs no lock of its own. An exclusive page
            # reads no lookahead row and carries a cursor whenever it is full.
            exclusive = chosen is StorageCandidateMode.EXCLUSIVE
            return self._exchange(lambda: scan(self._driver.store, self._txn, command, exclusive=exclusive))

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
        raise StorageUnsupportedError("the LMDB driver does not offer append")

    def prepare(self) -> Callable[[], None]:
        """End the attempt for commit and return the one exchange that writes and commits it."""
        rules = self._rules
        rules.end_for_commit()
        rules.check_within_limits()
        if self.broken is not None:
            raise StorageUnavailableError("the connection to the LMDB store broke during this attempt") from (
                self.broken
            )
        store, txn = self._driver.store, self._txn

        def write() -> None:
            for ekey, new in rules.creates:
                if txn.get(ekey.encode(), db=store.records) is not None:
                    # Only possible for a key this attempt never read: under the write transaction a
                    # replay would meet the same record, so the lost create ends here.
                    raise StorageConflictError(f"{new.key} already exists")
            version = int(txn.get(_VERSION, default=b"0", db=store.meta))
            for ekey, old in [*((e, c) for e, c, _ in rules.replaces), *rules.deletes]:
                for entry in old.indexes:
                    txn.delete(_entry_key(entry, ekey), db=store.index)
                txn.delete(ekey.encode(), db=store.records)
            for ekey, new in [*rules.creates, *((e, n) for e, _, n in rules.replaces)]:
                version += 1
                txn.put(ekey.encode(), _encode(new, version), db=store.records)
                for entry in new.indexes:
                    txn.put(_entry_key(entry, ekey), b"", db=store.index)
            txn.put(_VERSION, str(version).encode(), db=store.meta)

        return write

    def end(self) -> None:
        self._rules.end()


def scan(
    store: LmdbStore, txn: lmdb.Transaction, command: QueryRecordsCommand, *, exclusive: bool
) -> QueryRecordsResult:
    """One page of index references in contract order from the cursor on."""
    start = decode_storage_query_cursor(command)
    prefix = _index_key(command.index.value, command.partition)
    matches: list[tuple[str, str]] = []
    with txn.cursor(db=store.index) as cursor:
        if cursor.set_range(prefix):
            for item in cursor.iternext(keys=True, values=False):
                raw = bytes(item)
                if not raw.startswith(prefix):
                    break
                sort, _, ekey = raw[len(prefix) :].decode().partition("\x00")
                if command.range.contains(sort):
                    matches.append((sort, ekey))
    if command.direction is StorageQueryDirection.DESCENDING:
        matches.reverse()
    if start is not None:
        matches = [(s, k) for s, k in matches if is_after_cursor(s, k, start, command.direction)]
    page = [
        StorageIndexReference(StorageRecordKey(*storage_record_key_codec.decode_parts(ekey)), sort)  # type: ignore[arg-type]
        for sort, ekey in matches[: command.limit]
    ]
    full = len(page) == command.limit and bool(page)
    more = len(matches) > command.limit
    cursor_out = encode_storage_query_cursor(command, page[-1]) if (more or (exclusive and full)) else None
    return QueryRecordsResult(tuple(page), cursor_out)


class LmdbDriver:
    """One instance on an LMDB store: every ``transaction()`` is one LMDB write transaction."""

    def __init__(self, store: LmdbStore, clock: Clock | None, hook: FaultHook | None = None) -> None:
        self.store = store
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self._hook = hook
        self.profile = _profile()

    def round_trip(self, action: Callable[[], T]) -> T:
        return action() if self._hook is None else self._hook.round_trip(action)

    def transaction(self, callback: Callable[[LmdbTransaction], T]) -> T:
        store = self.store
        opened: list[lmdb.Transaction] = []

        def begin() -> lmdb.Transaction:
            txn = store.env.begin(write=True)
            opened.append(txn)  # kept even if the answer is lost, so it can be aborted
            return txn

        try:
            try:
                txn = self.round_trip(begin)
            except ConnectionError as error:
                raise StorageUnavailableError("could not open a write transaction on LMDB") from error
            tx = LmdbTransaction(self, txn)
            try:
                result = callback(tx)
                write = tx.prepare()
            finally:
                tx.end()
            marker = b"commit:" + uuid.uuid4().hex.encode()

            def commit() -> None:
                write()
                txn.put(marker, b"", db=store.meta)
                txn.commit()

            try:
                self.round_trip(commit)
            except ConnectionError as error:
                opened[0].abort()  # a commit that never ran goes with its connection
                if self._committed(marker):
                    return result
                raise StorageUnavailableError("the LMDB commit did not happen (connection broke)") from error
            return result
        finally:
            for txn in opened:
                txn.abort()  # no effect after a commit

    def _committed(self, marker: bytes) -> bool:
        store = self.store

        def look() -> bool:
            with store.env.begin() as txn:
                return txn.get(marker, db=store.meta) is not None

        try:
            return self.round_trip(look)
        except ConnectionError as error:
            raise StorageCommitUnknownError(
                "the LMDB commit was sent and the store could not be asked whether it took effect"
            ) from error

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        StorageTransactionMeter(self.profile.limits).check_query(command)

        def read() -> QueryRecordsResult:
            with self.store.env.begin() as txn:
                return scan(self.store, txn, command, exclusive=False)

        try:
            return self.round_trip(read)
        except ConnectionError as error:
            raise StorageUnavailableError("the connection to the LMDB store broke") from error

    def close(self) -> None:
        pass


class LmdbStoreHandle:
    """A store in a directory of its own; ``address()`` is that path, so other processes can attach.

    LMDB tells its live readers apart by process id: each locks the byte at its id in the
    environment's lock file. Processes that attach one store must therefore see one another's ids,
    which ``--isolation process`` gives: every backend of a run is in the run's one PID namespace.
    """

    def __init__(self, path: str, *, owner: bool) -> None:
        self._path = path
        self._owner = owner
        self._store = open_environment(path)

    def connect(self, *, clock: Clock | None = None) -> LmdbDriver:
        return LmdbDriver(self._store, clock)

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> LmdbDriver:
        return LmdbDriver(self._store, clock, hook)

    def address(self) -> str:
        return self._path

    def close(self) -> None:
        release_environment(self._store)
        if self._owner:
            shutil.rmtree(self._path, ignore_errors=True)


class LmdbHarness:
    def open_store(self) -> LmdbStoreHandle:
        return LmdbStoreHandle(tempfile.mkdtemp(prefix="runlane-lmdb-"), owner=True)

    def attach(self, address: object) -> LmdbStoreHandle:
        if not isinstance(address, str):
            raise ValueError(f"an LMDB store's address is its directory, got {address!r}")
        return LmdbStoreHandle(address, owner=False)

    def close(self) -> None:
        pass


def harness(options: Mapping[str, str]) -> LmdbHarness:
    """The entry point: the LMDB driver takes no options."""
    if options:
        raise ValueError(f"the LMDB driver takes no options, got {sorted(options)}")
    return LmdbHarness()
