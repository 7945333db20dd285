"""A correct locking driver certifies: competitors that wait and deadlock victims replayed are no violations.

``tests.locking.drivers`` makes every competitor wait for the transaction
that is open and replays that transaction after it (a deadlock victim), so
the checks with a competitor see the histories a locking database produces.
Each of them is serial, so none may fail. The MariaDB example shows the
same on a real server; this runs everywhere, deterministically.
"""

from __future__ import annotations

import threading

import pytest

from runlane_conformance import Leases
from runlane_conformance.fixtures.interleave import CompetitorPace
from tests.locking.drivers import LockingDriver, TicketLock, harness
from tests.mutants.runner import requirement_outcomes

DRIVER = "tests.locking.drivers:harness"


def test_a_competitor_waits_and_the_open_transaction_replays_behind_it() -> None:
    made = harness({})
    try:
        store = made.open_store()
        first, second = store.connect(), store.connect()
        assert isinstance(first, LockingDriver)
        leases = Leases(environment="locking")
        first.transaction(lambda tx: tx.create(leases.record("k", holder="0")))
        seen: list[object] = []
        rival: list[threading.Thread] = []

        def t1(tx: object) -> None:
            (k,) = tx.get([leases.key("k")])  # type: ignore[attr-defined]
            seen.append(k.document.value["holder"])
            if not rival:
                rival.append(threading.Thread(target=lambda: second.transaction(bump), daemon=True))
                rival[0].start()
                rival[0].join(0.2)
                seen.append("blocked" if rival[0].is_alive() else "ran")
            tx.replace(k, leases.record("k", holder=f"{k.document.value['holder']}+t1"))  # type: ignore[attr-defined]

        def bump(tx: object) -> None:
            (k,) = tx.get([leases.key("k")])  # type: ignore[attr-defined]
            tx.replace(k, leases.record("k", holder="t2"))  # type: ignore[attr-defined]

        first.transaction(t1)
        rival[0].join(10)
        assert seen == ["0", "blocked", "t2"], "the rival waits, then commits first; T1 replays after it"
        (final,) = first.transaction(lambda tx: tx.get([leases.key("k")]))
        assert final is not None and final.document.value["holder"] == "t2+t1"
        assert store.shared["victims"] == 1
    finally:
        made.close()


def test_the_ticket_lock_serves_in_arrival_order_and_reports_waiters() -> None:
    lock = TicketLock()
    lock.acquire()
    assert not lock.contended()
    order: list[int] = []
    threads = []
    for number in range(3):
        ready = threading.Event()

        def take(number: int = number, ready: threading.Event = ready) -> None:
            ready.set()
            lock.acquire()
            order.append(number)
            lock.release()

        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        ready.wait(5)
        # Bounded wait until this thread is queued (its ticket issued), so arrival order is fixed.
        deadline = threading.Event()
        for _ in range(500):
            if lock._issued == number + 2:  # the toolkit's own test of its own helper
                break
            deadline.wait(0.01)
        threads.append(thread)
    assert lock.contended()
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2]


@pytest.mark.parametrize("area", ["conflicts", "replay", "histories", "model"])
def test_a_locking_driver_passes_every_check_with_a_competitor(area: str) -> None:
    outcomes, messages = requirement_outcomes(DRIVER, areas=[area])
    failed = {req: messages.get(req, "") for req, outcome in outcomes.items() if outcome == "failed"}
    assert not failed, f"a correct locking driver fails: {failed}"
    assert any(outcome == "passed" for outcome in outcomes.values())


def test_the_competitor_pace_keeps_the_full_grace_until_a_driver_blocks() -> None:
    pace = CompetitorPace(floor=0.02, ceiling=1.0, factor=5.0)
    assert pace.grace() == 1.0, "no transaction measured yet: the fixed checks' grace"
    assert pace.timed(lambda: "done") == "done"
    pace.note(True)  # a competitor that finished in time says nothing about blocking
    assert pace.grace() == 1.0, "a driver that never blocked keeps the full grace and its interleavings"
    pace.note(False)
    assert pace.blocked_seen == 1
    assert pace.grace() == 0.02, "an instant transaction scales to the floor, never below it"
    for seconds in (0.5, 0.5, 0.5):
        pace._recent.append(seconds)  # the toolkit's own test of its own helper: slow transactions
    assert pace.grace() == 1.0, "five times a slow median is capped at the ceiling"
