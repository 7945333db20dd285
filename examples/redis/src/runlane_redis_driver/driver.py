"""A Runlane storage driver on Redis: optimistic attempts, validated reads, WATCH + MULTI/EXEC commits.

How it keeps the contract
-------------------------
Reads. Every ``get()`` and ``query_candidates()`` is one ``MULTI``/``EXEC``
block, so what it returns is one atomic view of the store. The attempt
remembers, for every key it depends on, the value it saw: a record's
version key (``None`` when absent) and, for each scanned index partition,
that partition's range-version counter. Each read block also re-reads all
of those earlier dependencies (one ``MGET``); if any moved, the attempt is
lost and the callback is replayed. So the callback always sees one
consistent state: every value it has read held together at the moment of
its latest read (no read skew, even in a read-only attempt, and never a
mix of two commits that a callback could trip over).

Commit. A writing attempt ``WATCH``es every dependency (and the version key
of every key it creates without having read it), re-reads them with one
``MGET`` and compares with what it saw; then it queues its writes between
``MULTI`` and ``EXEC``. A changed dependency, a created key that now exists,
or an ``EXEC`` that Redis aborts because a watched key was touched, all
mean the attempt lost a race: it is discarded (nothing was written) and the
callback replayed, up to ``max_transaction_attempts``, then
``StorageConflictError``. Since a version is never reused, an unchanged
version proves an unchanged record, and with the ``WATCH`` in place before
the re-check, the state at ``EXEC`` is exactly the state the attempt read.
Read-only attempts need no commit step: their latest read already proved
the whole read set consistent.

Versions come from ``INCRBY`` on one counter, drawn just before ``MULTI``;
an attempt that then loses wastes them, which leaves gaps but never repeats.

Append places a batch after the stream head as it stands at commit (read
under the same ``WATCH``), so positions are never consumed by a lost or
replayed attempt.

Exclusive candidates claim each returned row with ``SET <hold key> <token>
NX PX <hold_ms>`` and release the claims (only where the token is still
theirs) when the attempt commits, rolls back or loses.

Broken connections. The client never retries on its own (a blind resend
of a write is exactly what must not happen), and every connection failure is
the driver's to judge. Before ``EXEC`` was sent nothing can have committed
(Redis drops a client's queued ``MULTI`` when the connection goes), so the
failure is ``StorageUnavailableError``. Once ``EXEC`` was sent, the reply may
have been lost after the commit: redis-py then raises the same ``WatchError``
a real conflict raises, and replaying on that would apply the work twice.
So every writing attempt ``WATCH``es and sets a commit marker of its own
inside its ``MULTI`` (see ``layout``); when ``EXEC`` fails for any reason the
driver fences the marker on a fresh connection (``SET marker 0 NX``: if
the old ``EXEC`` has not run yet, touching its watched marker makes it
abort) and reads it back. ``1``: the attempt committed and its value is
returned. ``0``: it did not, and the callback is replayed as after any lost
race. The server unreachable: ``StorageCommitUnknownError``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import redis
import redis.cluster
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import RedisClusterException, RedisClusterUnreachableError
from redis.retry import Retry

from runlane_conformance import (
    AppendRecordsCommand,
    Clock,
    MaterializedStorageAppend,
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
    StorageTransactionMeter,
    StorageUnavailableError,
    StorageUsageError,
    StorageValidationError,
    StoredRecord,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    materialize_storage_append,
    read_storage_stream_position,
)

from .layout import (
    KeyLayout,
    encode_entries,
    key_from_encoded,
    lex_window,
    member,
    split_member,
    stored_record,
)

__all__ = [
    "CLUSTER_RETRIES",
    "COMMIT_MARKER_MS",
    "Client",
    "RedisStorageDriver",
    "RedisTransaction",
    "cluster_nodes",
    "has_hash_tag",
    "mget",
    "open_client",
    "redis_profile",
    "release_holds",
    "resolve_commit",
]

T = TypeVar("T")
Pipeline = Any  # redis.client.Pipeline; redis-py's generic stubs vary between releases


def redis_profile(limits: StorageLimits | None = None) -> StorageProfile:
    """What every instance advertises: process durability (Redis here persists nothing), client clock."""
    return StorageProfile(
        durability=StorageDurability.PROCESS,
        clock_authority=StorageClockAuthority.CLIENT,
        index_consistency=StorageIndexConsistency.STRONG,
        limits=StorageLimits() if limits is None else limits,
        exclusive_candidates=True,
        append=True,
    )


#: How long a commit marker outlives its EXEC: far longer than any wait for a lost reply (milliseconds).
COMMIT_MARKER_MS = 600_000
#: The errors redis-py raises when the connection itself failed, or (on a cluster) when the node serving
#: the store's slot could not be reached or was failing over: in every case the command did not run, or
#: (after EXEC was sent) its outcome is for the commit marker to settle.
CONNECTION_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.MasterDownError,
    redis.exceptions.SlotNotCoveredError,
    redis.exceptions.AskError,  # MovedError is an AskError: the slot moved and the client's retries ran out
    RedisClusterUnreachableError,  # a topology refresh reached no node
)
#: How often the cluster client resends a command whose node failed or whose slot moved (redis-py's
#: default is 10 with up to 1 s between tries: a dead node then took ~4 s to report). Three short tries
#: follow a slot that moved; a node that stays down is reported at once, as StorageUnavailableError.
CLUSTER_RETRIES = 3
#: A redis-py client: ``redis.Redis`` on a standalone server, ``redis.cluster.RedisCluster`` on a cluster.
Client = Any


def cluster_nodes(nodes: Sequence[tuple[str, int]]) -> list[Any]:
    """``(host, port)`` pairs as redis-py's ``ClusterNode`` startup nodes."""
    return [redis.cluster.ClusterNode(host, port) for host, port in nodes]  # type: ignore[no-untyped-call]


def open_client(
    url: str,
    *,
    cluster: bool,
    address_remap: Any = None,
    startup_nodes: Sequence[tuple[str, int]] = (),
) -> Client:
    """The client an instance talks through; never one that resends a write on its own.

    Standalone: ``redis.Redis`` with no retries at all, so every connection
    failure reaches the driver, which knows whether a retry is safe.

    Cluster: ``redis.cluster.RedisCluster``, which routes each command to the
    primary of its key's slot (for a store, always one slot) and follows
    ``MOVED`` after a failover. It keeps a few quick retries (``CLUSTER_RETRIES``), because
    without them a slot that moved could never be followed, and they are safe
    here: a retried read block is read-only; a transaction whose ``WATCH`` was
    acknowledged is never resent (redis-py raises ``WatchError`` instead, and
    the commit marker settles the outcome); a retried ``SET NX`` of a hold
    whose first reply was lost finds the hold taken, and the attempt's own
    token in it shows the hold is its own (``RedisTransaction._claim``).
    ``startup_nodes`` (besides the URL's node) are where a new client may
    learn the topology when the URL's node is down.
    """
    if cluster:
        return redis.cluster.RedisCluster.from_url(
            url,
            startup_nodes=cluster_nodes(startup_nodes),
            socket_connect_timeout=5,
            socket_timeout=30,
            address_remap=address_remap,
            # Ask for a topology refresh on every failed or redirected command. With redis-py's default
            # (every 5th) an instance never noticed a failover: each transaction runs on a new pipeline,
            # which counts its errors from zero and gives up after CLUSTER_RETRIES, so the client kept
            # dialling the dead primary (tests/test_redis_cluster_failover.py found it).
            reinitialize_steps=1,
            retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.25), CLUSTER_RETRIES),
        )
    return redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30, retry=Retry(NoBackoff(), 0))


def mget(pipe: Pipeline, keys: Sequence[str]) -> Any:
    """``MGET keys`` on a pipeline (queued in ``MULTI``, or run at once while watching).

    Sent as a raw command because redis-py's cluster pipeline blocks its
    ``mget()`` helper (keys of several slots could not run as one command);
    every key here shares the store's hash tag, so one slot, which the cluster
    client still checks before sending.
    """
    return pipe.execute_command("MGET", *keys)


def has_hash_tag(prefix: str) -> bool:
    """True when Redis Cluster hashes only a ``{tag}`` of every key under ``prefix`` (so: one slot)."""
    start = prefix.find("{")
    end = prefix.find("}", start + 1) if start >= 0 else -1
    return start >= 0 and end > start + 1


class _AttemptLost(StorageConflictError):
    """Internal: a dependency moved; this attempt must be discarded and the callback replayed."""


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def resolve_commit(client: Client, marker: str) -> bool | None:
    """After an EXEC that failed: True if it committed, False if it did not, None if that cannot be known.

    ``SET marker 0 NX`` fences the marker: an EXEC that has not run yet
    watches it and will abort, and one that ran has already set it to ``1``.
    """
    try:
        with client.pipeline(transaction=False) as pipe:
            pipe.set(marker, b"0", nx=True, px=COMMIT_MARKER_MS)
            pipe.get(marker)
            _fenced, value = pipe.execute()
    except (redis.RedisError, RedisClusterException):
        return None
    return bool(value == b"1")


def _page(command: QueryRecordsCommand, rows: Sequence[bytes]) -> QueryRecordsResult:
    """A page from members fetched one past the limit (the extra one only says a cursor is due)."""
    items = []
    for raw in rows[: command.limit]:
        sort, ekey = split_member(raw)
        items.append(StorageIndexReference(key_from_encoded(ekey), sort))
    cursor = encode_storage_query_cursor(command, items[-1]) if len(rows) > command.limit else None
    return QueryRecordsResult(tuple(items), cursor)


def queue_scan(
    pipe: Pipeline,
    layout: KeyLayout,
    command: QueryRecordsCommand,
    position: StorageCursorPosition | None,
    count: int,
) -> None:
    """Queue up to ``count`` members of ``command``'s window after ``position``, in scan order."""
    low, high = lex_window(command, position)
    key = layout.index(command.index, command.partition)
    if command.direction is StorageQueryDirection.DESCENDING:
        pipe.zrevrangebylex(key, high, low, start=0, num=count)
    else:
        pipe.zrangebylex(key, low, high, start=0, num=count)


def release_holds(client: Client, layout: KeyLayout, token: str, ekeys: Sequence[str]) -> None:
    """Delete the holds on ``ekeys`` that still carry ``token`` (an expired one may belong to another)."""
    keys = [layout.hold(ekey) for ekey in ekeys]
    mine = token.encode("ascii")
    for _try in range(8):
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(*keys)
                ours = [key for key, value in zip(keys, mget(pipe, keys), strict=True) if value == mine]
                pipe.multi()
                if ours:
                    pipe.delete(*ours)
                pipe.execute()
                return
            except redis.WatchError:
                continue  # a hold expired and was taken meanwhile: look again


class RedisTransaction:
    """One attempt. Reads go to Redis at once; mutations are staged until the callback returns.

    The contract's attempt rules (one thread at a time, nothing after the
    end, sealing, the frozen ``now()``, what may be mutated, append ownership,
    metering) are kept by ``StorageAttemptRules``; this class talks to Redis.
    """

    def __init__(
        self,
        client: Client,
        layout: KeyLayout,
        limits: StorageLimits,
        clock: Clock,
        *,
        hold_ms: int = 60_000,
    ) -> None:
        self._client = client
        self._hold_ms = hold_ms
        self._token: str | None = None
        self._held: dict[str, None] = {}  # encoded keys this attempt holds exclusively, in order
        self._layout = layout
        self._rules = StorageAttemptRules(limits, clock)
        self._deps: dict[str, bytes | None] = {}  # redis key -> the value this attempt saw
        self.lost: str | None = None
        self.broken: str | None = None  # why this attempt's connection failed, if it did
        #: (replicas, timeout in ms): a commit is acknowledged only once that many replicas hold it.
        self.wait_replicas: tuple[int, int] = (0, 0)

    def _unavailable(self, error: BaseException) -> StorageUnavailableError:
        self.broken = _one_line(error)
        return StorageUnavailableError(f"the redis connection failed; nothing was committed: {self.broken}")

    def _lose(self, reason: str) -> _AttemptLost:
        self.lost = reason
        return _AttemptLost(f"this attempt lost a race and will be replayed: {reason}")

    def _read_block(self, queue: Callable[[Pipeline], None]) -> list[Any]:
        """Run ``queue``'s reads in one MULTI/EXEC, re-checking every earlier dependency in it."""
        if self.broken is not None:
            raise StorageUnavailableError(f"this attempt's connection failed: {self.broken}")
        if self.lost is not None:
            raise _AttemptLost(f"this attempt already lost a race: {self.lost}")
        earlier = list(self._deps)
        try:
            with self._client.pipeline(transaction=True) as pipe:
                if earlier:
                    mget(pipe, earlier)
                queue(pipe)
                replies: list[Any] = pipe.execute()
        except CONNECTION_ERRORS as error:
            raise self._unavailable(error) from error
        if earlier:
            now = replies.pop(0)
            for key, seen in zip(earlier, now, strict=True):
                if seen != self._deps[key]:
                    raise self._lose(f"{key} changed after this attempt read it")
        return replies

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Each key's record (None when absent), positions and duplicates kept, from one atomic view."""
        with self._rules:
            keys = self._rules.begin_get(keys)
            unique = list(dict.fromkeys(key.encoded for key in keys))
            if not unique:
                return []
            layout = self._layout

            def queue(pipe: Pipeline) -> None:
                mget(pipe, [layout.version(ekey) for ekey in unique])
                for ekey in unique:
                    pipe.hmget(layout.record(ekey), "d", "x")

            versions, *bodies = self._read_block(queue)
            found: dict[str, StoredRecord | None] = {}
            for ekey, version, (document, entries) in zip(unique, versions, bodies, strict=True):
                record = None
                if version is not None:
                    if document is None or entries is None:
                        raise StorageCorruptionError(f"record {ekey} has a version but no body")
                    record = stored_record(key_from_encoded(ekey), version, document, entries)
                found[ekey] = record
                self._deps[layout.version(ekey)] = version
                self._rules.record_read(ekey, record)
            return [found[key.encoded] for key in keys]

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in (sort, key) order; the whole partition becomes a dependency."""
        with self._rules:
            mode = self._rules.begin_query(command, mode)
            position = decode_storage_query_cursor(command)
            if mode is StorageCandidateMode.EXCLUSIVE:
                return self._select_exclusive(command, position)
            range_key = self._layout.range_version(command.index, command.partition)

            def queue(pipe: Pipeline) -> None:
                pipe.get(range_key)
                queue_scan(pipe, self._layout, command, position, command.limit + 1)

            counter, rows = self._read_block(queue)
            self._deps[range_key] = counter
            return _page(command, rows)

    def _select_exclusive(
        self, command: QueryRecordsCommand, position: StorageCursorPosition | None
    ) -> QueryRecordsResult:
        """Walk the window in order, claiming rows no other attempt holds, until the page is full.

        Each claim is ``SET hold token NX PX``: atomic across every instance
        and process, and only on a row that will be returned, so nothing
        beyond the page is ever held. A full page always carries a cursor
        (there is no lookahead to prove more rows exist).
        """
        if self._token is None:
            self._token = uuid.uuid4().hex
        token = self._token
        layout = self._layout
        range_key = layout.range_version(command.index, command.partition)
        chunk = command.limit + 16
        items: list[StorageIndexReference] = []
        while len(items) < command.limit:

            def queue(pipe: Pipeline, after: StorageCursorPosition | None = position) -> None:
                pipe.get(range_key)
                queue_scan(pipe, layout, command, after, chunk)

            counter, rows = self._read_block(queue)
            self._deps[range_key] = counter
            for raw in rows:
                sort, ekey = split_member(raw)
                position = StorageCursorPosition(sort, ekey)
                try:
                    claimed = ekey in self._held or self._claim(layout.hold(ekey), token)
                except CONNECTION_ERRORS as error:
                    # The claim may have been made with its reply lost: release it with the rest
                    # (a release only deletes holds that carry this attempt's token).
                    self._held[ekey] = None
                    raise self._unavailable(error) from error
                if claimed:
                    self._held[ekey] = None
                    items.append(StorageIndexReference(key_from_encoded(ekey), sort))
                    if len(items) == command.limit:
                        break
            if len(rows) < chunk:
                break
        cursor = encode_storage_query_cursor(command, items[-1]) if len(items) == command.limit else None
        return QueryRecordsResult(tuple(items), cursor)

    def _claim(self, hold: str, token: str) -> bool:
        """Take the hold ``hold`` for this attempt: True if it is now this attempt's.

        ``SET NX`` that finds the hold taken is followed by a ``GET``: if the
        hold carries this attempt's token, an earlier ``SET`` of ours did take
        it and only its reply was lost (the cluster client resends a command
        whose connection failed), so the row is ours and will be released with
        the others, instead of staying held by nobody until it expires.
        """
        if self._client.set(hold, token, nx=True, px=self._hold_ms):
            return True
        return bool(self._client.get(hold) == token.encode("ascii"))

    def release(self) -> None:
        """Give up every exclusive hold of this attempt (after commit, rollback or a lost race).

        A release whose connection broke is tried once more (the client opens
        a new connection), so a fault on one connection never leaves rows held
        by an attempt that is over. If the server cannot be reached at all the
        holds stay until they expire (``hold_ms``); failing here would hide the
        attempt's own outcome.
        """
        if self._held and self._token is not None:
            held, self._held = list(self._held), {}
            for _try in range(2):
                try:
                    release_holds(self._client, self._layout, self._token, held)
                    return
                except CONNECTION_ERRORS:
                    continue

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

    def append(self, command: AppendRecordsCommand) -> None:
        """Stage one ordered batch; its positions are taken from the head only at commit.

        The attempt may not also point-read or mutate that stream partition's
        head or records, and may stage only one batch. Appending seals the
        read set like any mutation.
        """
        with self._rules:
            self._rules.stage_append(command)

    # -- ending ----------------------------------------------------------------------------------

    def _rollback(self) -> None:
        """Nothing was written before commit, so rolling back is only ending the attempt."""
        self._rules.end()

    def _commit(self) -> None:
        """Validate the read set under WATCH and write everything in one MULTI/EXEC.

        Raises ``_AttemptLost`` when the attempt must be replayed; then nothing was written.
        """
        rules = self._rules
        rules.end_for_commit()
        if self.lost is not None:
            raise _AttemptLost(f"this attempt lost a race: {self.lost}")
        if self.broken is not None:
            raise StorageUnavailableError(
                f"nothing was committed: this attempt's connection failed: {self.broken}"
            )
        rules.check_within_limits()
        if not rules.has_writes:
            return  # read-only: the latest read block proved the whole read set consistent
        layout = self._layout
        deps = list(self._deps)
        blind = [layout.version(ekey) for ekey, _ in rules.creates if ekey not in rules.reads]
        marker = layout.commit_marker(uuid.uuid4().hex)
        watched = [*deps, *blind, marker]
        exec_sent = False
        with self._client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(*watched)
                current: list[Any] = mget(pipe, watched)
                for key, value in zip(deps, current, strict=False):
                    if value != self._deps[key]:
                        raise self._lose(f"{key} changed after this attempt read it")
                for key, value in zip(blind, current[len(deps) : len(deps) + len(blind)], strict=True):
                    if value is not None:
                        raise self._lose(f"{key} exists, so it cannot be created")
                placed = None if rules.append is None else self._place_append(pipe, rules.append)
                drawn = len(rules.creates) + len(rules.replaces)
                if placed is not None:
                    drawn += len(placed[0].records) + 1
                top = int(pipe.incrby(layout.versions, drawn)) if drawn else 0
                versions = iter(range(top - drawn + 1, top + 1))
                touched: set[str] = set()
                pipe.multi()
                for ekey, record in rules.creates:
                    self._queue_write(pipe, ekey, next(versions), record)
                    self._queue_entries(pipe, ekey, (), record.indexes, touched)
                for ekey, old, record in rules.replaces:
                    self._queue_write(pipe, ekey, next(versions), record)
                    self._queue_entries(pipe, ekey, old.indexes, record.indexes, touched)
                for ekey, old in rules.deletes:
                    pipe.unlink(layout.version(ekey), layout.record(ekey))
                    self._queue_entries(pipe, ekey, old.indexes, (), touched)
                if placed is not None:
                    materialized, head = placed
                    for record in materialized.records:
                        ekey = record.key.encoded
                        self._queue_write(pipe, ekey, next(versions), record)
                        self._queue_entries(pipe, ekey, (), record.indexes, touched)
                    ekey = materialized.head.key.encoded
                    self._queue_write(pipe, ekey, next(versions), materialized.head)
                    old_entries = () if head is None else head.indexes
                    self._queue_entries(pipe, ekey, old_entries, materialized.head.indexes, touched)
                for key in sorted(touched):
                    pipe.incr(key)
                pipe.set(marker, b"1", px=COMMIT_MARKER_MS)
                exec_sent = True
                pipe.execute()
            except redis.WatchError as error:
                if not exec_sent:
                    raise self._lose("a watched key changed before EXEC") from error
                self._exec_failed(marker, error)
            except CONNECTION_ERRORS as error:
                if not exec_sent:
                    raise self._unavailable(error) from error
                self._exec_failed(marker, error)
        self._confirm_replicated(marker)

    def _confirm_replicated(self, marker: str) -> None:
        """With ``replicas=N``: return only once N replicas hold the commit, else StorageCommitUnknownError.

        ``WAIT`` counts the writes of the connection it is sent on, and the commit's EXEC went out on a
        pipeline connection that is gone by now; so the marker is written again (``SET XX``, a no-op
        for the data) on one connection to the slot's primary, followed by ``WAIT`` on that connection.
        The replication stream is ordered, so a replica that has the second write has the commit.
        """
        needed, timeout_ms = self.wait_replicas
        if not needed:
            return
        try:
            client = self._client
            if isinstance(client, redis.cluster.RedisCluster):
                target = client.get_redis_connection(client.get_node_from_key(marker))  # type: ignore[no-untyped-call]
            else:
                target = client
            with target.pipeline(transaction=False) as pipe:
                pipe.set(marker, b"1", xx=True, px=COMMIT_MARKER_MS)
                pipe.execute_command("WAIT", needed, timeout_ms)  # type: ignore[no-untyped-call]
                _rewritten, acknowledged = pipe.execute()
        except (redis.RedisError, RedisClusterException) as error:
            raise StorageCommitUnknownError(
                "the commit was applied on the primary, but whether a replica holds it could not be "
                f"confirmed: {_one_line(error)}"
            ) from error
        if int(acknowledged) < needed:
            raise StorageCommitUnknownError(
                f"the commit was applied on the primary, but only {int(acknowledged)} of {needed} replicas "
                f"confirmed it within {timeout_ms} ms, so a failover could still lose it"
            )

    def _exec_failed(self, marker: str, error: BaseException) -> None:
        """EXEC was sent and failed (a real conflict, or a lost reply): return only if it committed.

        redis-py reports both a watched key that changed and a connection
        lost after EXEC was sent as ``WatchError``, so the marker decides.
        """
        committed = self._resolve_commit(marker)
        if committed is True:
            return
        if committed is False:
            raise self._lose(f"EXEC did not take effect ({_one_line(error)})") from error
        raise StorageCommitUnknownError(
            f"the redis connection failed after EXEC was sent and whether it committed could not be "
            f"established: {_one_line(error)}"
        ) from error

    def _resolve_commit(self, marker: str) -> bool | None:
        return resolve_commit(self._client, marker)

    def _place_append(
        self, pipe: Pipeline, command: AppendRecordsCommand
    ) -> tuple[MaterializedStorageAppend, StoredRecord | None]:
        """Place the batch after the head as committed now (under WATCH, so it cannot move before EXEC).

        Positions come from the head at commit time, not from anything the
        attempt saw: appends to one partition commute, and a lost or replayed
        attempt never gets here with its writes, so it consumes no positions.
        A corrupt or exhausted head raises before anything is written.
        """
        layout = self._layout
        head_key = command.layout.head_key(command.partition)
        head_version = layout.version(head_key.encoded)
        pipe.watch(head_version)
        version = pipe.get(head_version)
        head = None
        if version is not None:
            document, entries = pipe.hmget(layout.record(head_key.encoded), "d", "x")
            if document is None or entries is None:
                raise StorageCorruptionError(f"stream head {head_key} has a version but no body")
            head = stored_record(head_key, version, document, entries)
        start = read_storage_stream_position(command.stream, command.partition, head)
        placed = materialize_storage_append(command, start)
        targets = [layout.version(record.key.encoded) for record in placed.records]
        pipe.watch(*targets)
        for record, found in zip(placed.records, mget(pipe, targets), strict=True):
            if found is not None:
                if pipe.get(head_version) != version:
                    # Another commit moved the head between our reads (WATCH makes EXEC fail, but these
                    # reads run before it): a lost race, replayed like any other, not corruption.
                    raise self._lose(f"the head of {head_key} moved while this batch was being placed")
                raise StorageCorruptionError(
                    f"stream {command.stream.value}/{command.partition}: a record already exists at "
                    f"{record.key}, beyond the head's next position {start}"
                )
        return placed, head

    def _queue_write(self, pipe: Pipeline, ekey: str, version: int, record: NewStorageRecord) -> None:
        pipe.set(self._layout.version(ekey), str(version))
        pipe.hset(
            self._layout.record(ekey),
            mapping={"d": record.document.text.encode("utf-8"), "x": encode_entries(record.indexes)},
        )

    def _queue_entries(
        self,
        pipe: Pipeline,
        ekey: str,
        old: Sequence[StorageIndexEntry],
        new: Sequence[StorageIndexEntry],
        touched: set[str],
    ) -> None:
        """Move one record's index entries from ``old`` to ``new``; note every partition that changed."""
        layout = self._layout
        kept = set(old) & set(new)
        for entry in old:
            if entry not in kept:
                pipe.zrem(layout.index(entry.index, entry.partition), member(entry.sort, ekey))
                touched.add(layout.range_version(entry.index, entry.partition))
        for entry in new:
            if entry not in kept:
                pipe.zadd(layout.index(entry.index, entry.partition), {member(entry.sort, ekey): 0})
                touched.add(layout.range_version(entry.index, entry.partition))


# -- the driver ------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RedisStorageDriver:
    """One instance over one store (a key prefix), with its own client and connection pool."""

    #: The class of one attempt (a subclass may change how an attempt talks to Redis).
    attempt_class: type[RedisTransaction] = RedisTransaction

    def __init__(
        self,
        url: str,
        prefix: str,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        hold_ms: int = 60_000,
        cluster: bool = False,
        address_remap: Any = None,
        startup_nodes: Sequence[tuple[str, int]] = (),
        wait_replicas: tuple[int, int] = (0, 0),
    ) -> None:
        if type(max_transaction_attempts) is not int or max_transaction_attempts < 1:
            raise StorageValidationError("max_transaction_attempts must be a positive integer")
        if cluster and not has_hash_tag(prefix):
            # A general (multi-slot) layout: a transaction would span slots, which Redis Cluster refuses.
            raise StorageUsageError(
                f"store prefix {prefix!r} has no {{hash tag}}, so on a Redis Cluster its keys would spread "
                "over many hash slots, and one MULTI/EXEC cannot span slots: this driver runs on a cluster "
                "only in a single-slot topology (every key of a store under one hash tag)"
            )
        self._hold_ms = hold_ms
        self._wait_replicas = wait_replicas
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = redis_profile(limits)
        self._max_attempts = max_transaction_attempts
        self._layout = KeyLayout(prefix)
        # Never a client that resends a write on its own (see open_client); made on first use.
        self._client_args = (url, cluster, address_remap, tuple(startup_nodes))
        self._client_made: Client | None = None
        self._client_lock = threading.Lock()
        self._closed = False

    @property
    def _client(self) -> Client:
        """This instance's client, made on first use, so that opening an instance never needs the server.

        A cluster client asks a node for the slot map as soon as it is made;
        when no node answers that is ``StorageUnavailableError`` (and the next
        call tries again), never a raw redis-py error.
        """
        with self._client_lock:
            if self._client_made is None:
                url, cluster, remap, nodes = self._client_args
                try:
                    self._client_made = open_client(
                        url, cluster=cluster, address_remap=remap, startup_nodes=nodes
                    )
                except (redis.RedisError, RedisClusterException) as error:
                    raise StorageUnavailableError(
                        f"no redis node could be reached: {_one_line(error)}"
                    ) from error
            return self._client_made

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    @property
    def layout(self) -> KeyLayout:
        return self._layout

    def _check_open(self) -> None:
        if self._closed:
            raise StorageUsageError("this redis driver instance was closed")

    def transaction(self, callback: Callable[[RedisTransaction], T]) -> T:
        """Run ``callback`` in attempts until one commits; return that attempt's value.

        A lost race replays the callback; after ``max_transaction_attempts``
        lost attempts ``StorageConflictError`` is raised. A callback error
        rolls back and propagates unchanged, unless the attempt had already
        lost a race (then the error may be a consequence of it, and the
        callback is replayed instead).
        """
        self._check_open()
        reason = "no attempt was made"
        for _attempt in range(self._max_attempts):
            attempt = self.attempt_class(
                self._client, self._layout, self._profile.limits, self._clock, hold_ms=self._hold_ms
            )
            attempt.wait_replicas = self._wait_replicas
            try:
                try:
                    result = callback(attempt)
                except BaseException:
                    attempt._rollback()
                    if attempt.lost is None:
                        raise
                    reason = attempt.lost
                    continue
                try:
                    attempt._commit()
                except _AttemptLost as lost:
                    reason = str(lost)
                    continue
                return result
            finally:
                attempt.release()
        raise StorageConflictError(
            f"transaction gave up after {self._max_attempts} conflicting attempts; last: {reason}"
        )

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory page from the latest committed state (one ZRANGEBYLEX)."""
        self._check_open()
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        try:
            with self._client.pipeline(transaction=False) as pipe:
                position = decode_storage_query_cursor(command)
                queue_scan(pipe, self._layout, command, position, command.limit + 1)
                (rows,) = pipe.execute()
        except CONNECTION_ERRORS as error:
            raise StorageUnavailableError(f"the redis connection failed: {_one_line(error)}") from error
        return _page(command, rows)

    def close(self) -> None:
        """Close this instance's connections; the store and other instances are unaffected."""
        self._closed = True
        with self._client_lock:
            if self._client_made is not None:
                self._client_made.close()
