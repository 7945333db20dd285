"""How the Python backend shares stdin between its threads: a request that waits never stalls the pipe.

The thread that reads a request answers it itself; these tests hold a request up inside the
driver, where the backend cannot see it coming, and check that the requests it waits for are
still read and answered.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.protocol.process import process_harness

BACKEND = f"{sys.executable} -m runlane_conformance.backend --driver tests.protocol.locking_driver:harness"
pytestmark = pytest.mark.timeout(120)


def test_a_read_waiting_for_another_transactions_lock_does_not_keep_that_transaction_from_finishing() -> None:
    harness = process_harness({"command": BACKEND, "timeout": "10"})
    store = harness.open_store()
    try:
        parked_connection, holder, waiter = store.connect(), store.connect(), store.connect()
        leases = Leases("locking")
        key = leases.key("shared")
        parked, unpark, holding, waiting = (threading.Event() for _ in range(4))
        seen: list[StoredRecord | None] = []
        errors: list[BaseException] = []

        def park(tx: StorageTransaction) -> None:
            # Keeps the thread that read this transaction busy waiting for it, so the holder's
            # transaction below is answered by another thread of the backend.
            parked.set()
            assert unpark.wait(10)

        def hold(tx: StorageTransaction) -> None:
            assert tx.get([key]) == [None]  # locks the key until this transaction ends
            holding.set()
            assert waiting.wait(10)
            time.sleep(0.3)  # the waiter's read is now waiting for the lock, inside the backend's driver
            tx.create(leases.record("shared"))

        def wait_for_the_lock(tx: StorageTransaction) -> None:
            waiting.set()
            seen.extend(tx.get([key]))

        def run(target: object) -> None:
            try:
                target()  # type: ignore[operator]
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

        threads = [threading.Thread(target=run, args=(lambda: parked_connection.transaction(park),))]
        threads[0].start()
        assert parked.wait(10)
        threads.append(threading.Thread(target=run, args=(lambda: holder.transaction(hold),)))
        threads[1].start()
        assert holding.wait(10)
        unpark.set()  # the parked transaction commits; its thread reads stdin again, outside any attempt
        threads[0].join(10)
        threads.append(threading.Thread(target=run, args=(lambda: waiter.transaction(wait_for_the_lock),)))
        threads[2].start()
        for thread in threads:
            thread.join(30)
        assert not errors, errors
        assert [record.key for record in seen if record is not None] == [key]
    finally:
        store.close()
        harness.close()


def test_an_attempt_that_ends_while_its_own_request_waits_for_the_toolkits_clock_still_commits() -> None:
    # The attempt's callback returns while a thread it started is inside now(), which asks the
    # toolkit's clock: the attempt's reply reaches the backend while the thread that waits for it
    # is busy answering that now().
    harness = process_harness({"command": BACKEND, "timeout": "10"})
    store = harness.open_store()
    try:
        gate = threading.Event()
        moments: list[object] = []

        def clock() -> datetime:
            assert gate.wait(10)
            return datetime(2030, 1, 1, tzinfo=UTC)

        driver = store.connect(clock=clock)
        started: list[threading.Thread] = []

        def callback(tx: StorageTransaction) -> str:
            thread = threading.Thread(target=lambda: moments.append(tx.now()))
            thread.start()
            started.append(thread)
            time.sleep(0.2)  # now() is waiting for the clock, inside the backend
            threading.Timer(0.3, gate.set).start()
            return "committed"

        assert driver.transaction(callback) == "committed"
        started[0].join(10)
        assert moments == [datetime(2030, 1, 1, tzinfo=UTC)]
    finally:
        store.close()
        harness.close()


def test_a_call_overlapping_another_of_the_same_attempt_runs_on_another_backend_thread() -> None:
    # As in process, where the second call comes from a second thread: here it waits for the
    # first (the driver serves one call of an attempt at a time) instead of running inside it.
    harness = process_harness(
        {"command": BACKEND.replace(":harness", ":one_call_at_a_time"), "timeout": "10"}
    )
    store = harness.open_store()
    try:
        entered, release = threading.Event(), threading.Event()
        outcome: dict[str, object] = {}

        def clock() -> datetime:
            entered.set()
            assert release.wait(10)
            return datetime(2030, 1, 1, tzinfo=UTC)

        driver = store.connect(clock=clock)
        leases = Leases("overlap")

        def capture(name: str, call: Callable[[], object]) -> None:
            try:
                outcome[name] = call()
            except BaseException as error:
                outcome[name] = error

        def callback(tx: StorageTransaction) -> None:
            timer = threading.Thread(target=capture, args=("now", tx.now))
            timer.start()
            assert entered.wait(10)
            reader = threading.Thread(target=capture, args=("read", lambda: tx.get([leases.key("x")])))
            reader.start()
            reader.join(0.3)
            release.set()
            timer.join(10)
            reader.join(10)

        driver.transaction(callback)
        assert outcome["now"] == datetime(2030, 1, 1, tzinfo=UTC)
        assert "read" in outcome  # answered (the reference driver refuses it: the read set is sealed)
    finally:
        store.close()
        harness.close()
