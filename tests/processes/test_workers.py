"""The worker processes checks use to reach a store from more than one process.

Run against the SQLite example (a store with an address: its file). Each
test says what the machinery guarantees: results and exceptions come back,
signals and go-aheads synchronise a call with the check, a SIGKILLed or hung
worker is reported instead of hanging, and a worker never outlives its parent.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from runlane_conformance import StorageConflictError
from runlane_conformance.fixtures.processes import (
    DriverTarget,
    WorkerCall,
    WorkerDied,
    WorkerFailed,
    WorkerPool,
    WorkerTimeout,
    start_workers,
)
from runlane_conformance.harness import StoreHandle, load_harness
from tests.conftest import example_package

TARGET = DriverTarget.of("sqlite", {})


@pytest.fixture
def store() -> Iterator[StoreHandle]:
    example_package("runlane_sqlite_driver", "sqlite")
    harness = load_harness("sqlite", {})
    handle = harness.open_store()
    try:
        yield handle
    finally:
        handle.close()
        harness.close()


# Functions the workers run (module-level, so a worker imports them by name).


def profile_of(call: WorkerCall) -> tuple[int, str]:
    return call.index, call.driver.profile.durability.value


def raise_conflict(call: WorkerCall, message: str) -> None:
    raise StorageConflictError(message)


def handshake(call: WorkerCall, tag: str) -> object:
    call.signal("waiting", os.getpid())
    return call.wait(tag)


def exit_hard(call: WorkerCall) -> None:
    os._exit(3)


def block(call: WorkerCall) -> None:
    call.wait("never", timeout=600)


def test_a_call_runs_in_another_process_on_a_fresh_instance(store: StoreHandle) -> None:
    with start_workers(TARGET, store.address(), 2) as workers:
        answers = [worker.call(profile_of) for worker in workers]
        pids = {worker.pid for worker in workers}
    assert answers == [(0, "durable"), (1, "durable")]
    assert os.getpid() not in pids and len(pids) == 2


def test_an_exception_comes_back_with_its_type_and_the_workers_traceback(store: StoreHandle) -> None:
    with start_workers(TARGET, store.address(), 1) as (worker,):
        with pytest.raises(WorkerFailed) as failed:
            worker.call(raise_conflict, "lost a race")
        assert isinstance(failed.value.error, StorageConflictError)
        assert "raise_conflict" in failed.value.remote_traceback
        assert "lost a race" in str(failed.value)
        assert worker.call(profile_of) == (0, "durable"), "the worker serves the next call"


def test_signals_and_go_aheads_synchronise_a_call_with_the_check(store: StoreHandle) -> None:
    with start_workers(TARGET, store.address(), 1) as (worker,):
        worker.start(handshake, "go")
        assert worker.expect("waiting") == worker.pid
        assert worker.poll_signal("other", 0.05) == (False, None)
        worker.send("go", {"answer": 42})
        assert worker.result() == {"answer": 42}


def test_a_killed_worker_is_reported_and_not_waited_for(store: StoreHandle) -> None:
    with start_workers(TARGET, store.address(), 2) as (first, second):
        first.start(handshake, "go")
        first.expect("waiting")
        assert first.kill() == -signal.SIGKILL
        with pytest.raises(WorkerDied):
            first.result()
        second.start(exit_hard)
        with pytest.raises(WorkerDied) as died:
            second.result()
        assert died.value.returncode == 3


def test_a_worker_that_does_not_answer_fails_the_step_within_its_deadline(store: StoreHandle) -> None:
    with start_workers(TARGET, store.address(), 1) as (worker,):
        worker.start(block)
        with pytest.raises(WorkerTimeout, match=r"did not answer within 0\.2s"):
            worker.result(timeout=0.2)
        assert not worker.alive


def test_a_store_without_an_address_is_refused() -> None:
    with pytest.raises(AssertionError, match="no address"), start_workers(TARGET, None, 1):
        pass


def test_a_worker_leaves_when_the_process_that_started_it_dies(store: StoreHandle, tmp_path: str) -> None:
    script = textwrap.dedent(
        f"""
        import os, sys
        from runlane_conformance.fixtures.processes import DriverTarget, start_workers
        with start_workers(DriverTarget.of("sqlite", {{}}), {store.address()!r}, 1) as (worker,):
            worker.start("tests.processes.test_workers:block")
            print(worker.pid, flush=True)
            os._exit(0)
        """
    )
    parent = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    pid = int(parent.stdout.strip())
    # The worker's lifeline closed with its parent: a pidfd becomes readable when the worker is gone.
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone
    try:
        readable, _, _ = select.select([pidfd], [], [], 30)
    finally:
        os.close(pidfd)
    assert readable, f"worker {pid} outlived the process that started it"


def test_a_joined_capability_is_gated_by_the_first_part_that_is_missing() -> None:
    from runlane_conformance import StorageDurability, StorageProfile
    from runlane_conformance.fixtures.gating import ProfileFacts, gating_reason

    durable = StorageProfile(durability=StorageDurability.DURABLE)
    local = ProfileFacts(durable, operator_reads=False, cross_process=False)
    shared = ProfileFacts(durable, operator_reads=False, cross_process=True)
    process = ProfileFacts(StorageProfile(), operator_reads=False, cross_process=True)
    assert gating_reason("cross_process+durable", shared) is None
    assert gating_reason("cross_process+durable", local) == gating_reason("cross_process", local)
    assert gating_reason("cross_process+durable", process) == gating_reason("durable", process)
    with pytest.raises(ValueError, match="unknown capability"):
        gating_reason("durable+teleport", shared)


def test_a_pool_reuses_workers_that_ended_cleanly_and_replaces_killed_ones(store: StoreHandle) -> None:
    pool = WorkerPool(TARGET)
    try:
        with pool.workers(store.address(), 2) as (first, second):
            pids = {first.pid, second.pid}
            first.kill()
        with pool.workers(store.address(), 2) as again:
            assert [worker.index for worker in again] == [0, 1]
            assert [worker.call(profile_of)[0] for worker in again] == [0, 1]
            assert second.pid in {worker.pid for worker in again}, "the worker that ended cleanly is reused"
            assert first.pid not in {worker.pid for worker in again}, "a killed worker is never handed out"
        with pool.workers(store.address(), 1, fresh=True) as (new,):
            assert new.pid not in pids | {worker.pid for worker in again}
    finally:
        pool.close()
