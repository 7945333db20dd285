"""The async adapter: an async driver is judged through it exactly as it behaves.

Each test names the guarantee ``runlane_conformance.aio`` gives a driver
author: errors and outcomes reach the suites unchanged or mapped to the
contract's errors, attempts roll back when their callback raises or is
cancelled, and concurrent transactions on one adapter stay concurrent.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

import pytest

from runlane_conformance import (
    StorageCommitUnknownError,
    StorageRecordKey,
    StorageTableName,
    StorageUnavailableError,
    StorageUnsupportedError,
    StorageUsageError,
)
from runlane_conformance.aio import (
    CallbackAborted,
    EventLoopThread,
    SyncDriverFromAsync,
    SyncHarnessFromAsync,
    SyncOperatorDriverFromAsync,
    async_harness,
    wrap_driver,
)
from runlane_conformance.contract.values import StorageProfile
from runlane_conformance.harness import load_harness
from runlane_conformance.runner import run_suites
from tests.mutants.async_wrapping import reference

T = TypeVar("T")

KEY = StorageRecordKey(StorageTableName.RUNS, ("r1",))


@pytest.fixture
def ported() -> Iterator[SyncHarnessFromAsync]:
    harness = reference({})
    assert isinstance(harness, SyncHarnessFromAsync)
    yield harness
    harness.close()


class ScriptedAttempt:
    """An async attempt whose reads are whatever the test's coroutine does."""

    def __init__(self, driver: ScriptedDriver) -> None:
        self.driver = driver

    async def get(self, keys: Any) -> list[Any]:
        return await self.driver.read(keys)

    async def query_candidates(self, command: Any, *, mode: Any = None) -> Any:
        raise NotImplementedError

    async def now(self) -> Any:
        raise NotImplementedError

    async def create(self, record: Any) -> None:
        self.driver.staged.append(record)

    async def replace(self, current: Any, record: Any) -> None:
        raise NotImplementedError

    async def delete(self, current: Any) -> None:
        raise NotImplementedError


class ScriptedDriver:
    """A tiny async driver whose reads and commit are coroutines the test supplies."""

    def __init__(self) -> None:
        self.profile = StorageProfile()
        self.staged: list[Any] = []
        self.commits = 0
        self.rollbacks: list[BaseException] = []

    async def read(self, keys: Any) -> list[Any]:
        return [None for _ in keys]

    async def commit(self) -> None:
        self.commits += 1

    async def transaction(self, callback: Callable[[Any], Awaitable[T]]) -> T:
        try:
            result = await callback(ScriptedAttempt(self))
        except BaseException as error:
            self.rollbacks.append(error)
            raise
        await self.commit()
        return result

    async def query(self, command: Any) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        pass


@pytest.fixture
def loop() -> Iterator[EventLoopThread]:
    running = EventLoopThread()
    yield running
    running.close()


def test_the_reference_driver_ported_to_async_certifies_through_the_adapter() -> None:
    """Every requirement passes or is gated by the profile: nothing fails, crashes or goes unrun."""
    result = run_suites("tests.mutants.async_wrapping:reference", seed=0)
    unfavourable = {
        req.id: (req.outcome.value, [test.message for test in req.failures])
        for req in result.requirements
        if req.outcome.value not in ("passed", "gated")
    }
    assert not unfavourable, f"the async port of the reference driver does not certify: {unfavourable}"
    passed = {req.id for req in result.requirements if req.outcome.value == "passed"}
    assert {
        "sealing.overlapping-calls-refused",
        "conflicts.lost-update",
        "exclusive_selection.released-at-commit",
        "append.positions-contiguous",
    } <= passed


def test_an_async_harness_registers_like_any_other(ported: SyncHarnessFromAsync) -> None:
    store = ported.open_store()
    try:
        driver = store.connect()
        assert driver.transaction(lambda tx: tx.get([KEY])) == [None]
        driver.close()
    finally:
        store.close()


def test_an_async_factory_registered_directly_is_served_through_the_adapter() -> None:
    harness = load_harness("tests.mutants.async_wrapping:reference_async_factory")
    try:
        assert isinstance(harness, SyncHarnessFromAsync)
        store = harness.open_store()
        assert store.connect().transaction(lambda tx: tx.get([KEY])) == [None]
        store.close()
    finally:
        harness.close()


def test_a_callback_exception_reaches_the_driver_and_the_caller_unchanged(loop: EventLoopThread) -> None:
    driver = ScriptedDriver()
    adapter = SyncDriverFromAsync(driver, loop)
    problem = ValueError("callback broke")

    def callback(tx: Any) -> None:
        raise problem

    with pytest.raises(ValueError) as raised:
        adapter.transaction(callback)
    assert raised.value is problem
    assert driver.rollbacks == [problem] and driver.commits == 0


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit, StopIteration, asyncio.CancelledError])
def test_a_callback_base_exception_rolls_back_and_is_re_raised_without_stopping_the_loop(
    loop: EventLoopThread, kind: type[BaseException]
) -> None:
    driver = ScriptedDriver()
    adapter = SyncDriverFromAsync(driver, loop)
    problem = kind()

    def callback(tx: Any) -> None:
        raise problem

    with pytest.raises(kind) as raised:
        adapter.transaction(callback)
    assert raised.value is problem
    assert driver.commits == 0
    assert len(driver.rollbacks) == 1 and isinstance(driver.rollbacks[0], CallbackAborted)
    assert adapter.transaction(lambda tx: "loop still serves") == "loop still serves"


def test_transactions_from_several_threads_run_concurrently_on_one_adapter(loop: EventLoopThread) -> None:
    """Two transactions each wait, inside a read, for the other's read to start: only concurrency ends it."""
    driver = ScriptedDriver()
    adapter = SyncDriverFromAsync(driver, loop)
    keys = [StorageRecordKey(StorageTableName.RUNS, (f"r{me}",)) for me in (0, 1)]

    async def make_events() -> list[asyncio.Event]:
        return [asyncio.Event(), asyncio.Event()]

    arrived = loop.run(make_events())

    async def rendezvous_read(read: Any) -> list[Any]:
        me = keys.index(read[0])
        arrived[me].set()
        await asyncio.wait_for(arrived[1 - me].wait(), 10)
        return [None for _ in read]

    driver.read = rendezvous_read  # type: ignore[method-assign,assignment]
    results: dict[int, object] = {}

    def run(me: int) -> None:
        try:
            results[me] = adapter.transaction(lambda tx: tx.get([keys[me]]))
        except BaseException as error:
            results[me] = error

    threads = [threading.Thread(target=run, args=(me,)) for me in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {0: [None], 1: [None]}
    assert driver.commits == 2


#: The adapter's one deadline in the overrun tests. It bounds every step, the ones that answer at once
#: as well as the one that never does, so it must be long enough that a busy machine never makes an
#: answering step miss it (the never-answering step still fails, only later).
OVERRUN = 5.0


def test_a_read_that_overruns_the_timeout_dooms_its_attempt(loop: EventLoopThread) -> None:
    driver = ScriptedDriver()
    never = asyncio.Event()

    async def hanging_read(keys: Any) -> list[Any]:
        await never.wait()
        return []

    driver.read = hanging_read  # type: ignore[method-assign]
    adapter = SyncDriverFromAsync(driver, loop, timeout=OVERRUN)

    def swallowing(tx: Any) -> str:
        with pytest.raises(StorageUnavailableError):
            tx.get([KEY])
        return "swallowed"

    with pytest.raises(StorageUnavailableError, match="did not answer"):
        adapter.transaction(swallowing)
    assert driver.commits == 0, (
        "an attempt whose read timed out must not commit, even if the callback swallowed it"
    )


def test_a_commit_that_overruns_the_timeout_after_the_callback_returned_is_commit_unknown(
    loop: EventLoopThread,
) -> None:
    driver = ScriptedDriver()
    never = asyncio.Event()

    async def hanging_commit() -> None:
        await never.wait()

    driver.commit = hanging_commit  # type: ignore[method-assign]
    adapter = SyncDriverFromAsync(driver, loop, timeout=OVERRUN)
    with pytest.raises(StorageCommitUnknownError):
        adapter.transaction(lambda tx: None)


def test_a_transaction_that_never_starts_an_attempt_is_unavailable(loop: EventLoopThread) -> None:
    driver = ScriptedDriver()
    never = asyncio.Event()

    async def never_starts(callback: Any) -> Any:
        await never.wait()

    driver.transaction = never_starts  # type: ignore[method-assign]
    adapter = SyncDriverFromAsync(driver, loop, timeout=OVERRUN)
    with pytest.raises(StorageUnavailableError):
        adapter.transaction(lambda tx: None)


def test_a_driver_that_cancels_its_callback_rolls_back_and_the_late_return_is_discarded(
    loop: EventLoopThread,
) -> None:
    """The driver bounds its callback with its own timeout; the suite's callback is still running."""
    driver = ScriptedDriver()
    release = threading.Event()
    cancelled = threading.Event()

    async def bounded(callback: Callable[[Any], Awaitable[Any]]) -> Any:
        try:
            return await asyncio.wait_for(callback(ScriptedAttempt(driver)), 0.1)
        except TimeoutError:
            cancelled.set()
            raise StorageUnavailableError("callback overran the driver's own bound") from None

    driver.transaction = bounded  # type: ignore[method-assign]
    adapter = SyncDriverFromAsync(driver, loop)

    def slow(tx: Any) -> str:
        assert cancelled.wait(10)
        release.set()
        return "too late"

    with pytest.raises(StorageUnavailableError, match="overran"):
        adapter.transaction(slow)
    assert release.is_set() and driver.commits == 0


def test_a_driver_transaction_ending_in_cancellation_maps_to_the_contract(loop: EventLoopThread) -> None:
    driver = ScriptedDriver()

    async def cancelled_before(callback: Any) -> Any:
        raise asyncio.CancelledError

    driver.transaction = cancelled_before  # type: ignore[method-assign]
    adapter = SyncDriverFromAsync(driver, loop)
    with pytest.raises(StorageUnavailableError, match="nothing committed"):
        adapter.transaction(lambda tx: None)

    async def cancelled_after(callback: Any) -> Any:
        await callback(ScriptedAttempt(driver))
        raise asyncio.CancelledError

    driver.transaction = cancelled_after  # type: ignore[method-assign]
    with pytest.raises(StorageCommitUnknownError):
        adapter.transaction(lambda tx: None)


def test_an_attempt_without_append_does_not_offer_it(loop: EventLoopThread) -> None:
    adapter = SyncDriverFromAsync(ScriptedDriver(), loop)

    def appending(tx: Any) -> None:
        tx.append(object())

    with pytest.raises(StorageUnsupportedError):
        adapter.transaction(appending)


def test_operator_reads_are_offered_exactly_when_the_async_driver_offers_them(loop: EventLoopThread) -> None:
    class WithReads(ScriptedDriver):
        async def get_run(self, environment: str, run_id: str) -> object | None:
            return (environment, run_id)

        async def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> object:
            return (environment, limit, cursor)

        async def list_run_events(
            self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
        ) -> object:
            return (environment, run_id, limit, cursor)

    plain = wrap_driver(ScriptedDriver(), loop)
    assert not hasattr(plain, "get_run")
    reads = wrap_driver(WithReads(), loop)
    assert isinstance(reads, SyncOperatorDriverFromAsync)
    assert reads.get_run("prod", "r1") == ("prod", "r1")
    assert reads.list_runs("prod", limit=2) == ("prod", 2, None)
    assert reads.list_run_events("prod", "r1", limit=3, cursor="c") == ("prod", "r1", 3, "c")


def test_a_call_from_the_loop_thread_itself_is_refused_instead_of_deadlocking(loop: EventLoopThread) -> None:
    adapter = SyncDriverFromAsync(ScriptedDriver(), loop)

    async def from_inside() -> BaseException | None:
        try:
            adapter.transaction(lambda tx: None)
        except StorageUsageError as error:
            return error
        return None

    assert isinstance(loop.run(from_inside()), StorageUsageError)


def test_an_async_factory_that_raises_is_reported_in_one_line_and_stops_its_loop() -> None:
    before = {thread.ident for thread in threading.enumerate()}

    async def broken(options: Mapping[str, str]) -> Any:
        raise ValueError("dsn option is malformed")

    factory = async_harness(broken)
    with pytest.raises(ValueError, match="malformed"):
        factory({})
    leftover = [
        thread
        for thread in threading.enumerate()
        if thread.ident not in before and thread.name == "runlane-aio-loop"
    ]
    assert not leftover


def test_closing_the_harness_stops_its_loop_thread() -> None:
    harness = load_harness("tests.mutants.async_wrapping:reference")
    assert isinstance(harness, SyncHarnessFromAsync)
    thread = harness.loop.thread
    harness.close()
    assert not thread.is_alive()
