"""A Runlane storage driver on PostgreSQL: SERIALIZABLE attempts, replayed on serialization failures.

How it keeps the contract
-------------------------
Every attempt is one PostgreSQL transaction at ``SERIALIZABLE`` isolation.
Reads run at once against the transaction's snapshot; PostgreSQL's
serializable snapshot isolation (SSI) remembers what was read, including
keys that were absent and index ranges that came back empty, and refuses to
commit any attempt whose reads and writes could not have happened in some
serial order. Mutations are staged in memory while the callback runs and
written in a handful of bulk statements after it returns, with each
replace/delete conditioned on the version the attempt read. Whenever the
server reports a serialization failure or a deadlock (SQLSTATE 40001,
40P01), or a staged condition lost a race (a created key appeared, a
version moved), the attempt is rolled back and the callback replayed on a
fresh snapshot, up to ``max_transaction_attempts`` times; then
``StorageConflictError``.

A read that the server rejects inside the callback marks the attempt as
lost before the error reaches the callback: whatever the callback does with
that error, the attempt is rolled back and replayed, never committed.

Broken connections. A connection that fails before ``COMMIT`` was sent
loses nothing (the server rolls back a transaction whose client is gone), so
the failure is reported as ``StorageUnavailableError``; a read that fails
that way also dooms the attempt, even if the callback swallows the error.
A connection that fails while ``COMMIT`` is on its way is ambiguous: the
commit may have happened. Every writing attempt therefore learns its
transaction id (``txid_current()``) before it writes; after such a failure
the driver opens a new connection, ends the old backend if it is still
alive (``pg_terminate_backend`` with a wait, only if it still runs that very
transaction), and asks the server what became of the transaction
(``txid_status``). Committed: the attempt's value is returned. Aborted: the
callback is replayed like after a conflict, which is safe because nothing
committed. Anything else (the server unreachable, the old backend still
running): ``StorageCommitUnknownError``; the callback is never replayed on a
guess.

Versions come from a sequence: ``nextval`` never hands out a value twice,
even when the transaction that drew it rolls back, so versions are never
reused (gaps are harmless: callers only compare versions for equality).

Exclusive candidates select index rows joined to their records with
``FOR UPDATE OF records SKIP LOCKED``: rows another transaction holds are
skipped, and the returned ones stay locked until this attempt ends, across
every connection and process. No lookahead row is locked.

Every text column uses the ``"C"`` collation, and every stored string is
ASCII (encoded keys and sorts, hex partitions), so the database's order is
exactly the contract's order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from runlane_conformance import (
    Clock,
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageAttemptRules,
    StorageCandidateMode,
    StorageClockAuthority,
    StorageCommitUnknownError,
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
    "RETRYABLE_SQLSTATES",
    "PostgresStorageDriver",
    "PostgresTransaction",
    "connection_lost",
    "create_schema",
    "open_connection",
    "postgres_profile",
    "resolve_commit",
]

T = TypeVar("T")

#: serialization_failure, deadlock_detected: the server's way of saying "replay this attempt".
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
_UNIQUE_VIOLATION = "23505"
#: How long resolving a lost COMMIT waits for the old backend to go away (milliseconds).
_TERMINATE_WAIT_MS = 5000

_TABLES = (
    'CREATE TABLE {schema}.records (key text COLLATE "C" PRIMARY KEY, version bigint NOT NULL, '
    "document text NOT NULL)",
    'CREATE TABLE {schema}.index_entries (idx text COLLATE "C" NOT NULL, '
    'partition text COLLATE "C" NOT NULL, sort text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, '
    "PRIMARY KEY (idx, partition, sort, key))",
    "CREATE INDEX index_entries_by_key ON {schema}.index_entries (key)",
    "CREATE SEQUENCE {schema}.versions AS bigint MINVALUE 1",
)


#: ``--option isolation=...``: the level every attempt runs at. Only ``serializable`` keeps the
#: contract. The weaker two exist to show what a driver that relies on the isolation level alone
#: lets through (they also drop the version condition from replace and delete, as such a driver
#: would): lost updates, read skew and write skew at ``read_committed``; write skew (and phantoms)
#: at ``repeatable_read``. The histories suite names each of these.
ISOLATION_LEVELS = ("serializable", "repeatable_read", "read_committed")
_BEGIN = {
    "serializable": "BEGIN ISOLATION LEVEL SERIALIZABLE",
    "repeatable_read": "BEGIN ISOLATION LEVEL REPEATABLE READ",
    "read_committed": "BEGIN ISOLATION LEVEL READ COMMITTED",
}


def postgres_profile(
    limits: StorageLimits | None = None, *, exclusive_candidates: bool = False
) -> StorageProfile:
    """What every instance advertises: durable server, client clock, strong index."""
    return StorageProfile(
        durability=StorageDurability.DURABLE,
        clock_authority=StorageClockAuthority.CLIENT,
        index_consistency=StorageIndexConsistency.STRONG,
        limits=StorageLimits() if limits is None else limits,
        exclusive_candidates=exclusive_candidates,
        append=False,
    )


def open_connection(dsn: str, schema: str, *, connect_timeout: int = 5) -> psycopg.Connection[Any]:
    """An autocommit connection (transactions are begun explicitly) whose search path is the store."""
    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=connect_timeout)
    try:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        # Index scans take fine-grained (page) predicate locks; a sequential scan of a small table
        # would lock the whole relation and turn every concurrent write into a serialization failure.
        conn.execute("SET enable_seqscan = off")
    except BaseException:
        conn.close()
        raise
    return conn


def create_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    """Create one store: a schema with the records, index entries and versions objects."""
    name = sql.Identifier(schema)
    with conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(name))
        for statement in _TABLES:
            conn.execute(sql.SQL(statement).format(schema=name))


# -- encodings between contract values and columns --------------------------------------------------


def encode_partition(partition: str) -> str:
    """Partitions are arbitrary text (NUL, lone surrogates); hex keeps every column ASCII."""
    return partition.encode("utf-8", "surrogatepass").hex()


def decode_partition(column: str) -> str:
    return bytes.fromhex(column).decode("utf-8", "surrogatepass")


def sql_bound(value: str) -> str:
    """An ASCII, NUL-free bound that orders every canonical sort value exactly as ``value`` does.

    Canonical sorts use only ``0-9a-f/``. At the first character of ``value``
    that is NUL (which PostgreSQL text cannot hold) or not ASCII, every sort
    sharing the prefix before it is already placed (equal to the prefix:
    below; longer: above for NUL, below for a non-ASCII character), so the
    tail can be replaced by one ASCII stand-in that no sort contains.
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
    key: StorageRecordKey, version: int, document: str, entries: Sequence[Sequence[str]]
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


_FETCH = (
    "SELECT r.key, r.version, r.document, "
    "COALESCE((SELECT array_agg(ARRAY[e.idx, e.partition, e.sort]) FROM index_entries e "
    "WHERE e.key = r.key), '{}') "
    "FROM records r WHERE r.key = ANY(%s)"
)


def fetch_records(conn: psycopg.Connection[Any], ekeys: Sequence[str]) -> dict[str, StoredRecord]:
    """The committed records among ``ekeys`` with their index entries, in one round trip."""
    found: dict[str, StoredRecord] = {}
    for ekey, version, document, entries in conn.execute(_FETCH, (list(ekeys),)):
        found[ekey] = stored_record(key_from_encoded(ekey), version, document, entries)
    return found


def scan_statement(
    command: QueryRecordsCommand, position: StorageCursorPosition | None, fetch: int, *, exclusive: bool
) -> tuple[str, list[object]]:
    """The SQL for one page of an index partition in contract order, and its parameters."""
    clauses = ["e.idx = %s", "e.partition = %s"]
    params: list[object] = [command.index.value, encode_partition(command.partition)]
    lower, upper = command.range.lower, command.range.upper
    if lower is not None:
        clauses.append("e.sort >= %s" if lower.inclusive else "e.sort > %s")
        params.append(sql_bound(lower.value))
    if upper is not None:
        clauses.append("e.sort <= %s" if upper.inclusive else "e.sort < %s")
        params.append(sql_bound(upper.value))
    descending = command.direction is StorageQueryDirection.DESCENDING
    if position is not None:
        clauses.append("(e.sort, e.key) < (%s, %s)" if descending else "(e.sort, e.key) > (%s, %s)")
        params.extend((position.sort, position.key))
    order = "DESC" if descending else "ASC"
    params.append(fetch)
    where = " AND ".join(clauses)
    if exclusive:
        statement = (
            f"SELECT e.sort, e.key FROM index_entries e JOIN records r ON r.key = e.key WHERE {where} "
            f'ORDER BY e.sort COLLATE "C" {order}, e.key COLLATE "C" {order} LIMIT %s '
            "FOR UPDATE OF r SKIP LOCKED"
        )
    else:
        statement = (
            f"SELECT e.sort, e.key FROM index_entries e WHERE {where} "
            f'ORDER BY e.sort COLLATE "C" {order}, e.key COLLATE "C" {order} LIMIT %s'
        )
    return statement, params


def page_result(
    command: QueryRecordsCommand, rows: Sequence[tuple[str, str]], *, lookahead: bool
) -> QueryRecordsResult:
    """A page from the fetched rows.

    With ``lookahead`` the rows were fetched one past the limit and the extra
    row only says a cursor is due; without it (exclusive scans, which must
    not lock an extra row) a full page always carries a cursor.
    """
    items = tuple(StorageIndexReference(key_from_encoded(ekey), sort) for sort, ekey in rows[: command.limit])
    more = len(rows) > command.limit if lookahead else (bool(items) and len(items) == command.limit)
    cursor = encode_storage_query_cursor(command, items[-1]) if more else None
    return QueryRecordsResult(items, cursor)


# -- one attempt ------------------------------------------------------------------------------------


class _AttemptLost(StorageConflictError):
    """Internal: the server refused this attempt (serialization failure, deadlock, lost condition)."""


def _sqlstate(error: BaseException) -> str | None:
    return getattr(error, "sqlstate", None)


def connection_lost(error: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``error`` means the connection itself failed (as opposed to the server refusing a statement).

    psycopg reports a dropped or unreachable server as ``OperationalError``
    and marks the connection broken; SQLSTATE class 08 is a connection
    exception reported by the server itself.
    """
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = _sqlstate(error)
    if state is not None and state.startswith("08"):
        return True
    return conn is None or conn.broken or conn.closed


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def resolve_commit(
    open_conn: Callable[[], psycopg.Connection[Any]], xid: int, backend_pid: int
) -> bool | None:
    """After a COMMIT whose answer was lost: True if transaction ``xid`` committed, False if it did not,
    None if that cannot be known (the server is unreachable, or the old backend is still running it).

    The old backend may not have noticed its client is gone; while it lives
    the transaction is "in progress" and could still commit. So it is ended
    first, and waited for, but only if it is still running that very
    transaction (its ``backend_xid``), so no unrelated session is touched.
    """
    try:
        with open_conn() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid, %s) FROM pg_stat_activity "
                "WHERE pid = %s AND backend_xid::text = %s",
                (_TERMINATE_WAIT_MS, backend_pid, str(xid & 0xFFFFFFFF)),
            )
            row = conn.execute("SELECT txid_status(%s)", (xid,)).fetchone()
    except (psycopg.Error, StorageUnavailableError):
        return None  # the server cannot be asked: the outcome stays unknown
    status = None if row is None else row[0]
    if status == "committed":
        return True
    if status == "aborted":
        return False
    return None


class PostgresTransaction:
    """One attempt: a SERIALIZABLE transaction on its own connection.

    The contract's attempt rules (one thread at a time, nothing after the
    end, sealing, the frozen ``now()``, what may be mutated, metering) are
    kept by ``StorageAttemptRules``; this class talks to the server.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        limits: StorageLimits,
        clock: Clock,
        *,
        exclusive: bool,
        reconnect: Callable[[], psycopg.Connection[Any]] | None = None,
        conditioned: bool = True,
    ) -> None:
        self._conn = conn
        self._conditioned = conditioned
        self._exclusive_offered = exclusive
        self._rules = StorageAttemptRules(limits, clock)
        self._reconnect = reconnect
        self.lost: BaseException | None = None
        self.broken: BaseException | None = None

    def _server(self, action: Callable[[], T]) -> T:
        """Run a statement; a serialization failure or deadlock dooms the attempt to a replay,
        a broken connection dooms it to ``StorageUnavailableError``."""
        if self.broken is not None:
            raise StorageUnavailableError(f"this attempt's connection failed: {_one_line(self.broken)}")
        if self.lost is not None:
            raise _AttemptLost(f"this attempt already lost a serialization race: {self.lost}")
        try:
            return action()
        except psycopg.Error as error:
            if _sqlstate(error) in RETRYABLE_SQLSTATES:
                self.lost = error
                raise _AttemptLost(f"the server refused this attempt: {error}") from error
            if connection_lost(error, self._conn):
                self.broken = error
                raise StorageUnavailableError(
                    f"the postgres connection failed; nothing was committed: {_one_line(error)}"
                ) from error
            raise

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Each key's record at this attempt's snapshot (None when absent), positions and duplicates kept."""
        with self._rules:
            keys = self._rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            found = self._server(lambda: fetch_records(self._conn, list(dict.fromkeys(ekeys))))
            results = [found.get(ekey) for ekey in ekeys]
            self._rules.record_reads(ekeys, results)
            return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in (sort, key) order; SSI guards the scanned range."""
        with self._rules:
            exclusive = self._rules.begin_query(command, mode) is StorageCandidateMode.EXCLUSIVE
            if exclusive and not self._exclusive_offered:
                raise StorageUnsupportedError("exclusive candidates are not enabled for this postgres store")
            position = decode_storage_query_cursor(command)
            fetch = command.limit if exclusive else command.limit + 1
            statement, params = scan_statement(command, position, fetch, exclusive=exclusive)
            rows = self._server(
                lambda: [(sort, ekey) for sort, ekey in self._conn.execute(statement, params)]
            )
            return page_result(command, rows, lookahead=not exclusive)

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
        raise StorageUnsupportedError("the postgres driver does not offer append")

    # -- ending ----------------------------------------------------------------------------------

    def _rollback(self) -> None:
        self._rules.end()
        if self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE and not self._conn.closed:
            self._conn.execute("ROLLBACK")

    def _commit(self) -> None:
        """Write every staged mutation and commit; ``_AttemptLost`` means "replay".

        A broken connection before ``COMMIT`` raises ``StorageUnavailableError``;
        one while ``COMMIT`` is under way is resolved (see the module docstring).
        """
        try:
            self._rules.end_for_commit()
            if self.lost is not None:
                raise _AttemptLost(f"the server refused this attempt: {self.lost}")
            if self.broken is not None:
                raise StorageUnavailableError(
                    f"nothing was committed: this attempt's connection failed: {_one_line(self.broken)}"
                )
            self._rules.check_within_limits()
            xid: int | None = None
            try:
                if self._rules.mutated:
                    xid = self._server(self._transaction_id)
                    self._server(self._flush)
            except psycopg.Error as error:
                if _sqlstate(error) == _UNIQUE_VIOLATION:
                    raise _AttemptLost(f"the server refused this attempt at commit: {error}") from error
                raise
            pid = self._conn.info.backend_pid
            try:
                self._conn.execute("COMMIT")
            except psycopg.Error as error:
                if _sqlstate(error) in RETRYABLE_SQLSTATES or _sqlstate(error) == _UNIQUE_VIOLATION:
                    raise _AttemptLost(f"the server refused this attempt at commit: {error}") from error
                if not connection_lost(error, self._conn):
                    raise
                self._commit_lost(error, xid, pid)
        except BaseException:
            self._rollback()
            raise

    def _transaction_id(self) -> int:
        """This attempt's transaction id (assigned now, since the attempt is about to write)."""
        row = self._conn.execute("SELECT txid_current()").fetchone()
        assert row is not None
        return int(row[0])

    def _commit_lost(self, error: psycopg.Error, xid: int | None, pid: int) -> None:
        """The connection failed while COMMIT was under way: return if it committed, else raise."""
        if xid is None:
            raise StorageUnavailableError(
                f"the connection failed while ending a read-only attempt: {_one_line(error)}"
            ) from error
        committed = None if self._reconnect is None else resolve_commit(self._reconnect, xid, pid)
        if committed is True:
            return
        if committed is False:
            raise _AttemptLost(f"the connection failed during COMMIT, which did not take effect: {error}")
        raise StorageCommitUnknownError(
            f"the postgres connection failed during COMMIT and whether transaction {xid} committed could "
            f"not be established: {_one_line(error)}"
        ) from error

    def _flush(self) -> None:
        conn = self._conn
        rules = self._rules
        written = len(rules.creates) + len(rules.replaces)
        versions: list[int] = []
        if written:
            versions = [
                row[0]
                for row in conn.execute("SELECT nextval('versions') FROM generate_series(1, %s)", (written,))
            ]
        numbered = iter(versions)
        entries: list[tuple[str, str, str, str]] = []
        if rules.creates:
            rows = [(ekey, next(numbered), record.document.text) for ekey, record in rules.creates]
            conn.execute(
                "INSERT INTO records (key, version, document) "
                "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[])",
                _columns(rows, 3),
            )
            for ekey, record in rules.creates:
                entries.extend(_entry_rows(ekey, record))
        moved: list[str] = []
        if rules.replaces:
            changes = [
                (ekey, int(current.version.value), next(numbered), record.document.text)
                for ekey, current, record in rules.replaces
            ]
            condition = "r.key = u.key AND r.version = u.old" if self._conditioned else "r.key = u.key"
            updated = conn.execute(
                "UPDATE records r SET version = u.version, document = u.document "
                "FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[]) "
                "AS u(key, old, version, document) WHERE " + condition,
                _columns(changes, 4),
            )
            if updated.rowcount != len(changes):
                raise _AttemptLost("a record to replace changed after this attempt read it")
            for ekey, _current, record in rules.replaces:
                moved.append(ekey)
                entries.extend(_entry_rows(ekey, record))
        if rules.deletes:
            gone = [(ekey, int(current.version.value)) for ekey, current in rules.deletes]
            condition = "r.key = d.key AND r.version = d.old" if self._conditioned else "r.key = d.key"
            deleted = conn.execute(
                "DELETE FROM records r USING unnest(%s::text[], %s::bigint[]) AS d(key, old) WHERE "
                + condition,
                _columns(gone, 2),
            )
            if deleted.rowcount != len(gone):
                raise _AttemptLost("a record to delete changed after this attempt read it")
            moved.extend(ekey for ekey, _ in gone)
        if moved:
            conn.execute("DELETE FROM index_entries WHERE key = ANY(%s)", (moved,))
        if entries:
            conn.execute(
                "INSERT INTO index_entries (idx, partition, sort, key) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])",
                _columns(entries, 4),
            )


def _columns(rows: Sequence[tuple[object, ...]], width: int) -> tuple[list[object], ...]:
    """Rows to one list per column, for ``unnest`` bulk statements."""
    return tuple([row[column] for row in rows] for column in range(width))


def _entry_rows(ekey: str, record: NewStorageRecord) -> list[tuple[str, str, str, str]]:
    return [
        (entry.index.value, encode_partition(entry.partition), entry.sort, ekey) for entry in record.indexes
    ]


# -- the driver ------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Connections:
    """This instance's connections: one per concurrently running call, reused afterwards."""

    def __init__(self, opener: Callable[[], psycopg.Connection[Any]]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._closed = False
        self._idle.append(self.open())

    def acquire(self) -> psycopg.Connection[Any]:
        with self._lock:
            if self._closed:
                raise StorageUsageError("this postgres driver instance was closed")
            if self._idle:
                conn = self._idle.pop()
                if not conn.broken and not conn.closed:
                    return conn
        return self.open()

    def open(self) -> psycopg.Connection[Any]:
        """A new connection; an unreachable server is ``StorageUnavailableError``."""
        try:
            return self._opener()
        except psycopg.OperationalError as error:
            raise StorageUnavailableError(f"cannot connect to postgres: {_one_line(error)}") from error

    def release(self, conn: psycopg.Connection[Any]) -> None:
        if conn.broken:
            conn.close()
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                conn.close()
        with self._lock:
            if not self._closed and not conn.closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class PostgresStorageDriver:
    """One instance over one store (a schema). Instances see each other's commits at once."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_candidates: bool = False,
        isolation: str = "serializable",
    ) -> None:
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION_LEVELS)}, got {isolation!r}")
        self._isolation = isolation
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = postgres_profile(limits, exclusive_candidates=exclusive_candidates)
        self._max_attempts = max_transaction_attempts
        self._connections = _Connections(lambda: open_connection(dsn, schema))

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    def transaction(self, callback: Callable[[PostgresTransaction], T]) -> T:
        """Run ``callback`` in SERIALIZABLE attempts until one commits; return that attempt's value.

        A serialization failure, deadlock or lost staged condition replays the
        callback; after ``max_transaction_attempts`` lost attempts
        ``StorageConflictError`` is raised. A callback error rolls back and
        propagates unchanged, unless the attempt had already lost (then the
        error is a consequence of the lost race, and the callback is replayed).
        """
        reason = "no attempt was made"
        for _attempt in range(self._max_attempts):
            conn = self._connections.acquire()
            try:
                try:
                    conn.execute(_BEGIN[self._isolation])
                except psycopg.OperationalError as error:
                    if not connection_lost(error, conn):
                        raise
                    raise StorageUnavailableError(
                        f"the postgres connection failed before the attempt began: {_one_line(error)}"
                    ) from error
                attempt = PostgresTransaction(
                    conn,
                    self._profile.limits,
                    self._clock,
                    exclusive=self._profile.exclusive_candidates,
                    reconnect=self._connections.open,
                    conditioned=self._isolation == "serializable",
                )
                try:
                    result = callback(attempt)
                except BaseException:
                    attempt._rollback()
                    if attempt.lost is None:
                        raise
                    reason = str(attempt.lost)
                    continue
                try:
                    attempt._commit()
                except _AttemptLost as lost:
                    reason = str(lost)
                    continue
                return result
            finally:
                self._connections.release(conn)
        raise StorageConflictError(
            f"transaction gave up after {self._max_attempts} conflicting attempts; last: {reason}"
        )

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory page from the latest committed state (one autocommit SELECT)."""
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        position = decode_storage_query_cursor(command)
        statement, params = scan_statement(command, position, command.limit + 1, exclusive=False)
        conn = self._connections.acquire()
        try:
            rows = [(sort, ekey) for sort, ekey in conn.execute(statement, params)]
        except psycopg.OperationalError as error:
            if not connection_lost(error, conn):
                raise
            raise StorageUnavailableError(f"the postgres connection failed: {_one_line(error)}") from error
        finally:
            self._connections.release(conn)
        return page_result(command, rows, lookahead=True)

    def close(self) -> None:
        """Close this instance's connections; the store and other instances are unaffected."""
        self._connections.close()
