"""Broken drivers for the operator_reads area.

Each mutant wraps the reference driver and offers the operator read model
(``get_run``, ``list_runs``, ``list_run_events``) through ``OperatorDriver``,
which delegates all three; a mutant overrides the one read it breaks. Mutants
that need to see what an attempt wrote record it in their attempt wrapper
and act after the commit, the way a projection maintained outside the
commit would.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, TypeVar

from runlane_conformance import (
    QueryRecordsCommand,
    StorageCursorError,
    StorageIndexName,
    StorageQueryDirection,
    StorageQueryRange,
    StorageTableName,
    build_storage_record,
    encode_storage_query_cursor,
    thaw_json,
)
from runlane_conformance.catalogue import operator_reads
from runlane_conformance.contract.table_definitions import run_record_key
from runlane_conformance.contract.values import StorageIndexReference
from runlane_conformance.local.operator import OperatorPage
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


class OperatorDriver(WrappedDriver):
    """A wrapped driver that also delegates the operator read model."""

    def get_run(self, environment: str, run_id: str) -> Any:
        return self.inner.get_run(environment, run_id)

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        return self.inner.list_runs(environment, limit=limit, cursor=cursor)

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        return self.inner.list_run_events(environment, run_id, limit=limit, cursor=cursor)


# -- a projection that trails the commit -----------------------------------------------------------


class RecordsRunWrites(WrappedTransaction):
    """Remembers the run records this attempt writes (for a projection updated outside the commit)."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.runs: list[tuple[Any, Any]] = []  # (key, new record or None)

    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table is StorageTableName.RUNS:
            self.runs.append((record.key, record))

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        if record.key.table is StorageTableName.RUNS:
            self.runs.append((record.key, record))

    def delete(self, current: Any) -> None:
        super().delete(current)
        if current.key.table is StorageTableName.RUNS:
            self.runs.append((current.key, None))


class LazyRunView(OperatorDriver):
    """get_run answers from a projection that applies a commit's run writes only when the next
    transaction starts, so a run appears one transaction late."""

    transaction_class = RecordsRunWrites

    def transaction(self, callback: Callable[[Any], T]) -> T:
        view: dict[Any, Any] = self.store.shared.setdefault("view", {})
        pending: list[tuple[Any, Any]] = self.store.shared.setdefault("pending", [])
        for key, record in pending:
            hidden = record is None or record.document.value.get("tombstonedAt") is not None
            if hidden:
                view.pop(key, None)
            else:
                view[key] = record
        pending.clear()
        attempts: list[RecordsRunWrites] = []

        def run(tx: Any) -> T:
            attempts.append(RecordsRunWrites(tx, self))
            return callback(attempts[-1])

        result: T = self.inner.transaction(run)
        pending.extend(attempts[-1].runs)
        return result

    def get_run(self, environment: str, run_id: str) -> Any:
        return self.store.shared.setdefault("view", {}).get(run_record_key(environment, run_id))


# -- list and history reads ------------------------------------------------------------------------


class DropsRunListCursor(OperatorDriver):
    """list_runs never returns a cursor, so listings stop after the first page."""

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        return OperatorPage(self.inner.list_runs(environment, limit=limit, cursor=cursor).items, None)


class ReversedHistoryPages(OperatorDriver):
    """list_run_events returns each page of a history newest event first."""

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_run_events(environment, run_id, limit=limit, cursor=cursor)
        return OperatorPage(tuple(reversed(page.items)), page.cursor)


class ShowsTombstonedRuns(OperatorDriver):
    """get_run returns the raw run record without checking whether it was tombstoned."""

    def get_run(self, environment: str, run_id: str) -> Any:
        key = run_record_key(environment, run_id)
        return self.inner.transaction(lambda tx: tx.get([key]))[0]


class ListsTombstonedHistories(OperatorDriver):
    """list_run_events reads the events index directly, so a tombstoned run's history stays listed."""

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        command = QueryRecordsCommand(
            StorageIndexName.EVENTS_BY_RUN,
            environment,
            limit,
            StorageQueryRange.prefix((run_id,)),
            StorageQueryDirection.ASCENDING,
            cursor,
        )
        page = self.inner.query(command)
        keys = [item.key for item in page.items]
        records = self.inner.transaction(lambda tx: tx.get(keys)) if keys else []
        return OperatorPage(tuple(record for record in records if record is not None), page.cursor)


class CursorIgnoresEnvironment(OperatorDriver):
    """list_runs cursors remember only the position, not the environment they were issued for."""

    _tokens = itertools.count()

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        positions: dict[str, StorageIndexReference] = self.store.shared.setdefault("positions", {})
        command = QueryRecordsCommand(
            StorageIndexName.RUNS_BY_CREATED_AT,
            environment,
            limit,
            StorageQueryRange(),
            StorageQueryDirection.DESCENDING,
        )
        if cursor in positions:
            cursor = encode_storage_query_cursor(command, positions[cursor])
        page = self.inner.list_runs(environment, limit=limit, cursor=cursor)
        if page.cursor is None or not page.items:
            return page
        last = page.items[-1]
        [entry] = [entry for entry in last.indexes if entry.index is StorageIndexName.RUNS_BY_CREATED_AT]
        token = f"position-{next(self._tokens)}"
        positions[token] = StorageIndexReference(last.key, entry.sort)
        return OperatorPage(page.items, token)


class SharesMutableRuns(OperatorDriver):
    """get_run hands every caller the same mutable run document (cached per record version)."""

    def get_run(self, environment: str, run_id: str) -> Any:
        found = self.inner.get_run(environment, run_id)
        if found is None:
            return None
        cache: dict[Any, Any] = self.store.shared.setdefault("documents", {})
        return cache.setdefault((found.key, found.version), thaw_json(found.document.value))


MUTANTS = [
    Mutant(
        "lazy-operator-view",
        "tests.mutants.m_operator_reads:lazy_run_view",
        operator_reads.VISIBLE_AT_ONCE,
        "get_run serves a projection that applies a commit only when the next transaction starts",
    ),
    Mutant(
        "drops-run-list-cursor",
        "tests.mutants.m_operator_reads:drops_run_list_cursor",
        operator_reads.LISTED_ONCE,
        "list_runs returns no cursor, so runs after the first page are never listed",
    ),
    Mutant(
        "reversed-history-pages",
        "tests.mutants.m_operator_reads:reversed_history_pages",
        operator_reads.HISTORY_ORDER,
        "list_run_events returns events out of sequence order",
    ),
    Mutant(
        "shows-tombstoned-runs",
        "tests.mutants.m_operator_reads:shows_tombstoned_runs",
        operator_reads.TOMBSTONE_HIDES,
        "get_run still returns a tombstoned run",
    ),
    Mutant(
        "lists-tombstoned-histories",
        "tests.mutants.m_operator_reads:lists_tombstoned_histories",
        operator_reads.TOMBSTONE_HIDES,
        "list_run_events still lists a tombstoned run's events",
    ),
    Mutant(
        "run-cursor-ignores-environment",
        "tests.mutants.m_operator_reads:cursor_ignores_environment",
        operator_reads.CURSOR_SCOPE,
        "a list_runs cursor from one environment continues a listing of another",
    ),
    Mutant(
        "shares-mutable-runs",
        "tests.mutants.m_operator_reads:shares_mutable_runs",
        operator_reads.DEFENSIVE_COPIES,
        "get_run returns one shared mutable document to every caller",
    ),
]


class _Tokens(OperatorDriver):
    """Hands out its own cursor tokens that remember only a position (no filters)."""

    _tokens = itertools.count()

    def _remember(self, page: Any, index: StorageIndexName) -> Any:
        if page.cursor is None or not page.items:
            return page
        last = page.items[-1]
        [entry] = [entry for entry in last.indexes if entry.index is index]
        token = f"position-{next(self._tokens)}"
        self.store.shared.setdefault("positions", {})[token] = StorageIndexReference(last.key, entry.sort)
        return OperatorPage(page.items, token)

    def _recall(self, cursor: str | None, command: QueryRecordsCommand) -> str | None:
        positions: dict[str, StorageIndexReference] = self.store.shared.setdefault("positions", {})
        if cursor in positions:
            return encode_storage_query_cursor(command, positions[cursor])
        return cursor


class LaterRunCursorsForgetEnvironment(_Tokens):
    """list_runs binds its first cursor to the environment; cursors of later pages keep only a position."""

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        command = QueryRecordsCommand(
            StorageIndexName.RUNS_BY_CREATED_AT,
            environment,
            limit,
            StorageQueryRange(),
            StorageQueryDirection.DESCENDING,
        )
        page = self.inner.list_runs(environment, limit=limit, cursor=self._recall(cursor, command))
        return page if cursor is None else self._remember(page, StorageIndexName.RUNS_BY_CREATED_AT)


class HistoryCursorForgetsEnvironment(_Tokens):
    """list_run_events cursors remember the run id and position, not the environment."""

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        command = QueryRecordsCommand(
            StorageIndexName.EVENTS_BY_RUN,
            environment,
            limit,
            StorageQueryRange.prefix((run_id,)),
            StorageQueryDirection.ASCENDING,
        )
        page = self.inner.list_run_events(
            environment, run_id, limit=limit, cursor=self._recall(cursor, command)
        )
        return self._remember(page, StorageIndexName.EVENTS_BY_RUN)


class HidesTombstonedHistoryOnFirstPageOnly(ListsTombstonedHistories):
    """Checks the tombstone when a history listing starts, but continues a cursor straight from the index."""

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        if cursor is None:
            return self.inner.list_run_events(environment, run_id, limit=limit, cursor=cursor)
        return super().list_run_events(environment, run_id, limit=limit, cursor=cursor)


class UnboundedOperatorPages(OperatorDriver):
    """Serves any operator page limit by joining as many inner pages as it takes."""

    def _joined(self, fetch: Callable[[int, str | None], Any], limit: int, cursor: str | None) -> Any:
        maximum = self.profile.limits.max_query_results
        items: list[Any] = []
        while True:
            page = fetch(min(limit - len(items), maximum), cursor)
            items.extend(page.items)
            cursor = page.cursor
            if cursor is None or len(items) >= limit:
                return OperatorPage(tuple(items), cursor)

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        return self._joined(lambda n, c: self.inner.list_runs(environment, limit=n, cursor=c), limit, cursor)

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        return self._joined(
            lambda n, c: self.inner.list_run_events(environment, run_id, limit=n, cursor=c), limit, cursor
        )


MUTANTS += [
    Mutant(
        "later-run-cursors-forget-environment",
        "tests.mutants.m_operator_reads:later_run_cursors_forget_environment",
        operator_reads.CURSOR_SCOPE,
        "list_runs cursors after the first page continue a listing of any environment",
    ),
    Mutant(
        "history-cursor-forgets-environment",
        "tests.mutants.m_operator_reads:history_cursor_forgets_environment",
        operator_reads.CURSOR_SCOPE,
        "a list_run_events cursor continues the same run id in another environment",
    ),
    Mutant(
        "tombstone-hides-first-history-page-only",
        "tests.mutants.m_operator_reads:hides_tombstoned_history_first_page_only",
        operator_reads.TOMBSTONE_HIDES,
        "a history continued from a cursor is read from the index without checking the tombstone",
    ),
    Mutant(
        "unbounded-operator-pages",
        "tests.mutants.m_operator_reads:unbounded_operator_pages",
        operator_reads.PAGE_LIMIT,
        "operator lists serve pages past max_query_results by joining inner pages",
    ),
]

later_run_cursors_forget_environment = mutant_harness(LaterRunCursorsForgetEnvironment)
history_cursor_forgets_environment = mutant_harness(HistoryCursorForgetsEnvironment)
hides_tombstoned_history_first_page_only = mutant_harness(HidesTombstonedHistoryOnFirstPageOnly)
unbounded_operator_pages = mutant_harness(UnboundedOperatorPages)
lazy_run_view = mutant_harness(LazyRunView)
drops_run_list_cursor = mutant_harness(DropsRunListCursor)
reversed_history_pages = mutant_harness(ReversedHistoryPages)
shows_tombstoned_runs = mutant_harness(ShowsTombstonedRuns)
lists_tombstoned_histories = mutant_harness(ListsTombstonedHistories)
cursor_ignores_environment = mutant_harness(CursorIgnoresEnvironment)
shares_mutable_runs = mutant_harness(SharesMutableRuns)


# -- a projection written while staging, a lossy projection, prefix-matching filters ----------------


class StagesIntoProjection(RecordsRunWrites):
    """Writes every staged run into the projection at once, whether or not the attempt commits."""

    def create(self, record: Any) -> None:
        super().create(record)
        _project(self.driver, record.key, record)

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        _project(self.driver, record.key, record)

    def delete(self, current: Any) -> None:
        super().delete(current)
        _project(self.driver, current.key, None)


def _project(driver: WrappedDriver, key: Any, record: Any) -> None:
    if key.table is not StorageTableName.RUNS:
        return
    view: dict[Any, Any] = driver.store.shared.setdefault("view", {})
    if record is None or record.document.value.get("tombstonedAt") is not None:
        view[key] = None
    else:
        view[key] = record


class ProjectionAtStaging(OperatorDriver):
    """get_run answers from a projection that the attempt wrote while staging (a rollback never undoes it)."""

    transaction_class = StagesIntoProjection

    def get_run(self, environment: str, run_id: str) -> Any:
        view: dict[Any, Any] = self.store.shared.setdefault("view", {})
        key = run_record_key(environment, run_id)
        return view[key] if key in view else self.inner.get_run(environment, run_id)


def _to_milliseconds(text: object) -> object:
    if not isinstance(text, str) or len(text) != len("2000-01-01T00:00:00.000000Z"):
        return text
    return text[:23] + "000Z"  # a TIMESTAMP(3) column keeps milliseconds only


def _lossy(run: Any) -> Any:
    if run is None:
        return None
    value = thaw_json(run.document.value)
    assert isinstance(value, dict)
    for field in ("createdAt", "updatedAt", "completedAt"):
        value[field] = _to_milliseconds(value[field])
    return build_storage_record(StorageTableName.RUNS, value)


class MillisecondProjection(OperatorDriver):
    """Run summaries come from a projection whose timestamp columns keep only milliseconds."""

    def get_run(self, environment: str, run_id: str) -> Any:
        return _lossy(self.inner.get_run(environment, run_id))

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_runs(environment, limit=limit, cursor=cursor)
        return OperatorPage(tuple(_lossy(run) for run in page.items), page.cursor)


class RecordsNames(WrappedTransaction):
    """Remembers every environment and run id a create names (the mutant's filter matches against them)."""

    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table is StorageTableName.RUNS:
            environment, run_id = record.key.id
            self.driver.store.shared.setdefault("names", set()).add((environment, run_id))


class PrefixFilters(OperatorDriver):
    """Filters with ``LIKE 'value%'``: a listing also shows runs of environments, and histories of runs,
    whose names extend the one asked for."""

    transaction_class = RecordsNames

    def _names(self) -> set[tuple[str, str]]:
        return set(self.store.shared.get("names", set()))

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_runs(environment, limit=limit, cursor=cursor)
        if cursor is not None:
            return page
        others = sorted(
            {env for env, _ in self._names() if env != environment and env.startswith(environment)}
        )
        extra = [run for env in others for run in self.inner.list_runs(env, limit=limit).items]
        return OperatorPage(tuple([*page.items, *extra][:limit]), page.cursor)

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_run_events(environment, run_id, limit=limit, cursor=cursor)
        if cursor is not None:
            return page
        others = sorted(
            {
                run
                for env, run in self._names()
                if env == environment and run != run_id and run.startswith(run_id)
            }
        )
        extra = [
            event
            for run in others
            for event in self.inner.list_run_events(environment, run, limit=limit).items
        ]
        return OperatorPage(tuple([*page.items, *extra][:limit]), page.cursor)


class ListsOnlyActiveRuns(OperatorDriver):
    """list_runs serves an "active runs" projection: finished runs are left out of every page."""

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_runs(environment, limit=limit, cursor=cursor)
        active = tuple(run for run in page.items if run.document.value.get("completedAt") is None)
        return OperatorPage(active, page.cursor)


MUTANTS += [
    Mutant(
        "lists-only-active-runs",
        "tests.mutants.m_operator_reads:lists_only_active_runs",
        operator_reads.LISTED_ONCE,
        "list_runs leaves finished runs out",
    ),
    Mutant(
        "projection-written-at-staging",
        "tests.mutants.m_operator_reads:projection_at_staging",
        operator_reads.VISIBLE_AT_ONCE,
        "the projection is written when a run is staged, so a rolled-back or replayed attempt's run shows",
    ),
    Mutant(
        "millisecond-projection",
        "tests.mutants.m_operator_reads:millisecond_projection",
        operator_reads.VISIBLE_AT_ONCE,
        "operator summaries keep timestamps to the millisecond only",
    ),
    Mutant(
        "prefix-matching-run-filter",
        "tests.mutants.m_operator_reads:prefix_filters",
        operator_reads.LISTED_ONCE,
        "list_runs also lists runs of environments whose name extends the one asked for",
    ),
    Mutant(
        "prefix-matching-history-filter",
        "tests.mutants.m_operator_reads:prefix_filters",
        operator_reads.HISTORY_ORDER,
        "list_run_events also lists events of runs whose id extends the one asked for",
    ),
]

projection_at_staging = mutant_harness(ProjectionAtStaging)
millisecond_projection = mutant_harness(MillisecondProjection)
prefix_filters = mutant_harness(PrefixFilters)
lists_only_active_runs = mutant_harness(ListsOnlyActiveRuns)


# -- lookups keyed by run id alone ------------------------------------------------------------------


class RecordsRunEnvironments(WrappedTransaction):
    """Remembers every environment a run was created in (what a lookup by id alone would search)."""

    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table is StorageTableName.RUNS:
            self.driver.store.shared.setdefault("environments", set()).add(record.key.id[0])


class RunByIdAlone(OperatorDriver):
    """get_run falls back to a run with the same id in any environment when the asked one has none."""

    transaction_class = RecordsRunEnvironments

    def get_run(self, environment: str, run_id: str) -> Any:
        found = self.inner.get_run(environment, run_id)
        for other in sorted(self.store.shared.get("environments", ())):
            if found is not None:
                break
            found = self.inner.get_run(other, run_id)
        return found


class HistoryByRunIdAlone(OperatorDriver):
    """list_run_events falls back to the history of a run with the same id in any environment."""

    transaction_class = RecordsRunEnvironments

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_run_events(environment, run_id, limit=limit, cursor=cursor)
        for other in sorted(self.store.shared.get("environments", ())):
            if page.items or cursor is not None:
                break
            page = self.inner.list_run_events(other, run_id, limit=limit, cursor=None)
        return page


run_by_id_alone = mutant_harness(RunByIdAlone)
history_by_run_id_alone = mutant_harness(HistoryByRunIdAlone)

MUTANTS += [
    Mutant(
        "run-found-by-id-alone",
        "tests.mutants.m_operator_reads:run_by_id_alone",
        operator_reads.VISIBLE_AT_ONCE,
        "get_run returns a run with the asked id from another environment",
    ),
    Mutant(
        "history-found-by-run-id-alone",
        "tests.mutants.m_operator_reads:history_by_run_id_alone",
        operator_reads.HISTORY_ORDER,
        "list_run_events lists the history of a run with the asked id from another environment",
    ),
]


# -- issue 20: a cursor that names a run, and a projection that guesses which documents are runs -----------


class RunCursorNamesItsLastRun(OperatorDriver):
    """list_runs cursors carry the last run's id; a listing continues after that run, and ends without it."""

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        everything: list[Any] = []
        inner: str | None = None
        while True:
            page = self.inner.list_runs(environment, limit=limit, cursor=inner)
            everything.extend(page.items)
            inner = page.cursor
            if inner is None:
                break
        if cursor is not None:
            name, _, last = cursor.partition(":")
            if name != environment:
                raise StorageCursorError("this cursor belongs to another listing")
            ids = [item.key.id[1] for item in everything]
            everything = everything[ids.index(last) + 1 :] if last in ids else []
        items = everything[:limit]
        follow = f"{environment}:{items[-1].key.id[1]}" if len(items) == limit else None
        return OperatorPage(tuple(items), follow)


class GuessesRunsByFields(OperatorDriver):
    """The projection takes any document with a runId, a status and a createdAt for a run: wait tokens too."""

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        page = self.inner.list_runs(environment, limit=limit, cursor=cursor)
        if page.cursor is not None:
            return page
        command = QueryRecordsCommand(
            StorageIndexName.WAIT_TOKENS_BY_STATUS,
            environment,
            max(1, min(50, self.profile.limits.max_query_results)),
        )
        keys = []
        while True:
            found = self.inner.query(command)
            keys.extend(item.key for item in found.items)
            if found.cursor is None:
                break
            command = command.with_cursor(found.cursor)
        budget = max(1, self.profile.limits.max_point_reads)
        tokens: list[Any] = []
        for start in range(0, len(keys), budget):
            part = keys[start : start + budget]
            found_tokens = self.inner.transaction(lambda tx, part=part: tx.get(part))
            tokens.extend(record for record in found_tokens if record is not None)
        return OperatorPage((*page.items, *tokens), None)


run_cursor_names_its_last_run = mutant_harness(RunCursorNamesItsLastRun)
guesses_runs_by_fields = mutant_harness(GuessesRunsByFields)

MUTANTS += [
    Mutant(
        "run-cursor-names-its-last-run",
        "tests.mutants.m_operator_reads:run_cursor_names_its_last_run",
        operator_reads.LISTED_ONCE,
        "a list_runs cursor continues after the run it names, so tombstoning that run ends the listing",
    ),
    Mutant(
        "guesses-runs-by-fields",
        "tests.mutants.m_operator_reads:guesses_runs_by_fields",
        operator_reads.LISTED_ONCE,
        "list_runs also lists wait tokens, whose documents carry a runId, a status and a createdAt",
    ),
]


class SharesMutableHistoryItems(OperatorDriver):
    """list_run_events pages are tuples, but each event in them is one cached mutable dict shared by every
    call (a page cache that copies the page, not its items)."""

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        cache: dict[str, Any] = self.__dict__.setdefault("_events", {})
        page = self.inner.list_run_events(environment, run_id, limit=limit, cursor=cursor)
        items = []
        for record in page.items:
            shared = cache.setdefault(
                record.key.encoded, {"document": {"value": thaw_json(record.document.value)}}
            )
            items.append(shared)
        return OperatorPage(tuple(items), page.cursor)


shares_mutable_history_items = mutant_harness(SharesMutableHistoryItems)

MUTANTS += [
    Mutant(
        "shares-mutable-history-items",
        "tests.mutants.m_operator_reads:shares_mutable_history_items",
        operator_reads.DEFENSIVE_COPIES,
        "list_run_events returns a tuple page whose events are mutable dicts shared by every call",
    ),
]
