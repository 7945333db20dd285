"""Broken drivers for the pruning area.

Each breaks one thing cleanup relies on: the run's count update, the
tombstone leaving the run indexes, the eventual index ever catching up, the
fence that makes two racing passes serial, the rollback of a pass that
raised, the atomicity of a pass's deletes with its counter update, and the
limits the driver advertises. Store-level mutants subclass ``LocalStore``
(validation lives there); the rest wrap the reference driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance import (
    StorageIndexName,
    StorageIndexReference,
    StorageLimitName,
    StorageRecordKey,
    StorageTableName,
    create_storage_limit_error,
)
from runlane_conformance.catalogue import pruning
from runlane_conformance.contract.values import QueryRecordsResult
from runlane_conformance.local.harness import local_harness
from runlane_conformance.local.store import CommitPlan, LocalStore
from tests.mutants.catalog import Mutant
from tests.mutants.m_conflicts import store_mutant
from tests.mutants.wrapping import (
    WrappedDriver,
    WrappedHarness,
    WrappedStore,
    WrappedTransaction,
    mutant_harness,
)

T = TypeVar("T")
CHILD_TABLES = (StorageTableName.EVENTS, StorageTableName.STEPS, StorageTableName.OUTBOX_MESSAGES)


def _table_prefix(table: StorageTableName) -> str:
    return StorageRecordKey(table, ("x",)).encoded.split("/")[0] + "/"


# -- the run's counts are not raised with its children ---------------------------------------------


class DropsRunCountUpdates(WrappedTransaction):
    """A run replacement is silently dropped when the same attempt creates children of it."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.children = False

    def create(self, record: Any) -> None:
        self.children = self.children or record.key.table in CHILD_TABLES
        super().create(record)

    def replace(self, current: Any, record: Any) -> None:
        if self.children and current.key.table is StorageTableName.RUNS:
            return
        super().replace(current, record)


# -- tombstoned runs stay in RunsByStatus ----------------------------------------------------------


class GhostEntries(WrappedTransaction):
    """Remembers the RunsByStatus entry of every run it tombstones and keeps serving it."""

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        if (
            current.key.table is StorageTableName.RUNS
            and record.document.value.get("tombstonedAt") is not None
        ):
            ghosts = self.driver.store.shared.setdefault("ghosts", [])
            for entry in current.indexes:
                if entry.index is self.driver.ghost_index:  # type: ignore[attr-defined]
                    ghosts.append((entry.partition, StorageIndexReference(current.key, entry.sort)))

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return _with_ghosts(self.driver, command, self.inner.query_candidates(command, **kwargs))


def _with_ghosts(driver: WrappedDriver, command: Any, result: Any) -> Any:
    if command.index is not driver.ghost_index or command.cursor is not None:  # type: ignore[attr-defined]
        return result
    ghosts = [
        ref for partition, ref in driver.store.shared.get("ghosts", []) if partition == command.partition
    ]
    items = sorted({*result.items, *ghosts}, key=lambda ref: (ref.sort, ref.key.encoded))
    return QueryRecordsResult(tuple(items[: command.limit]), result.cursor)


class GhostDriver(WrappedDriver):
    transaction_class = GhostEntries
    ghost_index = StorageIndexName.RUNS_BY_STATUS

    def query(self, command: Any) -> Any:
        return _with_ghosts(self, command, self.inner.query(command))


# -- an eventual index that never catches up -------------------------------------------------------


class NeverSettles(WrappedStore):
    """Claims the index converged, but the lagging index never moves past where it is."""

    def settle(self, *, timeout: float) -> bool:
        return True


def never_settles(options: Mapping[str, str]) -> WrappedHarness:
    class Harness(WrappedHarness):
        def open_store(self) -> WrappedStore:
            return NeverSettles(self.inner.open_store(), self.driver_class)

    return Harness(local_harness({"index_lag": "3", **options}), WrappedDriver)


# -- two racing passes both commit -----------------------------------------------------------------

_TOMBSTONES = _table_prefix(StorageTableName.TOMBSTONES)


class UnfencedTombstones(LocalStore):
    """An attempt that rewrites a tombstone skips read and range validation: last writer wins."""

    def commit(self, plan: CommitPlan) -> None:
        if any(ekey.startswith(_TOMBSTONES) for ekey, _record in plan.replaces):
            plan = replace(plan, reads={}, ranges=())
        super().commit(plan)


# -- a pass that raised still deletes --------------------------------------------------------------


class RecordsDeletes(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.deleted: list[Any] = []

    def delete(self, current: Any) -> None:
        super().delete(current)
        self.deleted.append(current.key)


class KeepsDeletesOnRaise(WrappedDriver):
    """When the callback raises, the deletes it staged are committed anyway (a partial rollback)."""

    transaction_class = RecordsDeletes

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[RecordsDeletes] = []

        def run(tx: Any) -> T:
            attempts.append(RecordsDeletes(tx, self))
            return callback(attempts[-1])

        try:
            return self.inner.transaction(run)  # type: ignore[no-any-return]
        except Exception:
            keys = attempts[-1].deleted if attempts else []
            if keys:

                def leak(tx: Any) -> None:
                    for record in tx.get(keys):
                        if record is not None:
                            tx.delete(record)

                self.inner.transaction(leak)
            raise


# -- a pass's counter update commits without its deletes -------------------------------------------


class DropsChildDeletes(WrappedTransaction):
    """Deletes of children are dropped in an attempt that also rewrites a tombstone."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.pending: list[Any] = []

    def delete(self, current: Any) -> None:
        if current.key.table in CHILD_TABLES:
            self.pending.append(current)  # decided when the tombstone is (or is not) rewritten
            return
        super().delete(current)

    def replace(self, current: Any, record: Any) -> None:
        if current.key.table is StorageTableName.TOMBSTONES:
            self.pending.clear()  # the counter goes down, the children stay
        super().replace(current, record)


class FlushesPending(WrappedDriver):
    transaction_class = DropsChildDeletes

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            wrapped = DropsChildDeletes(tx, self)
            result = callback(wrapped)
            for current in wrapped.pending:  # attempts that do not touch a tombstone keep their deletes
                tx.delete(current)
            return result

        return self.inner.transaction(run)  # type: ignore[no-any-return]


# -- advertised limits larger than the accepted ones -----------------------------------------------

ACCEPTED_RECORDS = 60


class AcceptsFewerRecords(WrappedTransaction):
    """Advertises the default 100 transaction records but refuses an attempt past 60 distinct keys."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.keys: set[str] = set()

    def _touch(self, keys: Sequence[Any]) -> None:
        self.keys.update(key.encoded for key in keys)
        if len(self.keys) > ACCEPTED_RECORDS:
            raise create_storage_limit_error(
                StorageLimitName.TRANSACTION_RECORDS, ACCEPTED_RECORDS, len(self.keys)
            )

    def get(self, keys: Sequence[Any]) -> list[Any]:
        self._touch(keys)
        return super().get(keys)

    def create(self, record: Any) -> None:
        self._touch([record.key])
        super().create(record)

    def replace(self, current: Any, record: Any) -> None:
        self._touch([current.key])
        super().replace(current, record)

    def delete(self, current: Any) -> None:
        self._touch([current.key])
        super().delete(current)


class ParentGhostDriver(GhostDriver):
    """Moves a tombstoned run out of the status and creation indexes but forgets RunsByParent."""

    ghost_index = StorageIndexName.RUNS_BY_PARENT


class CommitsOnBaseException(WrappedDriver):
    """Rolls back when the callback raises an Exception, but commits what it staged on a BaseException
    (``except Exception: rollback`` followed by an unconditional commit), then re-raises."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        escaped: list[BaseException] = []

        def run(tx: Any) -> Any:
            try:
                return callback(self.transaction_class(tx, self))
            except Exception:
                raise
            except BaseException as error:
                escaped.append(error)
                return None

        result = self.inner.transaction(run)
        if escaped:
            raise escaped[-1]
        return result  # type: ignore[no-any-return]


class RecordsChildEnvironments(WrappedTransaction):
    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table in CHILD_TABLES:
            self.driver.store.shared.setdefault("environments", set()).add(record.key.id[0])

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.driver.everywhere(command, lambda c: self.inner.query_candidates(c, **kwargs))  # type: ignore[attr-defined]


class EventIndexIgnoresPartition(WrappedDriver):
    """EventsByRun is keyed by run id alone: a run's event scan also lists another environment's run."""

    transaction_class = RecordsChildEnvironments

    def everywhere(self, command: Any, read: Callable[[Any], Any]) -> Any:
        page = read(command)
        if command.index is not StorageIndexName.EVENTS_BY_RUN or command.cursor is not None:
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
        "run-count-update-dropped",
        "tests.mutants.m_pruning:drops_run_count_updates",
        pruning.COUNTERS,
        "the run's counts are not raised in the commit that creates its children",
    ),
    Mutant(
        "pass-decrements-without-deleting",
        "tests.mutants.m_pruning:decrements_without_deleting",
        pruning.COUNTERS,
        "a pass's counter decrement commits while its child deletes are dropped",
    ),
    Mutant(
        "pass-decrements-without-deleting-random",
        "tests.mutants.m_pruning:decrements_without_deleting",
        pruning.MODEL,
        "a pass's counter decrement commits without its child deletes (caught by the random histories)",
    ),
    Mutant(
        "tombstoned-run-stays-indexed",
        "tests.mutants.m_pruning:ghost_entries",
        pruning.HIDDEN,
        "a tombstoned run's RunsByStatus entry keeps being served",
    ),
    Mutant(
        "eventual-index-never-catches-up",
        "tests.mutants.m_pruning:never_settles",
        pruning.STALE,
        "an eventual index whose settle hook claims convergence that never comes",
    ),
    Mutant(
        "racing-passes-both-commit",
        "tests.mutants.m_pruning:unfenced_tombstones",
        pruning.RACE,
        "attempts that rewrite a tombstone are not validated, so two racing passes both commit",
    ),
    Mutant(
        "pass-deletes-survive-a-raise",
        "tests.mutants.m_pruning:keeps_deletes_on_raise",
        pruning.INTERRUPTED,
        "the deletes of a callback that raised are committed anyway, without the counter update",
    ),
    Mutant(
        "advertises-more-records-than-accepted",
        "tests.mutants.m_pruning:accepts_fewer_records",
        pruning.LIMITS,
        "advertises 100 transaction records but refuses attempts past 60",
    ),
    Mutant(
        "candidate-page-keeps-lookahead-row",
        "tests.mutants.m_pruning:keeps_lookahead_row",
        pruning.BOUNDED,
        "query_candidates fetches one row past the page to learn whether more follow, and returns it too",
    ),
    Mutant(
        "tombstoned-run-stays-under-its-parent",
        "tests.mutants.m_pruning:parent_ghost_entries",
        pruning.HIDDEN,
        "a tombstoned child run's RunsByParent entry keeps being served",
    ),
    Mutant(
        "pass-commits-on-base-exception",
        "tests.mutants.m_pruning:commits_on_base_exception",
        pruning.INTERRUPTED,
        "a pass whose callback raised a BaseException (not an Exception) commits the deletes it staged",
    ),
    Mutant(
        "event-index-ignores-partition",
        "tests.mutants.m_pruning:event_index_ignores_partition",
        pruning.COUNTERS,
        "EventsByRun lists the events of a run with the same id in every environment",
    ),
]

drops_run_count_updates = mutant_harness(transaction_class=DropsRunCountUpdates)
decrements_without_deleting = mutant_harness(FlushesPending)
ghost_entries = mutant_harness(GhostDriver)
parent_ghost_entries = mutant_harness(ParentGhostDriver)
event_index_ignores_partition = mutant_harness(EventIndexIgnoresPartition)
commits_on_base_exception = mutant_harness(CommitsOnBaseException)
unfenced_tombstones = store_mutant(UnfencedTombstones)
keeps_deletes_on_raise = mutant_harness(KeepsDeletesOnRaise)
accepts_fewer_records = mutant_harness(transaction_class=AcceptsFewerRecords)


class KeepsLookaheadRow(WrappedTransaction):
    """Asks the store for one candidate more than the page holds and forgets to trim it off.

    The lookahead row is how a driver learns whether a cursor is needed; returning it makes every
    page one longer than asked, so a cleanup pass sized to its budget reads past that budget.
    """

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if command.limit >= self.driver.profile.limits.max_query_results:
            return self.inner.query_candidates(command, **kwargs)
        return self.inner.query_candidates(replace(command, limit=command.limit + 1), **kwargs)


keeps_lookahead_row = mutant_harness(transaction_class=KeepsLookaheadRow)


# -- issue 20: a deleted tombstone stays listed as due ---------------------------------------------------


class DeletedTombstoneEntries(WrappedTransaction):
    """Deleting a tombstone leaves its TombstonesByPruneAfter entry behind (a trigger that forgot deletes)."""

    def delete(self, current: Any) -> None:
        super().delete(current)
        if current.key.table is StorageTableName.TOMBSTONES:
            ghosts = self.driver.store.shared.setdefault("ghosts", [])
            for entry in current.indexes:
                if entry.index is StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER:
                    ghosts.append((entry.partition, StorageIndexReference(current.key, entry.sort)))

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return _with_ghosts(self.driver, command, self.inner.query_candidates(command, **kwargs))


class DeletedTombstoneDriver(GhostDriver):
    transaction_class = DeletedTombstoneEntries
    ghost_index = StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER


deleted_tombstone_entries = mutant_harness(DeletedTombstoneDriver)

MUTANTS += [
    Mutant(
        "deleted-tombstone-stays-due",
        "tests.mutants.m_pruning:deleted_tombstone_entries",
        pruning.COUNTERS,
        "deleting a tombstone leaves its TombstonesByPruneAfter entry: a pruned run stays listed as due",
    ),
]
