"""The histories workload itself: fixed by rounds and seed, every attempt recorded, several processes."""

from __future__ import annotations

from collections import Counter

from runlane_conformance.fixtures.processes import DriverTarget, start_workers
from runlane_conformance.harness import load_harness
from runlane_conformance.history import Outcome, Span, check_history
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
    report = check_history(history)
    assert report.ok
    # Each attempt's span is its round, counted, never timed: transaction t<n> ran in round n - 1.
    for attempt in history.attempts:
        number = int(attempt.transaction.rsplit(".t", 1)[1]) - 1
        assert attempt.span == Span("p0", 2 * number, 2 * number + 1), attempt
    # Rounds follow one another: each committed attempt precedes the next round's (up to 4 x 4 edges).
    assert 0 < report.realtime_edges <= 39 * CLIENTS * CLIENTS
    assert report.realtime is None
    assert "consistent with strict serializable" in report.realtime_line()


def test_worker_processes_add_their_clients_to_one_history(tmp_path: object) -> None:
    harness = load_harness("sqlite", {})
    store = harness.open_store()
    try:
        with start_workers(DriverTarget.of("sqlite", {}), store.address(), 2) as workers:
            history, _ = record_concurrent_history(store, rounds=10, seed=5, workers=workers)
    finally:
        store.close()
        harness.close()
    # Real-time order only within a process: each process counts its own rounds.
    assert {a.span.clock for a in history.attempts if a.span is not None} == {"p0", "p1", "p2"}
    per_process = Counter(attempt.process for attempt in history.attempts if attempt.id.endswith(".a1"))
    assert per_process == {0: 10 * CLIENTS, 1: 10 * WORKER_CLIENTS, 2: 10 * WORKER_CLIENTS}
    values = [op.value for a in history.attempts for op in a.writes if op.value is not None]
    assert len(values) == len(set(values)), "two processes wrote the same value"
    report = check_history(history)
    assert report.ok, report.render(history)
