"""The pruning slice on its own: tombstones copy counts; passes delete exactly what they count."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runlane_conformance import StorageIndexName, StorageLimits, StorageTableName, build_storage_record
from runlane_conformance.contract.table_definitions import (
    run_record_key,
    tombstone_record_key,
    wait_token_record_key,
)
from runlane_conformance.contract.values import QueryRecordsCommand, StorageQueryRange
from runlane_conformance.core.pruning import (
    CleanupStalledError,
    PassBudget,
    PassStatus,
    PruningLimitsError,
    TombstoneOutcome,
    cleanup_pass,
    due_tombstones,
    prune_run,
    tombstone_run,
)
from runlane_conformance.core.runs import (
    ChildKind,
    CoreInvariantError,
    RunChildren,
    add_run_children,
    child_counts,
    create_run,
    finish_run,
    replace_counts,
)
from runlane_conformance.core.wait_tokens import WaitTokenSpec, create_wait_token, link_run
from runlane_conformance.local import LocalStorageDriver
from runlane_conformance.local.store import LocalStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ENV = "prod"


def driver(limits: StorageLimits | None = None, *, lag: int = 0) -> LocalStorageDriver:
    return LocalStorageDriver(LocalStore(index_lag=lag), clock=lambda: T0, limits=limits)


def finished_run(store: LocalStorageDriver, run_id: str, children: RunChildren, tokens: int = 0) -> list[str]:
    """A succeeded run with ``children`` and links to ``tokens`` fresh tokens; returns the token ids."""
    store.transaction(lambda tx: create_run(tx, ENV, run_id))
    if children.size:
        store.transaction(lambda tx: add_run_children(tx, ENV, run_id, children))
    ids = []
    for number in range(tokens):
        spec = WaitTokenSpec(ENV, f"{run_id}-tok{number}", run_id, f"{run_id}-key{number}")
        store.transaction(lambda tx, spec=spec: create_wait_token(tx, spec))  # type: ignore[misc]
        store.transaction(lambda tx, spec=spec: link_run(tx, ENV, spec.token_id, run_id))  # type: ignore[misc]
        ids.append(spec.token_id)
    store.transaction(lambda tx: finish_run(tx, ENV, run_id))
    return ids


def read(store: LocalStorageDriver, *keys: object) -> list[object]:
    return store.transaction(lambda tx: tx.get(list(keys)))  # type: ignore[arg-type]


def counts_of(store: LocalStorageDriver, key: object) -> dict[ChildKind, int]:
    [record] = read(store, key)
    assert record is not None
    return child_counts(record)  # type: ignore[arg-type]


def test_tombstoning_copies_the_exact_counts_and_hides_the_run_from_operational_indexes() -> None:
    store = driver()
    finished_run(store, "r1", RunChildren(events=3, steps=("a", "b"), outbox_messages=("m",)), tokens=1)
    assert store.transaction(lambda tx: tombstone_run(tx, ENV, "r1", retention=timedelta(hours=1))) is (
        TombstoneOutcome.TOMBSTONED
    )
    expected = {
        ChildKind.EVENTS: 3,
        ChildKind.STEPS: 2,
        ChildKind.OUTBOX_MESSAGES: 1,
        ChildKind.WAIT_TOKEN_LINKS: 1,
    }
    assert counts_of(store, tombstone_record_key(ENV, "r1")) == expected
    [run] = read(store, run_record_key(ENV, "r1"))
    assert run is not None and run.indexes == ()  # type: ignore[attr-defined]
    assert store.get_run(ENV, "r1") is None
    page = store.query(QueryRecordsCommand(StorageIndexName.RUNS_BY_STATUS, ENV, 10))
    assert page.items == ()
    due = store.transaction(lambda tx: due_tombstones(tx, ENV, as_of=T0 + timedelta(hours=1), limit=5))
    early = store.transaction(lambda tx: due_tombstones(tx, ENV, as_of=T0, limit=5))
    assert [item.key for item in due.items] == [tombstone_record_key(ENV, "r1")] and early.items == ()


def test_tombstoning_refuses_unfinished_and_missing_runs_and_is_idempotent() -> None:
    store = driver()
    store.transaction(lambda tx: create_run(tx, ENV, "live"))
    assert store.transaction(lambda tx: tombstone_run(tx, ENV, "live")) is TombstoneOutcome.NOT_TERMINAL
    assert store.transaction(lambda tx: tombstone_run(tx, ENV, "nobody")) is TombstoneOutcome.MISSING
    finished_run(store, "done", RunChildren())
    assert store.transaction(lambda tx: tombstone_run(tx, ENV, "done")) is TombstoneOutcome.TOMBSTONED
    assert store.transaction(lambda tx: tombstone_run(tx, ENV, "done")) is TombstoneOutcome.ALREADY_TOMBSTONED


def test_cleanup_deletes_every_child_lowers_token_links_and_then_the_run_and_tombstone() -> None:
    store = driver()
    tokens = finished_run(store, "r1", RunChildren(events=2, steps=("s",), outbox_messages=("m",)), tokens=2)
    finished_run(store, "r10", RunChildren(events=1, steps=("s",)))  # a sibling whose id extends "r1"
    store.transaction(lambda tx: tombstone_run(tx, ENV, "r1"))
    passes = prune_run(store, ENV, "r1")
    assert passes[-1].status is PassStatus.FINISHED
    assert sum(sum(p.deleted.values()) for p in passes) == 6
    assert read(store, run_record_key(ENV, "r1"), tombstone_record_key(ENV, "r1")) == [None, None]
    for token in tokens:
        [record] = read(store, wait_token_record_key(ENV, token))
        assert record is not None and record.document.value["linkCount"] == "0"  # type: ignore[attr-defined]
    assert counts_of(store, run_record_key(ENV, "r10"))[ChildKind.EVENTS] == 1, "the sibling run was touched"
    assert prune_run(store, ENV, "r1")[-1].status is PassStatus.GONE
    assert prune_run(store, ENV, "r10")[-1].status is PassStatus.NOT_TOMBSTONED


def test_small_limits_split_cleanup_into_passes_that_each_fit() -> None:
    limits = StorageLimits(
        max_point_reads=3,
        max_query_results=1,
        max_transaction_records=3,
        max_record_bytes=4096,
        max_transaction_bytes=8192,
    )
    store = driver(limits)
    store.transaction(lambda tx: create_run(tx, ENV, "r"))
    for children in (RunChildren(events=1), RunChildren(events=1), RunChildren(steps=("a",))):
        store.transaction(lambda tx, children=children: add_run_children(tx, ENV, "r", children))  # type: ignore[misc]
    for number in range(2):
        spec = WaitTokenSpec(ENV, f"tok{number}", "r", f"key{number}")
        store.transaction(lambda tx, spec=spec: create_wait_token(tx, spec))  # type: ignore[misc]
        store.transaction(lambda tx, spec=spec: link_run(tx, ENV, spec.token_id, "r"))  # type: ignore[misc]
    store.transaction(lambda tx: finish_run(tx, ENV, "r"))
    store.transaction(lambda tx: tombstone_run(tx, ENV, "r"))
    passes = prune_run(store, ENV, "r")  # the driver itself refuses any pass over its limits
    assert passes[-1].status is PassStatus.FINISHED
    # Three keys per pass: the tombstone plus two children, or one link and its token.
    assert all(sum(p.deleted.values()) <= 2 for p in passes)
    assert all(p.deleted.get(ChildKind.WAIT_TOKEN_LINKS, 0) <= 1 for p in passes)
    assert len(passes) >= 4


def test_limits_below_the_smallest_pass_are_refused_up_front() -> None:
    with pytest.raises(PruningLimitsError, match="at least 3"):
        PassBudget.from_limits(replace(StorageLimits(), max_point_reads=2))


def test_a_pass_on_a_lagging_index_stalls_instead_of_finishing() -> None:
    store = driver(lag=50)
    finished_run(store, "r", RunChildren(events=2, steps=("a",)))
    store.transaction(lambda tx: tombstone_run(tx, ENV, "r"))
    budget = PassBudget.from_limits(store.profile.limits)
    result = store.transaction(lambda tx: cleanup_pass(tx, ENV, "r", budget))
    assert result.status is PassStatus.STALLED
    assert result.remaining[ChildKind.EVENTS] == 2
    assert read(store, run_record_key(ENV, "r"))[0] is not None
    with pytest.raises(CleanupStalledError, match="stalled"):
        prune_run(store, ENV, "r")
    assert prune_run(store, ENV, "r", wait_for_index=store.store.settle)[-1].status is PassStatus.FINISHED


def test_a_counter_above_the_real_children_stalls_with_an_invariant_error() -> None:
    store = driver()
    finished_run(store, "r", RunChildren(events=1))
    store.transaction(lambda tx: tombstone_run(tx, ENV, "r"))

    def inflate(tx: object) -> None:
        [stone] = tx.get([tombstone_record_key(ENV, "r")])  # type: ignore[attr-defined]
        counts = {**child_counts(stone), ChildKind.STEPS: 2}
        tx.replace(
            stone,
            build_storage_record(StorageTableName.TOMBSTONES, replace_counts(stone.document.value, counts)),
        )  # type: ignore[attr-defined]

    store.transaction(inflate)
    with pytest.raises(CleanupStalledError) as caught:
        prune_run(store, ENV, "r", wait_for_index=lambda: None)
    assert caught.value.rule == "stalled"
    assert read(store, run_record_key(ENV, "r"))[0] is not None, "a stalled cleanup must keep the run"


def test_a_link_whose_token_is_missing_is_reported_and_nothing_is_deleted() -> None:
    store = driver()
    [token] = finished_run(store, "r", RunChildren(events=1), tokens=1)
    store.transaction(lambda tx: tombstone_run(tx, ENV, "r"))
    store.transaction(lambda tx: tx.delete(tx.get([wait_token_record_key(ENV, token)])[0]))  # type: ignore[arg-type]
    with pytest.raises(CoreInvariantError) as caught:
        prune_run(store, ENV, "r")
    assert caught.value.rule == "link-token"
    assert counts_of(store, tombstone_record_key(ENV, "r"))[ChildKind.WAIT_TOKEN_LINKS] == 1
    assert counts_of(store, tombstone_record_key(ENV, "r"))[ChildKind.EVENTS] == 1


def test_a_negative_counter_is_refused() -> None:
    store = driver()
    finished_run(store, "r", RunChildren())
    [run] = read(store, run_record_key(ENV, "r"))
    with pytest.raises(CoreInvariantError, match="drop to -1"):
        replace_counts(run.document.value, {**child_counts(run), ChildKind.EVENTS: -1})  # type: ignore[attr-defined,arg-type]


def test_children_cannot_be_added_to_a_tombstoned_run() -> None:
    store = driver()
    finished_run(store, "r", RunChildren())
    store.transaction(lambda tx: tombstone_run(tx, ENV, "r"))
    with pytest.raises(CoreInvariantError) as caught:
        store.transaction(lambda tx: add_run_children(tx, ENV, "r", RunChildren(events=1)))
    assert caught.value.rule == "tombstone"


def test_candidate_pages_are_prefix_scans_of_the_run() -> None:
    # A guard on the query shape the pass relies on: the run id is the leading sort component.
    command = QueryRecordsCommand(ChildKind.STEPS.index_name, ENV, 5, StorageQueryRange.prefix(("r",)))
    assert command.range.contains(command.range.lower.value)  # type: ignore[union-attr]
