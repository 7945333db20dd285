"""A Runlane storage driver on etcd: snapshot reads at one revision, one compare-and-commit transaction.

How it keeps the contract
-------------------------
Reads. An attempt's first read runs at the cluster's current revision R
(a linearizable read); every later read of the attempt asks for revision R
explicitly, so the callback sees one snapshot whatever commits meanwhile (no
read skew, no mix of two commits). Several keys are read in one etcd
transaction of range requests, so one call is one atomic view. The attempt
remembers what it depends on: each point-read record's ``mod_revision`` (0
when absent), and for each scan the window it covered plus its partition's
removal marker.

Commit. One etcd transaction whose compares are exactly those dependencies:
each record read still has the ``mod_revision`` it had (so it was neither
changed nor deleted), each scanned window holds no key modified after R (no
entry appeared), each scanned partition's removal marker has not moved (no
entry disappeared), each key created without being read is still absent;
and whose success branch writes everything (records, index entries, removal
markers, the append's records and head, the commit marker) at once. A failed
compare means the attempt lost a race: nothing was written, and the callback
is replayed. A read-only attempt needs no commit: its snapshot was one
revision.

Versions are etcd's own ``mod_revision`` of a record's key: the revision of
the commit that wrote it, which never repeats.

A commit whose reply is lost (the connection broke, or etcd answered that it
could not tell, e.g. the leader changed) may or may not have been applied.
The commit transaction also requires that the attempt's commit marker does
not exist yet and creates it; afterwards the driver fences the marker (puts
``0`` only if it does not exist) on any member and reads it: ``1`` means
committed, ``0`` means not (and the fence guarantees it never will be: the
old transaction's compare now fails), no member answering means
``StorageCommitUnknownError``.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

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

from .client import EndpointError, EtcdEndpoints, b64, unb64
from .layout import KeyLayout, encode_record, key_from_encoded, split_entry, stored_record, window

__all__ = ["MARKERS_PER_COMMIT", "EtcdStorageDriver", "EtcdTransaction", "etcd_profile", "resolve_commit"]

T = TypeVar("T")
Json = dict[str, Any]

#: How long the driver keeps trying to settle a commit whose reply was lost (seconds): long enough for a
#: new leader to be elected, short enough that a dead cluster is reported promptly as unknown.
RESOLVE_S = 4.0
#: How many settled commit markers of earlier attempts one commit deletes along with its own writes.
MARKERS_PER_COMMIT = 64


def etcd_profile(limits: StorageLimits | None = None) -> StorageProfile:
    """What every instance advertises: durable (quorum + fsync), client clock, strong indexes."""
    return StorageProfile(
        durability=StorageDurability.DURABLE,
        clock_authority=StorageClockAuthority.CLIENT,
        index_consistency=StorageIndexConsistency.STRONG,
        limits=StorageLimits() if limits is None else limits,
        exclusive_candidates=True,
        append=True,
    )


class _AttemptLost(StorageConflictError):
    """Internal: a dependency moved; this attempt must be discarded and the callback replayed."""


def _int(value: object) -> int:
    """etcd's JSON gateway sends 64-bit integers as strings and leaves zero values out."""
    return int(value) if isinstance(value, (int, str)) and str(value) else 0


def _range(key: bytes, end: bytes | None = None, **more: Any) -> Json:
    body: Json = {"key": b64(key), **more}
    if end is not None:
        body["range_end"] = b64(end)
    return {"request_range": body}


def _put(key: bytes, value: bytes, lease: int | None = None) -> Json:
    body: Json = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def _delete(key: bytes) -> Json:
    return {"request_delete_range": {"key": b64(key)}}


def _mod_is(key: bytes, revision: int) -> Json:
    return {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(revision)}


def _absent(key: bytes) -> Json:
    return {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}


def _kvs(response: Json) -> list[Json]:
    kvs: list[Json] = response.get("response_range", {}).get("kvs", [])
    return kvs


def resolve_commit(endpoints: EtcdEndpoints, marker: bytes) -> bool | None:
    """After a commit whose reply was lost: True committed, False not (and now never), None unknown.

    The fence puts ``0`` only where no marker exists; the lost commit required
    the marker to be absent, so once fenced it can no longer apply.
    """
    body = {
        "compare": [_absent(marker)],
        "success": [_put(marker, b"0")],
        "failure": [_range(marker)],
    }
    deadline = time.monotonic() + RESOLVE_S
    while True:
        try:
            reply = endpoints.read("/kv/txn", body)  # safe to repeat: a second fence changes nothing
        except EndpointError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)
            continue
        if reply.get("succeeded"):
            return False
        kvs = _kvs(reply.get("responses", [{}])[0])
        return bool(kvs and unb64(kvs[0].get("value", "")) == b"1")


class EtcdTransaction:
    """One attempt. Reads go to etcd at once (at the attempt's revision); mutations wait for commit.

    The contract's attempt rules (one thread at a time, nothing after the end,
    sealing, the frozen ``now()``, what may be mutated, append ownership,
    metering) are kept by ``StorageAttemptRules``; this class talks to etcd.
    """

    def __init__(
        self, driver: EtcdStorageDriver, limits: StorageLimits, clock: Clock, *, hold_ms: int = 60_000
    ) -> None:
        self._driver = driver
        self._endpoints = driver.endpoints
        self._layout = driver.layout
        self._rules = StorageAttemptRules(limits, clock)
        self._hold_ms = hold_ms
        self._revision: int | None = None
        self._records: dict[bytes, int] = {}  # record key -> mod_revision seen (0: absent)
        self._markers: dict[bytes, int] = {}  # removal marker -> mod_revision seen
        self._windows: dict[tuple[bytes, bytes], None] = {}  # scanned [key, range_end)
        self._token = uuid.uuid4().hex
        self._lease: int | None = None  # the lease this attempt's holds hang on
        self.lost: str | None = None

    def _lose(self, reason: str) -> _AttemptLost:
        self.lost = reason
        return _AttemptLost(f"this attempt lost a race and will be replayed: {reason}")

    def _read(self, ranges: list[Json]) -> list[Json]:
        """Run range requests as one etcd transaction at this attempt's revision; their responses."""
        if self.lost is not None:
            raise _AttemptLost(f"this attempt already lost a race: {self.lost}")
        if self._revision is not None:
            for op in ranges:
                op["request_range"]["revision"] = str(self._revision)
                # Revision R is immutable on every member that has applied it, so a member may answer
                # from its own state (no round of the leader's heartbeats, as a linearizable read needs).
                op["request_range"]["serializable"] = True
        try:
            try:
                reply = self._endpoints.read("/kv/txn", {"success": ranges})
            except EndpointError as error:
                if not (error.answered and "future revision" in str(error)):
                    raise
                # This member has not applied R yet (the instance moved to it after the first read):
                # a linearizable read waits until it has.
                for op in ranges:
                    op["request_range"].pop("serializable", None)
                reply = self._endpoints.read("/kv/txn", {"success": ranges})
        except EndpointError as error:
            if error.answered and "compacted" in str(error):
                raise self._lose(f"revision {self._revision} was compacted") from error
            raise StorageUnavailableError(
                f"etcd did not serve a read; nothing was committed: {error}"
            ) from error
        if self._revision is None:
            self._revision = _int(reply.get("header", {}).get("revision"))
        responses: list[Json] = reply.get("responses", [])
        if len(responses) != len(ranges):
            raise StorageUnavailableError(f"etcd answered {len(responses)} reads for {len(ranges)}")
        return responses

    # -- reads -----------------------------------------------------------------------------------

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Each key's record (None when absent), positions and duplicates kept, from one snapshot."""
        with self._rules:
            keys = self._rules.begin_get(keys)
            unique = list(dict.fromkeys(key.encoded for key in keys))
            if not unique:
                return []
            layout = self._layout
            responses = self._read([_range(layout.record(ekey)) for ekey in unique])
            found: dict[str, StoredRecord | None] = {}
            for ekey, response in zip(unique, responses, strict=True):
                kvs = _kvs(response)
                record = None
                revision = 0
                if kvs:
                    revision = _int(kvs[0].get("mod_revision"))
                    record = stored_record(key_from_encoded(ekey), revision, unb64(kvs[0].get("value", "")))
                found[ekey] = record
                self._records[layout.record(ekey)] = revision
                self._rules.record_read(ekey, record)
            return [found[key.encoded] for key in keys]

    def _scan(
        self, command: QueryRecordsCommand, position: StorageCursorPosition | None, count: int
    ) -> list[tuple[str, str]]:
        """Up to ``count`` (sort, encoded key) of the window after ``position``; records the dependencies."""
        layout = self._layout
        start, end = window(layout, command, position)
        marker = layout.removals(command.index, command.partition)
        order = "DESCEND" if command.direction is StorageQueryDirection.DESCENDING else "ASCEND"
        marker_reply, rows = self._read(
            [
                _range(marker),
                _range(start, end, limit=str(count), sort_order=order, sort_target="KEY", keys_only=True),
            ]
        )
        kvs = _kvs(marker_reply)
        self._markers[marker] = _int(kvs[0].get("mod_revision")) if kvs else 0
        self._windows[(start, end)] = None
        base = len(layout.partition(command.index, command.partition))
        return [split_entry(unb64(kv["key"])[base:]) for kv in _kvs(rows)]

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in (sort, key) order, from the attempt's snapshot."""
        with self._rules:
            mode = self._rules.begin_query(command, mode)
            position = decode_storage_query_cursor(command)
            if mode is StorageCandidateMode.EXCLUSIVE:
                return self._select_exclusive(command, position)
            rows = self._scan(command, position, command.limit + 1)
            items = [
                StorageIndexReference(key_from_encoded(ekey), sort) for sort, ekey in rows[: command.limit]
            ]
            cursor = encode_storage_query_cursor(command, items[-1]) if len(rows) > command.limit else None
            return QueryRecordsResult(tuple(items), cursor)

    def _select_exclusive(
        self, command: QueryRecordsCommand, position: StorageCursorPosition | None
    ) -> QueryRecordsResult:
        """Walk the window in order, claiming rows no other attempt holds, until the page is full.

        A claim is one etcd transaction: put the hold (this attempt's token, on
        this attempt's lease) only if no hold exists. Only rows that will be
        returned are claimed; a full page always carries a cursor.
        """
        chunk = command.limit + 16
        items: list[StorageIndexReference] = []
        while len(items) < command.limit:
            rows = self._scan(command, position, chunk)
            for sort, ekey in rows:
                position = StorageCursorPosition(sort, ekey)
                if self._claim(ekey):
                    items.append(StorageIndexReference(key_from_encoded(ekey), sort))
                    if len(items) == command.limit:
                        break
            if len(rows) < chunk:
                break
        cursor = encode_storage_query_cursor(command, items[-1]) if len(items) == command.limit else None
        return QueryRecordsResult(tuple(items), cursor)

    def _claim(self, ekey: str) -> bool:
        """Take the hold on ``ekey`` for this attempt: True if it is now this attempt's.

        Safe to send again after a lost reply: a repeated claim finds the hold
        taken, and this attempt's token in it shows the hold is its own.
        """
        hold = self._layout.hold(ekey)
        body = {
            "compare": [_absent(hold)],
            "success": [_put(hold, self._token.encode("ascii"), self._hold_lease())],
            "failure": [_range(hold)],
        }
        try:
            reply = self._endpoints.read("/kv/txn", body)
        except EndpointError as error:
            raise StorageUnavailableError(
                f"etcd did not answer a claim; nothing was committed: {error}"
            ) from error
        if reply.get("succeeded"):
            return True
        kvs = _kvs(reply.get("responses", [{}])[0])
        return bool(kvs and unb64(kvs[0].get("value", "")) == self._token.encode("ascii"))

    def _hold_lease(self) -> int:
        if self._lease is None:
            ttl = max(1, math.ceil(self._hold_ms / 1000))
            try:
                reply = self._endpoints.read("/lease/grant", {"TTL": str(ttl)})
            except EndpointError as error:
                raise StorageUnavailableError(f"etcd did not grant a lease for holds: {error}") from error
            self._lease = _int(reply.get("ID"))
        return self._lease

    def release(self) -> None:
        """Give up every exclusive hold of this attempt: revoking its lease deletes them all at once.

        A revoke whose connection broke is sent again on a new connection (it
        is idempotent), so one fault never leaves rows held by an attempt that
        is over. If no member answers, the holds stay until the lease expires
        (``hold_ms``); failing here would hide the attempt's own outcome.
        """
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(EndpointError):
                self._endpoints.read("/lease/revoke", {"ID": str(lease)}, tries=2)

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
        """Stage one ordered batch; its positions are taken from the head only at commit."""
        with self._rules:
            self._rules.stage_append(command)

    # -- ending ----------------------------------------------------------------------------------

    def _rollback(self) -> None:
        self._rules.end()

    def _commit(self) -> None:
        """Compare every dependency and write everything in one etcd transaction.

        Raises ``_AttemptLost`` when the attempt must be replayed; then nothing was written.
        """
        rules = self._rules
        rules.end_for_commit()
        if self.lost is not None:
            raise _AttemptLost(f"this attempt lost a race: {self.lost}")
        rules.check_within_limits()
        if not rules.has_writes:
            return  # read-only: every read was the one snapshot at this attempt's revision
        layout = self._layout
        compare = [_mod_is(key, revision) for key, revision in self._records.items()]
        compare += [_mod_is(key, revision) for key, revision in self._markers.items()]
        if self._windows:
            assert self._revision is not None
            compare += [
                {"key": b64(start), "range_end": b64(end), "target": "MOD", "result": "LESS",
                 "mod_revision": str(self._revision + 1)}
                for start, end in self._windows
            ]  # fmt: skip
        compare += [_absent(layout.record(ekey)) for ekey, _ in rules.creates if ekey not in rules.reads]
        success: list[Json] = []
        touched: set[bytes] = set()
        for ekey, record in rules.creates:
            self._write(success, ekey, record, (), touched)
        for ekey, old, record in rules.replaces:
            self._write(success, ekey, record, old.indexes, touched)
        for ekey, old in rules.deletes:
            success.append(_delete(layout.record(ekey)))
            self._entries(success, ekey, old.indexes, (), touched)
        if rules.append is not None:
            placed, head, head_revision = self._place_append(rules.append)
            head_key = layout.record(placed.head.key.encoded)
            compare.append(_mod_is(head_key, head_revision))
            for record in placed.records:
                compare.append(_absent(layout.record(record.key.encoded)))
                self._write(success, record.key.encoded, record, (), touched)
            self._write(
                success, placed.head.key.encoded, placed.head, () if head is None else head.indexes, touched
            )
        for marker in sorted(touched):
            success.append(_put(marker, b""))
        marker = layout.commit_marker(self._token)
        compare.append(_absent(marker))
        success.append(_put(marker, b"1"))
        settled = self._driver.settled_markers()
        success += [_delete(key) for key in settled]
        try:
            reply = self._endpoints.write("/kv/txn", {"compare": compare, "success": success})
        except EndpointError as error:
            self._driver.settled(*settled)  # they may still exist: a later commit deletes them
            if error.answered:
                raise StorageUnavailableError(
                    f"etcd refused the commit; nothing was committed: {error}"
                ) from error
            committed = resolve_commit(self._endpoints, marker)
            # A fenced marker (0) stays with the store: deleting it would let the lost commit, if it
            # were still on its way to the leader, find no marker and apply after all.
            if committed is True:
                self._driver.settled(marker)
                return
            if committed is False:
                raise self._lose(
                    f"the commit's reply was lost and it did not take effect ({error})"
                ) from error
            raise StorageCommitUnknownError(
                f"the commit was sent, its reply was lost, and no etcd member answered to settle it: {error}"
            ) from error
        if not reply.get("succeeded"):
            self._driver.settled(*settled)
            raise self._lose("a record, scanned window or stream head it depends on changed")
        self._driver.settled(marker)

    def _write(
        self,
        success: list[Json],
        ekey: str,
        record: NewStorageRecord,
        old: Sequence[StorageIndexEntry],
        touched: set[bytes],
    ) -> None:
        success.append(_put(self._layout.record(ekey), encode_record(record.document.text, record.indexes)))
        self._entries(success, ekey, old, record.indexes, touched)

    def _entries(
        self,
        success: list[Json],
        ekey: str,
        old: Sequence[StorageIndexEntry],
        new: Sequence[StorageIndexEntry],
        touched: set[bytes],
    ) -> None:
        """Move one record's index entries from ``old`` to ``new``; a removal moves its partition's marker."""
        kept = set(old) & set(new)
        for entry in dict.fromkeys(old):
            if entry not in kept:
                success.append(_delete(self._layout.entry(entry, ekey)))
                touched.add(self._layout.removals(entry.index, entry.partition))
        for entry in dict.fromkeys(new):
            if entry not in kept:
                success.append(_put(self._layout.entry(entry, ekey), b""))

    def _place_append(
        self, command: AppendRecordsCommand
    ) -> tuple[MaterializedStorageAppend, StoredRecord | None, int]:
        """Place the batch after the head as committed now; the commit then requires the head unchanged.

        Positions come from the head at commit time, not from the attempt's
        snapshot, so appends to one partition only collide when they race for
        the same head; a lost or replayed attempt writes nothing, so it
        consumes no positions. A corrupt or exhausted head raises before
        anything is written.
        """
        layout = self._layout
        head_key = command.layout.head_key(command.partition)
        try:
            reply = self._endpoints.read("/kv/range", {"key": b64(layout.record(head_key.encoded))})
        except EndpointError as error:
            raise StorageUnavailableError(
                f"etcd did not serve the stream head; nothing was committed: {error}"
            ) from error
        kvs: list[Json] = reply.get("kvs", [])
        head = None
        head_revision = 0
        if kvs:
            head_revision = _int(kvs[0].get("mod_revision"))
            head = stored_record(head_key, head_revision, unb64(kvs[0].get("value", "")))
        start = read_storage_stream_position(command.stream, command.partition, head)
        placed = materialize_storage_append(command, start)
        targets = [layout.record(record.key.encoded) for record in placed.records]
        check = [_range(layout.record(head_key.encoded)), *(_range(key, keys_only=True) for key in targets)]
        try:
            found = self._endpoints.read("/kv/txn", {"success": check})["responses"]
        except (EndpointError, KeyError) as error:
            raise StorageUnavailableError(
                f"etcd did not serve the stream records; nothing was committed: {error}"
            ) from error
        now_head = _kvs(found[0])
        if (_int(now_head[0].get("mod_revision")) if now_head else 0) != head_revision:
            raise self._lose(f"the head of {head_key} moved while this batch was being placed")
        for record, response in zip(placed.records, found[1:], strict=True):
            if _kvs(response):
                raise StorageCorruptionError(
                    f"stream {command.stream.value}/{command.partition}: a record already exists at "
                    f"{record.key}, beyond the head's next position {start}"
                )
        return placed, head, head_revision


# -- the driver ------------------------------------------------------------------------------------


def _utc_now() -> datetime:
    return datetime.now(UTC)


class EtcdStorageDriver:
    """One instance over one store (a key prefix), with its own HTTP sessions to the members."""

    #: The class of one attempt (a subclass may change how an attempt talks to etcd).
    attempt_class: type[EtcdTransaction] = EtcdTransaction

    def __init__(
        self,
        endpoints: Sequence[tuple[str, int]],
        prefix: str,
        *,
        clock: Clock | None = None,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        hold_ms: int = 60_000,
    ) -> None:
        if type(max_transaction_attempts) is not int or max_transaction_attempts < 1:
            raise StorageValidationError("max_transaction_attempts must be a positive integer")
        self._hold_ms = hold_ms
        self._clock: Clock = _utc_now if clock is None else clock
        self._profile = etcd_profile(limits)
        self._max_attempts = max_transaction_attempts
        self.layout = KeyLayout(prefix)
        self.endpoints = EtcdEndpoints(endpoints)
        self._settled: list[bytes] = []  # commit markers whose outcome is known: to delete
        self._settled_lock = threading.Lock()
        self._closed = False

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    def settled_markers(self) -> list[bytes]:
        """Take up to ``MARKERS_PER_COMMIT`` markers whose commits are settled, for a commit to delete."""
        with self._settled_lock:
            taken, self._settled = self._settled[:MARKERS_PER_COMMIT], self._settled[MARKERS_PER_COMMIT:]
        return taken

    def settled(self, *markers: bytes) -> None:
        """Markers no longer needed (their outcome is known), or given back by a commit that failed."""
        with self._settled_lock:
            self._settled.extend(markers)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageUsageError("this etcd driver instance was closed")

    def transaction(self, callback: Callable[[EtcdTransaction], T]) -> T:
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
            attempt = self.attempt_class(self, self._profile.limits, self._clock, hold_ms=self._hold_ms)
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
        """An advisory page from the latest committed state (one range read)."""
        self._check_open()
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        StorageTransactionMeter(self._profile.limits).check_query(command)
        position = decode_storage_query_cursor(command)
        start, end = window(self.layout, command, position)
        order = "DESCEND" if command.direction is StorageQueryDirection.DESCENDING else "ASCEND"
        body = {
            "key": b64(start), "range_end": b64(end), "limit": str(command.limit + 1),
            "sort_order": order, "sort_target": "KEY", "keys_only": True,
        }  # fmt: skip
        try:
            reply = self.endpoints.read("/kv/range", body)
        except EndpointError as error:
            raise StorageUnavailableError(f"etcd did not serve the query: {error}") from error
        base = len(self.layout.partition(command.index, command.partition))
        rows = [split_entry(unb64(kv["key"])[base:]) for kv in reply.get("kvs", [])]
        items = [StorageIndexReference(key_from_encoded(ekey), sort) for sort, ekey in rows[: command.limit]]
        cursor = encode_storage_query_cursor(command, items[-1]) if len(rows) > command.limit else None
        return QueryRecordsResult(tuple(items), cursor)

    def close(self) -> None:
        """Close this instance's sessions; the store and other instances are unaffected."""
        self._closed = True
        with self._settled_lock:
            markers, self._settled = self._settled, []
        if markers:  # best effort: a marker left behind is deleted with its store
            with contextlib.suppress(EndpointError):
                for start in range(0, len(markers), MARKERS_PER_COMMIT):
                    chunk = markers[start : start + MARKERS_PER_COMMIT]
                    self.endpoints.read("/kv/txn", {"success": [_delete(key) for key in chunk]})
        self.endpoints.close()
