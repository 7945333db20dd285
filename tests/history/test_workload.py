"""The histories workload itself: fixed by rounds and seed, every attempt recorded, several processes."""

from __future__ import annotations

from collections import Counter

from runlane_conformance.fixtures.processes import DriverTarget, start_workers
from runlane_conformance.harness import load_harness
from runlane_conformance.history import Outcome, check_history
from runlane_conformance.suites._histories_support import (
    CLIENTS,
    WORKER_CLIENTS,
    plan_round,
    record_concurrent_history,
)


def _plans(seed: int) -> list[object]:
    import random

    rng = random.Random(seed)
    counter = iter(range(10**6))
    return [
        plan_round(rng, n, CLIENTS, lambda: next(counter), exclusive=True, append=True) for n in range(30)
    ]


def test_the_plans_are_fixed_by_the_seed_alone() -> None:
    assert _plans(7) == _plans(7)
    assert _plans(7) != _plans(8)


def test_every_attempt_is_recorded_and_replays_are_aborted_attempts() -> None:
    harness = load_harness("local", {})
    store = harness.open_store()
    try:
        history, workload = record_concurrent_history(store, rounds=40, seed=3)
    finally:
        store.close()
        harness.close()
    assert history.transactions() == 40 * CLIENTS
    by_transaction: dict[str, list[Outcome]] = {}
    for attempt in history.attempts:
        by_transaction.setdefault(attempt.transaction, []).append(attempt.outcome)
    for outcomes in by_transaction.values():
        # Every attempt but the last was rolled back; the last committed unless the callback raised.
        assert all(outcome is Outcome.ABORTED for outcome in outcomes[:-1])
    assert any(len(outcomes) > 1 for outcomes in by_transaction.values()), "no replay was provoked"
    assert sum(workload.round_kinds.values()) == 40
    assert check_history(history).ok


def test_worker_processes_add_their_clients_to_one_history(tmp_path: object) -> None:
    harness = load_harness("sqlite", {})
    store = harness.open_store()
    try:
        with start_workers(DriverTarget.of("sqlite", {}), store.address(), 2) as workers:
            history, _ = record_concurrent_history(store, rounds=10, seed=5, workers=workers)
    finally:
        store.close()
        harness.close()
    per_process = Counter(attempt.process for attempt in history.attempts if attempt.id.endswith(".a1"))
    assert per_process == {0: 10 * CLIENTS, 1: 10 * WORKER_CLIENTS, 2: 10 * WORKER_CLIENTS}
    values = [op.value for a in history.attempts for op in a.writes if op.value is not None]
    assert len(values) == len(set(values)), "two processes wrote the same value"
    report = check_history(history)
    assert report.ok, report.render(history)
