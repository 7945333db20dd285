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

from runlane_conformance import QueryRecordsResult, StorageCandidateMode, encode_storage_query_cursor
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


MUTANTS = [
    Mutant(
        "double-hands-exclusive-rows",
        "tests.mutants.m_exclusive_selection:ignores_exclusive_mode",
        "exclusive_selection.disjoint-across-instances",
        "exclusive selection is advisory: two open attempts get the same rows",
    ),
    Mutant(
        "exclusive-rows-never-released-at-commit",
        "tests.mutants.m_exclusive_selection:keeps_holds_at_commit",
        "exclusive_selection.released-at-commit",
        "rows stay held after the attempt commits",
    ),
    Mutant(
        "exclusive-rows-never-released-at-rollback",
        "tests.mutants.m_exclusive_selection:keeps_holds_at_rollback",
        "exclusive_selection.released-at-rollback",
        "rows stay held after the callback raised",
    ),
    Mutant(
        "advisory-selection-holds",
        "tests.mutants.m_exclusive_selection:advisory_holds",
        "exclusive_selection.advisory-never-holds",
        "advisory selection holds and skips rows",
    ),
    Mutant(
        "drops-exclusive-cursor",
        "tests.mutants.m_exclusive_selection:drops_exclusive_cursor",
        "exclusive_selection.full-page-continues",
        "a full exclusive page never returns a cursor",
    ),
    Mutant(
        "holds-lookahead-row",
        "tests.mutants.m_exclusive_selection:holds_lookahead",
        "exclusive_selection.no-lookahead-hold",
        "selects and holds one row beyond the page",
    ),
]

ignores_exclusive_mode = mutant_harness(transaction_class=IgnoresExclusiveMode)
advisory_holds = mutant_harness(transaction_class=AdvisoryHolds)
holds_lookahead = mutant_harness(transaction_class=HoldsLookahead)
drops_exclusive_cursor = mutant_harness(transaction_class=DropsExclusiveCursor)
keeps_holds_at_commit = mutant_harness(KeepsHoldsAtCommit)
keeps_holds_at_rollback = mutant_harness(KeepsHoldsAtRollback)
