"""Run pruning: tombstone a finished run, then delete its children in bounded, counted passes.

The flow (``docs/pruning.md`` walks through it with the interleavings):

1. ``tombstone_run``: one commit point-reads a terminal run, replaces it with
   ``tombstonedAt`` set (the run leaves every operational index, and the
   operator read model, in that commit) and creates its tombstone with an
   exact copy of the run's four child counts.
2. ``cleanup_pass``: one bounded commit point-reads the tombstone, asks each
   child index for a page of candidates of the run (sized so the whole pass
   fits the driver's limits), point-reads them, deletes the ones that exist
   (a wait-token link also lowers its token's ``linkCount``) and lowers the
   tombstone's counters by exactly what it deleted, all in one commit.
3. The run and its tombstone are deleted together, in the pass that finds
   every counter at zero, and never earlier.

Why the counters and not the index: an eventually consistent index may show
an empty (or stale) page while children still exist. Counting from point
reads means an empty page only makes a pass "stall", never finish, and the
next pass (after the index caught up) resumes exactly. Because every pass
is one atomic commit fenced on the tombstone's version, two passes racing on
two instances cannot both lower the same counter, and a pass that fails
half-way leaves nothing behind: the next one starts from the same state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from ..contract.catalog import StorageIndexName, StorageTableName
from ..contract.encodings import iso_date_codec, storage_tuple_codec
from ..contract.errors import StorageProfileError
from ..contract.json_boundary import JsonValue, thaw_json
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.records import build_storage_record
from ..contract.table_definitions import (
    TERMINAL_RUN_STATUSES,
    RunStatus,
    run_record_key,
    step_token,
    tombstone_for_run,
    tombstone_record_key,
    wait_token_record_key,
)
from ..contract.values import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StoredRecord,
)
from .runs import ChildKind, CoreInvariantError, child_counts, replace_counts

__all__ = [
    "CleanupPass",
    "CleanupStalledError",
    "PassBudget",
    "PassStatus",
    "PruningLimitsError",
    "TombstoneOutcome",
    "cleanup_pass",
    "due_tombstones",
    "prune_run",
    "tombstone_run",
]


class TombstoneOutcome(StrEnum):
    """What ``tombstone_run`` did."""

    TOMBSTONED = "tombstoned"
    ALREADY_TOMBSTONED = "already_tombstoned"  # a racing or earlier attempt did it; nothing written
    NOT_TERMINAL = "not_terminal"  # only finished runs may be pruned
    MISSING = "missing"


def tombstone_run(
    tx: StorageTransaction, environment: str, run_id: str, *, retention: timedelta = timedelta(0)
) -> TombstoneOutcome:
    """Tombstone a terminal run in this attempt: run replaced with ``tombstonedAt``, tombstone created.

    The tombstone's counts are copied from the run read in the same attempt,
    so they are exact as of the commit; ``pruneAfter`` is the attempt time
    plus ``retention`` (cleanup may start then). Idempotent: a run already
    tombstoned is left alone.
    """
    run, stone = tx.get([run_record_key(environment, run_id), tombstone_record_key(environment, run_id)])
    if run is None:
        if stone is not None:
            raise CoreInvariantError(
                f"tombstone of {environment}/{run_id} outlived its run", rule="tombstone"
            )
        return TombstoneOutcome.MISSING
    value = run.document.value
    if value["tombstonedAt"] is not None:
        if stone is None:
            raise CoreInvariantError(
                f"run {environment}/{run_id} is tombstoned without a tombstone", rule="tombstone"
            )
        return TombstoneOutcome.ALREADY_TOMBSTONED
    if stone is not None:
        raise CoreInvariantError(
            f"visible run {environment}/{run_id} already has a tombstone", rule="tombstone"
        )
    if RunStatus(str(value["status"])) not in TERMINAL_RUN_STATUSES:
        return TombstoneOutcome.NOT_TERMINAL
    at = tx.now()
    source = thaw_json(value)
    assert isinstance(source, dict)
    stone_value = tombstone_for_run(source, tombstoned_at=at, prune_after=at + retention)
    hidden = {**source, "tombstonedAt": stone_value["tombstonedAt"]}
    tx.replace(run, build_storage_record(StorageTableName.RUNS, hidden))
    tx.create(build_storage_record(StorageTableName.TOMBSTONES, stone_value))
    return TombstoneOutcome.TOMBSTONED


def due_tombstones(
    tx: StorageTransaction, environment: str, *, as_of: datetime, limit: int, cursor: str | None = None
) -> QueryRecordsResult:
    """Candidates from ``TombstonesByPruneAfter`` whose ``pruneAfter`` is at or before ``as_of``.

    Candidates only: a sweeper point-reads each (``cleanup_pass`` does) before
    acting, because an eventual index may list a tombstone already gone.
    """
    upper = StorageRangeBound(storage_tuple_codec.encode((iso_date_codec.encode(as_of),)), True)
    command = QueryRecordsCommand(
        StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER,
        environment,
        limit,
        StorageQueryRange(None, upper),
        cursor=cursor,
    )
    return tx.query_candidates(command)


class PruningLimitsError(StorageProfileError):
    """The driver's limits cannot fit even the smallest cleanup pass (reported, never worked around)."""


@dataclass(frozen=True)
class PassBudget:
    """How much one cleanup pass may touch, taken from the driver's advertised limits.

    ``point_reads`` and ``records`` bound the keys a pass reads and writes
    (the tombstone, each child, each linked token, and the run when it
    finishes), ``page`` bounds each candidate query, and ``bytes`` the
    documents it rewrites (the tombstone and linked tokens; deletes are free).
    The smallest pass that can always make progress reads and rewrites the
    tombstone, one link and its token: three keys.
    """

    point_reads: int
    records: int
    page: int
    bytes: int

    MINIMUM_KEYS = 3

    @classmethod
    def from_limits(
        cls,
        limits: StorageLimits,
        *,
        point_reads: int | None = None,
        records: int | None = None,
        page: int | None = None,
    ) -> PassBudget:
        """The budget the limits allow, optionally made smaller (never larger) per dimension."""

        def capped(limit: int, cap: int | None) -> int:
            return limit if cap is None else min(limit, cap)

        budget = cls(
            capped(limits.max_point_reads, point_reads),
            capped(limits.max_transaction_records, records),
            capped(limits.max_query_results, page),
            limits.max_transaction_bytes,
        )
        if min(budget.point_reads, budget.records) < cls.MINIMUM_KEYS:
            raise PruningLimitsError(
                f"a cleanup pass needs at least {cls.MINIMUM_KEYS} point reads and transaction records "
                f"(tombstone, link, token); the driver allows {budget.point_reads} and {budget.records}"
            )
        return budget


class PassStatus(StrEnum):
    """How a cleanup pass ended."""

    FINISHED = "finished"  # every counter was zero: the run and its tombstone were deleted
    PROGRESSED = "progressed"  # some children were deleted and the counters lowered by exactly that
    STALLED = "stalled"  # a counter is above zero but the index offered nothing deletable (yet)
    GONE = "gone"  # neither run nor tombstone exists: nothing to do
    NOT_TOMBSTONED = "not_tombstoned"  # the run is visible: cleanup never touches it


@dataclass(frozen=True)
class CleanupPass:
    """What one committed cleanup pass did: the children it deleted and the counters it left."""

    status: PassStatus
    deleted: Mapping[ChildKind, int] = field(default_factory=dict)
    remaining: Mapping[ChildKind, int] = field(default_factory=dict)
    tokens_released: tuple[str, ...] = ()


def _child_owner(kind: ChildKind, key: StorageRecordKey) -> str | None:
    """The run id a child key belongs to (links are keyed token first, run last)."""
    if key.table is not kind.table or len(key.id) < 3:
        return None
    return key.id[2] if kind is ChildKind.WAIT_TOKEN_LINKS else key.id[1]


def _candidate_page(
    tx: StorageTransaction, kind: ChildKind, environment: str, run_id: str, limit: int
) -> list[StorageRecordKey]:
    command = QueryRecordsCommand(kind.index_name, environment, limit, StorageQueryRange.prefix((run_id,)))
    keys = []
    for item in tx.query_candidates(command).items:
        if item.key.id[0] != environment or _child_owner(kind, item.key) != run_id:
            raise CoreInvariantError(
                f"{kind.index_name.value} offered {item.key} as a child of {environment}/{run_id}",
                rule="child-owner",
            )
        keys.append(item.key)
    return keys


def _check_exact_step(record: StoredRecord) -> None:
    value = record.document.value
    token = step_token(
        str(value["environment"]), str(value["runId"]), str(value["stepName"]), int(str(value["sequence"]))
    )
    if value["token"] != token or record.key.id[2] != token:
        raise CoreInvariantError(f"step {record.key} is not the exact owner of its token", rule="step-token")


def cleanup_pass(tx: StorageTransaction, environment: str, run_id: str, budget: PassBudget) -> CleanupPass:
    """One bounded cleanup pass over a tombstoned run, as one attempt (see the module docstring).

    Reads the tombstone, then candidate pages per child kind within
    ``budget``, then point-reads every candidate (and each link's token, and
    the run when the pass may finish) in one ``get``. Deletes the children
    that exist, lowers their tokens' link counts and the tombstone's counters
    by exactly what it deleted, or, when every counter is zero, deletes the
    run and the tombstone together. Raises ``CoreInvariantError`` (nothing
    staged) when the records contradict each other: a counter that would go
    negative, a link whose token is missing, a step that is not its token's
    exact owner, a tombstone without its tombstoned run.
    """
    stone_key, run_key = tombstone_record_key(environment, run_id), run_record_key(environment, run_id)
    [stone] = tx.get([stone_key])
    if stone is None:
        [run] = tx.get([run_key])
        if run is None:
            return CleanupPass(PassStatus.GONE)
        if run.document.value["tombstonedAt"] is not None:
            raise CoreInvariantError(
                f"run {environment}/{run_id} is tombstoned without a tombstone", rule="tombstone"
            )
        return CleanupPass(PassStatus.NOT_TOMBSTONED)
    counts = child_counts(stone)
    reads_left, records_left = budget.point_reads - 1, budget.records - 1
    bytes_left = budget.bytes - stone.document.size  # the rewritten tombstone is never larger
    candidates: list[tuple[ChildKind, StorageRecordKey]] = []
    for kind in ChildKind:
        cost = 2 if kind is ChildKind.WAIT_TOKEN_LINKS else 1  # a link brings its token along
        take = min(counts[kind], budget.page, reads_left // cost, records_left // cost)
        if take <= 0:
            continue
        keys = _candidate_page(tx, kind, environment, run_id, take)
        candidates.extend((kind, key) for key in keys)
        reads_left -= cost * len(keys)
        records_left -= cost * len(keys)
    offered = {kind: sum(1 for k, _ in candidates if k is kind) for kind in ChildKind}
    may_finish = (
        all(counts[kind] <= offered[kind] for kind in ChildKind) and min(reads_left, records_left) >= 1
    )
    keys = [key for _kind, key in candidates]
    token_keys = [
        wait_token_record_key(environment, key.id[1])
        for kind, key in candidates
        if kind is ChildKind.WAIT_TOKEN_LINKS
    ]
    found = tx.get([*keys, *token_keys, *([run_key] if may_finish else [])]) if keys or may_finish else []
    records = dict(zip(keys, found[: len(keys)], strict=True))
    tokens = dict(zip(token_keys, found[len(keys) : len(keys) + len(token_keys)], strict=True))
    run = found[-1] if may_finish else None
    if may_finish and (run is None or run.document.value["tombstonedAt"] is None):
        raise CoreInvariantError(
            f"tombstone of {environment}/{run_id} has no tombstoned run", rule="tombstone"
        )

    deletes: list[StoredRecord] = []
    token_writes: list[tuple[StoredRecord, dict[str, JsonValue]]] = []
    deleted = dict.fromkeys(ChildKind, 0)
    for kind, key in candidates:
        record = records[key]
        if record is None:
            continue  # a stale candidate: the index still lists a child that is gone
        if kind is ChildKind.STEPS:
            _check_exact_step(record)
        if kind is ChildKind.WAIT_TOKEN_LINKS:
            token = tokens[wait_token_record_key(environment, key.id[1])]
            if token is None:
                raise CoreInvariantError(f"link {key} names a missing wait token", rule="link-token")
            links = int(str(token.document.value["linkCount"]))
            if links < 1:
                raise CoreInvariantError(
                    f"wait token {token.key} counts no link but {key} exists", rule="counter"
                )
            value = thaw_json(token.document.value)
            assert isinstance(value, dict)
            value["linkCount"] = str(links - 1)
            size = build_storage_record(StorageTableName.WAIT_TOKENS, value).document.size
            if size > bytes_left:
                continue  # the next pass takes this link
            bytes_left -= size
            token_writes.append((token, value))
        deletes.append(record)
        deleted[kind] += 1
    remaining = {kind: counts[kind] - deleted[kind] for kind in ChildKind}
    replaced_stone = replace_counts(stone.document.value, remaining)
    finished = run is not None and not any(remaining.values())
    if not deletes and not finished:
        return CleanupPass(PassStatus.STALLED, deleted, remaining)
    for record in deletes:
        tx.delete(record)
    for token, value in token_writes:
        tx.replace(token, build_storage_record(StorageTableName.WAIT_TOKENS, value))
    if finished:
        assert run is not None
        tx.delete(run)
        tx.delete(stone)
    else:
        tx.replace(stone, build_storage_record(StorageTableName.TOMBSTONES, replaced_stone))
    released = tuple(token.key.id[1] for token, _value in token_writes)
    return CleanupPass(
        PassStatus.FINISHED if finished else PassStatus.PROGRESSED, deleted, remaining, released
    )


class CleanupStalledError(CoreInvariantError):
    """Cleanup stopped making progress although a counter is above zero, even after the index settled."""

    def __init__(self, message: str) -> None:
        super().__init__(message, rule="stalled")


def prune_run(
    driver: StorageDriver,
    environment: str,
    run_id: str,
    *,
    wait_for_index: Callable[[], None] | None = None,
    max_passes: int = 10_000,
    max_stalls: int = 3,
) -> list[CleanupPass]:
    """Run cleanup passes until the run and its tombstone are gone; returns every pass.

    A stalled pass (counter above zero, nothing deletable offered) calls
    ``wait_for_index`` (a bounded wait for an eventual index to catch up)
    and tries again; ``max_stalls`` stalls in a row, or no ``wait_for_index``
    at all, raise ``CleanupStalledError``: the counters then promise children
    the index cannot find, and guessing would orphan or double-count them.
    """
    budget = PassBudget.from_limits(driver.profile.limits)
    passes: list[CleanupPass] = []
    stalls = 0
    for _ in range(max_passes):
        result = driver.transaction(lambda tx: cleanup_pass(tx, environment, run_id, budget))
        passes.append(result)
        if result.status in (PassStatus.FINISHED, PassStatus.GONE, PassStatus.NOT_TOMBSTONED):
            return passes
        if result.status is PassStatus.STALLED:
            stalls += 1
            if wait_for_index is None or stalls > max_stalls:
                counters = {kind.value: count for kind, count in result.remaining.items() if count}
                raise CleanupStalledError(
                    f"cleanup of {environment}/{run_id} stalled with counters {counters} after {stalls} "
                    "pass(es) that found nothing to delete"
                )
            wait_for_index()
        else:
            stalls = 0
    raise CleanupStalledError(f"cleanup of {environment}/{run_id} did not finish in {max_passes} passes")
