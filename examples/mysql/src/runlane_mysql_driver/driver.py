"""A Runlane storage driver on MariaDB (InnoDB): SERIALIZABLE locking attempts, deadlock victims replayed.

How it keeps the contract
-------------------------
Every attempt is one InnoDB transaction at ``SERIALIZABLE``. Unlike
PostgreSQL's snapshot-based serializable isolation, InnoDB serializes by
locking: every read here is a locking read (``LOCK IN SHARE MODE``, which
InnoDB would also apply implicitly at this level), so the rows an attempt
read, the gaps where a key it found absent would go, and the index range it
scanned (next-key locks) are held in shared mode until the attempt ends. A
competitor that wants to change any of them waits. Two attempts that wait for
each other form a deadlock that InnoDB detects at once: it rolls one of them
back entirely (error 1213) and the driver replays that callback from the
start, on a fresh transaction. A lock wait that exceeds
``innodb_lock_wait_timeout`` (error 1205; InnoDB rolls back only the statement)
is treated the same way: the driver rolls the whole attempt back and replays
it. So a correct history from this driver typically shows competitors that
*waited* for the first attempt to end, and attempts that were chosen as
deadlock victims and replayed after a competitor's commits: both are
serializable.

Mutations are staged in memory while the callback runs and written after it
returns; each replace/delete is conditioned on the version the attempt read
(redundant while the shared lock is held, kept as a second fence) and a
create that meets an existing key (error 1062) loses the attempt.

Every query names its index (``FORCE INDEX``): a small table would otherwise
be read by a full scan, and a locking full scan locks every row of the table,
turning every concurrent write into a wait.

Versions come from a MariaDB ``SEQUENCE``: ``NEXTVAL`` is not transactional,
so a value drawn by an attempt that rolled back is never handed out again
(gaps are harmless: versions are compared for equality only).

Exclusive candidates: the index entries of the range are read in order
(shared locks, like every read) and their records are then claimed with
``SELECT ... FOR UPDATE SKIP LOCKED`` on the records table, chunk by chunk,
until the page is full or the range is exhausted. Only returned records are
locked exclusively; a record another attempt holds (or is reading under a
shared lock) is skipped. MariaDB's ``SKIP LOCKED`` on a range scan would also
lock the first row past the range (InnoDB's next-key lookahead), which is why
the records are claimed by key rather than by scanning with ``SKIP LOCKED``.

Every stored column is binary (``VARBINARY``/``LONGBLOB``), so comparisons
are byte comparisons: encoded keys and sorts are ASCII, partitions and range
bounds are stored or compared as UTF-8 bytes, whose order is code point order.

Broken connections. A connection that fails before ``COMMIT`` loses nothing
(the server rolls back a transaction whose client is gone) and is reported
as ``StorageUnavailableError``. One that fails while ``COMMIT`` is in flight
is ambiguous; this driver has no way to ask the server afterwards and reports
``StorageCommitUnknownError`` (never a replay on a guess).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

import pymysql
import pymysql.cursors
from pymysql.constants import CLIENT

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
    "RETRYABLE_ERRORS",
    "ConnectionPool",
    "MysqlServer",
    "MysqlStorageDriver",
    "MysqlTransaction",
    "create_database",
    "drop_database",
    "mysql_profile",
    "open_connection",
]

T = TypeVar("T")

#: ER_LOCK_DEADLOCK (the whole transaction was rolled back), ER_LOCK_WAIT_TIMEOUT (the statement was;
#: the driver rolls back the rest), ER_CHECKREAD (a snapshot conflict some MariaDB settings report):
#: each means "replay this attempt".
RETRYABLE_ERRORS = frozenset({1213, 1205, 1020})
_DUPLICATE_KEY = 1062
#: Client-side error numbers for a connection that is gone (CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR,
#: CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_COMMANDS_OUT_OF_SYNC) and the server's ER_CONNECTION_KILLED.
_CONNECTION_ERRORS = frozenset({2002, 2003, 2006, 2013, 2014, 1927})

_TABLES = (
    # 3072 bytes is InnoDB's longest index key: the record key alone, or the four index columns together.
    "CREATE TABLE records (k VARBINARY(3072) NOT NULL PRIMARY KEY, version BIGINT UNSIGNED NOT NULL, "
    "document LONGBLOB NOT NULL) ENGINE=InnoDB ROW_FORMAT=DYNAMIC",
    "CREATE TABLE index_entries (idx VARBINARY(64) NOT NULL, part VARBINARY(1000) NOT NULL, "
    "sort VARBINARY(1000) NOT NULL, k VARBINARY(1000) NOT NULL, PRIMARY KEY (idx, part, sort, k), "
    "KEY by_key (k)) ENGINE=InnoDB ROW_FORMAT=DYNAMIC",
    "CREATE SEQUENCE versions START WITH 1 MINVALUE 1 INCREMENT BY 1",
)


def mysql_profile(
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


# -- connections ------------------------------------------------------------------------------------

if TYPE_CHECKING:
    Connection = pymysql.connections.Connection[pymysql.cursors.Cursor]
else:
    Connection = pymysql.connections.Connection


class MysqlServer:
    """Where the server is and how to log in (a picklable value; the password is never printed)."""

    __slots__ = ("host", "password", "port", "user")

    def __init__(self, host: str, port: int, user: str, password: str) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.password = password

    def at(self, host: str, port: int) -> MysqlServer:
        """The same login at another address (the faults suite's proxy)."""
        return MysqlServer(host, port, self.user, self.password)

    def __repr__(self) -> str:
        return f"mysql://{self.user}@{self.host}:{self.port}"


#: ``--option isolation=...``: the InnoDB level every session runs at. Only ``serializable`` keeps the
#: contract (its plain reads take shared locks); the weaker two exist to show what a driver that
#: relies on a weaker level gets from the suites (they must refuse it).
ISOLATION_LEVELS = {
    "serializable": "SERIALIZABLE",
    "repeatable_read": "REPEATABLE-READ",
    "read_committed": "READ-COMMITTED",
}


def open_connection(
    server: MysqlServer,
    database: str | None,
    *,
    lock_wait_timeout: int = 10,
    connect_timeout: int = 5,
    isolation: str = "serializable",
) -> Connection:
    """An autocommit connection (attempts begin explicitly) at SERIALIZABLE on ``database``.

    ``FOUND_ROWS`` makes an UPDATE report the rows it matched, so a
    conditional replace is judged by its WHERE clause alone;
    ``MULTI_STATEMENTS`` lets an attempt begin with its first read and write
    all its mutations in one round trip.
    """
    conn: Connection = pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=database,
        autocommit=True,
        client_flag=CLIENT.FOUND_ROWS | CLIENT.MULTI_STATEMENTS,
        connect_timeout=connect_timeout,
        charset="utf8mb4",
        # Both settings in the connect round trip itself.
        init_command=(
            f"SET SESSION tx_isolation = '{ISOLATION_LEVELS[isolation]}', "
            f"innodb_lock_wait_timeout = {int(lock_wait_timeout)}"
        ),
    )
    return conn


def create_database(conn: Connection, database: str) -> None:
    """Create one store: a database with the records and index-entry tables and the versions sequence."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET binary")
        for statement in _TABLES:
            cur.execute(
                statement.replace("CREATE TABLE ", f"CREATE TABLE `{database}`.", 1).replace(
                    "CREATE SEQUENCE ", f"CREATE SEQUENCE `{database}`.", 1
                )
            )


def drop_database(conn: Connection, database: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


# -- encodings between contract values and columns --------------------------------------------------


def _utf8(text: str) -> bytes:
    """Arbitrary text (NUL, lone surrogates included) as bytes whose order is code point order."""
    return text.encode("utf-8", "surrogatepass")


def _text(column: bytes) -> str:
    return column.decode("utf-8", "surrogatepass")


@lru_cache(maxsize=8192)
def key_from_encoded(encoded: str) -> StorageRecordKey:
    table, ident = storage_record_key_codec.decode_parts(encoded)
    return StorageRecordKey(table, ident)  # type: ignore[arg-type]


def stored_record(
    key: StorageRecordKey, version: int, document: bytes, entries: Sequence[tuple[bytes, bytes, bytes]]
) -> StoredRecord:
    """Rebuild a committed record from its rows; anything that does not validate is corruption."""
    try:
        return StoredRecord(
            key,
            StorageRecordVersion(str(version)),
            parse_storage_document(_text(document)),
            tuple(
                StorageIndexEntry(idx.decode("ascii"), _text(part), sort.decode("ascii"))  # type: ignore[arg-type]
                for idx, part, sort in entries
            ),
        )
    except (StorageValidationError, UnicodeDecodeError) as error:
        raise StorageCorruptionError(f"stored record {key} does not validate: {error}") from error


#: One key's record and index entries (a const lookup on the primary key, then the entries by key).
_FETCH = (
    "SELECT r.k, r.version, r.document, e.idx, e.part, e.sort FROM records r FORCE INDEX (PRIMARY) "
    "LEFT JOIN index_entries e FORCE INDEX (by_key) ON e.k = r.k WHERE r.k = %s LOCK IN SHARE MODE"
)
#: Claim one record if no other attempt holds it.
_CLAIM = "SELECT k FROM records FORCE INDEX (PRIMARY) WHERE k = %s FOR UPDATE SKIP LOCKED"


def _by_key(select: str, count: int) -> str:
    """``select`` (one key) for ``count`` keys in one statement: a UNION ALL of single-key lookups.

    ``k IN (...)`` would be simpler, but on a small table the optimizer reads
    an IN list by scanning the whole index, and a locking scan locks every
    row it passes: each attempt would lock the entire table. A single-key
    lookup locks that key (or, when absent, the gap where it would go) only.
    """
    return " UNION ALL ".join([f"({select})"] * count)


def fetch_records(cur: AttemptCursor, ekeys: Sequence[str]) -> dict[str, StoredRecord]:
    """The committed records among ``ekeys`` with their index entries, share-locked, in one round trip.

    A key that is absent leaves a shared gap lock where it would go, so a
    competitor's create of it waits for this attempt.
    """
    cur.execute(_by_key(_FETCH, len(ekeys)), [key.encode("ascii") for key in ekeys])
    rows: dict[str, tuple[int, bytes, list[tuple[bytes, bytes, bytes]]]] = {}
    for k, version, document, idx, part, sort in cur.fetchall():
        ekey = k.decode("ascii")
        _, _, entries = rows.setdefault(ekey, (int(version), document, []))
        if idx is not None:
            entries.append((idx, part, sort))
    return {
        ekey: stored_record(key_from_encoded(ekey), version, document, entries)
        for ekey, (version, document, entries) in rows.items()
    }


def scan_statement(
    command: QueryRecordsCommand, position: StorageCursorPosition | None, fetch: int, *, lock: str
) -> tuple[str, list[object]]:
    """The SQL for one page of an index partition in contract order, and its parameters."""
    clauses = ["idx = %s", "part = %s"]
    params: list[object] = [command.index.value.encode("ascii"), _utf8(command.partition)]
    lower, upper = command.range.lower, command.range.upper
    if lower is not None:
        clauses.append("sort >= %s" if lower.inclusive else "sort > %s")
        params.append(_utf8(lower.value))
    if upper is not None:
        clauses.append("sort <= %s" if upper.inclusive else "sort < %s")
        params.append(_utf8(upper.value))
    descending = command.direction is StorageQueryDirection.DESCENDING
    if position is not None:
        # Spelled out instead of a row comparison, so the optimizer keeps it a range of the index.
        op = "<" if descending else ">"
        clauses.append(f"(sort {op} %s OR (sort = %s AND k {op} %s))")
        sort = _utf8(position.sort)
        params.extend((sort, sort, _utf8(position.key)))
    order = "DESC" if descending else "ASC"
    params.append(fetch)
    statement = (
        f"SELECT sort, k FROM index_entries FORCE INDEX (PRIMARY) WHERE {' AND '.join(clauses)} "
        f"ORDER BY sort {order}, k {order} LIMIT %s {lock}"
    )
    return statement, params


def _references(rows: Sequence[tuple[bytes, bytes]]) -> list[StorageIndexReference]:
    return [
        StorageIndexReference(key_from_encoded(k.decode("ascii")), sort.decode("ascii")) for sort, k in rows
    ]


# -- one attempt ------------------------------------------------------------------------------------


class AttemptCursor:
    """A cursor whose first statement also begins the attempt's transaction (one round trip, not two).

    ``START TRANSACTION`` travels in front of the attempt's first statement
    (a multi-statement request); nothing is begun for an attempt that never
    reaches the server, so it has nothing to commit or roll back either.
    """

    def __init__(self, cur: pymysql.cursors.Cursor, attempt: MysqlTransaction) -> None:
        self._cur = cur
        self._attempt = attempt

    def execute(self, statement: str, params: Sequence[object] = ()) -> int:
        """Run ``statement`` (maybe several, ``;``-separated); the affected or matched rows of the first."""
        if self._attempt.open:
            return self._cur.execute(statement, params)
        self._attempt.open = True
        self._cur.execute("START TRANSACTION; " + statement, params)
        self._cur.nextset()
        return self._cur.rowcount

    def fetchall(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(self._cur.fetchall())

    def results(self) -> list[int]:
        """The affected or matched row count of every remaining result of the last request, in order."""
        counts = [self._cur.rowcount]
        while self._cur.nextset():
            counts.append(self._cur.rowcount)
        return counts


class _AttemptLost(StorageConflictError):
    """Internal: the server refused this attempt (deadlock victim, lock wait timeout, lost condition)."""


def _errno(error: BaseException) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def connection_lost(error: BaseException) -> bool:
    """Whether ``error`` means the connection itself failed (not the server refusing a statement)."""
    if isinstance(error, pymysql.err.InterfaceError):
        return True
    return isinstance(error, pymysql.err.OperationalError) and _errno(error) in _CONNECTION_ERRORS


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


class MysqlTransaction:
    """One attempt: an InnoDB transaction at SERIALIZABLE on its own connection.

    The contract's attempt rules (one thread at a time, nothing after the
    end, sealing, the frozen ``now()``, what may be mutated, metering) are
    kept by ``StorageAttemptRules``; this class talks to the server.
    """

    def __init__(self, conn: Connection, limits: StorageLimits, clock: Clock, *, exclusive: bool) -> None:
        self._conn = conn
        self._exclusive_offered = exclusive
        self._rules = StorageAttemptRules(limits, clock)
        #: True from the attempt's first statement (which begins its transaction) until it ends.
        self.open = False
        self.lost: BaseException | None = None
        self.broken: BaseException | None = None

    def _server(self, action: Callable[[AttemptCursor], T]) -> T:
        """Run statements; a deadlock or lock timeout dooms the attempt to a replay, a broken
        connection dooms it to ``StorageUnavailableError``."""
        if self.broken is not None:
            raise StorageUnavailableError(f"this attempt's connection failed: {_one_line(self.broken)}")
        if self.lost is not None:
            raise _AttemptLost(f"this attempt already lost a lock conflict: {self.lost}")
        try:
            with self._conn.cursor() as cur:
                return action(AttemptCursor(cur, self))
        except pymysql.err.Error as error:
            if _errno(error) in RETRYABLE_ERRORS:
                self.lost = error
                raise _AttemptLost(f"the server chose this attempt as a victim: {error}") from error
            if connection_lost(error):
                self.broken = error
                raise StorageUnavailableError(
                    f"the mysql connection failed; nothing was committed: {_one_line(error)}"
                ) from error
            raise

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Each key's committed record (None when absent), share-locked; positions and duplicates kept."""
        with self._rules:
            keys = self._rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            if not ekeys:
                return []
            found = self._server(lambda cur: fetch_records(cur, list(dict.fromkeys(ekeys))))
            results = [found.get(ekey) for ekey in ekeys]
            self._rules.record_reads(ekeys, results)
            return results

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in (sort, key) order; the scanned range stays share-locked."""
        with self._rules:
            exclusive = self._rules.begin_query(command, mode) is StorageCandidateMode.EXCLUSIVE
            if exclusive and not self._exclusive_offered:
                raise StorageUnsupportedError("exclusive candidates are not enabled for this mysql store")
            if exclusive:
                items = self._server(lambda cur: self._claim(cur, command))
                cursor = (
                    encode_storage_query_cursor(command, items[-1]) if len(items) == command.limit else None
                )
                return QueryRecordsResult(tuple(items), cursor)
            position = decode_storage_query_cursor(command)
            statement, params = scan_statement(
                command, position, command.limit + 1, lock="LOCK IN SHARE MODE"
            )

            def scan(cur: AttemptCursor) -> list[tuple[bytes, bytes]]:
                cur.execute(statement, params)
                return list(cur.fetchall())

            refs = _references(self._server(scan))
            items = refs[: command.limit]
            cursor = encode_storage_query_cursor(command, items[-1]) if len(refs) > command.limit else None
            return QueryRecordsResult(tuple(items), cursor)

    def _claim(self, cur: AttemptCursor, command: QueryRecordsCommand) -> list[StorageIndexReference]:
        """Walk the range in order, claiming records (``FOR UPDATE SKIP LOCKED``) until the page is full."""
        position = decode_storage_query_cursor(command)
        claimed: list[StorageIndexReference] = []
        while len(claimed) < command.limit:
            wanted = command.limit - len(claimed)
            statement, params = scan_statement(command, position, wanted, lock="LOCK IN SHARE MODE")
            cur.execute(statement, params)
            refs = _references(list(cur.fetchall()))
            if not refs:
                break
            cur.execute(_by_key(_CLAIM, len(refs)), [ref.key.encoded.encode("ascii") for ref in refs])
            held = {row[0].decode("ascii") for row in cur.fetchall()}
            claimed.extend(ref for ref in refs if ref.key.encoded in held)
            if len(refs) < wanted:
                break
            last = refs[-1]
            position = StorageCursorPosition(last.sort, last.key.encoded)
        return claimed

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
        raise StorageUnsupportedError("the mysql driver does not offer append")

    # -- ending ----------------------------------------------------------------------------------

    def _rollback(self) -> None:
        self._rules.end()
        if self.open and self.broken is None:
            self.open = False
            try:
                self._conn.rollback()
            except pymysql.err.Error as error:
                self.broken = error

    def _commit(self) -> None:
        """Write every staged mutation and commit; ``_AttemptLost`` means "replay"."""
        try:
            self._rules.end_for_commit()
            if self.lost is not None:
                raise _AttemptLost(f"the server refused this attempt: {self.lost}")
            if self.broken is not None:
                raise StorageUnavailableError(
                    f"nothing was committed: this attempt's connection failed: {_one_line(self.broken)}"
                )
            self._rules.check_within_limits()
            if not self._rules.mutated and not self.open:
                return  # nothing reached the server: nothing to commit
            try:
                if self._rules.mutated:
                    self._server(self._flush)
            except pymysql.err.IntegrityError as error:
                if _errno(error) == _DUPLICATE_KEY:
                    raise _AttemptLost(f"a created key appeared meanwhile: {error}") from error
                raise
            try:
                self._conn.commit()
                self.open = False
            except pymysql.err.Error as error:
                if _errno(error) in RETRYABLE_ERRORS:
                    raise _AttemptLost(f"the server refused this attempt at commit: {error}") from error
                if not connection_lost(error):
                    raise
                self.broken = error
                self.open = False
                raise StorageCommitUnknownError(
                    "the mysql connection failed during COMMIT; whether it took effect cannot be "
                    f"established: {_one_line(error)}"
                ) from error
        except BaseException:
            self._rollback()
            raise

    def _flush(self, cur: AttemptCursor) -> None:
        """Write every staged mutation in one request, then check each conditional statement's count.

        Versions are drawn in SQL (``NEXTVAL`` per written row). Nothing here
        commits: ``COMMIT`` is sent only after every replace and delete matched
        exactly the version it was staged from.
        """
        rules = self._rules
        statements: list[str] = []
        params: list[object] = []
        expected: list[int | None] = []  # per statement: the matched rows it must report (None: any)
        entries: list[tuple[bytes, bytes, bytes, bytes]] = []
        if rules.creates:
            statements.append(
                "INSERT INTO records (k, version, document) VALUES "
                + ", ".join(["(%s, NEXTVAL(versions), %s)"] * len(rules.creates))
            )
            for ekey, record in rules.creates:
                params.extend((ekey.encode("ascii"), _utf8(record.document.text)))
                entries.extend(_entry_rows(ekey, record))
            expected.append(None)  # a created key that exists fails with 1062 instead
        moved: list[bytes] = []
        for ekey, current, record in rules.replaces:
            key = ekey.encode("ascii")
            statements.append(
                "UPDATE records SET version = NEXTVAL(versions), document = %s WHERE k = %s AND version = %s"
            )
            params.extend((_utf8(record.document.text), key, int(current.version.value)))
            expected.append(1)
            moved.append(key)
            entries.extend(_entry_rows(ekey, record))
        for ekey, current in rules.deletes:
            key = ekey.encode("ascii")
            statements.append("DELETE FROM records WHERE k = %s AND version = %s")
            params.extend((key, int(current.version.value)))
            expected.append(1)
            moved.append(key)
        for key in moved:
            # One statement per key (an IN list could become a locking scan of the whole index).
            statements.append("DELETE FROM index_entries WHERE k = %s")
            params.append(key)
            expected.append(None)
        if entries:
            statements.append(
                "INSERT INTO index_entries (idx, part, sort, k) VALUES "
                + ", ".join(["(%s, %s, %s, %s)"] * len(entries))
            )
            params.extend(value for row in entries for value in row)
            expected.append(None)
        cur.execute("; ".join(statements), params)
        counts = cur.results()
        for count, wanted in zip(counts, expected, strict=True):
            if wanted is not None and count != wanted:
                raise _AttemptLost("a record to replace or delete changed after this attempt read it")


def _entry_rows(ekey: str, record: NewStorageRecord) -> list[tuple[bytes, bytes, bytes, bytes]]:
    key = ekey.encode("ascii")
    return [
        (entry.index.value.encode("ascii"), _utf8(entry.partition), entry.sort.encode("ascii"), key)
        for entry in record.indexes
    ]


# -- the driver ------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ConnectionPool:
    """Idle connections to one server, shared by the instances of a harness across its stores.

    Opening a connection costs several round trips (handshake, login,
    settings); a suite opens two or more instances for every check and every
    generated history. A connection an instance no longer needs comes back
    here, outside any transaction, and the next instance takes it and
    switches it to its own database (one round trip). Only connections to the
    same server (and settings) are pooled; the faults suite's proxied
    instances open their own.
    """

    def __init__(
        self,
        server: MysqlServer,
        *,
        lock_wait_timeout: int = 10,
        keep: int = 16,
        isolation: str = "serializable",
    ) -> None:
        self._server = server
        self._lock_wait_timeout = lock_wait_timeout
        self._isolation = isolation
        self._keep = keep
        self._lock = threading.Lock()
        self._idle: list[Connection] = []

    def take(self, database: str) -> Connection:
        """A connection on ``database``: a pooled one switched to it, or a new one."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            try:
                conn.select_db(database)
                return conn
            except pymysql.err.Error:
                with contextlib.suppress(pymysql.err.Error):
                    conn.close()
        return open_connection(
            self._server, database, lock_wait_timeout=self._lock_wait_timeout, isolation=self._isolation
        )

    def give(self, conn: Connection) -> None:
        """Take back a healthy connection that is outside any transaction."""
        with self._lock:
            if conn.open and len(self._idle) < self._keep:
                self._idle.append(conn)
                return
        with contextlib.suppress(pymysql.err.Error):
            conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(pymysql.err.Error):
                conn.close()


class _Connections:
    """This instance's connections: one per concurrently running call, reused afterwards."""

    def __init__(self, opener: Callable[[], Connection], giver: Callable[[Connection], None] | None) -> None:
        self._opener = opener
        self._giver = giver
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._closed = False
        self._idle.append(self.open())

    def acquire(self) -> Connection:
        with self._lock:
            if self._closed:
                raise StorageUsageError("this mysql driver instance was closed")
            if self._idle:
                return self._idle.pop()
        return self.open()

    def open(self) -> Connection:
        """A new connection; an unreachable server is ``StorageUnavailableError``."""
        try:
            return self._opener()
        except pymysql.err.OperationalError as error:
            raise StorageUnavailableError(f"cannot connect to mysql: {_one_line(error)}") from error

    def release(self, conn: Connection, *, healthy: bool) -> None:
        with self._lock:
            if healthy and not self._closed and conn.open:
                self._idle.append(conn)
                return
        if healthy and self._giver is not None:
            self._giver(conn)
            return
        with contextlib.suppress(pymysql.err.Error):
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            if self._giver is not None:
                self._giver(conn)
                continue
            with contextlib.suppress(pymysql.err.Error):
                conn.close()


class MysqlStorageDriver:
    """One instance over one store (a database). Instances see each other's commits at once."""

    def __init__(
        self,
        server: MysqlServer,
        database: str,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_candidates: bool = False,
        lock_wait_timeout: int = 10,
        pool: ConnectionPool | None = None,
        isolation: str = "serializable",
    ) -> None:
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = mysql_profile(limits, exclusive_candidates=exclusive_candidates)
        self._max_attempts = max_transaction_attempts
        if pool is None:
            self._connections = _Connections(
                lambda: open_connection(
                    server, database, lock_wait_timeout=lock_wait_timeout, isolation=isolation
                ),
                None,
            )
        else:
            self._connections = _Connections(lambda: pool.take(database), pool.give)

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    def transaction(self, callback: Callable[[MysqlTransaction], T]) -> T:
        """Run ``callback`` in SERIALIZABLE attempts until one commits; return that attempt's value.

        A deadlock, a lock wait timeout or a lost staged condition replays the
        callback; after ``max_transaction_attempts`` lost attempts
        ``StorageConflictError`` is raised. A callback error rolls back and
        propagates unchanged, unless the attempt had already lost (then the
        error is a consequence of the lost race, and the callback is replayed).
        """
        reason = "no attempt was made"
        for _attempt in range(self._max_attempts):
            conn = self._connections.acquire()
            attempt: MysqlTransaction | None = None
            try:
                attempt = MysqlTransaction(
                    conn, self._profile.limits, self._clock, exclusive=self._profile.exclusive_candidates
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
                healthy = attempt is None or (attempt.broken is None and not attempt.open)
                self._connections.release(conn, healthy=healthy and conn.open)
        raise StorageConflictError(
            f"transaction gave up after {self._max_attempts} conflicting attempts; last: {reason}"
        )

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory page from the latest committed state (one autocommit, non-locking SELECT)."""
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        position = decode_storage_query_cursor(command)
        statement, params = scan_statement(command, position, command.limit + 1, lock="")
        conn = self._connections.acquire()
        healthy = True
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
                refs = _references(list(cur.fetchall()))
        except pymysql.err.Error as error:
            if not connection_lost(error):
                raise
            healthy = False
            raise StorageUnavailableError(f"the mysql connection failed: {_one_line(error)}") from error
        finally:
            self._connections.release(conn, healthy=healthy)
        items = refs[: command.limit]
        cursor = encode_storage_query_cursor(command, items[-1]) if len(refs) > command.limit else None
        return QueryRecordsResult(tuple(items), cursor)

    def close(self) -> None:
        """Close this instance's connections; the store and other instances are unaffected."""
        self._connections.close()
