"""Broken drivers for the completion_waits area.

Each mutant wraps the reference driver and mishandles only records of the
``runCompletionWaitPresence`` table (or what happens to them when runs are
written): kept per instance, read and written outside the attempt, removed
with the waiting run, or invented for every run. Work a mutant does "after
the commit" runs in a separate transaction once the wrapped one returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from runlane_conformance import (
    QueryRecordsResult,
    StorageIndexName,
    StorageRecordVersion,
    StorageTableName,
    StoredRecord,
    iso_date_codec,
)
from runlane_conformance.catalogue import completion_waits
from runlane_conformance.core.completion_waits import RunCompletionWaitPresence
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedStore, WrappedTransaction, mutant_harness

T = TypeVar("T")
MARKERS = StorageTableName.RUN_COMPLETION_WAIT_PRESENCE


def _is_marker(key: Any) -> bool:
    return key.table is MARKERS


def _split_get(
    keys: Sequence[Any], ordinary: Callable[[list[Any]], list[Any]], markers: Callable[[list[Any]], list[Any]]
) -> list[Any]:
    """Answer marker keys with ``markers`` and the rest with ``ordinary``, in the caller's order."""
    plain = [key for key in keys if not _is_marker(key)]
    special = [key for key in keys if _is_marker(key)]
    plain_found = iter(ordinary(plain) if plain else [])
    special_found = iter(markers(special) if special else [])
    return [next(special_found) if _is_marker(key) else next(plain_found) for key in keys]


class AfterCommitDriver(WrappedDriver):
    """Runs ``after_commit`` with the committed attempt's wrapper once the transaction returned."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[WrappedTransaction] = []

        def run(tx: Any) -> T:
            attempts.append(self.transaction_class(tx, self))
            return callback(attempts[-1])

        result: T = self.inner.transaction(run)
        self.after_commit(attempts[-1])
        return result

    def after_commit(self, attempt: Any) -> None:
        """Nothing by default."""

    def ensure_markers(self, keys: list[Any]) -> None:
        def callback(tx: Any) -> None:
            found = tx.get(keys)
            for key, marker in zip(keys, found, strict=True):
                if marker is None:
                    tx.create(RunCompletionWaitPresence(key.id[0], key.id[1]).record(tx.now()))

        if keys:
            self.inner.transaction(callback)


# -- markers kept in a per-instance cache ----------------------------------------------------------


class CachedMarkers(WrappedTransaction):
    """Markers live in the instance's memory; every other record goes to the store."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        cache: dict[Any, Any] = self.driver.markers  # type: ignore[attr-defined]
        return _split_get(keys, self.inner.get, lambda wanted: [cache.get(key) for key in wanted])

    def create(self, record: Any) -> None:
        if _is_marker(record.key):
            self.driver.markers[record.key] = StoredRecord.committed(  # type: ignore[attr-defined]
                record, StorageRecordVersion("1")
            )
            return
        self.inner.create(record)


class CachingDriver(WrappedDriver):
    transaction_class = CachedMarkers

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self.markers: dict[Any, Any] = {}


# -- markers read and written outside the attempt --------------------------------------------------


class UnfencedMarkers(WrappedTransaction):
    """Reads markers on a side connection and upserts them there at once: no read dependency, no conflict."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        side = self.driver.side()  # type: ignore[attr-defined]
        return _split_get(keys, self.inner.get, lambda wanted: side.transaction(lambda tx: tx.get(wanted)))

    def create(self, record: Any) -> None:
        if not _is_marker(record.key):
            self.inner.create(record)
            return

        def upsert(tx: Any) -> None:
            if tx.get([record.key])[0] is None:
                tx.create(record)

        self.driver.side().transaction(upsert)  # type: ignore[attr-defined]


class SideConnectionDriver(WrappedDriver):
    transaction_class = UnfencedMarkers

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self._side: Any = None

    def side(self) -> Any:
        if self._side is None:
            self._side = self.store.inner.connect()
        return self._side

    def close(self) -> None:
        if self._side is not None:
            self._side.close()
        super().close()


# -- marker lifetime tied to runs ------------------------------------------------------------------


class RecordsRuns(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.created_runs: list[Any] = []
        self.deleted_waiters: list[Any] = []

    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table is StorageTableName.RUNS:
            self.created_runs.append(record)

    def delete(self, current: Any) -> None:
        super().delete(current)
        if current.key.table is StorageTableName.RUNS:
            source = current.document.value.get("waitingForRunId")
            if source is not None:
                self.deleted_waiters.append(RunCompletionWaitPresence(current.key.id[0], str(source)).key)


class DeletesMarkerWithWaiters(AfterCommitDriver):
    """Pruning a waiting run also deletes the marker of the source it waited on."""

    transaction_class = RecordsRuns

    def after_commit(self, attempt: Any) -> None:
        keys = list(dict.fromkeys(attempt.deleted_waiters))
        if not keys:
            return

        def callback(tx: Any) -> None:
            for marker in tx.get(keys):
                if marker is not None:
                    tx.delete(marker)

        self.inner.transaction(callback)


class MarkerForEveryRun(AfterCommitDriver):
    """Creates a marker for every run it stores, as if presence were derived from the runs."""

    transaction_class = RecordsRuns

    def after_commit(self, attempt: Any) -> None:
        keys = [RunCompletionWaitPresence(run.key.id[0], run.key.id[1]).key for run in attempt.created_runs]
        self.ensure_markers(list(dict.fromkeys(keys)))


# -- marker lifetime tied to the source run, to waiters leaving, or to the wall clock ---------------


class RecordsRunChanges(RecordsRuns):
    """Also remembers deleted runs and waiting runs that stopped waiting through a replacement."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.deleted_runs: list[Any] = []
        self.resumed_waiters: list[Any] = []

    def delete(self, current: Any) -> None:
        super().delete(current)
        if current.key.table is StorageTableName.RUNS:
            self.deleted_runs.append(RunCompletionWaitPresence(current.key.id[0], current.key.id[1]).key)

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        if current.key.table is StorageTableName.RUNS:
            before = current.document.value.get("waitingForRunId")
            if before is not None and record.document.value.get("waitingForRunId") != before:
                self.resumed_waiters.append(RunCompletionWaitPresence(current.key.id[0], str(before)))


def _delete_markers(driver: WrappedDriver, keys: list[Any]) -> None:
    def callback(tx: Any) -> None:
        for marker in tx.get(keys):
            if marker is not None:
                tx.delete(marker)

    if keys:
        driver.inner.transaction(callback)


class CascadesFromSourceRun(AfterCommitDriver):
    """Deleting a run (the last step of pruning it) cascades to the marker with the same id."""

    transaction_class = RecordsRunChanges

    def after_commit(self, attempt: Any) -> None:
        _delete_markers(self, list(dict.fromkeys(attempt.deleted_runs)))


class CountsWaitersOnResume(AfterCommitDriver):
    """Treats the marker as a waiter count: once no run waits on the source any more, the marker goes."""

    transaction_class = RecordsRunChanges

    def after_commit(self, attempt: Any) -> None:
        from runlane_conformance.core.completion_waits import find_completion_waiters

        idle = [
            presence.key
            for presence in dict.fromkeys(attempt.resumed_waiters)
            if not self.inner.transaction(
                lambda tx, p=presence: find_completion_waiters(tx, p, limit=1)
            ).items
        ]
        _delete_markers(self, idle)


#: Markers older than this (by their createdAt, against the wall clock) are treated as expired.
MARKER_TTL = timedelta(days=1)


class ExpiringMarkers(WrappedTransaction):
    """Stores markers with a time to live: one created more than a day ago reads as absent."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        found = self.inner.get(keys)
        horizon = datetime.now(UTC) - MARKER_TTL
        return [
            None
            if record is not None
            and _is_marker(record.key)
            and iso_date_codec.decode(str(record.document.value["createdAt"])) < horizon
            else record
            for record in found
        ]


# -- the waiter index ignores its partition ----------------------------------------------------------


class RecordsWaiterEnvironments(WrappedTransaction):
    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table is StorageTableName.RUNS:
            self.driver.store.shared.setdefault("environments", set()).add(record.key.id[0])

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.driver.everywhere(command, lambda c: self.inner.query_candidates(c, **kwargs))  # type: ignore[attr-defined]


class WaiterIndexIgnoresPartition(WrappedDriver):
    """RunsWaitingForCompletion is keyed by source id alone: a scan lists waiters of every environment."""

    transaction_class = RecordsWaiterEnvironments

    def everywhere(self, command: Any, read: Callable[[Any], Any]) -> Any:
        page = read(command)
        if command.index is not StorageIndexName.RUNS_WAITING_FOR_COMPLETION or command.cursor is not None:
            return page
        items = list(page.items)
        for environment in sorted(self.store.shared.get("environments", set()) - {command.partition}):
            items.extend(read(replace(command, partition=environment)).items)
        items.sort(key=lambda item: (item.sort, item.key.encoded))
        return QueryRecordsResult(tuple(items[: command.limit]), page.cursor)

    def query(self, command: Any) -> Any:
        return self.everywhere(command, self.inner.query)


MUTANTS = [
    Mutant(
        "markers-in-instance-cache",
        "tests.mutants.m_completion_waits:cached_markers",
        completion_waits.STORED,
        "markers are kept in a per-instance cache instead of the store",
    ),
    Mutant(
        "unfenced-marker-upsert",
        "tests.mutants.m_completion_waits:unfenced_markers",
        completion_waits.RACE,
        "markers are read and upserted outside the attempt, so two first waiters both create one",
    ),
    Mutant(
        "marker-deleted-with-waiters",
        "tests.mutants.m_completion_waits:deletes_marker_with_waiters",
        completion_waits.MONOTONIC,
        "deleting a waiting run deletes its source's marker",
    ),
    Mutant(
        "marker-for-every-run",
        "tests.mutants.m_completion_waits:marker_for_every_run",
        completion_waits.ABSENT,
        "every stored run gets a marker, so an absent marker no longer proves anything",
    ),
    Mutant(
        "marker-deleted-with-source-run",
        "tests.mutants.m_completion_waits:cascades_from_source_run",
        completion_waits.MONOTONIC,
        "deleting (pruning) the source run cascades to its marker",
    ),
    Mutant(
        "marker-counts-waiters",
        "tests.mutants.m_completion_waits:counts_waiters_on_resume",
        completion_waits.MONOTONIC,
        "the marker is deleted once the last waiting run stops waiting",
    ),
    Mutant(
        "marker-expires",
        "tests.mutants.m_completion_waits:expiring_markers",
        completion_waits.MONOTONIC,
        "a marker older than a day reads as absent (a time to live on the marker row)",
    ),
    Mutant(
        "waiter-index-ignores-partition",
        "tests.mutants.m_completion_waits:waiter_index_ignores_partition",
        completion_waits.STORED,
        "a RunsWaitingForCompletion scan lists the waiters of every environment's run with that source id",
    ),
]

cascades_from_source_run = mutant_harness(CascadesFromSourceRun)
waiter_index_ignores_partition = mutant_harness(WaiterIndexIgnoresPartition)
counts_waiters_on_resume = mutant_harness(CountsWaitersOnResume)
expiring_markers = mutant_harness(transaction_class=ExpiringMarkers)
cached_markers = mutant_harness(CachingDriver)
unfenced_markers = mutant_harness(SideConnectionDriver)
deletes_marker_with_waiters = mutant_harness(DeletesMarkerWithWaiters)
marker_for_every_run = mutant_harness(MarkerForEveryRun)
