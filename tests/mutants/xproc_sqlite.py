"""The SQLite-based drivers behind ``m_cross_process``: right inside one process, wrong across processes.

Each is built on the SQLite example (``runlane_sqlite_driver``), whose store
has an address (its file), because the cross-process checks need one; the
reference driver's stores live in one process. Each mutant keeps something
the contract says lives in storage in the memory of the process instead, the
way a driver author tuning for speed plausibly would:

* ``LateLockDriver`` serializes attempts with the example's in-process gate
  alone and takes SQLite's write lock only to write, so exclusive selection
  is exclusive only among the instances of one process;
* ``UnconditionalWritesDriver`` also writes without the version conditions
  (inside one process the gate makes them redundant), so conflicts between
  processes go undetected;
* ``CachedHeadAppendDriver`` offers native append with the next position
  cached per process (kept exact for that process's own writes);
* ``GroupCommitDriver`` acknowledges a commit at a savepoint of one long
  transaction per process and makes the batch durable only when the last
  instance closes, so a killed process loses acknowledged commits;
* ``LazyReleaseDriver`` records exclusive holds in a file every process sees
  but releases them only at its own process's next transaction;
* ``InProcessMarkerDriver`` keeps completion-wait markers in a set in process
  memory instead of storing them.

``m_cross_process.IN_PROCESS_TWINS`` names, for each, the single-process
requirement of the same rule it still passes
(``tests/mutants/test_cross_process_mutants.py`` proves that), which is what
makes it a cross-process bug.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from runlane_sqlite_driver.driver import (
    SqliteStorageDriver,
    SqliteTransaction,
    _entry_rows,
    _is_busy,
    fetch_records,
)
from runlane_sqlite_driver.harness import SqliteHarness, SqliteStoreHandle
from runlane_sqlite_driver.harness import harness as sqlite_harness

from runlane_conformance import (
    AppendRecordsCommand,
    QueryRecordsResult,
    StorageCandidateMode,
    StorageConcurrentUseError,
    StorageConflictError,
    StorageProfile,
    StorageRecordVersion,
    StorageTableName,
    StoredRecord,
    encode_storage_query_cursor,
    materialize_storage_append,
    read_storage_stream_position,
)
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")
_PUT_ENTRY = "INSERT OR REPLACE INTO index_entries (idx, partition, sort, key) VALUES (?, ?, ?, ?)"
EXCLUSIVE = StorageCandidateMode.EXCLUSIVE


# -- a harness whose stores open a driver subclass ----------------------------------------------------


class _MutantStore(SqliteStoreHandle):
    driver_class: type[SqliteStorageDriver] = SqliteStorageDriver

    def _open(self, clock: Any, hook: Any) -> SqliteStorageDriver:
        if self._closed:
            raise RuntimeError(f"the store {self._path} was closed")
        driver = self.driver_class(
            self._path,
            faults=hook,
            clock=clock,
            limits=self._harness.limits,
            busy_timeout=self._harness.busy_timeout,
            synchronous=self._harness.synchronous,
            max_transaction_attempts=self._harness.max_transaction_attempts,
            exclusive_candidates=self._harness.exclusive_candidates,
        )
        self._drivers.append(driver)
        return driver


class _MutantHarness(SqliteHarness):
    store_class: type[_MutantStore] = _MutantStore

    def open_store(self) -> SqliteStoreHandle:
        handle = super().open_store()
        handle.__class__ = self.store_class
        return handle

    def attach(self, address: object) -> SqliteStoreHandle:
        handle = super().attach(address)
        handle.__class__ = self.store_class
        return handle


def _sqlite_mutant(
    driver_class: type[SqliteStorageDriver], **base: str
) -> Callable[[Mapping[str, str]], SqliteHarness]:
    store_class = type(f"{driver_class.__name__}Store", (_MutantStore,), {"driver_class": driver_class})
    harness_class = type(f"{driver_class.__name__}Harness", (_MutantHarness,), {"store_class": store_class})

    def factory(options: Mapping[str, str]) -> SqliteHarness:
        made = sqlite_harness({**base, **options})
        made.__class__ = harness_class
        return made

    return factory


# -- the write lock taken only to write ----------------------------------------------------------------


class _LateLockTransaction(SqliteTransaction):
    """Reads run in autocommit mode (no SQLite lock); ``BEGIN IMMEDIATE`` only when the attempt commits."""

    def _commit(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE" if self._rules.mutated else "BEGIN")
        super()._commit()


class LateLockDriver(SqliteStorageDriver):
    """The example driver with its in-process gate as the only thing serializing attempts.

    Inside one process this is exactly the example (every attempt on the file
    queues on the gate); another process's attempts run alongside.
    """

    transaction_class: type[SqliteTransaction] = _LateLockTransaction

    def transaction(self, callback: Callable[[Any], T]) -> T:
        gate, me = self._gate, threading.get_ident()
        if gate.owner == me:
            raise StorageConcurrentUseError("this thread already has a transaction open on this store")
        if not gate.lock.acquire(timeout=self._busy_timeout):
            raise StorageConflictError("another transaction in this process held the store too long")
        gate.owner = me
        try:
            conn = self._connections.acquire()
            try:
                attempt = self.transaction_class(
                    conn, self._profile.limits, self._clock, exclusive=self._profile.exclusive_candidates
                )
                try:
                    result = callback(attempt)
                except BaseException:
                    attempt._rollback()
                    raise
                try:
                    attempt._commit()
                except sqlite3.OperationalError as error:
                    if _is_busy(error):
                        raise StorageConflictError(f"the write lock stayed busy: {error}") from error
                    raise
                return result
            finally:
                self._connections.release(conn)
        finally:
            gate.owner = None
            gate.lock.release()


# -- writes without their conditions -----------------------------------------------------------------


class _UnconditionalTransaction(_LateLockTransaction):
    """Writes every staged mutation as it is, trusting the in-process gate to have kept reads true."""

    def _flush(self) -> None:
        conn, rules = self._conn, self._rules
        (last,) = conn.execute("SELECT last FROM versions WHERE id = 1").fetchone()
        version = last
        entries: list[tuple[str, str, str, str]] = []
        writes = [(ekey, record) for ekey, record in rules.creates]
        writes += [(ekey, record) for ekey, _current, record in rules.replaces]
        for ekey, record in writes:
            version += 1
            conn.execute(
                "INSERT OR REPLACE INTO records (key, version, document) VALUES (?, ?, ?)",
                (ekey, version, record.document.text),
            )
            conn.execute("DELETE FROM index_entries WHERE key = ?", (ekey,))
            entries.extend(_entry_rows(ekey, record))
        for ekey, _current in rules.deletes:
            conn.execute("DELETE FROM records WHERE key = ?", (ekey,))
            conn.execute("DELETE FROM index_entries WHERE key = ?", (ekey,))
        conn.execute("UPDATE versions SET last = ? WHERE id = 1", (version,))
        if entries:
            conn.executemany(
                "INSERT OR REPLACE INTO index_entries (idx, partition, sort, key) VALUES (?, ?, ?, ?)",
                entries,
            )


class UnconditionalWritesDriver(LateLockDriver):
    transaction_class = _UnconditionalTransaction


# -- native append with a per-process cached head ---------------------------------------------------

_HEADS: dict[tuple[str, str], int] = {}  # (file, partition) -> next position, as this process last knew it
_HEADS_LOCK = threading.Lock()


class _CachedHeadTransaction(SqliteTransaction):
    """Native append whose start position comes from the process's cache once it has one."""

    path = ""

    def append(self, command: object) -> None:
        with self._rules:
            self._rules.stage_append(command)  # type: ignore[arg-type]

    def _commit(self) -> None:
        command: AppendRecordsCommand | None = self._rules.append
        if command is not None:  # the example commits only attempts with point mutations
            self._rules.mutated.add(command.layout.head_key(command.partition).encoded)
        super()._commit()

    def _flush(self) -> None:
        super()._flush()
        rules = self._rules
        for _ekey, record in [*rules.creates, *((k, r) for k, _c, r in rules.replaces)]:
            if record.key.table is StorageTableName.STREAM_HEADS:  # a point writer moved a head here
                with _HEADS_LOCK:
                    _HEADS.pop((self.path, str(record.key.id[1])), None)
        command: AppendRecordsCommand | None = rules.append
        if command is None:
            return
        conn = self._conn
        slot = (self.path, command.partition)
        with _HEADS_LOCK:
            start = _HEADS.get(slot)
        if start is None:
            head_key = command.layout.head_key(command.partition)
            found = fetch_records(conn, [head_key.encoded]).get(head_key.encoded)
            start = read_storage_stream_position(command.stream, command.partition, found)
        placed = materialize_storage_append(command, start)
        (last,) = conn.execute("SELECT last FROM versions WHERE id = 1").fetchone()
        version = last
        entries: list[tuple[str, str, str, str]] = []
        for record in (*placed.records, placed.head):
            version += 1
            ekey = record.key.encoded
            conn.execute(
                "INSERT OR REPLACE INTO records (key, version, document) VALUES (?, ?, ?)",
                (ekey, version, record.document.text),
            )
            conn.execute("DELETE FROM index_entries WHERE key = ?", (ekey,))
            entries.extend(_entry_rows(ekey, record))
        conn.execute("UPDATE versions SET last = ? WHERE id = 1", (version,))
        if entries:
            conn.executemany(
                "INSERT OR REPLACE INTO index_entries (idx, partition, sort, key) VALUES (?, ?, ?, ?)",
                entries,
            )
        self.learned = (slot, start + len(placed.records))

    learned: tuple[tuple[str, str], int] | None = None


class CachedHeadAppendDriver(SqliteStorageDriver):
    """The example driver plus native append; the allocator trusts this process's last known head."""

    @property
    def profile(self) -> StorageProfile:
        return replace(self._profile, append=True)

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[_CachedHeadTransaction] = []

        def wrapped(tx: SqliteTransaction) -> T:
            tx.__class__ = _CachedHeadTransaction
            assert isinstance(tx, _CachedHeadTransaction)
            tx.path = self._path
            attempts.append(tx)
            return callback(tx)

        result = super().transaction(wrapped)
        learned = attempts[-1].learned if attempts else None
        if learned is not None:
            with _HEADS_LOCK:
                _HEADS[learned[0]] = learned[1]
        return result


# -- acknowledged at a savepoint, durable at close ------------------------------------------------------


class _Batch:
    """One connection per file and process, inside one long write transaction; attempts are savepoints."""

    def __init__(self, path: str, busy_timeout: float) -> None:
        self.conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.lock = threading.RLock()
        self.users = 0
        self.open = False

    def begin(self) -> None:
        if not self.open:
            self.conn.execute("BEGIN IMMEDIATE")
            self.open = True

    def flush(self) -> None:
        if self.open:
            self.conn.execute("COMMIT")
            self.open = False


_BATCHES: dict[str, _Batch] = {}
_BATCHES_LOCK = threading.Lock()


class _Savepoint:
    """What ``SqliteTransaction`` sees as its connection: the batch, with attempts mapped to a savepoint."""

    def __init__(self, batch: _Batch) -> None:
        self._batch = batch
        self.broken = False
        self.slot = uuid.uuid4().hex
        self.in_transaction = False

    def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        conn = self._batch.conn
        if sql == "BEGIN IMMEDIATE":
            self._batch.begin()
            self.in_transaction = True
            return conn.execute("SAVEPOINT attempt")
        if sql == "ROLLBACK":
            self.in_transaction = False
            conn.execute("ROLLBACK TO attempt")
            return conn.execute("RELEASE attempt")
        if sql == "COMMIT":  # acknowledged here; durable only when the batch commits
            self.in_transaction = False
            return conn.execute("RELEASE attempt")
        return conn.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any) -> sqlite3.Cursor:
        return self._batch.conn.executemany(sql, parameters)


class GroupCommitDriver(SqliteStorageDriver):
    """Every attempt of a process on one file is a savepoint of one transaction, committed at the last close.

    Inside one process everything reads and writes through that one
    connection, so every instance sees every acknowledged commit; closing
    every instance makes the batch durable.
    """

    def __init__(self, path: str, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        with _BATCHES_LOCK:
            batch = _BATCHES.get(path)
            if batch is None:
                batch = _BATCHES[path] = _Batch(path, self._busy_timeout)
            batch.users += 1
        self._batch = batch
        self._closed = False

    def transaction(self, callback: Callable[[Any], T]) -> T:
        with self._batch.lock:
            conn = _Savepoint(self._batch)
            conn.execute("BEGIN IMMEDIATE")
            attempt = SqliteTransaction(
                conn,  # type: ignore[arg-type]
                self._profile.limits,
                self._clock,
                exclusive=self._profile.exclusive_candidates,
            )
            try:
                result = callback(attempt)
            except BaseException:
                attempt._rollback()
                raise
            attempt._commit()
            return result

    def query(self, command: Any) -> Any:
        with self._batch.lock:
            return self.transaction(lambda tx: QueryRecordsResult(*_query(tx, command)))

    def close(self) -> None:
        super().close()
        if self._closed:
            return
        self._closed = True
        with _BATCHES_LOCK, self._batch.lock:
            self._batch.users -= 1
            if self._batch.users == 0:
                self._batch.flush()
                self._batch.conn.close()
                _BATCHES.pop(self._path, None)


def _query(tx: SqliteTransaction, command: Any) -> tuple[Any, Any]:
    page = tx.query_candidates(command)
    return page.items, page.cursor


# -- exclusive holds released at the holder's next transaction --------------------------------------

_PENDING: dict[str, list[str]] = {}  # file -> held keys this process will release at its next transaction
_PENDING_LOCK = threading.Lock()


def _holds(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path + ".holds", timeout=30, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS holds (key TEXT PRIMARY KEY)")
    return conn


class _HoldingTransaction(WrappedTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        result = self.inner.query_candidates(command, **kwargs)
        if StorageCandidateMode(kwargs.get("mode", StorageCandidateMode.ADVISORY)) is not EXCLUSIVE:
            return result
        driver = self.driver
        assert isinstance(driver, LazyReleaseDriver)
        with contextlib.closing(_holds(driver.path)) as conn:
            held = {row[0] for row in conn.execute("SELECT key FROM holds")}
            items = tuple(item for item in result.items if item.key.encoded not in held)
            conn.executemany(
                "INSERT OR IGNORE INTO holds (key) VALUES (?)", [(i.key.encoded,) for i in items]
            )
        driver.held.extend(item.key.encoded for item in items)
        if len(items) == len(result.items):
            return result
        return QueryRecordsResult(items, encode_storage_query_cursor(command, items[-1]) if items else None)


class LazyReleaseDriver(WrappedDriver):
    """Exclusive holds go to a file beside the store, released only at this process's next transaction.

    The example already makes selection exclusive inside one process (its
    write lock); the holds file is what other processes consult. Any
    transaction in this process first releases what earlier ones held.
    """

    transaction_class = _HoldingTransaction

    def __init__(self, inner: Any, store: Any) -> None:
        super().__init__(inner, store)
        self.path = str(store.address())
        self.held: list[str] = []

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> T:
            with _PENDING_LOCK:
                pending = _PENDING.pop(self.path, [])
            if pending:
                with contextlib.closing(_holds(self.path)) as conn:
                    conn.executemany("DELETE FROM holds WHERE key = ?", [(key,) for key in pending])
            return callback(self.transaction_class(tx, self))

        try:
            return self.inner.transaction(attempt)  # type: ignore[no-any-return]
        finally:
            with _PENDING_LOCK:
                _PENDING.setdefault(self.path, []).extend(self.held)
            self.held = []


# -- completion-wait markers in process memory -----------------------------------------------------

_MARKERS: dict[str, dict[str, StoredRecord]] = {}  # file -> marker key -> the marker as stored "here"
_MARKERS_LOCK = threading.Lock()
_MARKER_VERSIONS = iter(range(10**12, 10**13))


class _MarkerTransaction(WrappedTransaction):
    def get(self, keys: Any) -> list[Any]:
        found = self.inner.get(keys)
        driver = self.driver
        assert isinstance(driver, InProcessMarkerDriver)
        with _MARKERS_LOCK:
            markers = _MARKERS.get(driver.path, {})
            return [markers.get(key.encoded, record) for key, record in zip(keys, found, strict=True)]

    def create(self, record: Any) -> None:
        if record.key.table is StorageTableName.RUN_COMPLETION_WAIT_PRESENCE:
            driver = self.driver
            assert isinstance(driver, InProcessMarkerDriver)
            version = StorageRecordVersion(str(next(_MARKER_VERSIONS)))
            driver.staged.append(StoredRecord(record.key, version, record.document, record.indexes))
            return
        self.inner.create(record)


class InProcessMarkerDriver(WrappedDriver):
    """Completion-wait markers live in a per-process set (added when their attempt commits), not stored."""

    transaction_class = _MarkerTransaction

    def __init__(self, inner: Any, store: Any) -> None:
        super().__init__(inner, store)
        self.path = str(store.address())
        self.staged: list[StoredRecord] = []

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> T:
            self.staged = []
            return callback(self.transaction_class(tx, self))

        result: T = self.inner.transaction(attempt)
        with _MARKERS_LOCK:
            markers = _MARKERS.setdefault(self.path, {})
            for marker in self.staged:
                markers.setdefault(marker.key.encoded, marker)
        self.staged = []
        return result


_EXCLUSIVE = {"exclusive_candidates": "true"}

exclusive_by_in_process_lock = _sqlite_mutant(LateLockDriver, **_EXCLUSIVE)
conflicts_by_in_process_lock = _sqlite_mutant(UnconditionalWritesDriver)
append_head_cached = _sqlite_mutant(CachedHeadAppendDriver)
group_commit = _sqlite_mutant(GroupCommitDriver)
holds_released_lazily = mutant_harness(LazyReleaseDriver, base="sqlite", base_options=_EXCLUSIVE)
marker_in_process_set = mutant_harness(InProcessMarkerDriver, base="sqlite")
