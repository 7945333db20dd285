"""Completion-wait presence: the marker is an ordinary stored record that only ever appears.

Core registers a completion wait with ``register_completion_wait`` (a fenced
read of the source run and its marker, then a conditional create of the
marker) and, when the source finishes, skips the waiter scan only if a point
read finds no marker. That is sound only if the driver stores the marker like
any record: visible to every instance, created once under a race, never
invented and never removed by deleting waiting runs. Every driver must keep
this; there is no capability to opt out.

The waiter index ``RunsWaitingForCompletion`` is only compared exactly on
drivers whose profile promises a strongly consistent index.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from runlane_conformance.catalogue.completion_waits import ABSENT, ACROSS_PROCESSES, MONOTONIC, RACE, STORED
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.table_definitions import RunStatus, run_record_key
from runlane_conformance.contract.values import (
    QueryRecordsResult,
    StorageClockAuthority,
    StorageIndexConsistency,
)
from runlane_conformance.core.completion_waits import (
    CompletionWaitPlan,
    RunCompletionWaitPresence,
    find_completion_waiters,
    plan_completion_wait,
    register_completion_wait,
)
from runlane_conformance.core.pruning import PassStatus, TombstoneOutcome, tombstone_run
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.suites._lifecycle_support import prune_fully
from runlane_conformance.suites._messages import missing
from runlane_conformance.suites._operator_support import fresh_environment, read_keys, run_record, write
from runlane_conformance.suites._processes_support import (
    GRACE,
    committed,
    w_finish_source,
    w_register_wait,
)
from runlane_conformance.suites._retries_support import transact_with_retries


def _strong(driver: StorageDriver) -> bool:
    return driver.profile.index_consistency is StorageIndexConsistency.STRONG


def _wait(driver: StorageDriver, presence: RunCompletionWaitPresence, waiter: str) -> CompletionWaitPlan:
    """Register ``waiter`` as waiting on the presence's source, the way core does; returns the plan."""

    def callback(tx: StorageTransaction) -> CompletionWaitPlan:
        plan, _extra = register_completion_wait(tx, presence)
        if plan is not CompletionWaitPlan.SOURCE_TERMINAL:
            tx.create(
                run_record(
                    presence.environment, waiter, status=RunStatus.WAITING, waiting_for=presence.source_run_id
                )
            )
        return plan

    return driver.transaction(callback)


def _marker_present(driver: StorageDriver, presence: RunCompletionWaitPresence) -> bool:
    [marker] = read_keys(driver, [presence.key])
    if marker is not None:
        assert marker.key == presence.key, f"a point read of {presence.key} returned {marker.key}"
        assert marker.document.value["sourceRunId"] == presence.source_run_id, (
            "the completion-wait marker must name the source run it stands for"
        )
    return marker is not None


def _scan(
    presence: RunCompletionWaitPresence, cursor: str | None, limit: int
) -> Callable[[StorageTransaction], QueryRecordsResult | None]:
    return lambda tx: find_completion_waiters(tx, presence, limit=limit, cursor=cursor)


def _waiters(driver: StorageDriver, presence: RunCompletionWaitPresence) -> list[str] | None:
    """Waiting run ids found by core's terminal-transition scan, or None when the absent marker skipped it."""
    found: list[str] = []
    cursor: str | None = None
    limit = min(10, driver.profile.limits.max_query_results)  # pages of ten, or as many as one may hold
    for _ in range(100):
        page = driver.transaction(_scan(presence, cursor, limit))
        if page is None:
            assert not found, "the marker vanished between two pages of one scan"
            return None
        found.extend(item.key.id[1] for item in page.items)
        cursor = page.cursor
        if cursor is None:
            return sorted(found)
    raise AssertionError("the waiter scan did not end")


def _set_status(driver: StorageDriver, env: str, run_id: str, status: RunStatus) -> None:
    def callback(tx: StorageTransaction) -> None:
        [current] = tx.get([run_record_key(env, run_id)])
        assert current is not None, missing(
            f"run {run_id}", written="the check created it before this transaction"
        )
        tx.replace(current, run_record(env, run_id, status=status))

    driver.transaction(callback)


@STORED
def test_a_marker_created_by_one_instance_is_read_by_another(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"))
    # A neighbour environment (its name extends this one) waits on a source with the same id: its
    # marker and waiter are its own, and no scan of this environment may list them.
    neighbour = RunCompletionWaitPresence(f"{env}x", "source")
    write(driver, run_record(neighbour.environment, "source"))
    _wait(other_driver, neighbour, "waiter-elsewhere")

    assert _wait(driver, presence, "waiter-1") is CompletionWaitPlan.CREATE_MARKER, (
        "the first wait on a running source must be told to create the marker"
    )
    assert _marker_present(other_driver, presence), "another instance does not see the marker"
    assert _wait(other_driver, presence, "waiter-2") is CompletionWaitPlan.MARKER_PRESENT, (
        "the second wait, on another instance, did not find the first wait's marker"
    )
    third = connect()
    waiters = _waiters(third, presence)
    assert waiters is not None, "a new instance's terminal transition would skip the waiter scan"
    if _strong(third):
        assert waiters == ["waiter-1", "waiter-2"], f"the waiter index holds {waiters}"


@STORED
def test_a_wait_on_a_future_source_leaves_a_marker_every_instance_sees(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "not-created-yet")
    assert _wait(driver, presence, "early") is CompletionWaitPlan.CREATE_MARKER, (
        "a wait on a source run that does not exist yet must be told to create the marker"
    )
    assert _marker_present(other_driver, presence), "the marker of a wait on a future run id is not stored"


@RACE
@pytest.mark.parametrize("race_point", ["after-read", "after-create"])
def test_two_first_waiters_on_two_instances_leave_one_marker_and_both_waits(
    driver: StorageDriver, other_driver: StorageDriver, race_point: str
) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"))
    started: list[Competitor[CompletionWaitPlan]] = []

    def race() -> None:
        if not started:
            started.append(compete(lambda: _wait(other_driver, presence, "theirs")))

    def callback(tx: StorageTransaction) -> CompletionWaitPlan:
        source, marker = tx.get([presence.source_key, presence.key])
        plan = plan_completion_wait(source, marker)
        if race_point == "after-read":
            race()
        if plan is CompletionWaitPlan.CREATE_MARKER:
            tx.create(presence.record(tx.now()))
        if race_point == "after-create":
            race()
        tx.create(run_record(env, "mine", status=RunStatus.WAITING, waiting_for="source"))
        return plan

    mine = transact_with_retries(driver, callback, started)
    theirs = started[0].settle()

    assert sorted([mine, theirs]) == sorted(
        [CompletionWaitPlan.CREATE_MARKER, CompletionWaitPlan.MARKER_PRESENT]
    ), f"racing first waiters returned plans {mine} and {theirs}: exactly one must have created the marker"
    assert _marker_present(other_driver, presence), "the race left no marker"
    mine_run, theirs_run = read_keys(driver, [run_record_key(env, "mine"), run_record_key(env, "theirs")])
    assert mine_run is not None and theirs_run is not None, "a racing waiter's waiting run was lost"
    waiters = _waiters(other_driver, presence)
    assert waiters is not None, missing(
        ("the waiting runs' list"), written="both racing waiters committed a wait"
    )
    if _strong(other_driver):
        assert waiters == ["mine", "theirs"], f"the waiter index holds {waiters}"


@MONOTONIC
def test_deleting_the_waiting_runs_and_finishing_the_source_keep_the_marker(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"))
    _wait(driver, presence, "waiter-1")
    _wait(other_driver, presence, "waiter-2")

    def delete_waiters(tx: StorageTransaction) -> None:
        for current in tx.get([run_record_key(env, "waiter-1"), run_record_key(env, "waiter-2")]):
            assert current is not None, missing(
                ("a waiting run"), written="the check created both waiters before this delete"
            )
            tx.delete(current)

    other_driver.transaction(delete_waiters)
    assert _marker_present(driver, presence), "deleting the waiting runs removed the marker"
    _set_status(driver, env, "source", RunStatus.SUCCEEDED)

    for reader in (connect(), connect()):
        assert _marker_present(reader, presence), "the marker is gone for a newly connected instance"
        waiters = _waiters(reader, presence)
        assert waiters is not None, "a terminal transition would now skip a scan it must make"
        if _strong(reader):
            assert waiters == [], f"deleted waiters are still indexed: {waiters}"


@MONOTONIC
def test_later_waits_leave_the_marker_unchanged(driver: StorageDriver, other_driver: StorageDriver) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    _wait(driver, presence, "waiter-1")
    [first] = read_keys(other_driver, [presence.key])
    for index, instance in enumerate((other_driver, driver, other_driver), start=2):
        assert _wait(instance, presence, f"waiter-{index}") is CompletionWaitPlan.MARKER_PRESENT, (
            "a later wait, on any instance, must find the marker the first wait stored"
        )
    [last] = read_keys(driver, [presence.key])
    assert first is not None and last is not None, "the marker disappeared"
    assert (last.version, last.document) == (first.version, first.document), (
        "a later wait rewrote the marker: it is a one-time flag, not a counter"
    )


def _assert_marker_still_counts(
    reader: StorageDriver, presence: RunCompletionWaitPresence, after: str
) -> None:
    """The marker is there and still makes a terminal transition scan, and a new wait finds it."""
    assert _marker_present(reader, presence), f"{after} removed the completion-wait marker"
    assert _waiters(reader, presence) is not None, (
        f"after {after} a terminal transition of {presence.source_run_id} would skip the waiter scan"
    )


@MONOTONIC
def test_pruning_the_source_run_keeps_its_marker(driver: StorageDriver, other_driver: StorageDriver) -> None:
    """The marker shares the source run's id but not its lifetime: no cascade from deleting that run."""
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"))
    _wait(driver, presence, "waiter")
    _set_status(other_driver, env, "source", RunStatus.SUCCEEDED)
    tombstoned = driver.transaction(lambda tx: tombstone_run(tx, env, "source"))
    assert tombstoned is TombstoneOutcome.TOMBSTONED, f"tombstoning the finished source returned {tombstoned}"
    passes = prune_fully(other_driver, env, "source")
    assert passes[-1].status in (PassStatus.FINISHED, PassStatus.GONE), f"pruning ended with {passes[-1]}"
    assert read_keys(driver, [presence.source_key]) == [None], "the pruned source run is still stored"
    _assert_marker_still_counts(driver, presence, "pruning the source run")
    _assert_marker_still_counts(other_driver, presence, "pruning the source run")
    # The source id is free again: a wait on it is a wait on a future run and must find the marker.
    assert _wait(other_driver, presence, "later") is CompletionWaitPlan.MARKER_PRESENT, (
        "a wait on the pruned source's id did not find the marker the first wait stored"
    )


@MONOTONIC
def test_waiters_that_stop_waiting_keep_the_marker(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """The marker is not a waiter count: the last waiter leaving the wait (not deleted) leaves it in place."""
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"))
    _wait(driver, presence, "waiter-1")
    _wait(other_driver, presence, "waiter-2")
    for waiter, status in (("waiter-1", RunStatus.RUNNING), ("waiter-2", RunStatus.CANCELLED)):
        _set_status(other_driver, env, waiter, status)
        _assert_marker_still_counts(driver, presence, f"moving {waiter} out of its wait ({status.value})")
    _set_status(driver, env, "source", RunStatus.FAILED)
    _assert_marker_still_counts(other_driver, presence, "finishing the source after its waiters left")


@MONOTONIC
def test_an_old_marker_is_still_a_marker(
    driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    """No time to live: a marker created long before the reading attempt's time is read like a new one.

    With a client clock, the wait is registered on an instance whose clock reads 2001 and read back on one
    whose clock reads 2090 (and on a default instance); other drivers register and read at their own time.
    """
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    client = driver.profile.clock_authority is StorageClockAuthority.CLIENT
    writer = connect(clock=lambda: datetime(2001, 1, 1, tzinfo=UTC)) if client else driver
    write(writer, run_record(env, "source"))
    assert _wait(writer, presence, "waiter") is CompletionWaitPlan.CREATE_MARKER, (
        "the first wait on a running source must be told to create the marker"
    )
    readers = [connect(clock=lambda: datetime(2090, 1, 1, tzinfo=UTC)), connect()] if client else [connect()]
    for reader in readers:
        _assert_marker_still_counts(reader, presence, "time passing")
        assert _wait(reader, presence, f"waiter-{id(reader)}") is CompletionWaitPlan.MARKER_PRESENT, (
            "a later wait did not find a marker stored long before"
        )


@ABSENT
def test_ordinary_runs_and_their_completion_create_no_marker(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"), run_record(env, "bystander", status=RunStatus.PENDING))
    _set_status(driver, env, "source", RunStatus.FAILED)

    for reader in (driver, other_driver):
        assert not _marker_present(reader, presence), "an ordinary run got a completion-wait marker"
        assert _waiters(reader, presence) is None, (
            "an ordinary run must have no waiting runs recorded "
            "(completion_waits.absent-marker-means-no-wait)"
        )
        assert not _marker_present(reader, RunCompletionWaitPresence(env, "bystander")), (
            "a run nobody waited for must have no completion-wait marker"
        )


@ABSENT
def test_a_wait_on_a_finished_source_creates_no_marker(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("waits")
    done = RunCompletionWaitPresence(env, "done")
    live = RunCompletionWaitPresence(env, "live")
    write(driver, run_record(env, "done", status=RunStatus.SUCCEEDED), run_record(env, "live"))
    assert _wait(driver, done, "late") is CompletionWaitPlan.SOURCE_TERMINAL, (
        "a wait on a source that already finished must be told the source is terminal"
    )
    assert _wait(driver, live, "waiter") is CompletionWaitPlan.CREATE_MARKER, (
        "the first wait on a running source must be told to create the marker"
    )

    assert not _marker_present(other_driver, done), "a wait refused for a finished source left a marker"
    assert read_keys(other_driver, [run_record_key(env, "late")]) == [None], (
        "a wait refused because its source finished must not store the waiting run"
    )
    assert _marker_present(other_driver, live), "the other source's marker is missing"


# -- across processes --------------------------------------------------------------------------------


@ACROSS_PROCESSES
def test_a_wait_registered_in_one_process_is_seen_by_others(
    driver: StorageDriver, runlane_workers: Any
) -> None:
    env = fresh_environment("waits")
    presence = RunCompletionWaitPresence(env, "source")
    write(driver, run_record(env, "source"))
    first, second = runlane_workers(2)
    assert (
        first.call(w_register_wait, env, "source", "waiter-1", False) == CompletionWaitPlan.CREATE_MARKER
    ), "the first wait on a running source must be told to create the marker"
    assert (
        second.call(w_register_wait, env, "source", "waiter-2", False) == CompletionWaitPlan.MARKER_PRESENT
    ), "a wait registered in another process did not find the marker the first process's wait created"
    assert _marker_present(driver, presence), "the marker created in a worker process is missing here"
    assert first.call(w_finish_source, env, "source") is True, (
        "the source's terminal transition in a worker process found no marker, so core would skip the "
        "waiter scan although two waits were registered"
    )
    waiters = _waiters(driver, presence)
    assert waiters is not None, "a terminal transition in this process would skip the waiter scan"
    if _strong(driver):
        assert waiters == ["waiter-1", "waiter-2"], f"the waiter index holds {waiters}"


@ACROSS_PROCESSES
def test_a_wait_racing_the_terminal_transition_in_another_process_is_never_stranded(
    driver: StorageDriver, runlane_workers: Any
) -> None:
    """One process makes the fenced read of a first wait (source running, no marker) and waits inside its
    attempt; another process finishes the source meanwhile (or is made to wait). Serially either the wait
    came first (the transition saw the marker) or the transition did (the wait saw a finished source)."""
    env = fresh_environment("waits")
    write(driver, run_record(env, "source"))
    waiter, finisher = runlane_workers(2)
    waiter.start(w_register_wait, env, "source", "waiter", True)
    assert waiter.expect("read") == CompletionWaitPlan.CREATE_MARKER, (
        "the first wait on a running source must plan to create the marker"
    )
    finisher.start(w_finish_source, env, "source")
    finisher.done(GRACE)
    waiter.send("go")
    registered, saw_marker = waiter.outcome(), finisher.outcome()
    [stored] = read_keys(driver, [run_record_key(env, "waiter")])
    finished = committed(saw_marker)
    if committed(registered) and registered != CompletionWaitPlan.SOURCE_TERMINAL:
        assert stored is not None, f"the wait committed ({registered}) but its waiting run is missing"
    if stored is not None and finished:
        assert saw_marker is True, (
            "a waiting run was committed while the source's terminal transition, in another process, found "
            "no marker and so would skip the waiter scan: the wait is stranded (no serial order allows that)"
        )
