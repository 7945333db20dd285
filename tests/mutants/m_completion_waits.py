"""Broken drivers for the completion_waits area.

Each mutant wraps the reference driver and mishandles only records of the
``runCompletionWaitPresence`` table (or what happens to them when runs are
written): kept per instance, read and written outside the attempt, removed
with the waiting run, or invented for every run. Work a mutant does "after
the commit" runs in a separate transaction once the wrapped one returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from runlane_conformance import StorageRecordVersion, StorageTableName, StoredRecord
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


MUTANTS = [
    Mutant(
        "markers-in-instance-cache",
        "tests.mutants.m_completion_waits:cached_markers",
        "completion_waits.marker-stored-for-every-instance",
        "markers are kept in a per-instance cache instead of the store",
    ),
    Mutant(
        "unfenced-marker-upsert",
        "tests.mutants.m_completion_waits:unfenced_markers",
        "completion_waits.racing-first-waiters-create-one-marker",
        "markers are read and upserted outside the attempt, so two first waiters both create one",
    ),
    Mutant(
        "marker-deleted-with-waiters",
        "tests.mutants.m_completion_waits:deletes_marker_with_waiters",
        "completion_waits.marker-outlives-waiters",
        "deleting a waiting run deletes its source's marker",
    ),
    Mutant(
        "marker-for-every-run",
        "tests.mutants.m_completion_waits:marker_for_every_run",
        "completion_waits.absent-marker-means-no-wait",
        "every stored run gets a marker, so an absent marker no longer proves anything",
    ),
]

cached_markers = mutant_harness(CachingDriver)
unfenced_markers = mutant_harness(SideConnectionDriver)
deletes_marker_with_waiters = mutant_harness(DeletesMarkerWithWaiters)
marker_for_every_run = mutant_harness(MarkerForEveryRun)
