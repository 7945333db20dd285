"""Broken drivers for the wait_tokens area.

Each mishandles wait tokens, their owners or their index entries in one
way: owners claimed outside the attempt, token rewrites without a version
fence, token reads served from a per-instance cache, an index mapping that
drops or keeps entries, owner deletes that never happen, and a "helpful"
driver that deletes a token whose owner it cannot find.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from runlane_conformance import (
    StorageIndexName,
    StorageIndexReference,
    StorageRecordKey,
    StorageTableName,
    encode_storage_query_cursor,
    iso_date_codec,
    storage_tuple_codec,
)
from runlane_conformance.catalogue import wait_tokens
from runlane_conformance.contract.table_definitions import OwnerScope, owner_record_key
from runlane_conformance.contract.values import QueryRecordsResult
from runlane_conformance.local.store import CommitPlan, LocalStore
from tests.mutants.catalog import Mutant
from tests.mutants.m_conflicts import store_mutant
from tests.mutants.m_cursors import RescanDriver, RescanTransaction
from tests.mutants.m_pruning import _table_prefix
from tests.mutants.wrapping import WrappedDriver, WrappedStore, WrappedTransaction, mutant_harness

T = TypeVar("T")


class MillisecondClock(WrappedTransaction):
    """Keeps time at millisecond precision, rounding the attempt's now() up (a timestamp column
    without microseconds): a token is then due up to a millisecond before its timeoutAt."""

    def now(self) -> datetime:
        moment: datetime = self.inner.now()
        spare = moment.microsecond % 1000
        return moment if spare == 0 else moment + timedelta(microseconds=1000 - spare)


OWNERS = StorageTableName.OWNERS
TOKENS = StorageTableName.WAIT_TOKENS


# -- the owner claim is made outside the attempt ---------------------------------------------------


class UnfencedOwners(WrappedTransaction):
    """Owner keys are read on a side connection and owners upserted there at once (no fence, no atomicity)."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        side = self.driver.side()  # type: ignore[attr-defined]
        owners = [key for key in keys if key.table is OWNERS]
        found = dict(zip(owners, side.transaction(lambda tx: tx.get(owners)), strict=True)) if owners else {}
        rest = [key for key in keys if key.table is not OWNERS]
        plain = iter(self.inner.get(rest) if rest else [])
        return [found[key] if key.table is OWNERS else next(plain) for key in keys]

    def create(self, record: Any) -> None:
        if record.key.table is not OWNERS:
            self.inner.create(record)
            return

        def upsert(tx: Any) -> None:
            [current] = tx.get([record.key])
            if current is None:
                tx.create(record)
            else:
                tx.replace(current, record)

        self.driver.side().transaction(upsert)  # type: ignore[attr-defined]


class SideConnection(WrappedDriver):
    transaction_class = UnfencedOwners

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


# -- token rewrites without a version fence --------------------------------------------------------

_TOKEN_PREFIX = _table_prefix(TOKENS)


class UnfencedTokens(LocalStore):
    """An attempt that rewrites a wait token skips read and range validation: last writer wins."""

    def commit(self, plan: CommitPlan) -> None:
        if any(ekey.startswith(_TOKEN_PREFIX) for ekey, _record in plan.replaces):
            plan = replace(plan, reads={}, ranges=())
        super().commit(plan)


# -- token reads served from a per-instance cache --------------------------------------------------


class CachedTokenReads(WrappedTransaction):
    """The first read of a token on an instance is cached; later reads there return it, however stale."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        found = self.inner.get(keys)
        cache: dict[Any, Any] = self.driver.cache  # type: ignore[attr-defined]
        answer = []
        for key, record in zip(keys, found, strict=True):
            if key.table is TOKENS and record is not None:
                answer.append(cache.setdefault(key, record))
            else:
                answer.append(record)
        return answer


class CachingDriver(WrappedDriver):
    transaction_class = CachedTokenReads

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self.cache: dict[Any, Any] = {}


# -- index mappings that drop or keep entries ------------------------------------------------------


def _filtered(index: StorageIndexName) -> type[WrappedDriver]:
    """A driver whose ``index`` scans never return anything (the mapping's entries are dropped)."""

    def strip(command: Any, result: Any) -> Any:
        if command.index is not index:
            return result
        return QueryRecordsResult((), None)

    class Dropping(WrappedTransaction):
        def query_candidates(self, command: Any, **kwargs: Any) -> Any:
            return strip(command, self.inner.query_candidates(command, **kwargs))

    class Driver(WrappedDriver):
        transaction_class = Dropping

        def query(self, command: Any) -> Any:
            return strip(command, self.inner.query(command))

    return Driver


class StaleStatusEntries(WrappedTransaction):
    """When a token's status changes, its old WaitTokensByStatus entry keeps being served."""

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        if (
            current.key.table is TOKENS
            and current.document.value["status"] != record.document.value["status"]
        ):
            ghosts = self.driver.store.shared.setdefault("ghosts", [])
            for entry in current.indexes:
                if entry.index is StorageIndexName.WAIT_TOKENS_BY_STATUS:
                    ghosts.append((entry.partition, StorageIndexReference(current.key, entry.sort)))

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return _with_ghosts(self.driver, command, self.inner.query_candidates(command, **kwargs))


def _with_ghosts(driver: WrappedDriver, command: Any, result: Any) -> Any:
    if command.index is not StorageIndexName.WAIT_TOKENS_BY_STATUS or command.cursor is not None:
        return result
    ghosts = [
        ref for partition, ref in driver.store.shared.get("ghosts", []) if partition == command.partition
    ]
    items = sorted({*result.items, *ghosts}, key=lambda ref: (ref.sort, ref.key.encoded))
    return QueryRecordsResult(tuple(items[: command.limit]), result.cursor)


class StaleStatusDriver(WrappedDriver):
    transaction_class = StaleStatusEntries

    def query(self, command: Any) -> Any:
        return _with_ghosts(self, command, self.inner.query(command))


# -- owner deletes that never happen ---------------------------------------------------------------


class KeepsOwners(WrappedTransaction):
    """Deletes of owner records are silently dropped."""

    def delete(self, current: Any) -> None:
        if current.key.table is OWNERS:
            return
        super().delete(current)


# -- a driver that "repairs" orphan tokens ---------------------------------------------------------


class WatchesOwners(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.tokens: list[Any] = []
        self.absent_owners: set[Any] = set()

    def get(self, keys: Sequence[Any]) -> list[Any]:
        found = super().get(keys)
        for key, record in zip(keys, found, strict=True):
            if key.table is TOKENS and record is not None:
                self.tokens.append(record)
            if key.table is OWNERS and record is None:
                self.absent_owners.add(key.encoded)
        return found


class RepairsOrphans(WrappedDriver):
    """After an attempt saw a token whose owner is absent, the driver deletes the token to "clean up"."""

    transaction_class = WatchesOwners

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[WatchesOwners] = []

        def run(tx: Any) -> T:
            attempts.append(WatchesOwners(tx, self))
            return callback(attempts[-1])

        try:
            return self.inner.transaction(run)  # type: ignore[no-any-return]
        finally:
            if attempts:
                self._repair(attempts[-1])

    def _repair(self, attempt: WatchesOwners) -> None:
        orphans = []
        for token in attempt.tokens:
            owner = token.document.value["idempotencyOwner"]
            encoded = StorageRecordKey(str(owner["table"]), tuple(str(part) for part in owner["id"])).encoded
            if encoded in attempt.absent_owners:
                orphans.append(token.key)
        if orphans:

            def delete(tx: Any) -> None:
                for record in tx.get(orphans):
                    if record is not None:
                        tx.delete(record)

            self.inner.transaction(delete)


# -- a time to live on resolved tokens, and a timeout index whose due bound is exclusive ------------

#: Resolved tokens whose resolvedAt lies further back than this (against the wall clock) are expired.
RESOLVED_TTL = timedelta(days=1)


class ExpiresResolvedTokens(WrappedTransaction):
    """Treats a resolved token as garbage after a day: it reads as absent, links or not."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        horizon = datetime.now(UTC) - RESOLVED_TTL
        return [
            None
            if record is not None
            and record.key.table is TOKENS
            and record.document.value.get("resolvedAt") is not None
            and iso_date_codec.decode(str(record.document.value["resolvedAt"])) < horizon
            else record
            for record in self.inner.get(keys)
        ]


def _exclusive_due_bound(command: Any) -> Any:
    upper = command.range.upper
    if command.index is not StorageIndexName.WAIT_TOKENS_BY_TIMEOUT or upper is None or not upper.inclusive:
        return command
    # The native plan says ``timeout_at < :as_of``: tokens due exactly now wait for the next sweep.
    return replace(command, range=replace(command.range, upper=replace(upper, inclusive=False)))


class DueBoundExclusive(WrappedTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        narrowed = _exclusive_due_bound(command)
        if narrowed is command:
            return self.inner.query_candidates(command, **kwargs)
        return _rescoped(command, self.inner.query_candidates(narrowed, **kwargs))


class DueBoundExclusiveDriver(WrappedDriver):
    """WaitTokensByTimeout scans treat the inclusive due bound as exclusive (on both read paths)."""

    transaction_class = DueBoundExclusive

    def query(self, command: Any) -> Any:
        narrowed = _exclusive_due_bound(command)
        if narrowed is command:
            return self.inner.query(command)
        return _rescoped(command, self.inner.query(narrowed))


def _rescoped(command: Any, result: Any) -> Any:
    """The narrowed scan's page, with its cursor re-issued for the caller's scope."""
    items = tuple(result.items)
    cursor = encode_storage_query_cursor(command, items[-1]) if result.cursor is not None and items else None
    return QueryRecordsResult(items, cursor)


# -- one index that ignores its partition ------------------------------------------------------------


class RecordsEnvironments(WrappedTransaction):
    def create(self, record: Any) -> None:
        super().create(record)
        if record.key.table in (TOKENS, StorageTableName.WAIT_TOKEN_LINKS):
            self.driver.store.shared.setdefault("environments", set()).add(record.key.id[0])

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.driver.everywhere(command, lambda c: self.inner.query_candidates(c, **kwargs))  # type: ignore[attr-defined]


class LinksIndexIgnoresPartition(WrappedDriver):
    """WaitTokenLinksByToken is one native table without the environment in its key: a scan of one
    environment lists the links of every environment."""

    transaction_class = RecordsEnvironments

    def everywhere(self, command: Any, read: Callable[[Any], Any]) -> Any:
        page = read(command)
        if command.index is not StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN or command.cursor is not None:
            return page
        others = sorted(self.store.shared.get("environments", set()) - {command.partition})
        items = list(page.items)
        for environment in others:
            items.extend(read(replace(command, partition=environment)).items)
        items.sort(key=lambda item: (item.sort, item.key.encoded))
        return QueryRecordsResult(tuple(items[: command.limit]), page.cursor)

    def query(self, command: Any) -> Any:
        return self.everywhere(command, self.inner.query)


MUTANTS = [
    Mutant(
        "token-owner-claimed-outside-the-attempt",
        "tests.mutants.m_wait_tokens:unfenced_owners",
        wait_tokens.CREATED,
        "owner keys are read and upserted on a side connection, so two creators with one key both win",
    ),
    Mutant(
        "token-link-count-lost-update",
        "tests.mutants.m_wait_tokens:unfenced_tokens",
        wait_tokens.LINKS,
        "token rewrites are not validated, so two racing links both raise the count from the same value",
    ),
    Mutant(
        "racing-resolutions-both-win",
        "tests.mutants.m_wait_tokens:unfenced_tokens",
        wait_tokens.RACE,
        "token rewrites are not validated, so a racing completion and timeout both commit",
    ),
    Mutant(
        "stale-cached-token-reads",
        "tests.mutants.m_wait_tokens:cached_token_reads",
        wait_tokens.ONCE,
        "token reads come from a per-instance cache, so another instance resolves a token again",
    ),
    Mutant(
        "timeout-index-dropped",
        "tests.mutants.m_wait_tokens:drops_timeout_index",
        wait_tokens.TIMEOUT,
        "WaitTokensByTimeout scans return nothing, so due tokens are never found",
    ),
    Mutant(
        "millisecond-clock-rounds-up",
        "tests.mutants.m_wait_tokens:millisecond_clock",
        wait_tokens.TIMEOUT_BOUNDARY,
        "now() is rounded up to the millisecond, so a token times out just before its timeoutAt",
    ),
    Mutant(
        "token-by-run-entries-dropped",
        "tests.mutants.m_wait_tokens:drops_token_by_run_index",
        wait_tokens.MAPPINGS,
        "WaitTokensByRun scans return nothing (the mapping's entries are dropped)",
    ),
    Mutant(
        "stale-token-status-entry",
        "tests.mutants.m_wait_tokens:stale_status_entries",
        wait_tokens.MAPPINGS,
        "a resolved token is still served under its old 'pending' WaitTokensByStatus entry",
    ),
    Mutant(
        "stale-token-status-entry-random",
        "tests.mutants.m_wait_tokens:stale_status_entries",
        wait_tokens.MODEL,
        "a resolved token keeps its old WaitTokensByStatus entry (caught by the random histories)",
    ),
    Mutant(
        "token-owner-delete-dropped",
        "tests.mutants.m_wait_tokens:keeps_owners",
        wait_tokens.PRUNED,
        "deleting an owner record does nothing, so pruning a token orphans its owner",
    ),
    Mutant(
        "repairs-orphan-tokens",
        "tests.mutants.m_wait_tokens:repairs_orphans",
        wait_tokens.BROKEN,
        "a token whose owner is missing is deleted by the driver, turning a reported fault into data loss",
    ),
    Mutant(
        "resolved-tokens-expire",
        "tests.mutants.m_wait_tokens:expires_resolved_tokens",
        wait_tokens.PRUNED,
        "a token resolved more than a day ago reads as absent although runs still link it",
    ),
    Mutant(
        "due-bound-exclusive",
        "tests.mutants.m_wait_tokens:due_bound_exclusive",
        wait_tokens.TIMEOUT,
        "WaitTokensByTimeout treats the inclusive due bound as exclusive: a token due exactly now is missed",
    ),
    Mutant(
        "links-index-ignores-partition",
        "tests.mutants.m_wait_tokens:links_index_ignores_partition",
        wait_tokens.MAPPINGS,
        "a WaitTokenLinksByToken scan of one environment lists the links of every environment",
    ),
]

expires_resolved_tokens = mutant_harness(transaction_class=ExpiresResolvedTokens)
links_index_ignores_partition = mutant_harness(LinksIndexIgnoresPartition)
due_bound_exclusive = mutant_harness(DueBoundExclusiveDriver)
unfenced_owners = mutant_harness(SideConnection)
unfenced_tokens = store_mutant(UnfencedTokens)
cached_token_reads = mutant_harness(CachingDriver)
drops_timeout_index = mutant_harness(_filtered(StorageIndexName.WAIT_TOKENS_BY_TIMEOUT))
drops_token_by_run_index = mutant_harness(_filtered(StorageIndexName.WAIT_TOKENS_BY_RUN))
stale_status_entries = mutant_harness(StaleStatusDriver)
keeps_owners = mutant_harness(transaction_class=KeepsOwners)
repairs_orphans = mutant_harness(RepairsOrphans)
millisecond_clock = mutant_harness(transaction_class=MillisecondClock)


# -- issue 20: an owner deleted by environment and idempotency key alone ---------------------------------


class OwnerDeleteIgnoresScope(WrappedDriver):
    """Deleting an owner also deletes every owner of its environment and idempotency key, whatever its
    scope (a ``DELETE ... WHERE environment = ? AND idempotency_key = ?`` run after the commit)."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        deleted: list[Any] = []

        class Recording(WrappedTransaction):
            def delete(self, current: Any) -> None:
                super().delete(current)
                if current.key.table is StorageTableName.OWNERS:
                    deleted.append(current.key)

        def attempt(tx: Any) -> T:
            deleted.clear()
            return callback(Recording(tx, self))

        result = self.inner.transaction(attempt)
        for key in list(deleted):
            environment, scope, idempotency_key = key.id
            others = [
                owner_record_key(environment, other, idempotency_key)
                for other in OwnerScope
                if other.value != scope
            ]

            def sweep(tx: Any, others: list[Any] = others) -> None:
                for record in tx.get(others):
                    if record is not None:
                        tx.delete(record)

            self.inner.transaction(sweep)
        return result


owner_delete_ignores_scope = mutant_harness(OwnerDeleteIgnoresScope)

MUTANTS += [
    Mutant(
        "owner-delete-ignores-scope",
        "tests.mutants.m_wait_tokens:owner_delete_ignores_scope",
        wait_tokens.PRUNED,
        "pruning a token's owner also deletes the run owner of the same idempotency key (scope ignored)",
    ),
]


# -- issue 20: a native WaitTokensByRun plan ordered by run and token, not by creation time ----------------


class TokensByRunInKeyOrder(RescanDriver):
    """WaitTokensByRun is served by ``ORDER BY run_id, token_id``: a run's tokens come in key order, not
    in the order of their createdAt (the second sort component is forgotten)."""

    def arrange(self, command: Any, ascending: list[StorageIndexReference]) -> list[Any]:
        if command.index is StorageIndexName.WAIT_TOKENS_BY_RUN:
            ascending = sorted(
                ascending, key=lambda item: (storage_tuple_codec.decode(item.sort)[0], item.key.encoded)
            )
        return super().arrange(command, ascending)


tokens_by_run_in_key_order = mutant_harness(TokensByRunInKeyOrder, transaction_class=RescanTransaction)

MUTANTS += [
    Mutant(
        "tokens-by-run-in-key-order",
        "tests.mutants.m_wait_tokens:tokens_by_run_in_key_order",
        wait_tokens.MAPPINGS,
        "WaitTokensByRun lists a run's tokens by token key instead of by their createdAt",
    ),
]
