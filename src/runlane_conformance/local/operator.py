"""The operator read model of the local driver: run lookups, run lists and run histories.

Nothing here is separately stored or separately writable. Each call opens one
snapshot of the store and answers from the canonical ``runs`` and ``events``
records and their index entries, which every commit changes atomically. That
gives the contract's guarantees for free: a run appears with exactly the
summary and history committed with it, and a tombstoned run (whose record
carries ``tombstonedAt`` and therefore no index entries) disappears from
every operator read in the very commit that tombstoned it, even while its
raw child records still await cleanup. That holds on a store with
``index_lag`` too: operator scans ask for the exact index view, because the
read model is part of the commit, not of the trailing indexer.

Results are ``StoredRecord`` values, immutable all the way down, so callers
get defensive copies by construction. Lists are pages in index order with a
cursor bound (through the index command) to environment, index, range and
direction: runs newest first by creation time; events in sequence order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract.catalog import StorageIndexName, StorageQueryDirection
from ..contract.cursors import decode_storage_query_cursor, encode_storage_query_cursor
from ..contract.limits import StorageTransactionMeter
from ..contract.table_definitions import run_record_key
from ..contract.values import (
    QueryRecordsCommand,
    StorageLimits,
    StorageQueryRange,
    StoredRecord,
)
from .store import LocalStore

__all__ = ["OperatorPage", "get_run", "list_run_events", "list_runs"]


@dataclass(frozen=True)
class OperatorPage:
    """One page of an operator list: immutable records, and a cursor when the page is full."""

    items: tuple[StoredRecord, ...]
    cursor: str | None = None


def _visible_run(store: LocalStore, snapshot: int, environment: str, run_id: str) -> StoredRecord | None:
    [run] = store.read(snapshot, [run_record_key(environment, run_id).encoded])
    if run is None or run.document.value.get("tombstonedAt") is not None:
        return None
    return run


def get_run(store: LocalStore, environment: str, run_id: str) -> StoredRecord | None:
    """The visible run, or ``None`` when it does not exist or was tombstoned."""
    snapshot = store.open_snapshot()
    try:
        return _visible_run(store, snapshot, environment, run_id)
    finally:
        store.rollback(0, snapshot, ())


def _page(
    store: LocalStore, snapshot: int, command: QueryRecordsCommand, limits: StorageLimits
) -> OperatorPage:
    StorageTransactionMeter(limits).check_query(command)
    position = decode_storage_query_cursor(command)
    page = store.scan(
        snapshot,
        command.index.value,
        command.partition,
        command.range,
        command.direction,
        position,
        command.limit,
        exact=True,  # the read model moves in the committing transaction, even when indexes lag
    )
    records = store.read(snapshot, page.ekeys)
    items = tuple(record for record in records if record is not None)
    cursor = None
    if page.references and len(page.references) == command.limit:
        cursor = encode_storage_query_cursor(command, page.references[-1])
    return OperatorPage(items, cursor)


def list_runs(
    store: LocalStore, limits: StorageLimits, environment: str, *, limit: int, cursor: str | None = None
) -> OperatorPage:
    """Visible runs of ``environment``, newest first (by creation time, then key)."""
    command = QueryRecordsCommand(
        StorageIndexName.RUNS_BY_CREATED_AT,
        environment,
        limit,
        StorageQueryRange(),
        StorageQueryDirection.DESCENDING,
        cursor,
    )
    snapshot = store.open_snapshot()
    try:
        return _page(store, snapshot, command, limits)
    finally:
        store.rollback(0, snapshot, ())


def list_run_events(
    store: LocalStore,
    limits: StorageLimits,
    environment: str,
    run_id: str,
    *,
    limit: int,
    cursor: str | None = None,
) -> OperatorPage:
    """The history of a visible run in sequence order; empty for a missing or tombstoned run."""
    command = QueryRecordsCommand(
        StorageIndexName.EVENTS_BY_RUN,
        environment,
        limit,
        StorageQueryRange.prefix((run_id,)),
        StorageQueryDirection.ASCENDING,
        cursor,
    )
    snapshot = store.open_snapshot()
    try:
        if _visible_run(store, snapshot, environment, run_id) is None:
            decode_storage_query_cursor(command)  # a bad cursor is still refused
            return OperatorPage(())
        return _page(store, snapshot, command, limits)
    finally:
        store.rollback(0, snapshot, ())
