"""An asyncio Runlane storage driver on PostgreSQL through asyncpg: SERIALIZABLE attempts, replayed.

The storage design is the one examples/postgres uses, written as coroutines:

* every attempt is one PostgreSQL transaction at ``SERIALIZABLE``; reads run
  at once and serializable snapshot isolation (SSI) tracks them, absent keys
  and empty ranges included (sessions set ``enable_seqscan = off`` so reads
  take page-level predicate locks rather than whole-relation ones);
* mutations are staged while the callback runs and written after it returns
  in a few bulk ``unnest`` statements, each replace/delete conditioned on the
  version the attempt read;
* a serialization failure or deadlock (SQLSTATE 40001, 40P01), a created key
  that appeared meanwhile (23505) or a version that moved rolls the attempt
  back and replays the callback on a fresh snapshot, up to
  ``max_transaction_attempts`` times; then ``StorageConflictError``. A read
  the server refused dooms its attempt before the error reaches the callback,
  so a callback that swallows it is still replayed, never committed;
* a connection that fails before ``COMMIT`` loses nothing and is
  ``StorageUnavailableError``; one that fails while ``COMMIT`` is in flight is
  resolved by asking the server about the attempt's transaction id
  (``txid_status``) after ending the old backend if it still runs that very
  transaction: committed returns the value, aborted replays, anything else is
  ``StorageCommitUnknownError``;
* versions come from a sequence, so they are never reused;
* exclusive candidates are ``FOR UPDATE OF records SKIP LOCKED``, held until
  the attempt ends, with no lookahead row locked.

What is particular to asyncio: an attempt's calls may overlap (two tasks on
one attempt); ``StorageAttemptRules`` refuses the second with
``StorageConcurrentUseError`` because its guard is held across the awaited
statement. The injected client clock is called off the loop, so a clock
that blocks holds up only its own attempt. A transaction cancelled while it
runs (the caller's timeout) terminates its connection: the server then rolls
the transaction back, and a half-used connection never returns to the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar

import asyncpg

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
    "AsyncpgStorageDriver",
    "AsyncpgTransaction",
    "asyncpg_profile",
    "connection_lost",
    "create_schema",
    "open_connection",
]

T = TypeVar("T")

#: serialization_failure, deadlock_detected: the server's way of saying "replay this attempt".
RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
_UNIQUE_VIOLATION = "23505"
#: How long resolving a lost COMMIT waits for the old backend to go away (milliseconds).
_TERMINATE_WAIT_MS = 5000
#: Seconds to establish a connection before the server counts as unreachable.
CONNECT_TIMEOUT = 5.0

_TABLES = (
    'CREATE TABLE {schema}.records (key text COLLATE "C" PRIMARY KEY, version bigint NOT NULL, '
    "document text NOT NULL)",
    'CREATE TABLE {schema}.index_entries (idx text COLLATE "C" NOT NULL, '
    'partition text COLLATE "C" NOT NULL, sort text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, '
    "PRIMARY KEY (idx, partition, sort, key))",
    "CREATE INDEX index_entries_by_key ON {schema}.index_entries (key)",
    "CREATE SEQUENCE {schema}.versions AS bigint MINVALUE 1",
)


def asyncpg_profile(
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


def quote_identifier(name: str) -> str:
    """A double-quoted SQL identifier (schema names are generated, but quoting keeps that a non-issue)."""
    return '"' + name.replace('"', '""') + '"'


async def open_connection(
    dsn: str, schema: str, *, host: str | None = None, port: int | None = None
) -> asyncpg.Connection:
    """A connection whose search path is the store; ``host``/``port`` override the DSN's (fault proxy)."""
    overrides: dict[str, Any] = {}
    if host is not None:
        overrides.update(host=host, port=port)
    return await asyncpg.connect(
        dsn,
        timeout=CONNECT_TIMEOUT,
        server_settings={"search_path": schema, "enable_seqscan": "off"},
        statement_cache_size=256,
        **overrides,
    )


async def create_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Create one store: a schema with the records, index entries and versions objects."""
    name = quote_identifier(schema)
    async with conn.transaction():
        await conn.execute(f"CREATE SCHEMA {name}")
        for statement in _TABLES:
            await conn.execute(statement.format(schema=name))


# -- encodings between contract values and columns --------------------------------------------------


def encode_partition(partition: str) -> str:
    """Partitions are arbitrary text (NUL, lone surrogates); hex keeps every column ASCII."""
    return partition.encode("utf-8", "surrogatepass").hex()


def decode_partition(column: str) -> str:
    return bytes.fromhex(column).decode("utf-8", "surrogatepass")


def sql_bound(value: str) -> str:
    """An ASCII, NUL-free bound ordering every canonical sort value exactly as ``value`` does.

    Canonical sorts use only ``0-9a-f/``; at the first NUL or non-ASCII
    character every sort sharing the prefix is already placed, so one ASCII
    stand-in that no sort contains replaces the tail.
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
    "FROM records r WHERE r.key = ANY($1::text[])"
)


async def fetch_records(conn: asyncpg.Connection, ekeys: Sequence[str]) -> dict[str, StoredRecord]:
    """The committed records among ``ekeys`` with their index entries, in one round trip."""
    found: dict[str, StoredRecord] = {}
    for ekey, version, document, entries in await conn.fetch(_FETCH, list(ekeys)):
        found[ekey] = stored_record(key_from_encoded(ekey), version, document, entries or ())
    return found


def scan_statement(
    command: QueryRecordsCommand, position: StorageCursorPosition | None, fetch: int, *, exclusive: bool
) -> tuple[str, list[object]]:
    """The SQL for one page of an index partition in contract order, and its parameters."""
    params: list[object] = [command.index.value, encode_partition(command.partition)]

    def slot(value: object) -> str:
        params.append(value)
        return f"${len(params)}"

    clauses = ["e.idx = $1", "e.partition = $2"]
    lower, upper = command.range.lower, command.range.upper
    if lower is not None:
        clauses.append(("e.sort >= " if lower.inclusive else "e.sort > ") + slot(sql_bound(lower.value)))
    if upper is not None:
        clauses.append(("e.sort <= " if upper.inclusive else "e.sort < ") + slot(sql_bound(upper.value)))
    descending = command.direction is StorageQueryDirection.DESCENDING
    if position is not None:
        sort_slot, key_slot = slot(position.sort), slot(position.key)
        clauses.append(f"(e.sort, e.key) {'<' if descending else '>'} ({sort_slot}, {key_slot})")
    order = "DESC" if descending else "ASC"
    limit = slot(fetch)
    where = " AND ".join(clauses)
    if exclusive:
        statement = (
            f"SELECT e.sort, e.key FROM index_entries e JOIN records r ON r.key = e.key WHERE {where} "
            f'ORDER BY e.sort COLLATE "C" {order}, e.key COLLATE "C" {order} LIMIT {limit} '
            "FOR UPDATE OF r SKIP LOCKED"
        )
    else:
        statement = (
            f"SELECT e.sort, e.key FROM index_entries e WHERE {where} "
            f'ORDER BY e.sort COLLATE "C" {order}, e.key COLLATE "C" {order} LIMIT {limit}'
        )
    return statement, params


def page_result(
    command: QueryRecordsCommand, rows: Sequence[tuple[str, str]], *, lookahead: bool
) -> QueryRecordsResult:
    """A page from the fetched rows: with ``lookahead`` the extra row says a cursor is due."""
    items = tuple(StorageIndexReference(key_from_encoded(ekey), sort) for sort, ekey in rows[: command.limit])
    more = len(rows) > command.limit if lookahead else (bool(items) and len(items) == command.limit)
    cursor = encode_storage_query_cursor(command, items[-1]) if more else None
    return QueryRecordsResult(items, cursor)


# -- errors ------------------------------------------------------------------------------------------


class _AttemptLost(StorageConflictError):
    """Internal: the server refused this attempt (serialization failure, deadlock, lost condition)."""


def _sqlstate(error: BaseException) -> str | None:
    state = getattr(error, "sqlstate", None)
    return state if isinstance(state, str) else None


def connection_lost(error: BaseException, conn: asyncpg.Connection | None = None) -> bool:
    """Whether ``error`` means the connection itself failed, not that the server refused a statement.

    asyncpg reports a dropped socket as ``ConnectionDoesNotExistError`` (or
    an ``OSError``); SQLSTATE class 08 (connection exception) and 57P
    (operator intervention: the backend was terminated) come from the server.
    """
    if isinstance(error, (OSError, asyncpg.ConnectionDoesNotExistError, asyncpg.PostgresConnectionError)):
        return True
    state = _sqlstate(error)
    if state is not None and (state.startswith("08") or state.startswith("57P")):
        return True
    return isinstance(error, asyncpg.InterfaceError) and (conn is None or conn.is_closed())


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _rowcount(status: str) -> int:
    """The row count at the end of a command tag such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[-1])


async def resolve_commit(
    open_conn: Callable[[], Awaitable[asyncpg.Connection]], xid: int, backend_pid: int
) -> bool | None:
    """After a COMMIT whose answer was lost: whether transaction ``xid`` committed, ``None`` if unknowable.

    The old backend may still be running the transaction (and could still
    commit it), so it is terminated first, and waited for, but only while it
    runs that very transaction, so no unrelated session is touched.
    """
    try:
        conn = await open_conn()
        try:
            await conn.execute(
                "SELECT pg_terminate_backend(pid, $1) FROM pg_stat_activity "
                "WHERE pid = $2 AND backend_xid::text = $3",
                _TERMINATE_WAIT_MS,
                backend_pid,
                str(xid & 0xFFFFFFFF),
            )
            status = await conn.fetchval("SELECT txid_status($1)", xid)
        finally:
            await conn.close()
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, StorageUnavailableError, TimeoutError):
        return None
    if status == "committed":
        return True
    if status == "aborted":
        return False
    return None


# -- one attempt -------------------------------------------------------------------------------------


class AsyncpgTransaction:
    """One attempt: a SERIALIZABLE transaction on its own connection; every method is a coroutine.

    The contract's attempt rules are kept by ``StorageAttemptRules``, whose
    guard is held across each awaited statement, so an overlapping call of
    the same attempt is refused rather than interleaved.
    """

    def __init__(
        self,
        conn: asyncpg.Connection,
        limits: StorageLimits,
        clock: Clock,
        *,
        exclusive: bool,
        reconnect: Callable[[], Awaitable[asyncpg.Connection]],
    ) -> None:
        self._conn = conn
        self._exclusive_offered = exclusive
        self._rules = StorageAttemptRules(limits, clock)
        self._reconnect = reconnect
        self.lost: BaseException | None = None
        self.broken: BaseException | None = None

    async def _server(self, action: Awaitable[T]) -> T:
        """Await a statement; a serialization failure dooms the attempt to a replay, a broken connection
        to ``StorageUnavailableError``."""
        if self.broken is not None:
            _close_awaitable(action)
            raise StorageUnavailableError(f"this attempt's connection failed: {_one_line(self.broken)}")
        if self.lost is not None:
            _close_awaitable(action)
            raise _AttemptLost(f"this attempt already lost a serialization race: {self.lost}")
        try:
            return await action
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
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

    async def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Each key's record at this attempt's snapshot (``None`` when absent), positions kept."""
        with self._rules:
            keys = self._rules.begin_get(keys)
            ekeys = [key.encoded for key in keys]
            found = await self._server(fetch_records(self._conn, list(dict.fromkeys(ekeys))))
            results = [found.get(ekey) for ekey in ekeys]
            self._rules.record_reads(ekeys, results)
            return results

    async def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in (sort, key) order; SSI guards the scanned range."""
        with self._rules:
            exclusive = self._rules.begin_query(command, mode) is StorageCandidateMode.EXCLUSIVE
            if exclusive and not self._exclusive_offered:
                raise StorageUnsupportedError("exclusive candidates are not enabled for this asyncpg store")
            position = decode_storage_query_cursor(command)
            fetch = command.limit if exclusive else command.limit + 1
            statement, params = scan_statement(command, position, fetch, exclusive=exclusive)
            rows = await self._server(self._conn.fetch(statement, *params))
            return page_result(command, [(row[0], row[1]) for row in rows], lookahead=not exclusive)

    async def now(self) -> datetime:
        """One reading of the client clock per attempt, frozen; taken off the loop, it seals the read set."""
        with self._rules:
            return await asyncio.to_thread(self._rules.now)

    # -- mutations -------------------------------------------------------------------------------

    async def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert of a key this attempt did not read as present."""
        with self._rules:
            self._rules.stage_create(record)

    async def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """Stage a replacement of exactly ``current``, moving all its index entries."""
        with self._rules:
            self._rules.stage_replace(current, record)

    async def delete(self, current: StoredRecord) -> None:
        """Stage a delete of exactly ``current``, removing all its index entries."""
        with self._rules:
            self._rules.stage_delete(current)

    async def append(self, command: object) -> None:
        """Append is not offered: core falls back to head reads and conditional point writes."""
        raise StorageUnsupportedError("the asyncpg driver does not offer append")

    # -- ending ----------------------------------------------------------------------------------

    async def _rollback(self) -> None:
        self._rules.end()
        if not self._conn.is_closed() and self._conn.is_in_transaction():
            await self._conn.execute("ROLLBACK")

    async def _commit(self) -> None:
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
            xid: int | None = None
            try:
                if self._rules.mutated:
                    xid = int(await self._server(self._conn.fetchval("SELECT txid_current()")))
                    await self._server(self._flush())
            except asyncpg.UniqueViolationError as error:
                raise _AttemptLost(f"the server refused this attempt at commit: {error}") from error
            pid = self._conn.get_server_pid()
            try:
                await self._conn.execute("COMMIT")
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
                state = _sqlstate(error)
                if state in RETRYABLE_SQLSTATES or state == _UNIQUE_VIOLATION:
                    raise _AttemptLost(f"the server refused this attempt at commit: {error}") from error
                if not connection_lost(error, self._conn):
                    raise
                await self._commit_lost(error, xid, pid)
        except BaseException:
            await _quietly(self._rollback())
            raise

    async def _commit_lost(self, error: BaseException, xid: int | None, pid: int) -> None:
        """The connection failed while COMMIT was under way: return if it committed, else raise."""
        if xid is None:
            raise StorageUnavailableError(
                f"the connection failed while ending a read-only attempt: {_one_line(error)}"
            ) from error
        committed = await resolve_commit(self._reconnect, xid, pid)
        if committed is True:
            return
        if committed is False:
            raise _AttemptLost(f"the connection failed during COMMIT, which did not take effect: {error}")
        raise StorageCommitUnknownError(
            f"the postgres connection failed during COMMIT and whether transaction {xid} committed could "
            f"not be established: {_one_line(error)}"
        ) from error

    async def _flush(self) -> None:
        conn = self._conn
        rules = self._rules
        written = len(rules.creates) + len(rules.replaces)
        versions: list[int] = []
        if written:
            versions = [
                row[0]
                for row in await conn.fetch("SELECT nextval('versions') FROM generate_series(1, $1)", written)
            ]
        numbered = iter(versions)
        entries: list[tuple[str, str, str, str]] = []
        if rules.creates:
            rows = [(ekey, next(numbered), record.document.text) for ekey, record in rules.creates]
            await conn.execute(
                "INSERT INTO records (key, version, document) "
                "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])",
                *_columns(rows, 3),
            )
            for ekey, record in rules.creates:
                entries.extend(_entry_rows(ekey, record))
        moved: list[str] = []
        if rules.replaces:
            changes = [
                (ekey, int(current.version.value), next(numbered), record.document.text)
                for ekey, current, record in rules.replaces
            ]
            status = await conn.execute(
                "UPDATE records r SET version = u.version, document = u.document "
                "FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[]) "
                "AS u(key, old, version, document) WHERE r.key = u.key AND r.version = u.old",
                *_columns(changes, 4),
            )
            if _rowcount(status) != len(changes):
                raise _AttemptLost("a record to replace changed after this attempt read it")
            for ekey, _current, record in rules.replaces:
                moved.append(ekey)
                entries.extend(_entry_rows(ekey, record))
        if rules.deletes:
            gone = [(ekey, int(current.version.value)) for ekey, current in rules.deletes]
            status = await conn.execute(
                "DELETE FROM records r USING unnest($1::text[], $2::bigint[]) AS d(key, old) "
                "WHERE r.key = d.key AND r.version = d.old",
                *_columns(gone, 2),
            )
            if _rowcount(status) != len(gone):
                raise _AttemptLost("a record to delete changed after this attempt read it")
            moved.extend(ekey for ekey, _ in gone)
        if moved:
            await conn.execute("DELETE FROM index_entries WHERE key = ANY($1::text[])", moved)
        if entries:
            await conn.execute(
                "INSERT INTO index_entries (idx, partition, sort, key) "
                "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])",
                *_columns(entries, 4),
            )


def _columns(rows: Sequence[tuple[object, ...]], width: int) -> list[list[object]]:
    """Rows to one list per column, for ``unnest`` bulk statements."""
    return [[row[column] for row in rows] for column in range(width)]


def _entry_rows(ekey: str, record: NewStorageRecord) -> list[tuple[str, str, str, str]]:
    return [
        (entry.index.value, encode_partition(entry.partition), entry.sort, ekey) for entry in record.indexes
    ]


def _close_awaitable(action: Awaitable[object]) -> None:
    """Close a coroutine that will not be awaited, so it does not warn "never awaited"."""
    close = getattr(action, "close", None)
    if callable(close):
        close()


async def _quietly(action: Awaitable[None]) -> None:
    """Best-effort cleanup on an error path: its own failure must not mask the error being raised."""
    with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        await action


# -- the driver --------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Connections:
    """This instance's connections: one per concurrently running call, reused afterwards.

    Everything runs on one event loop, and no ``await`` separates checking
    the idle list from taking from it, so no lock is needed.
    """

    def __init__(self, opener: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._opener = opener
        self._idle: list[asyncpg.Connection] = []
        self._busy: set[asyncpg.Connection] = set()
        self._closed = False

    async def acquire(self) -> asyncpg.Connection:
        if self._closed:
            raise StorageUsageError("this asyncpg driver instance was closed")
        while self._idle:
            conn = self._idle.pop()
            if not conn.is_closed():
                self._busy.add(conn)
                return conn
        conn = await self.open()
        self._busy.add(conn)
        return conn

    async def open(self) -> asyncpg.Connection:
        """A new connection; an unreachable server is ``StorageUnavailableError``."""
        try:
            return await self._opener()
        except (OSError, TimeoutError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError) as error:
            raise StorageUnavailableError(f"cannot connect to postgres: {_one_line(error)}") from error
        except asyncpg.PostgresError as error:
            if connection_lost(error):
                raise StorageUnavailableError(f"cannot connect to postgres: {_one_line(error)}") from error
            raise

    async def release(self, conn: asyncpg.Connection, *, clean: bool) -> None:
        """Return ``conn`` for reuse; one that may be mid-statement (``clean=False``) is terminated."""
        self._busy.discard(conn)
        if not clean:
            conn.terminate()
            return
        if not conn.is_closed() and conn.is_in_transaction():
            try:
                await conn.execute("ROLLBACK")
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                conn.terminate()
        if self._closed or conn.is_closed():
            conn.terminate()
            return
        self._idle.append(conn)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            try:
                await asyncio.wait_for(conn.close(), CONNECT_TIMEOUT)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
                conn.terminate()
        for conn in list(self._busy):  # a leaked transaction must not keep its locks
            conn.terminate()
        self._busy.clear()


class AsyncpgStorageDriver:
    """One instance over one store (a schema). Instances see each other's commits at once."""

    def __init__(
        self,
        opener: Callable[[], Awaitable[asyncpg.Connection]],
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_candidates: bool = False,
    ) -> None:
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = asyncpg_profile(limits, exclusive_candidates=exclusive_candidates)
        self._max_attempts = max_transaction_attempts
        self._connections = _Connections(opener)

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    async def transaction(self, callback: Callable[[AsyncpgTransaction], Awaitable[T]]) -> T:
        """Await ``callback`` in SERIALIZABLE attempts until one commits; return that attempt's value.

        A serialization failure, deadlock or lost staged condition replays the
        callback; after ``max_transaction_attempts`` lost attempts
        ``StorageConflictError``. A callback error (or its cancellation) rolls
        back and propagates unchanged, unless the attempt had already lost:
        then the error is a consequence of the lost race and the callback is
        replayed.
        """
        reason = "no attempt was made"
        for _attempt in range(self._max_attempts):
            conn = await self._connections.acquire()
            clean = False
            try:
                try:
                    await conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
                    if not connection_lost(error, conn):
                        raise
                    raise StorageUnavailableError(
                        f"the postgres connection failed before the attempt began: {_one_line(error)}"
                    ) from error
                attempt = AsyncpgTransaction(
                    conn,
                    self._profile.limits,
                    self._clock,
                    exclusive=self._profile.exclusive_candidates,
                    reconnect=self._connections.open,
                )
                try:
                    result = await callback(attempt)
                except asyncio.CancelledError:
                    attempt._rules.end()
                    raise  # the connection may be mid-statement: it is terminated, never reused
                except BaseException:
                    await _quietly(attempt._rollback())
                    clean = True
                    if attempt.lost is None:
                        raise
                    reason = str(attempt.lost)
                    continue
                try:
                    await attempt._commit()
                except _AttemptLost as lost:
                    reason = str(lost)
                    clean = True
                    continue
                clean = True
                return result
            finally:
                await self._connections.release(conn, clean=clean)
        raise StorageConflictError(
            f"transaction gave up after {self._max_attempts} conflicting attempts; last: {reason}"
        )

    async def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory page from the latest committed state (one autocommit SELECT)."""
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        position = decode_storage_query_cursor(command)
        statement, params = scan_statement(command, position, command.limit + 1, exclusive=False)
        conn = await self._connections.acquire()
        clean = False
        try:
            rows = await conn.fetch(statement, *params)
            clean = True
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
            if not connection_lost(error, conn):
                clean = True
                raise
            raise StorageUnavailableError(f"the postgres connection failed: {_one_line(error)}") from error
        finally:
            await self._connections.release(conn, clean=clean)
        return page_result(command, [(row[0], row[1]) for row in rows], lookahead=True)

    async def close(self) -> None:
        """Close this instance's connections; the store and other instances are unaffected."""
        await self._connections.close()
