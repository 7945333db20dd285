"""The shared in-process store behind every local driver instance: MVCC over sorted containers.

Why this structure
------------------
The reference driver must give each attempt an immutable snapshot, validate
the attempt's reads optimistically at commit, and still cost the same per
transaction whether it holds a thousand records or a million. Copying the
whole state per commit (the simplest way to get immutable snapshots) is
therefore out. Two designs keep commits cheap: a persistent (path-copying)
sorted map, or multi-version concurrency control over mutable sorted
containers. We chose MVCC because ``sortedcontainers`` gives O(log n) ordered
inserts, removals and range scans with small constants in pure Python, while a
persistent balanced tree written in Python would allocate O(log n) nodes per
write and be several times slower on every read.

The pieces
----------
* ``_chains``: encoded record key -> version chain, a short list of
  ``(commit sequence, StoredRecord | None)`` in commit order (``None`` marks a
  delete). An attempt whose snapshot is sequence ``s`` sees, for each key, the
  newest entry with sequence <= ``s``.
* ``_index``: one ``SortedList`` of flat strings
  ``index NUL hex(partition) NUL encoded sort NUL encoded key``, a superset of
  the entries of every version some live snapshot may still see. Encoded
  sorts and keys only use ``0-9a-f/``, all above NUL, so plain string order
  of the flat form *is* the contract order (partition, then encoded sort, then
  encoded key), and one string comparison replaces a tuple comparison that
  would chase four objects: at a million entries the difference is mostly
  CPU cache misses. ``_references`` maps each flat entry to the immutable
  ``StorageIndexReference`` queries hand out for it, built once.
* ``_recent``: flat entry -> its add/remove events ``(commit sequence,
  present)`` that some live snapshot may still need to see past. An entry
  without events is visible to every snapshot. Events of one entry alternate
  strictly (a key's versions gain and lose it in turn), so the state before
  the first retained event is the opposite of that event.
* ``_log``: one entry per commit (keys written, index entries added or
  removed), kept only while some live snapshot is older than it. Range
  dependencies are validated against these entries; when the oldest live
  snapshot moves past an entry, the entry is dropped, the versions it made
  obsolete are trimmed from their chains and the index events it recorded
  are folded away (removing entries nobody can see any more).
* ``_holds``: encoded key -> token of the attempt that selected it in
  exclusive mode. Every driver instance over this store shares it, which is
  what makes exclusive selection work across instances.
* ``_indexed`` (only with ``index_lag`` > 0): the newest commit the indexes
  reflect. See "Eventual indexes" below.

One lock guards all of it. Callbacks never run under the lock, so a second
instance can commit from inside a first instance's callback.

Eventual indexes
----------------
Driver authors whose indexes trail their records (a search index fed from a
change stream, a replica) need the suites' eventual branches to be real, so
the store can imitate them: with ``index_lag=N`` every index scan (queries and
candidates, not operator reads and never point reads) looks at the indexes as
they were at commit ``_indexed``, which trails the latest commit by at most N
commits. A scan may therefore miss an entry added by the last N commits, or
still return one they removed or moved; point reads stay exact, which is
exactly the eventual contract. The lag is deterministic (commits, not time),
and ``settle()`` plays the indexer catching up once writers stop: afterwards
every scan sees every finished commit. Because the lagging view is just an
older snapshot of the indexes, it reuses the MVCC history: the trailing
commits are kept as versions and index events until ``_indexed`` passes them,
so a lagging store always takes the versioned commit path. With no lag (the
default) none of this runs and commits cost what they always did.

Costs: a point read is a dict lookup plus a walk of a chain that is one entry
long unless a snapshot older than the newest write is still live; a query is
an O(log n) seek plus the page; a commit is O(log n) per changed index entry
plus O(commits since the attempt's snapshot) for range validation. None of
these depend on how many records are stored.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from sortedcontainers import SortedList  # type: ignore[import-untyped]

from ..contract.catalog import StorageQueryDirection
from ..contract.cursors import StorageCursorPosition
from ..contract.errors import StorageCorruptionError, StorageUsageError
from ..contract.streams import AppendRecordsCommand, materialize_storage_append, read_storage_stream_position
from ..contract.values import (
    NewStorageRecord,
    StorageIndexReference,
    StorageQueryRange,
    StorageRecordKey,
    StorageRecordVersion,
    StoredRecord,
)

__all__ = ["CommitPlan", "IndexKey", "LocalStore", "RangeDependency", "ScanPage"]

#: ``(index name, partition, encoded sort, encoded record key)``: an index entry as dependencies see it.
IndexKey = tuple[str, str, str, str]
#: The index entries of one stored version: flat form -> tuple form.
_Entries = dict[str, IndexKey]
#: One version of a key: (commit sequence, record or None for a delete, its index entries).
_Version = tuple[int, StoredRecord | None, _Entries]
_Chain = list[_Version]
_NO_ENTRIES: _Entries = {}
_NONE: frozenset[str] = frozenset()
_CLOSED = "the local store was closed"


@lru_cache(maxsize=4096)
def _partition_prefix(index: str, partition: str) -> str:
    """The flat prefix of one index partition; the partition is hex-encoded so it cannot contain NUL."""
    return f"{index}\x00{partition.encode('utf-8', 'surrogatepass').hex()}\x00"


def _reference(key: StorageRecordKey, sort: str) -> StorageIndexReference:
    """A query result for an already validated key and sort (built once per index entry)."""
    reference = object.__new__(StorageIndexReference)
    reference.__dict__.update(key=key, sort=sort)
    return reference


def _version(number: int) -> StorageRecordVersion:
    """A version from the store counter; a positive decimal by construction."""
    version = object.__new__(StorageRecordVersion)
    version.__dict__["value"] = str(number)
    return version


def _stored(seq: int, record: StoredRecord | None, ekey: str) -> _Version:
    if record is None:
        return (seq, None, _NO_ENTRIES)
    entries: _Entries = {}
    for entry in record.indexes:
        index = entry.index  # a StrEnum member is its own value as a string; .value costs a descriptor call
        entries[f"{_partition_prefix(index, entry.partition)}{entry.sort}\x00{ekey}"] = (
            index,
            entry.partition,
            entry.sort,
            ekey,
        )
    return (seq, record, entries)


def _visible(chain: _Chain | None, snapshot: int) -> _Version | None:
    if chain is None:
        return None
    for version in reversed(chain):
        if version[0] <= snapshot:
            return version
    return None


def _present(events: list[tuple[int, bool]], snapshot: int) -> bool:
    """Whether an index entry with these (alternating) events is visible at ``snapshot``."""
    state = not events[0][1]
    for seq, present in events:
        if seq > snapshot:
            break
        state = present
    return state


class RangeDependency(NamedTuple):
    """The part of an index an attempt scanned, which must not change before it commits.

    It covers the query's partition and range, from just after the cursor the
    query started from (if any) up to and including the last returned entry
    when the page was full, or to the end of the range when it was not. Rows
    skipped because another attempt held them exclusively are not covered:
    the attempt never saw them, and an empty exclusive page promises nothing.
    (A named tuple rather than a dataclass: one is built per query, and a
    tuple is immutable and several times cheaper to build.)
    """

    index_name: str
    partition: str
    range: StorageQueryRange
    direction: StorageQueryDirection
    after: tuple[str, str] | None
    stop: tuple[str, str] | None
    skipped: frozenset[str] = frozenset()

    def covers(self, entry: IndexKey) -> bool:
        index, partition, sort, ekey = entry
        if index != self.index_name or partition != self.partition or not self.range.contains(sort):
            return False
        if ekey in self.skipped:
            return False
        position = (sort, ekey)
        if self.direction is StorageQueryDirection.ASCENDING:
            if self.after is not None and position <= self.after:
                return False
            return self.stop is None or position <= self.stop
        if self.after is not None and position >= self.after:
            return False
        return self.stop is None or position >= self.stop


class ScanPage(NamedTuple):
    """What one index scan found: the visible references in order, their encoded keys, and its extent."""

    references: tuple[StorageIndexReference, ...]
    ekeys: tuple[str, ...]
    dependency: RangeDependency


@dataclass
class CommitPlan:
    """Everything an attempt asks the store to validate and apply atomically."""

    token: int
    snapshot: int | None
    reads: Mapping[str, StoredRecord | None]
    ranges: Sequence[RangeDependency]
    creates: Sequence[tuple[str, NewStorageRecord]]
    replaces: Sequence[tuple[str, NewStorageRecord]]
    deletes: Sequence[str]
    held: Iterable[str] = ()
    append: AppendRecordsCommand | None = None


class StoreConflict(Exception):
    """Internal: validation failed; the attempt was rolled back and may be replayed."""


@dataclass
class _LogEntry:
    seq: int
    keys: tuple[str, ...]
    changes: tuple[tuple[str, IndexKey], ...] = field(default=())


def _in_scope(
    sort: str,
    ekey: str,
    query_range: StorageQueryRange,
    position: tuple[str, str] | None,
    direction: StorageQueryDirection,
) -> bool:
    if not query_range.contains(sort):
        return False
    if position is None:
        return True
    if direction is StorageQueryDirection.ASCENDING:
        return (sort, ekey) > position
    return (sort, ekey) < position


class LocalStore:
    """One process-local store; every ``LocalStorageDriver`` connected to it shares this object."""

    def __init__(self, *, index_lag: int = 0) -> None:
        if type(index_lag) is not int or index_lag < 0:
            raise StorageUsageError(f"index_lag must be a non-negative integer, got {index_lag!r}")
        self._lag = index_lag
        # The newest commit index scans reflect; only maintained (and read) when _lag > 0.
        self._indexed = 0
        self._lock = threading.Lock()
        self._seq = 0
        self._version = 0
        self._chains: dict[str, _Chain] = {}
        self._index: SortedList = SortedList()
        self._references: dict[str, tuple[StorageIndexReference, str]] = {}
        self._recent: dict[str, list[tuple[int, bool]]] = {}
        self._log: deque[_LogEntry] = deque()
        # Live snapshot -> how many attempts hold it. Snapshots are registered at the latest
        # sequence, which never decreases, so insertion order is ascending order and the
        # oldest live snapshot is simply the first key.
        self._live: dict[int, int] = {}
        self._holds: dict[str, int] = {}
        self._tokens = itertools.count(1)
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def index_lag(self) -> int:
        """How many of the latest commits index scans may not reflect yet (0: indexes are strong)."""
        return self._lag

    def settle(self) -> None:
        """Let the indexes catch up with every commit so far (the store is idle, so the indexer finishes).

        After this returns, every scan sees every commit that finished before
        the call, until the next ``index_lag`` commits land. A no-op on a
        store without lag.
        """
        with self._lock:
            if self._closed:
                raise StorageUsageError(_CLOSED)
            if self._lag:
                self._indexed = self._seq
                if self._log:
                    self._collect()

    def close(self) -> None:
        """Drop everything; later use of any instance over this store is refused."""
        with self._lock:
            self._closed = True
            self._chains.clear()
            self._index.clear()
            self._references.clear()
            self._recent.clear()
            self._log.clear()
            self._holds.clear()

    def new_token(self) -> int:
        """A fresh attempt identity (used to own exclusive holds)."""
        return next(self._tokens)

    def open_snapshot(self) -> int:
        """Register and return a snapshot of the latest commit; it pins the versions it can see."""
        with self._lock:
            if self._closed:
                raise StorageUsageError(_CLOSED)
            seq = self._seq
            live = self._live
            live[seq] = live.get(seq, 0) + 1
            return seq

    # -- reads -----------------------------------------------------------------------------------

    def read(self, snapshot: int, ekeys: Sequence[str]) -> list[StoredRecord | None]:
        with self._lock:
            if self._closed:
                raise StorageUsageError(_CLOSED)
            chains = self._chains
            found: list[StoredRecord | None] = []
            for ekey in ekeys:
                chain = chains.get(ekey)
                if chain is None:
                    found.append(None)
                elif chain[-1][0] <= snapshot:  # the usual case: the newest version is visible
                    found.append(chain[-1][1])
                else:
                    version = _visible(chain, snapshot)
                    found.append(None if version is None else version[1])
            return found

    def latest_seq(self) -> int:
        with self._lock:
            return self._seq

    def scan(
        self,
        snapshot: int,
        index: str,
        partition: str,
        query_range: StorageQueryRange,
        direction: StorageQueryDirection,
        after: StorageCursorPosition | None,
        limit: int,
        exclusive_token: int | None = None,
        *,
        exact: bool = False,
    ) -> ScanPage:
        """Visible entries of one index partition, in contract order, at ``snapshot``.

        With ``exclusive_token`` the scan skips entries held by any other
        token and holds each returned entry for that token, all under the
        store lock, so two attempts can never both be handed the same row.
        Only returned rows are held; the scan stops at the last one it returns.

        On a store with ``index_lag`` the scan sees the indexes as of the
        older of ``snapshot`` and the lagging index commit, unless ``exact``
        (operator reads, which must be exact in the committing transaction).
        """
        descending = direction is StorageQueryDirection.DESCENDING
        prefix = _partition_prefix(index, partition)
        lower, upper = query_range.lower, query_range.upper
        # Flat bounds: NUL ends a sort inside an entry, so "sort + \x01" is just past every
        # entry with that exact sort and below every longer sort (whose next char is >= "/").
        # Bounds holding NUL (never produced by the codecs) could compare differently in flat
        # form, so such scans re-check every entry against the range and cursor in tuple form.
        exotic = False
        if lower is None:
            lo = prefix
        else:
            exotic = "\x00" in lower.value
            lo = prefix + lower.value if lower.inclusive else prefix + lower.value + "\x01"
        if upper is None:
            hi = prefix[:-1] + "\x01"
        else:
            exotic = exotic or "\x00" in upper.value
            hi = prefix + upper.value + "\x01" if upper.inclusive else prefix + upper.value
        lo_inclusive = True
        position = None
        if after is not None:
            position = (after.sort, after.key)
            exotic = exotic or "\x00" in after.sort or "\x00" in after.key
            bound = f"{prefix}{after.sort}\x00{after.key}"
            if descending:
                hi = min(hi, bound)
            elif bound >= lo:
                lo, lo_inclusive = bound, False
        references: list[StorageIndexReference] = []
        ekeys: list[str] = []
        skipped: set[str] = set()
        stop: tuple[str, str] | None = None
        with self._lock:
            if self._closed:
                raise StorageUsageError(_CLOSED)
            view = snapshot if exact or not self._lag else min(snapshot, self._indexed)
            recent = self._recent
            known = self._references
            holds = self._holds
            for flat in self._index.irange(lo, hi, (lo_inclusive, False), reverse=descending):
                if recent:
                    events = recent.get(flat)
                    if events is not None and not _present(events, view):
                        continue
                reference, ekey = known[flat]
                if exotic and not _in_scope(reference.sort, ekey, query_range, position, direction):
                    continue
                if exclusive_token is not None:
                    holder = holds.get(ekey)
                    if holder is not None and holder != exclusive_token:
                        skipped.add(ekey)
                        continue
                    holds[ekey] = exclusive_token
                references.append(reference)
                ekeys.append(ekey)
                if len(ekeys) == limit:
                    stop = (reference.sort, ekey)
                    break
        dependency = RangeDependency(
            index, partition, query_range, direction, position, stop, frozenset(skipped) if skipped else _NONE
        )
        return ScanPage(tuple(references), tuple(ekeys), dependency)

    # -- commit and rollback ---------------------------------------------------------------------

    def rollback(self, token: int, snapshot: int | None, held: Iterable[str]) -> None:
        """End an attempt without writing: release its exclusive holds and its snapshot."""
        with self._lock:
            self._finish(token, snapshot, held)

    def commit(self, plan: CommitPlan) -> None:
        """Validate ``plan`` against everything committed since its snapshot and apply it.

        Raises ``StoreConflict`` (after releasing the attempt) when a read
        dependency changed, a scanned range gained, lost or moved an entry, or
        a key to be created exists. Otherwise applies every mutation under one
        new commit sequence, assigning each written record a fresh version.
        Either way the attempt's holds and snapshot are released in the same
        critical section, so no other attempt can observe a half-ended one.
        They are released *before* the writes are applied, so that a commit
        with no other live snapshot can skip keeping old versions at all.
        """
        with self._lock:
            try:
                if self._closed:
                    raise StorageUsageError(_CLOSED)
                self._validate(plan)
                writes = self._writes(plan)
            finally:
                self._finish(plan.token, plan.snapshot, plan.held)
            if writes:
                self._apply(writes)

    def _validate(self, plan: CommitPlan) -> None:
        chains = self._chains
        snapshot = plan.snapshot
        if snapshot is not None:
            for ekey in plan.reads:
                chain = chains.get(ekey)
                if chain is not None and chain[-1][0] > snapshot:
                    raise StoreConflict(f"record {ekey} changed after this attempt read it")
            if plan.ranges:
                for logged in self._log:
                    if logged.seq <= snapshot:
                        continue
                    for _flat, change in logged.changes:
                        for dependency in plan.ranges:
                            if dependency.covers(change):
                                raise StoreConflict(
                                    f"index {dependency.index_name} partition {dependency.partition!r} "
                                    "changed inside a range this attempt scanned"
                                )
        for ekey, _record in plan.creates:
            chain = chains.get(ekey)
            if chain is not None and chain[-1][1] is not None:
                raise StoreConflict(f"record {ekey} exists, so it cannot be created")

    def _writes(self, plan: CommitPlan) -> list[tuple[str, NewStorageRecord | None]]:
        """Every write of the plan, with an append placed after the partition's latest head.

        Positions are allocated here, under the store lock, from the head as
        it is committed *now* (not as the attempt's snapshot saw it): appends
        to one partition commute, so they never need to conflict with each
        other, and an attempt that is rolled back or replayed never reaches
        this point, so it consumes no positions. A corrupt or exhausted head
        raises before anything is written.
        """
        writes: list[tuple[str, NewStorageRecord | None]] = [*plan.creates, *plan.replaces]
        writes.extend((ekey, None) for ekey in plan.deletes)
        command = plan.append
        if command is not None:
            layout = command.layout
            head_key = layout.head_key(command.partition).encoded
            head_chain = self._chains.get(head_key)
            head = None if head_chain is None else head_chain[-1][1]
            start = read_storage_stream_position(command.stream, command.partition, head)
            placed = materialize_storage_append(command, start)
            for record in placed.records:
                ekey = record.key.encoded
                chain = self._chains.get(ekey)
                if chain is not None and chain[-1][1] is not None:
                    raise StorageCorruptionError(
                        f"stream {command.stream.value}/{command.partition}: a record already exists at "
                        f"{record.key}, beyond the head's next position {start}"
                    )
                writes.append((ekey, record))
            writes.append((head_key, placed.head))
        return writes

    def _apply(self, writes: Sequence[tuple[str, NewStorageRecord | None]]) -> None:
        """Apply ``writes`` under one new commit sequence, each written record with a fresh version.

        While some snapshot is live the old versions and index entries must
        stay visible to it, so the commit is recorded as versions, index
        events and a log entry (collected once no snapshot needs them). With
        no live snapshot nobody can look back, and the writes replace the
        current state directly: the common, uncontended case pays for no
        history at all. A lagging store always keeps the history, because
        its index view still looks back at the commits it trails.
        """
        if self._lag:
            self._apply_versioned(writes)
            self._indexed = max(self._indexed, self._seq - self._lag)
        elif self._live:
            self._apply_versioned(writes)
        else:
            self._apply_settled(writes)

    def _apply_settled(self, writes: Sequence[tuple[str, NewStorageRecord | None]]) -> None:
        # No live snapshot means the log was collected: every chain holds just its current version
        # and no index entry has pending events.
        self._seq += 1
        seq = self._seq
        chains = self._chains
        index = self._index
        references = self._references
        for ekey, new in writes:
            chain = chains.get(ekey)
            before = _NO_ENTRIES if chain is None else chain[-1][2]
            if new is None:
                if chain is not None:
                    del chains[ekey]
                after = _NO_ENTRIES
            else:
                self._version += 1
                stored = StoredRecord.committed(new, _version(self._version))
                version = _stored(seq, stored, ekey)
                chains[ekey] = [version]
                after = version[2]
                for flat, entry in after.items():
                    if flat not in before:
                        index.add(flat)
                        references[flat] = (_reference(stored.key, entry[2]), ekey)
            for flat in before:
                if flat not in after:
                    index.remove(flat)
                    del references[flat]

    def _apply_versioned(self, writes: Sequence[tuple[str, NewStorageRecord | None]]) -> None:
        self._seq += 1
        seq = self._seq
        chains = self._chains
        changes: list[tuple[str, IndexKey]] = []
        keys: list[str] = []
        for ekey, new in writes:
            chain = chains.get(ekey)
            before = _NO_ENTRIES if chain is None else chain[-1][2]
            stored: StoredRecord | None = None
            if new is not None:
                self._version += 1
                stored = StoredRecord.committed(new, _version(self._version))
            version = _stored(seq, stored, ekey)
            if chain is None:
                chains[ekey] = [version]
            else:
                chain.append(version)
            after = version[2]
            for flat, entry in after.items():
                if flat not in before:
                    self._event(flat, entry, seq, True, stored)
                    changes.append((flat, entry))
            for flat, entry in before.items():
                if flat not in after:
                    self._event(flat, entry, seq, False, None)
                    changes.append((flat, entry))
            keys.append(ekey)
        self._log.append(_LogEntry(seq, tuple(keys), tuple(changes)))

    def _event(
        self, flat: str, entry: IndexKey, seq: int, present: bool, record: StoredRecord | None
    ) -> None:
        if record is not None and flat not in self._references:
            self._index.add(flat)
            self._references[flat] = (_reference(record.key, entry[2]), entry[3])
        events = self._recent.get(flat)
        if events is None:
            self._recent[flat] = [(seq, present)]
        else:
            events.append((seq, present))

    def _finish(self, token: int, snapshot: int | None, held: Iterable[str]) -> None:
        holds = self._holds
        for ekey in held:
            if holds.get(ekey) == token:
                del holds[ekey]
        if snapshot is not None:
            live = self._live
            count = live[snapshot] - 1
            if count:
                live[snapshot] = count
            else:
                del live[snapshot]
        if self._log:
            self._collect()

    def _collect(self) -> None:
        """Drop log entries no live snapshot needs; trim the versions and index events they made obsolete."""
        horizon = next(iter(self._live)) if self._live else self._seq
        if self._lag and self._indexed < horizon:
            horizon = self._indexed  # the lagging index view still needs what came after it
        log = self._log
        while log and log[0].seq <= horizon:
            logged = log.popleft()
            for ekey in logged.keys:
                self._trim(ekey, horizon)
            for flat, _entry in logged.changes:
                self._fold(flat, horizon)

    def _trim(self, ekey: str, horizon: int) -> None:
        chain = self._chains.get(ekey)
        if chain is None:
            return
        keep = 0
        for position, version in enumerate(chain):
            if version[0] <= horizon:
                keep = position
        if keep:
            del chain[:keep]
        if len(chain) == 1 and chain[0][1] is None and chain[0][0] <= horizon:
            del self._chains[ekey]

    def _fold(self, flat: str, horizon: int) -> None:
        events = self._recent.get(flat)
        if events is None:
            return
        settled = 0
        while settled < len(events) and events[settled][0] <= horizon:
            settled += 1
        if settled < len(events):
            del events[:settled]
            return
        del self._recent[flat]
        if not events[-1][1]:
            self._index.remove(flat)
            del self._references[flat]

    # -- bulk loading and introspection ----------------------------------------------------------

    def bulk_load(self, records: Iterable[NewStorageRecord]) -> int:
        """Insert many new records as one commit, bypassing transactions and limits.

        Meant for benchmarks and fixtures that need a large store quickly;
        records are validated values already, keys must be new and distinct.
        Refused while any attempt is live. Returns the number loaded.
        """
        with self._lock:
            if self._closed:
                raise StorageUsageError(_CLOSED)
            if self._live or self._log:
                raise StorageUsageError("bulk_load needs a store with no live attempts")
            self._seq += 1
            seq = self._seq
            chains = self._chains
            fresh: list[str] = []
            count = 0
            for record in records:
                ekey = record.key.encoded
                existing = chains.get(ekey)
                if existing is not None and existing[-1][1] is not None:
                    raise StorageUsageError(f"bulk_load: record {ekey} already exists")
                self._version += 1
                version = _stored(seq, StoredRecord.committed(record, _version(self._version)), ekey)
                chains[ekey] = [version]
                for flat, entry in version[2].items():
                    self._references[flat] = (_reference(record.key, entry[2]), ekey)
                    fresh.append(flat)
                count += 1
            self._index.update(fresh)
            self._indexed = seq  # a bulk load arrives already indexed
            return count

    def stats(self) -> dict[str, int]:
        """Sizes of the internal structures (for tests that check garbage collection)."""
        with self._lock:
            return {
                "records": sum(1 for chain in self._chains.values() if chain[-1][1] is not None),
                "versions": sum(len(chain) for chain in self._chains.values()),
                "index_entries": len(self._index),
                "index_events": sum(len(events) for events in self._recent.values()),
                "log_entries": len(self._log),
                "live_snapshots": sum(self._live.values()),
                "holds": len(self._holds),
                "unindexed_commits": self._seq - self._indexed if self._lag else 0,
            }
