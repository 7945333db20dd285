"""A Runlane storage driver on one SQLite file: every attempt holds the database's write lock.

How it keeps the contract
-------------------------
Each attempt starts with ``BEGIN IMMEDIATE``, which takes SQLite's single
write lock before the callback reads anything. While the lock is held no
other connection (in this process or another) can commit, so everything the
attempt reads stays true until it commits: reads never go stale, there is
nothing to validate and nothing to replay. That is serializable by
construction; the price is that transactions on one store run one at a time.
A competing transaction on another instance simply waits in ``BEGIN
IMMEDIATE`` (the connection's busy timeout) until the first one ends.

Writes are staged in memory while the callback runs and sent in one go after
it returns, then committed; a callback that raises, or a staged condition
that fails, rolls everything back. Versions come from a one-row counter
table that is advanced in the same commit, so a version is never handed out
twice (rolled-back attempts never made theirs visible).

Outside transactions, ``query()`` is one ``SELECT`` in autocommit mode: the
database runs in WAL mode, so it reads the latest committed state without
waiting for a writer.

Tables (all text is ASCII, so SQLite's BINARY collation is the contract order):

* ``records(key, version, document)``: encoded key, integer version, canonical JSON text;
* ``index_entries(idx, partition, sort, key)``: a ``WITHOUT ROWID`` table whose
  primary key *is* the covering scan index (index name, hex partition, encoded
  sort, encoded key), plus an index on ``key`` to move or drop a record's entries;
* ``versions(id, last)``: the last version handed out;
* ``commit_markers(slot, token)``: per connection, the token of the last attempt it
  committed (written in the same commit; read back when a ``COMMIT`` fails).

Faults. An instance opened with a fault hook (``connect_with_faults``, the
conformance suite's in-process stand-in for a broken connection) sends every
statement, and the opening of every connection, through it. A fault before
``COMMIT`` ran closes the connection (which rolls back and frees the write
lock) and raises ``StorageUnavailableError``. A fault on ``COMMIT`` itself is
resolved: if the connection is still inside its transaction the commit did
not happen; otherwise the connection's commit marker says whether this
attempt's commit did. If the marker cannot be read either,
``StorageCommitUnknownError``; the callback is never run again on a guess.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

from runlane_conformance import (
    Clock,
    FaultHook,
    InjectedFault,
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageAttemptRules,
    StorageCandidateMode,
    StorageClockAuthority,
    StorageCommitUnknownError,
    StorageConcurrentUseError,
    StorageConflictError,
    StorageCorruptionError,
    StorageCursorPosition,
    StorageDurability,
    StorageIndexConsistency,
    StorageIndexEntry,
    StorageIndexReference,
    StorageLimits,
    StorageProfile,
    StorageQueryDirection,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTransactionMeter,
    StorageUnavailableError,
    StorageUnsupportedError,
    StorageUsageError,
    StorageValidationError,
    StoredRecord,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    parse_storage_document,
    storage_record_key_codec,
)

__all__ = [
    "SCHEMA",
    "FaultyConnection",
    "SqliteStorageDriver",
    "SqliteTransaction",
    "StoreConnection",
    "open_connection",
    "sqlite_profile",
]

T = TypeVar("T")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records ("
    " key TEXT NOT NULL PRIMARY KEY COLLATE BINARY,"
    " version INTEGER NOT NULL,"
    " document TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS index_entries ("
    " idx TEXT NOT NULL COLLATE BINARY,"
    " partition TEXT NOT NULL COLLATE BINARY,"
    " sort TEXT NOT NULL COLLATE BINARY,"
    " key TEXT NOT NULL COLLATE BINARY,"
    " PRIMARY KEY (idx, partition, sort, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS index_entries_by_key ON index_entries (key)",
    "CREATE TABLE IF NOT EXISTS versions (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO versions (id, last) VALUES (1, 0)",
    "CREATE TABLE IF NOT EXISTS commit_markers (slot TEXT NOT NULL PRIMARY KEY, token TEXT NOT NULL)",
)

#: SQLite binds at most this many parameters per statement on old builds; stay well below it.
_CHUNK = 400


def sqlite_profile(
    limits: StorageLimits | None = None, *, exclusive_candidates: bool = True
) -> StorageProfile:
    """What every instance advertises: durable file, client clock, strong index, exclusive candidates
    (every selection is exclusive under the write lock) unless switched off; no append."""
    return StorageProfile(
        durability=StorageDurability.DURABLE,
        clock_authority=StorageClockAuthority.CLIENT,
        index_consistency=StorageIndexConsistency.STRONG,
        limits=StorageLimits() if limits is None else limits,
        exclusive_candidates=exclusive_candidates,
        append=False,
    )


class StoreConnection(sqlite3.Connection):
    """A connection with a slot of its own in ``commit_markers`` and a flag for "discard me"."""

    slot: str
    broken: bool = False


class FaultyConnection(StoreConnection):
    """A connection whose every statement goes through a fault hook (for the faults suite)."""

    hook: FaultHook

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.hook.round_trip(lambda: super(FaultyConnection, self).execute(sql, parameters))

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return self.hook.round_trip(lambda: super(FaultyConnection, self).executemany(sql, parameters))


def open_connection(
    path: str, *, busy_timeout: float, synchronous: str, hook: FaultHook | None = None
) -> StoreConnection:
    """A connection in autocommit mode (we issue BEGIN/COMMIT ourselves), usable from any thread.

    The busy timeout is what makes a competing transaction wait for the
    write lock instead of failing at once. With ``hook``, opening the
    connection and every statement on it go through the hook.
    """

    def connect() -> StoreConnection:
        conn = sqlite3.connect(
            path,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            factory=StoreConnection if hook is None else FaultyConnection,
        )
        assert isinstance(conn, StoreConnection)
        conn.slot = uuid.uuid4().hex
        sqlite3.Connection.execute(conn, "PRAGMA journal_mode = WAL")
        sqlite3.Connection.execute(conn, f"PRAGMA synchronous = {synchronous}")
        return conn

    if hook is None:
        return connect()
    conn = hook.round_trip(connect)
    assert isinstance(conn, FaultyConnection)
    conn.hook = hook
    return conn


# -- encodings between contract values and columns --------------------------------------------------


def encode_partition(partition: str) -> str:
    """Partitions are arbitrary text (even lone surrogates); hex keeps every column ASCII."""
    return partition.encode("utf-8", "surrogatepass").hex()


def decode_partition(column: str) -> str:
    return bytes.fromhex(column).decode("utf-8", "surrogatepass")


def sql_bound(value: str) -> str:
    """An ASCII bound that orders every canonical sort value exactly as ``value`` does.

    Canonical sorts use only ``0-9a-f/``. At the first character of ``value``
    that is NUL or not ASCII, every sort sharing the prefix before it has
    already been placed (shorter: below; longer: above for NUL, below for a
    non-ASCII character), so the tail can be replaced by one ASCII stand-in
    that no sort contains. Bounds built by the codecs are returned unchanged.
    """
    for position, char in enumerate(value):
        code = ord(char)
        if code == 0:
            return value[:position] + "\x01"
        if code > 0x7F:
            return value[:position] + "~"
    return value


@lru_cache(maxsize=8192)
def key_from_encoded(encoded: str) -> StorageRecordKey:
    table, ident = storage_record_key_codec.decode_parts(encoded)
    return StorageRecordKey(table, ident)  # type: ignore[arg-type]


def stored_record(
    key: StorageRecordKey, version: int, document: str, entries: Sequence[tuple[str, str, str]]
) -> StoredRecord:
    """Rebuild a committed record from its row; anything that does not validate is corruption."""
    try:
        return StoredRecord(
            key,
            StorageRecordVersion(str(version)),
            parse_storage_document(document),
            tuple(StorageIndexEntry(idx, decode_partition(part), sort) for idx, part, sort in entries),  # type: ignore[arg-type]
        )
    except StorageValidationError as error:
        raise StorageCorruptionError(f"stored record {key} does not validate: {error}") from error


def fetch_records(conn: sqlite3.Connection, ekeys: Sequence[str]) -> dict[str, StoredRecord]:
    """The committed records among ``ekeys`` (distinct encoded keys), with their index entries."""
    rows: dict[str, tuple[int, str]] = {}
    entries: dict[str, list[tuple[str, str, str]]] = {}
    for start in range(0, len(ekeys), _CHUNK):
        chunk = ekeys[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        for ekey, version, document in conn.execute(
            f"SELECT key, version, document FROM records WHERE key IN ({marks})", chunk
        ):
            rows[ekey] = (version, document)
        for ekey, idx, part, sort in conn.execute(
            f"SELECT key, idx, partition, sort FROM index_entries WHERE key IN ({marks})", chunk
        ):
            entries.setdefault(ekey, []).append((idx, part, sort))
    return {
        ekey: stored_record(key_from_encoded(ekey), version, document, entries.get(ekey, ()))
        for ekey, (version, document) in rows.items()
    }


def scan(
    conn: sqlite3.Connection,
    command: QueryRecordsCommand,
    position: StorageCursorPosition | None,
    fetch: int,
) -> list[tuple[str, str]]:
    """Up to ``fetch`` (sort, encoded key) rows of one index partition, in contract order."""
    clauses = ["idx = ?", "partition = ?"]
    params: list[object] = [command.index.value, encode_partition(command.partition)]
    lower, upper = command.range.lower, command.range.upper
    if lower is not None:
        clauses.append("sort >= ?" if lower.inclusive else "sort > ?")
        params.append(sql_bound(lower.value))
    if upper is not None:
        clauses.append("sort <= ?" if upper.inclusive else "sort < ?")
        params.append(sql_bound(upper.value))
    descending = command.direction is StorageQueryDirection.DESCENDING
    if position is not None:
        clauses.append("(sort, key) < (?, ?)" if descending else "(sort, key) > (?, ?)")
        params.extend((position.sort, position.key))
    order = "DESC" if descending else "ASC"
    params.append(fetch)
    sql = (
        f"SELECT sort, key FROM index_entries WHERE {' AND '.join(clauses)} "
        f"ORDER BY sort {order}, key {order} LIMIT ?"
    )
    return [(sort, ekey) for sort, ekey in conn.execute(sql, params)]


def page_result(
    command: QueryRecordsCommand, rows: Sequence[tuple[str, str]], *, lookahead: bool
) -> QueryRecordsResult:
    """A page from the fetched rows.

    With ``lookahead`` the rows were fetched one past the limit and the extra
    row only says a cursor is due; without it (exclusive selections, which
    must not take an extra row) a full page always carries a cursor.
    """
    items = tuple(StorageIndexReference(key_from_encoded(ekey), sort) for sort, ekey in rows[: command.limit])
    more = len(rows) > command.limit if lookahead else (bool(items) and len(items) == command.limit)
    cursor = encode_storage_query_cursor(command, items[-1]) if more else None
    return QueryRecordsResult(items, cursor)


# -- one attempt ------------------------------------------------------------------------------------


class SqliteTransaction:
    """One attempt, running inside ``BEGIN IMMEDIATE`` on its own connection.

    Reads go to the database at once (the write lock keeps them true);
    mutations are staged and written by ``_commit``. The contract's attempt
    rules (one thread at a time, nothing after the end, sealing, the frozen
    ``now()``, what may be mutated, metering) are kept by ``StorageAttemptRules``.
    """

    def __init__(
        self, conn: StoreConnection, limits: StorageLimits, clock: Clock, *, exclusive: bool = False
    ) -> None:
        self._conn = conn
        self._exclusive_offered = exclusive
        self._rules = StorageAttemptRules(limits, clock)
        self.broken: InjectedFault | None = None

    def _store(self, action: Callable[[], T]) -> T:
        """Run a read; a broken connection dooms the attempt (it can no longer commit)."""
        if self.broken is not None:
            raise StorageUnavailableError(f"this attempt's connection failed: {self.broken}")
        try:
            return action()
        except InjectedFault as fault:
            self.broken = fault
            self._conn.broken = True
            raise StorageUnavailableError(
                f"the sqlite connection failed; nothing was committed: {fault}"
            ) from fault

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Each key's committed record (None when absent), in request order, duplicates kept."""
        with self._rules:
            keys = self._rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            found = self._store(lambda: fetch_records(self._conn, list(dict.fromkeys(ekeys))))
            results = [found.get(ekey) for ekey in ekeys]
            self._rules.record_reads(ekeys, results)
            return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in (sort, key) order; the lock keeps the range stable.

        Exclusive mode needs no extra machinery here: the attempt already
        holds the store's only write lock, so no other attempt can select,
        change or commit anything until this one ends. The page is then read
        without a lookahead row (a full page always carries a cursor), so
        exactly the returned rows are what this attempt selected.
        """
        with self._rules:
            mode = self._rules.begin_query(command, mode)
            position = decode_storage_query_cursor(command)
            if mode is StorageCandidateMode.EXCLUSIVE:
                if not self._exclusive_offered:
                    raise StorageUnsupportedError(
                        "exclusive candidates are not enabled for this sqlite store"
                    )
                rows = self._store(lambda: scan(self._conn, command, position, command.limit))
                return page_result(command, rows, lookahead=False)
            rows = self._store(lambda: scan(self._conn, command, position, command.limit + 1))
            return page_result(command, rows, lookahead=True)

    def now(self) -> datetime:
        """One reading of the client clock per attempt, frozen; the first call seals the read set."""
        with self._rules:
            return self._rules.now()

    # -- mutations -------------------------------------------------------------------------------

    def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert of a key this attempt did not read as present."""
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

    def append(self, command: object) -> None:
        raise StorageUnsupportedError("the sqlite driver does not offer append")

    # -- ending ----------------------------------------------------------------------------------

    def _rollback(self) -> None:
        self._rules.end()
        if self._conn.broken:
            return  # the connection is discarded (closing it rolls back and frees the write lock)
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except InjectedFault:
                self._conn.broken = True

    def _commit(self) -> None:
        """Write every staged mutation and commit, or roll back and raise.

        A fault while writing raises ``StorageUnavailableError`` (nothing
        committed); a fault on ``COMMIT`` is resolved (see the module docstring).
        """
        try:
            self._rules.end_for_commit()
            if self.broken is not None:
                raise StorageUnavailableError(
                    f"nothing was committed: this attempt's connection failed: {self.broken}"
                )
            self._rules.check_within_limits()
            try:
                if not self._rules.mutated:
                    self._conn.execute("ROLLBACK")  # nothing to write: ending a read-only attempt
                    return
                token = uuid.uuid4().hex
                self._flush()
                self._conn.execute(
                    "INSERT OR REPLACE INTO commit_markers (slot, token) VALUES (?, ?)",
                    (self._conn.slot, token),
                )
            except InjectedFault as fault:
                self._conn.broken = True
                raise StorageUnavailableError(
                    f"the sqlite connection failed; nothing was committed: {fault}"
                ) from fault
            try:
                self._conn.execute("COMMIT")
            except InjectedFault as fault:
                self._commit_failed(fault, token)
        except BaseException:
            self._rollback()
            raise

    def _commit_failed(self, fault: InjectedFault, token: str) -> None:
        """COMMIT raised: return if this attempt committed anyway, raise otherwise."""
        conn = self._conn
        if conn.in_transaction:  # the commit did not happen; the transaction is still open
            conn.broken = True
            raise StorageUnavailableError(f"nothing was committed: COMMIT failed: {fault}") from fault
        try:
            row = conn.execute("SELECT token FROM commit_markers WHERE slot = ?", (conn.slot,)).fetchone()
        except InjectedFault as again:
            conn.broken = True
            raise StorageCommitUnknownError(
                f"COMMIT failed ({fault}) and its commit marker could not be read: {again}"
            ) from fault
        if row is None or row[0] != token:
            raise StorageUnavailableError(f"nothing was committed: COMMIT failed: {fault}") from fault

    def _flush(self) -> None:
        conn = self._conn
        rules = self._rules
        (last,) = conn.execute("SELECT last FROM versions WHERE id = 1").fetchone()
        written = len(rules.creates) + len(rules.replaces)
        conn.execute("UPDATE versions SET last = ? WHERE id = 1", (last + written,))
        version = last
        entries: list[tuple[str, str, str, str]] = []
        for ekey, record in rules.creates:
            version += 1
            try:
                conn.execute(
                    "INSERT INTO records (key, version, document) VALUES (?, ?, ?)",
                    (ekey, version, record.document.text),
                )
            except sqlite3.IntegrityError as error:
                raise StorageConflictError(f"{record.key} already exists, so it cannot be created") from error
            entries.extend(_entry_rows(ekey, record))
        for ekey, current, record in rules.replaces:
            version += 1
            updated = conn.execute(
                "UPDATE records SET version = ?, document = ? WHERE key = ? AND version = ?",
                (version, record.document.text, ekey, int(current.version.value)),
            )
            if updated.rowcount != 1:
                raise StorageConflictError(f"{record.key} changed after this attempt read it")
            conn.execute("DELETE FROM index_entries WHERE key = ?", (ekey,))
            entries.extend(_entry_rows(ekey, record))
        for ekey, current in rules.deletes:
            deleted = conn.execute(
                "DELETE FROM records WHERE key = ? AND version = ?", (ekey, int(current.version.value))
            )
            if deleted.rowcount != 1:
                raise StorageConflictError(f"record {ekey} changed after this attempt read it")
            conn.execute("DELETE FROM index_entries WHERE key = ?", (ekey,))
        if entries:
            conn.executemany(
                "INSERT INTO index_entries (idx, partition, sort, key) VALUES (?, ?, ?, ?)", entries
            )


def _entry_rows(ekey: str, record: NewStorageRecord) -> list[tuple[str, str, str, str]]:
    return [
        (entry.index.value, encode_partition(entry.partition), entry.sort, ekey) for entry in record.indexes
    ]


# -- the driver ------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _is_busy(error: sqlite3.OperationalError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(error)


class _Gate:
    """The write lock as seen inside one process: instances on one file queue here first.

    SQLite's own busy handler polls with growing sleeps (up to 100 ms), so a
    waiter in this process would notice a released lock late. Queueing on a
    threading lock first hands the lock over at once; waiters in other
    processes still fall back to the busy handler. The gate also knows which
    thread holds it, so a transaction nested inside another on the same
    store and thread is refused at once instead of waiting for itself.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: int | None = None


_GATES: dict[str, _Gate] = {}
_GATES_LOCK = threading.Lock()


def _gate(path: str) -> _Gate:
    with _GATES_LOCK:
        gate = _GATES.get(path)
        if gate is None:
            gate = _GATES[path] = _Gate()
        return gate


def forget_gate(path: str) -> None:
    """Drop the in-process gate of a store that no instance uses any more."""
    with _GATES_LOCK:
        _GATES.pop(path, None)


class _Connections:
    """This instance's connections: one per concurrently running call, reused afterwards."""

    def __init__(self, opener: Callable[[], StoreConnection]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._idle: list[StoreConnection] = []
        self._closed = False
        self._idle.append(self.open())

    def open(self) -> StoreConnection:
        try:
            return self._opener()
        except InjectedFault as fault:
            raise StorageUnavailableError(f"cannot open the sqlite store: {fault}") from fault

    def acquire(self) -> StoreConnection:
        with self._lock:
            if self._closed:
                raise StorageUsageError("this sqlite driver instance was closed")
            if self._idle:
                return self._idle.pop()
        return self.open()

    def release(self, conn: StoreConnection) -> None:
        if conn.broken:  # closing rolls back whatever was open and frees the write lock
            conn.close()
            return
        if conn.in_transaction:  # never hand out a connection with a transaction still open
            conn.execute("ROLLBACK")
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class SqliteStorageDriver:
    """One instance over a SQLite file. Instances on one file see each other's commits at once."""

    def __init__(
        self,
        path: str,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        busy_timeout: float = 30.0,
        synchronous: str = "FULL",
        max_transaction_attempts: int = 3,
        exclusive_candidates: bool = True,
        faults: FaultHook | None = None,
    ) -> None:
        self._path = path
        self._gate = _gate(path)
        self._busy_timeout = busy_timeout
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = sqlite_profile(limits, exclusive_candidates=exclusive_candidates)
        self._max_attempts = max_transaction_attempts
        self._connections = _Connections(
            lambda: open_connection(path, busy_timeout=busy_timeout, synchronous=synchronous, hook=faults)
        )

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    @property
    def path(self) -> str:
        return self._path

    def transaction(self, callback: Callable[[SqliteTransaction], T]) -> T:
        """Run ``callback`` under the write lock and commit what it staged; return its value.

        The callback runs once unless the write lock could not be had within
        the busy timeout; after ``max_transaction_attempts`` such waits the
        transaction gives up with ``StorageConflictError``. A callback error
        rolls back and propagates unchanged.
        """
        gate, me = self._gate, threading.get_ident()
        if gate.owner == me:
            raise StorageConcurrentUseError(
                "this thread already has a transaction open on this store; a nested one would wait for itself"
            )
        reason = "no attempt was made"
        for _attempt in range(self._max_attempts):
            if not gate.lock.acquire(timeout=self._busy_timeout):
                reason = f"another transaction in this process held the store for {self._busy_timeout}s"
                continue
            gate.owner = me
            try:
                conn = self._connections.acquire()
                try:
                    try:
                        conn.execute("BEGIN IMMEDIATE")
                    except sqlite3.OperationalError as error:
                        if not _is_busy(error):
                            raise
                        reason = f"the write lock stayed busy: {error}"
                        continue
                    except InjectedFault as fault:
                        conn.broken = True
                        raise StorageUnavailableError(
                            f"the sqlite connection failed before the attempt began: {fault}"
                        ) from fault
                    attempt = SqliteTransaction(
                        conn, self._profile.limits, self._clock, exclusive=self._profile.exclusive_candidates
                    )
                    try:
                        result = callback(attempt)
                    except BaseException:
                        attempt._rollback()
                        raise
                    attempt._commit()
                    return result
                finally:
                    self._connections.release(conn)
            finally:
                gate.owner = None
                gate.lock.release()
        raise StorageConflictError(f"transaction gave up after {self._max_attempts} attempts; last: {reason}")

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory page from the latest committed state (one autocommit SELECT)."""
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        position = decode_storage_query_cursor(command)
        conn = self._connections.acquire()
        try:
            rows = scan(conn, command, position, command.limit + 1)
        except InjectedFault as fault:
            conn.broken = True
            raise StorageUnavailableError(f"the sqlite connection failed: {fault}") from fault
        finally:
            self._connections.release(conn)
        return page_result(command, rows, lookahead=True)

    def close(self) -> None:
        """Close this instance's connections; the file and other instances are unaffected."""
        self._connections.close()
