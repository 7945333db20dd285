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


@runtime_checkable
class StorageTransaction(Protocol):
    """One attempt of a transaction callback.

    Reads (``get``, ``query_candidates``) come first; the first ``now()`` or
    mutation seals the read set; mutations are staged and committed together
    only if every read is still valid.
    """

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Read each key; ``None`` where absent. Positions (and duplicates) are preserved."""
        ...

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """Index references in contract order; the scanned range joins the read set."""
        ...

    def now(self) -> datetime:
        """The attempt's frozen time; the first call seals the read set."""
        ...

    def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert: commits only while the key is still absent."""
        ...

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """Stage a replacement of exactly ``current`` (same key, same version)."""
        ...

    def delete(self, current: StoredRecord) -> None:
        """Stage a delete of exactly ``current`` (same key, same version)."""
        ...

    def append(self, command: AppendRecordsCommand) -> None:
        """Stage one ordered append batch (only where ``profile.append`` is true)."""
        ...


@runtime_checkable
class StorageDriver(Protocol):
    """A connection to one store. Independent instances on one store must see each other's commits."""

    @property
    def profile(self) -> StorageProfile: ...

    def transaction(self, callback: Callable[[StorageTransaction], T]) -> T:
        """Run ``callback`` in attempts until one commits; return that attempt's value."""
        ...

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory index read outside any transaction."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class OperatorReadDriver(Protocol):
    """Optional read model for operators: exact run lookups, run lists and run histories."""

    def get_run(self, environment: str, run_id: str) -> object | None: ...

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> object: ...

    def list_run_events(
        self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
    ) -> object: ...
