"""The driver-facing protocols: what a storage driver and its transactions must offer.

The API is synchronous. ``StorageDriver.transaction(callback)`` runs
``callback(tx)`` once per attempt, replays it after a conflict, and returns
the committed attempt's value; nothing an aborted attempt did or returned is
observable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from .catalog import StorageCandidateMode
from .streams import AppendRecordsCommand
from .values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageProfile,
    StorageRecordKey,
    StoredRecord,
)

__all__ = ["Clock", "OperatorReadDriver", "StorageDriver", "StorageTransaction"]

T = TypeVar("T")

Clock = Callable[[], datetime]
"""A clock injected into a driver instance: each call returns the current time as an aware ``datetime``."""


@runtime_checkable
class StorageTransaction(Protocol):
    """One attempt of a transaction callback: reads, then a seal, then staged writes.

    Reads (``get``, ``query_candidates``) come first and every answer, absent
    keys and empty ranges included, joins the attempt's read set. The first
    ``now()`` or mutation seals the read set. Mutations are staged and
    committed together, with their index entries, only if every read is still
    valid at commit; otherwise nothing of the attempt is applied and the
    driver replays the callback on a new transaction object.

    Every method raises ``StorageAttemptEndedError`` once the attempt has
    committed, rolled back or been replaced by a replay, and
    ``StorageConcurrentUseError`` when two threads use one attempt at once.
    Work beyond an advertised limit raises ``StorageLimitError`` before
    anything is committed.
    """

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Read each key: one result per position, in request order, ``None`` where absent.

        Duplicated keys answer at each of their positions and every position
        counts toward ``max_point_reads``. The records returned are frozen, so
        the caller cannot change stored state through them. Raises
        ``StorageSealedError`` after ``now()`` or a mutation.
        """
        ...

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """Index references in (encoded sort, encoded key) order for the scan direction.

        The scanned range joins the read set even when the page is empty, so a
        record committed into it by someone else makes this attempt replay. In
        ``EXCLUSIVE`` mode (only where ``profile.exclusive_candidates`` is
        true, otherwise ``StorageUnsupportedError``) rows held by other open
        attempts are skipped and the returned rows are held until this attempt
        ends. A cursor from another scope raises ``StorageCursorError``; reads
        after the seal raise ``StorageSealedError``.
        """
        ...

    def now(self) -> datetime:
        """The attempt's time: the same aware ``datetime`` on every call of one attempt.

        The first call seals the read set. With ``client`` clock authority the
        value comes from the clock given to ``StoreHandle.connect``.
        """
        ...

    def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert that commits only while the key is still absent.

        Seals the read set. Refused with ``StorageDuplicateMutationError`` when
        this attempt read the key as present or already mutated it; when
        another commit creates the key first, the attempt conflicts instead of
        overwriting.
        """
        ...

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """Stage a replacement of exactly ``current``: the record and version this attempt read.

        The new record must have the same key (``StorageKeyChangeError``
        otherwise) and replaces all of the old record's index entries in the
        same commit. A record this attempt did not read at that version is
        refused with ``StorageKeyChangeError``; a version that changed before
        commit makes the attempt conflict.
        """
        ...

    def delete(self, current: StoredRecord) -> None:
        """Stage the delete of exactly ``current``, removing all its index entries in the same commit.

        Refused like ``replace`` for a record this attempt did not read at
        that version; a version that changed before commit makes the attempt
        conflict.
        """
        ...

    def append(self, command: AppendRecordsCommand) -> None:
        """Stage one ordered append batch; positions are assigned at commit.

        Only where ``profile.append`` is true (``StorageUnsupportedError``
        otherwise). One batch per attempt; it seals the read set, counts the
        head and every record toward the limits, and leaves exactly the records
        ``materialize_storage_append`` describes. An aborted attempt uses up no
        positions.
        """
        ...


@runtime_checkable
class StorageDriver(Protocol):
    """A connection to one store. Independent instances on one store must see each other's commits.

    Every instance on a store advertises the same profile, and the profile is
    true: the suites measure what it claims.
    """

    @property
    def profile(self) -> StorageProfile:
        """What this driver promises: durability, clock, index consistency, limits, capabilities."""
        ...

    def transaction(self, callback: Callable[[StorageTransaction], T]) -> T:
        """Run ``callback`` in attempts until one commits; return that attempt's value.

        Each attempt gets a new ``StorageTransaction``. When a read went stale
        or a conditional write lost a race, the attempt is discarded and the
        callback runs again; after a bounded number of attempts the driver
        raises ``StorageConflictError``. When the callback raises, the attempt
        rolls back and the exception propagates unchanged. Only the committed
        attempt's writes and return value are ever observable.
        """
        ...

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory index read outside any transaction: holds nothing, joins no read set.

        Pages and cursors behave exactly as in ``query_candidates``.
        """
        ...

    def close(self) -> None:
        """Release this instance's connections; the store and other instances are unaffected."""
        ...


@runtime_checkable
class OperatorReadDriver(Protocol):
    """Optional read model for operators: exact run lookups, run lists and run histories.

    A driver offers it by having all three methods (the ``operator_reads``
    capability). The view changes atomically with each commit: a committed
    run is visible at once with its exact summary and history, and a
    tombstoned run disappears with all its events in the commit that
    tombstones it. Everything returned is a copy the caller may change.
    """

    def get_run(self, environment: str, run_id: str) -> object | None:
        """The visible run ``run_id`` of ``environment`` with its summary, or ``None``."""
        ...

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> object:
        """One page of at most ``limit`` visible runs of ``environment``, with a continuation cursor.

        Following the cursors yields each visible run once. A cursor is bound
        to the listing it came from and is refused (or ignored) elsewhere.
        """
        ...

    def list_run_events(
        self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
    ) -> object:
        """One page of the run's own events in ascending sequence order, with a continuation cursor."""
        ...
