"""Completion-wait presence: absent marker proves nobody waited; present marker only says "scan"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runlane_conformance import (
    StorageTableName,
    build_storage_record,
    create_local_storage_driver,
    iso_date_codec,
)
from runlane_conformance.core.completion_waits import (
    CompletionWaitPlan,
    RunCompletionWaitPresence,
    find_completion_waiters,
    register_completion_wait,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ZERO = {"events": "0", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"}


def run(run_id: str, status: str = "running", waiting_for: str | None = None) -> Any:
    terminal = status in ("succeeded", "failed", "cancelled")
    return build_storage_record(
        StorageTableName.RUNS,
        {
            "environment": "prod",
            "runId": run_id,
            "workflow": "wf",
            "status": status,
            "input": {},
            "output": None,
            "error": None,
            "parentRunId": None,
            "waitingForRunId": waiting_for,
            "createdAt": iso_date_codec.encode(T0),
            "updatedAt": iso_date_codec.encode(T0),
            "completedAt": iso_date_codec.encode(T0) if terminal else None,
            "tombstonedAt": None,
            "counts": ZERO,
        },
    )


def wait_on(driver: Any, waiter: str, source: str) -> CompletionWaitPlan:
    presence = RunCompletionWaitPresence("prod", source)

    def register(tx: Any) -> CompletionWaitPlan:
        plan, _ = register_completion_wait(tx, presence)
        if plan is not CompletionWaitPlan.SOURCE_TERMINAL:
            tx.create(run(waiter, "waiting", waiting_for=source))
        return plan

    return driver.transaction(register)  # type: ignore[no-any-return]


def test_an_absent_marker_skips_the_waiter_scan() -> None:
    driver = create_local_storage_driver(clock=lambda: T0)
    driver.transaction(lambda tx: tx.create(run("source")))
    presence = RunCompletionWaitPresence("prod", "source")
    assert driver.transaction(lambda tx: find_completion_waiters(tx, presence, limit=10)) is None


def test_first_wait_creates_the_marker_and_the_waiter_is_found() -> None:
    driver = create_local_storage_driver(clock=lambda: T0)
    driver.transaction(lambda tx: tx.create(run("source")))
    assert wait_on(driver, "waiter", "source") is CompletionWaitPlan.CREATE_MARKER
    assert wait_on(driver, "waiter-2", "source") is CompletionWaitPlan.MARKER_PRESENT
    presence = RunCompletionWaitPresence("prod", "source")
    page = driver.transaction(lambda tx: find_completion_waiters(tx, presence, limit=10))
    assert page is not None
    assert [ref.key.id[1] for ref in page.items] == ["waiter", "waiter-2"]


def test_a_terminal_source_needs_no_marker_and_no_waiting_run() -> None:
    driver = create_local_storage_driver(clock=lambda: T0)
    driver.transaction(lambda tx: tx.create(run("done", "succeeded")))
    assert wait_on(driver, "late", "done") is CompletionWaitPlan.SOURCE_TERMINAL
    presence = RunCompletionWaitPresence("prod", "done")
    assert driver.transaction(lambda tx: tx.get([presence.key]))[0] is None


def test_a_wait_on_a_future_source_id_leaves_a_marker() -> None:
    driver = create_local_storage_driver(clock=lambda: T0)
    assert wait_on(driver, "early", "not-yet-created") is CompletionWaitPlan.CREATE_MARKER
    presence = RunCompletionWaitPresence("prod", "not-yet-created")
    assert driver.transaction(lambda tx: tx.get([presence.key]))[0] is not None


def test_the_marker_outlives_its_waiters() -> None:
    driver = create_local_storage_driver(clock=lambda: T0)
    wait_on(driver, "waiter", "source")
    presence = RunCompletionWaitPresence("prod", "source")
    waiter_key = run("waiter", "waiting", waiting_for="source").key
    driver.transaction(lambda tx: tx.delete(tx.get([waiter_key])[0]))
    page = driver.transaction(lambda tx: find_completion_waiters(tx, presence, limit=10))
    assert page is not None and page.items == (), "a present marker only means: scan (and find nothing)"


def test_two_first_waiters_race_on_the_marker_and_both_waits_are_kept() -> None:
    store_driver = create_local_storage_driver(clock=lambda: T0)
    presence = RunCompletionWaitPresence("prod", "source")
    attempts = {"n": 0}

    def first(tx: Any) -> CompletionWaitPlan:
        attempts["n"] += 1
        plan, _ = register_completion_wait(tx, presence)
        if attempts["n"] == 1:
            # another waiter registers (and creates the marker) before this attempt commits
            assert wait_on(store_driver, "other", "source") is CompletionWaitPlan.CREATE_MARKER
        tx.create(run("mine", "waiting", waiting_for="source"))
        return plan

    assert store_driver.transaction(first) is CompletionWaitPlan.MARKER_PRESENT
    assert attempts["n"] == 2, "the first attempt's conditional marker create must lose and replay"
    page = store_driver.transaction(lambda tx: find_completion_waiters(tx, presence, limit=10))
    assert page is not None and sorted(ref.key.id[1] for ref in page.items) == ["mine", "other"]
