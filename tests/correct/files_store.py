"""A correct driver on plain files, shared by every process that opens the same directory.

The freedom it takes: a store that really outlives its instances and its processes, with no
server and no database engine, only a directory holding two files:

* ``state.json``: every committed record (encoded key, version, canonical document text, index
  entries) and the last version handed out. A commit writes the whole new state to a temporary
  file, flushes it to disk (``fsync``) and renames it over ``state.json``, so a reader sees either
  the old state or the new one, never a torn write, and a commit acknowledged to the caller is on
  disk before ``transaction()`` returns: a process killed right after cannot lose it.
* ``lock``: a commit holds an exclusive ``flock`` on it while it validates and writes, so commits
  on the store happen one after another whatever process they run in. Inside one process a
  re-entrant thread lock queues the threads first, so one process never asks the kernel for a
  lock it already holds.

Attempts are optimistic and never wait for one another: an attempt reads one committed state (the
file as it was when the attempt began: a snapshot, so its reads agree with each other and a re-read
answers the same). A read-only attempt commits nothing and needs no lock: its snapshot is a state
every serial order of the commits passes through. An attempt that writes commits only if, under the
lock, every record it read still has the version it read and every candidate page it scanned comes
back the same from the latest state; its reads are then what a transaction running alone at that
instant would read, so the commit is serializable. Otherwise the attempt is rolled back and replayed.

Each process caches the state it last loaded, together with an open descriptor of that very file:
while the descriptor is open its inode cannot be reused, so "the file at ``state.json`` is still the
inode I hold" proves the cache is current, and anything else reloads it.

Options: ``durability`` (``durable``, the default, or ``process``: the same store advertising only
the weaker promise, which is honest since it keeps the stronger one). No append, no exclusive
candidates, no operator reads, no fault hook: its level is ``core``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
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
    StorageCorruptionError,
    StorageDurability,
    StorageIndexEntry,
    StorageProfile,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTableName,
    StorageTransactionMeter,
    StorageUnsupportedError,
    StorageValidationError,
    StoredRecord,
    parse_storage_document,
    storage_record_key_codec,
)

T = TypeVar("T")


def scan(store: object, command: QueryRecordsCommand) -> QueryRecordsResult:
    """One page of ``store.records``'s index entries: the tiny example's full scan, certified in CI."""
    page = _tiny_scan(store, command)
    assert isinstance(page, QueryRecordsResult)
    return page


STATE = "state.json"
LOCK = "lock"
#: Attempts before a transaction that keeps losing to other writers gives up with ``StorageConflictError``.
MAX_ATTEMPTS = 64


class _Stale(StorageConflictError):
    """Internal: a record this attempt read or meant to change is no longer what it read."""


@dataclass
class _State:
    """One loaded ``state.json``: the records by encoded key and the last version handed out."""

    records: dict[str, StoredRecord] = field(default_factory=dict)
    last_version: int = 0


def _to_json(state: _State) -> str:
    rows = [
        [
            ekey,
            int(record.version.value),
            record.document.text,
            [[entry.index.value, entry.partition, entry.sort] for entry in record.indexes],
        ]
        for ekey, record in state.records.items()
    ]
    return json.dumps({"last_version": state.last_version, "records": rows})


def _from_json(text: str) -> _State:
    try:
        raw = json.loads(text)
        state = _State(last_version=int(raw["last_version"]))
        for ekey, version, document, entries in raw["records"]:
            table, ident = storage_record_key_codec.decode_parts(ekey)
            state.records[ekey] = StoredRecord(
                StorageRecordKey(StorageTableName(table), ident),
                StorageRecordVersion(str(version)),
                parse_storage_document(document),
                tuple(StorageIndexEntry(idx, part, sort) for idx, part, sort in entries),
            )
    except (ValueError, KeyError, TypeError, StorageValidationError) as error:
        raise StorageCorruptionError(f"{STATE} does not parse as this driver's state: {error}") from error
    return state


class FileStore:
    """This process's view of one store directory: its locks and its cache of the committed state."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._lock_fd = os.open(os.path.join(directory, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
        self._cached: _State | None = None
        self._cached_fd: int | None = None

    @contextlib.contextmanager
    def locked(self) -> Any:
        """Hold the store exclusively (threads of this process, then every other process)."""
        with self._thread_lock:
            if self._depth == 0:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def snapshot(self) -> _State:
        """The latest committed state, read without the store's lock (a rename swaps it atomically)."""
        with self._thread_lock:
            return self.state()

    def state(self) -> _State:
        """The latest committed state, the cache if it is still the file (under the thread lock)."""
        path = os.path.join(self.directory, STATE)
        if self._cached is not None and self._cached_fd is not None:
            try:
                if os.stat(path).st_ino == os.fstat(self._cached_fd).st_ino:
                    return self._cached
            except FileNotFoundError:
                pass
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            self._remember(_State(), None)
            assert self._cached is not None
            return self._cached
        with open(os.dup(fd), encoding="utf-8") as file:
            state = _from_json(file.read())
        self._remember(state, fd)
        return state

    def _remember(self, state: _State, fd: int | None) -> None:
        if self._cached_fd is not None:
            os.close(self._cached_fd)
        self._cached, self._cached_fd = state, fd

    def write(self, state: _State) -> None:
        """Make ``state`` the committed one: on disk (fsync) before this returns, swapped in atomically."""
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix="state-", suffix=".tmp")
        try:
            with open(fd, "w", encoding="utf-8") as file:
                file.write(_to_json(state))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, os.path.join(self.directory, STATE))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
            raise
        directory_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
        self._remember(state, os.open(os.path.join(self.directory, STATE), os.O_RDONLY))

    def close(self) -> None:
        self._remember(_State(), None)
        self._cached = None
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)


class FileTransaction:
    """One attempt; ``StorageAttemptRules`` keeps the contract's attempt rules, the files keep the data."""

    def __init__(self, state: _State, profile: StorageProfile, clock: Callable[[], datetime]) -> None:
        self._state = state
        self._rules = StorageAttemptRules(profile.limits, clock)
        self._pages: list[tuple[QueryRecordsCommand, QueryRecordsResult]] = []

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        with self._rules:
            keys = self._rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            results = [self._state.records.get(ekey) for ekey in ekeys]
            self._rules.record_reads(ekeys, results)
            return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        with self._rules:
            if self._rules.begin_query(command, mode) is not StorageCandidateMode.ADVISORY:
                raise StorageUnsupportedError("the files driver does not offer exclusive candidates")
            page = scan(self._state, command)
            self._pages.append((command, page))
            return page

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
        raise StorageUnsupportedError("the files driver does not offer append")

    def commit(self, store: FileStore) -> None:
        """Nothing to do for a read-only attempt; otherwise validate and write, holding the lock."""
        rules = self._rules
        rules.end_for_commit()
        rules.check_within_limits()
        if not rules.mutated:
            return
        with store.locked():
            self._commit_locked(store)

    def _commit_locked(self, store: FileStore) -> None:
        rules = self._rules
        committed = store.state()
        records = committed.records
        for ekey, seen in rules.reads.items():
            now = records.get(ekey)
            if (now is None) != (seen is None) or (
                now is not None and seen is not None and now.version != seen.version
            ):
                raise _Stale(f"record {ekey} changed after this attempt read it")
        for command, page in self._pages:
            if scan(committed, command) != page:
                raise _Stale("an index range this attempt scanned changed after it scanned it")
        following = _State(dict(records), committed.last_version)
        for ekey, new in rules.creates:
            if ekey in following.records:
                raise StorageConflictError(f"{new.key} already exists")
            following.records[ekey] = StoredRecord.committed(new, self._next(following))
        for ekey, current, new in rules.replaces:
            if records.get(ekey) is None or records[ekey].version != current.version:
                raise _Stale(f"{new.key} changed after this attempt read it")
            following.records[ekey] = StoredRecord.committed(new, self._next(following))
        for ekey, current in rules.deletes:
            if records.get(ekey) is None or records[ekey].version != current.version:
                raise _Stale(f"record {ekey} changed after this attempt read it")
            del following.records[ekey]
        store.write(following)

    @staticmethod
    def _next(state: _State) -> StorageRecordVersion:
        state.last_version += 1
        return StorageRecordVersion(str(state.last_version))

    def end(self) -> None:
        self._rules.end()


class FileDriver:
    """One instance on a store directory. Client clock, strong index, no optional capabilities."""

    def __init__(
        self, store: FileStore, clock: Callable[[], datetime] | None, profile: StorageProfile
    ) -> None:
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))
        self.profile = profile

    def transaction(self, callback: Callable[[FileTransaction], T]) -> T:
        for _ in range(MAX_ATTEMPTS):
            tx = FileTransaction(self._store.snapshot(), self.profile, self._clock)
            try:
                result = callback(tx)
                tx.commit(self._store)
                return result
            except _Stale:
                continue
            finally:
                tx.end()
        raise StorageConflictError(f"gave up after {MAX_ATTEMPTS} attempts lost to other writers")

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        StorageTransactionMeter(self.profile.limits).check_query(command)
        return scan(self._store.snapshot(), command)

    def close(self) -> None:
        pass


class FileStoreHandle:
    """A store directory; ``connect()`` opens independent instances, ``address()`` is the directory."""

    def __init__(self, directory: str, profile: StorageProfile, *, owned: bool) -> None:
        self._directory = directory
        self._profile = profile
        self._owned = owned
        self._store = FileStore(directory)

    def connect(self, *, clock: Callable[[], datetime] | None = None) -> FileDriver:
        return FileDriver(self._store, clock, self._profile)

    def address(self) -> str:
        return self._directory

    def close(self) -> None:
        self._store.close()
        if self._owned:
            shutil.rmtree(self._directory, ignore_errors=True)


class FileHarness:
    def __init__(self, profile: StorageProfile) -> None:
        self._profile = profile
        self._handles: list[FileStoreHandle] = []

    def open_store(self) -> FileStoreHandle:
        handle = FileStoreHandle(tempfile.mkdtemp(prefix="runlane-files-"), self._profile, owned=True)
        self._handles.append(handle)
        return handle

    def attach(self, address: object) -> FileStoreHandle:
        if not isinstance(address, str) or not os.path.isdir(address):
            raise ValueError(f"not a files-driver store directory: {address!r}")
        handle = FileStoreHandle(address, self._profile, owned=False)
        self._handles.append(handle)
        return handle

    def close(self) -> None:
        for handle in self._handles:
            handle.close()
        self._handles.clear()


DURABILITY = {"durable": StorageDurability.DURABLE, "process": StorageDurability.PROCESS}


def harness(options: Mapping[str, str]) -> FileHarness:
    """The entry point: option ``durability`` (``durable`` by default, or ``process``)."""
    unknown = set(options) - {"durability"}
    if unknown:
        raise ValueError(f"the files driver takes only the option durability, got {sorted(unknown)}")
    durability = options.get("durability", "durable")
    if durability not in DURABILITY:
        raise ValueError(f"durability must be durable or process, got {durability!r}")
    return FileHarness(StorageProfile(durability=DURABILITY[durability]))
