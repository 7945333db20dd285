"""Broken drivers for the exclusive_selection area.

Selection mutants wrap the reference driver's attempts. The two release
mutants reach into the reference attempt (``LocalTransaction._held``, the
set of rows it will release when it ends) because a wrapper never sees the
moment an attempt ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageCandidateMode,
    StorageIndexReference,
    StorageQueryDirection,
    StorageQueryRange,
    StorageRecordKey,
    StorageTableName,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    storage_record_key_codec,
)
from runlane_conformance.catalogue import exclusive_selection
from runlane_conformance.contract.cursors import StorageCursorPosition
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")
EXCLUSIVE = StorageCandidateMode.EXCLUSIVE


def _mode(kwargs: dict[str, Any]) -> StorageCandidateMode:
    return StorageCandidateMode(kwargs.get("mode", StorageCandidateMode.ADVISORY))


class IgnoresExclusiveMode(WrappedTransaction):
    """Serves exclusive requests as advisory ones while still advertising the capability."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.inner.query_candidates(command)


class AdvisoryHolds(WrappedTransaction):
    """Serves advisory requests (and the default mode) exclusively: they hold and skip rows."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.inner.query_candidates(command, mode=EXCLUSIVE)


class HoldsLookahead(WrappedTransaction):
    """Selects one row more than the page to learn whether more follow, and keeps holding it."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if _mode(kwargs) is not EXCLUSIVE:
            return self.inner.query_candidates(command, **kwargs)
        wider = self.inner.query_candidates(replace(command, limit=command.limit + 1), mode=EXCLUSIVE)
        items = wider.items[: command.limit]
        more = len(wider.items) > command.limit
        cursor = encode_storage_query_cursor(command, items[-1]) if more and items else None
        return QueryRecordsResult(items, cursor)


class HoldsLookaheadOnContinuation(HoldsLookahead):
    """The continuation query (after a cursor) is a separate statement that still locks one row extra."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if command.cursor is None:
            return self.inner.query_candidates(command, **kwargs)
        return super().query_candidates(command, **kwargs)


class DropsContinuationCursor(WrappedTransaction):
    """A page reached through a cursor never returns one: only the first exclusive page can be continued."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        result = self.inner.query_candidates(command, **kwargs)
        if _mode(kwargs) is EXCLUSIVE and command.cursor is not None:
            return QueryRecordsResult(result.items, None)
        return result


class DropsExclusiveCursor(WrappedTransaction):
    """Never returns a cursor from an exclusive page, so a full page cannot be continued."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        result = self.inner.query_candidates(command, **kwargs)
        if _mode(kwargs) is EXCLUSIVE:
            return QueryRecordsResult(result.items, None)
        return result


class KeepsHoldsAtCommit(WrappedDriver):
    """Forgets to release the rows an attempt held when it commits."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            result = callback(self.transaction_class(tx, self))
            tx._held.clear()  # the attempt no longer knows what to release
            return result

        return self.inner.transaction(run)  # type: ignore[no-any-return]


class KeepsHoldsAtRollback(WrappedDriver):
    """Forgets to release the rows an attempt held when its callback raises."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            try:
                return callback(self.transaction_class(tx, self))
            except BaseException:
                tx._held.clear()
                raise

        return self.inner.transaction(run)  # type: ignore[no-any-return]


class KeepsHoldsAfterBaseException(WrappedDriver):
    """Releases held rows when the callback raises an Exception, but not a BaseException outside it."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            try:
                return callback(self.transaction_class(tx, self))
            except Exception:
                raise
            except BaseException:
                tx._held.clear()  # the ``except Exception`` cleanup path never sees a KeyboardInterrupt
                raise

        return self.inner.transaction(run)  # type: ignore[no-any-return]


# -- an exclusive path written apart from the advisory one -----------------------------------------


def _reference(position: StorageCursorPosition) -> StorageIndexReference:
    table, parts = storage_record_key_codec.decode_parts(position.key)
    return StorageIndexReference(StorageRecordKey(StorageTableName(table), parts), position.sort)


def _translated(
    tx: Any, command: QueryRecordsCommand, alt: QueryRecordsCommand, **kwargs: Any
) -> QueryRecordsResult:
    """Serve ``command`` by scanning ``alt`` instead, carrying the cursor position across both scopes."""
    position = decode_storage_query_cursor(command)  # the caller's cursor is still checked for its scope
    alt_cursor = None if position is None else encode_storage_query_cursor(alt, _reference(position))
    result = tx.query_candidates(replace(alt, cursor=alt_cursor), **kwargs)
    items = tuple(result.items)[: command.limit]
    cursor = encode_storage_query_cursor(command, items[-1]) if result.cursor is not None and items else None
    return QueryRecordsResult(items, cursor)


class ExclusiveIgnoresUpperBound(WrappedTransaction):
    """The exclusive statement (its own ``SKIP LOCKED`` query) forgets the range's upper bound."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if _mode(kwargs) is not EXCLUSIVE or command.range.upper is None:
            return self.inner.query_candidates(command, **kwargs)
        alt = replace(command, range=StorageQueryRange(command.range.lower, None), cursor=None)
        return _translated(self.inner, command, alt, mode=EXCLUSIVE)


class ExclusiveAlwaysAscending(WrappedTransaction):
    """The exclusive statement forgets ``ORDER BY ... DESC``: its pages always come in ascending order."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if _mode(kwargs) is not EXCLUSIVE or command.direction is StorageQueryDirection.ASCENDING:
            return self.inner.query_candidates(command, **kwargs)
        alt = replace(command, direction=StorageQueryDirection.ASCENDING, cursor=None)
        return _translated(self.inner, command, alt, mode=EXCLUSIVE)


class ExclusiveCursorTable(WrappedTransaction):
    """Exclusive cursors are looked up in a server-side table by their text, whatever scope they come with."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if _mode(kwargs) is not EXCLUSIVE:
            return self.inner.query_candidates(command, **kwargs)
        issued: dict[str, StorageIndexReference] = self.driver.store.shared.setdefault("cursors", {})
        if command.cursor is not None and command.cursor in issued:
            command = replace(command, cursor=encode_storage_query_cursor(command, issued[command.cursor]))
        result = self.inner.query_candidates(command, mode=EXCLUSIVE)
        if result.cursor is not None and result.items:
            issued[result.cursor] = result.items[-1]
        return result


class SkipsOwnHolds(WrappedTransaction):
    """Skips every held row, including the rows this attempt already holds itself."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.mine: set[str] = set()

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if _mode(kwargs) is not EXCLUSIVE or not self.mine:
            result = self.inner.query_candidates(command, **kwargs)
        else:
            wider = replace(command, limit=command.limit + len(self.mine))
            position = decode_storage_query_cursor(command)
            if position is not None:
                wider = replace(wider, cursor=encode_storage_query_cursor(wider, _reference(position)))
            found = self.inner.query_candidates(wider, mode=EXCLUSIVE)
            items = tuple(item for item in found.items if item.key.encoded not in self.mine)[: command.limit]
            more = found.cursor is not None or len(items) < len(found.items)
            cursor = encode_storage_query_cursor(command, items[-1]) if more and items else None
            result = QueryRecordsResult(items, cursor)
        if _mode(kwargs) is EXCLUSIVE:
            self.mine.update(item.key.encoded for item in result.items)
        return result


# -- holds kept per index entry instead of per record ----------------------------------------------


class HoldsPerIndexEntry(WrappedTransaction):
    """Holds (index, record) pairs: a record held through one index is handed out through another."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if _mode(kwargs) is not EXCLUSIVE:
            return self.inner.query_candidates(command, **kwargs)
        holds: dict[tuple[str, str], int] = self.driver.store.shared.setdefault("holds", {})
        owner = id(self)
        busy = {key for (index, key), holder in holds.items() if index == command.index and holder != owner}
        limits = self.driver.profile.limits
        wider = replace(command, limit=min(limits.max_query_results, command.limit + len(busy)))
        position = decode_storage_query_cursor(command)
        if position is not None:
            wider = replace(wider, cursor=encode_storage_query_cursor(wider, _reference(position)))
        found = self.inner.query_candidates(wider)
        items = tuple(item for item in found.items if item.key.encoded not in busy)[: command.limit]
        more = found.cursor is not None or len(items) < len(found.items)
        for item in items:
            holds[(command.index, item.key.encoded)] = owner
        cursor = encode_storage_query_cursor(command, items[-1]) if more and items else None
        return QueryRecordsResult(items, cursor)


class PerIndexHoldsDriver(WrappedDriver):
    transaction_class = HoldsPerIndexEntry

    def transaction(self, callback: Callable[[Any], T]) -> T:
        holds: dict[tuple[str, str], int] = self.store.shared.setdefault("holds", {})

        def run(tx: Any) -> T:
            attempt = self.transaction_class(tx, self)
            try:
                return callback(attempt)
            finally:
                for entry in [entry for entry, holder in holds.items() if holder == id(attempt)]:
                    del holds[entry]

        return self.inner.transaction(run)  # type: ignore[no-any-return]


class _ExclusiveForTheRestOfTheAttempt(WrappedTransaction):
    """Once the attempt selected exclusively, its later advisory scans are served in exclusive mode."""

    locking = False

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode") is StorageCandidateMode.EXCLUSIVE:
            self.locking = True
        elif self.locking:
            kwargs["mode"] = StorageCandidateMode.EXCLUSIVE
        return self.inner.query_candidates(command, **kwargs)


MUTANTS = [
    Mutant(
        "double-hands-exclusive-rows",
        "tests.mutants.m_exclusive_selection:ignores_exclusive_mode",
        exclusive_selection.DISJOINT,
        "exclusive selection is advisory: two open attempts get the same rows",
    ),
    Mutant(
        "exclusive-holds-released-at-first-point-read",
        "tests.mutants.m_exclusive_selection:releases_at_first_point_read",
        exclusive_selection.DISJOINT,
        "point-reading the selected rows (as core does before deciding) releases their holds",
    ),
    Mutant(
        "exclusive-holds-released-at-first-write",
        "tests.mutants.m_exclusive_selection:releases_at_first_write",
        exclusive_selection.DISJOINT,
        "the first staged write releases the selection's holds before the attempt ends",
    ),
    Mutant(
        "exclusive-rows-never-released-at-commit",
        "tests.mutants.m_exclusive_selection:keeps_holds_at_commit",
        exclusive_selection.RELEASED_AT_COMMIT,
        "rows stay held after the attempt commits",
    ),
    Mutant(
        "exclusive-rows-never-released-at-rollback",
        "tests.mutants.m_exclusive_selection:keeps_holds_at_rollback",
        exclusive_selection.RELEASED_AT_ROLLBACK,
        "rows stay held after the callback raised",
    ),
    Mutant(
        "advisory-selection-holds",
        "tests.mutants.m_exclusive_selection:advisory_holds",
        exclusive_selection.ADVISORY,
        "advisory selection holds and skips rows",
    ),
    Mutant(
        "drops-exclusive-cursor",
        "tests.mutants.m_exclusive_selection:drops_exclusive_cursor",
        exclusive_selection.FULL_PAGE,
        "a full exclusive page never returns a cursor",
    ),
    Mutant(
        "holds-lookahead-row",
        "tests.mutants.m_exclusive_selection:holds_lookahead",
        exclusive_selection.NO_LOOKAHEAD,
        "selects and holds one row beyond the page",
    ),
    Mutant(
        "exclusive-rows-kept-after-base-exception",
        "tests.mutants.m_exclusive_selection:keeps_holds_after_base_exception",
        exclusive_selection.RELEASED_AT_ROLLBACK,
        "rows stay held after the callback raised a BaseException that is not an Exception",
    ),
    Mutant(
        "exclusive-holds-per-index-entry",
        "tests.mutants.m_exclusive_selection:holds_per_index_entry",
        exclusive_selection.DISJOINT,
        "holds are kept per index entry, so a record held through one index is handed out through another",
    ),
    Mutant(
        "exclusive-ignores-upper-bound",
        "tests.mutants.m_exclusive_selection:exclusive_ignores_upper_bound",
        exclusive_selection.SAME_SCAN,
        "the exclusive scan forgets the range's upper bound",
    ),
    Mutant(
        "exclusive-always-ascending",
        "tests.mutants.m_exclusive_selection:exclusive_always_ascending",
        exclusive_selection.SAME_SCAN,
        "the exclusive scan ignores a descending direction",
    ),
    Mutant(
        "exclusive-cursor-table-ignores-scope",
        "tests.mutants.m_exclusive_selection:exclusive_cursor_table",
        exclusive_selection.SAME_SCAN,
        "an exclusive cursor continues whatever index, partition, range or direction it is used with",
    ),
    Mutant(
        "exclusive-skips-own-holds",
        "tests.mutants.m_exclusive_selection:skips_own_holds",
        exclusive_selection.SAME_SCAN,
        "a second exclusive scan in one attempt skips the rows that attempt already holds",
    ),
    Mutant(
        "holds-lookahead-on-continuation",
        "tests.mutants.m_exclusive_selection:holds_lookahead_on_continuation",
        exclusive_selection.NO_LOOKAHEAD,
        "a page reached through a cursor selects and holds one row beyond it",
    ),
    Mutant(
        "drops-continuation-cursor",
        "tests.mutants.m_exclusive_selection:drops_continuation_cursor",
        exclusive_selection.FULL_PAGE,
        "a full exclusive page reached through a cursor returns no cursor although rows follow",
    ),
    Mutant(
        "exclusive-for-the-rest-of-the-attempt",
        "tests.mutants.m_exclusive_selection:exclusive_for_the_rest_of_the_attempt",
        exclusive_selection.ADVISORY,
        "after one exclusive selection every later scan of the attempt holds the rows it returns",
    ),
]

keeps_holds_after_base_exception = mutant_harness(KeepsHoldsAfterBaseException)
holds_lookahead_on_continuation = mutant_harness(transaction_class=HoldsLookaheadOnContinuation)
drops_continuation_cursor = mutant_harness(transaction_class=DropsContinuationCursor)
holds_per_index_entry = mutant_harness(PerIndexHoldsDriver)
exclusive_ignores_upper_bound = mutant_harness(transaction_class=ExclusiveIgnoresUpperBound)
exclusive_always_ascending = mutant_harness(transaction_class=ExclusiveAlwaysAscending)
exclusive_cursor_table = mutant_harness(transaction_class=ExclusiveCursorTable)
skips_own_holds = mutant_harness(transaction_class=SkipsOwnHolds)
ignores_exclusive_mode = mutant_harness(transaction_class=IgnoresExclusiveMode)
advisory_holds = mutant_harness(transaction_class=AdvisoryHolds)
holds_lookahead = mutant_harness(transaction_class=HoldsLookahead)
drops_exclusive_cursor = mutant_harness(transaction_class=DropsExclusiveCursor)


class _EndsSelection(WrappedTransaction):
    """Releases the attempt's exclusive holds early, as a driver that runs its selection as its own
    statement transaction (SKIP LOCKED) and the rest of the attempt in another would."""

    def end_selection(self) -> None:
        inner = self.inner
        with inner._store._lock:
            holds = inner._store._holds
            for ekey in inner._held:
                if holds.get(ekey) == inner._token:
                    del holds[ekey]
        inner._held.clear()


class ReleasesAtFirstPointRead(_EndsSelection):
    """The point reads run in a new statement transaction, which drops the selection's row locks."""

    def get(self, keys: Any) -> Any:
        self.end_selection()
        return self.inner.get(keys)


class ReleasesAtFirstWrite(_EndsSelection):
    """Reads run in a read transaction; the first staged write opens the write one and drops the holds."""

    def create(self, record: Any) -> None:
        self.end_selection()
        self.inner.create(record)

    def replace(self, current: Any, record: Any) -> None:
        self.end_selection()
        self.inner.replace(current, record)

    def delete(self, current: Any) -> None:
        self.end_selection()
        self.inner.delete(current)


releases_at_first_point_read = mutant_harness(transaction_class=ReleasesAtFirstPointRead)
releases_at_first_write = mutant_harness(transaction_class=ReleasesAtFirstWrite)
keeps_holds_at_commit = mutant_harness(KeepsHoldsAtCommit)
keeps_holds_at_rollback = mutant_harness(KeepsHoldsAtRollback)

exclusive_for_the_rest_of_the_attempt = mutant_harness(transaction_class=_ExclusiveForTheRestOfTheAttempt)
