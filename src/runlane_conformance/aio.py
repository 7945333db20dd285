"""Async Python drivers, judged by the unchanged synchronous suites.

An asyncio driver keeps the same contract as a synchronous one; only the
calling convention differs: ``await driver.transaction(callback)`` where the
callback is a coroutine function receiving an attempt whose methods are
awaited. This module states that shape as protocols (``AsyncStorageDriver``,
``AsyncStorageTransaction``, the async harness and store) and bridges it to
the synchronous ``StorageDriver`` the suites call.

How the bridge works, and why it keeps the driver's behaviour
-------------------------------------------------------------
``SyncHarnessFromAsync`` owns one event loop running on a dedicated daemon
thread; every store and driver instance of that harness lives on it. A
suite thread calling ``transaction(callback)`` submits the driver's own
``transaction`` coroutine to the loop and then waits on a private channel.
Each time the driver starts an attempt it awaits the bridge coroutine, which
hands a synchronous attempt facade to the waiting suite thread and awaits
the callback's outcome. The suite's callback therefore runs on the suite's
thread, not on the loop: while it runs, the loop stays free for every other
transaction, and each facade call is one coroutine submitted to the loop
and awaited from the suite thread. Several suite threads can thus run
transactions on one adapter at once, interleaving exactly as the driver's
coroutines interleave (lock waits, replays, ``SKIP LOCKED``), and the
driver's own guards (concurrent use of one attempt, use after the end) see
the calls as the driver would.

Errors and outcomes
-------------------
* A callback error that is an ``Exception`` is handed to the driver as it
  is, so the driver rolls back and propagates it (or replays, if its attempt
  had already lost). Any other ``BaseException`` (``KeyboardInterrupt``,
  ``SystemExit``, ``CancelledError``...) cannot be raised inside the loop
  without stopping it, so the driver receives a ``CallbackAborted`` in its
  place and the original is re-raised on the suite thread once the driver
  has rolled back.
* When the driver cancels the bridge (its own timeout around the callback,
  say), the attempt is over for the driver and the callback's eventual
  return is discarded. The facade never refuses a call on its own: a call
  after the attempt ended still reaches the driver, whose attempt must
  refuse it, so a driver that forgets to is caught, not shielded.
* ``timeout`` (given to ``async_harness``) bounds every awaited call. A read or write that
  overruns, or is cancelled, dooms its attempt (whatever the callback does
  with the error, the attempt cannot commit) and raises
  ``StorageUnavailableError``. A transaction still unfinished that long after
  a callback returned may have committed, so it is cancelled and reported as
  ``StorageCommitUnknownError``; before any callback returned nothing can
  have committed, so it is ``StorageUnavailableError``. A driver coroutine
  that ends in ``CancelledError`` is mapped the same way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from .contract.catalog import StorageCandidateMode
from .contract.errors import (
    RunlaneError,
    StorageCommitUnknownError,
    StorageUnavailableError,
    StorageUnsupportedError,
    StorageUsageError,
)
from .contract.protocols import Clock, StorageTransaction
from .contract.streams import AppendRecordsCommand
from .contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageProfile,
    StorageRecordKey,
    StoredRecord,
)
from .harness_protocols import DriverHarness, HarnessFactory

__all__ = [
    "AsyncDriverHarness",
    "AsyncHarnessFactory",
    "AsyncOperatorReadDriver",
    "AsyncProxiedStore",
    "AsyncSettlingStore",
    "AsyncStorageDriver",
    "AsyncStorageTransaction",
    "AsyncStoreHandle",
    "CallbackAborted",
    "EventLoopThread",
    "SyncDriverFromAsync",
    "SyncHarnessFromAsync",
    "SyncOperatorDriverFromAsync",
    "SyncStoreFromAsync",
    "async_harness",
]

T = TypeVar("T")


# -- the async shape of the contract ----------------------------------------------------------------


@runtime_checkable
class AsyncStorageTransaction(Protocol):
    """One attempt of an async driver: ``StorageTransaction`` with every method awaited.

    The rules are the synchronous attempt's, word for word: reads first and
    all of them join the read set, the first ``now()`` or mutation seals it,
    mutations are staged and committed together only if every read is still
    valid. "Two threads at once" becomes "two overlapping calls": a second
    call while one is pending must raise ``StorageConcurrentUseError``.
    ``append`` may be left out by a driver that does not offer it.
    """

    async def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """Read each key; one result per position, ``None`` where absent."""
        ...

    async def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """One page of index references in contract order; the scanned range joins the read set."""
        ...

    async def now(self) -> datetime:
        """The attempt's one time; the first call seals the read set."""
        ...

    async def create(self, record: NewStorageRecord) -> None:
        """Stage a conditional insert."""
        ...

    async def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """Stage the replacement of exactly ``current``."""
        ...

    async def delete(self, current: StoredRecord) -> None:
        """Stage the delete of exactly ``current``."""
        ...


@runtime_checkable
class AsyncStorageDriver(Protocol):
    """``StorageDriver`` for asyncio: ``transaction`` awaits an async callback once per attempt."""

    @property
    def profile(self) -> StorageProfile:
        """What this driver promises; read without awaiting, like the synchronous profile."""
        ...

    async def transaction(self, callback: Callable[[Any], Awaitable[T]]) -> T:
        """Await ``callback(attempt)`` in attempts until one commits; return that attempt's value.

        A callback that raises rolls its attempt back and the exception
        propagates unchanged; a callback that is cancelled rolls back too.
        """
        ...

    async def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """An advisory index read outside any transaction."""
        ...

    async def close(self) -> None:
        """Release this instance's connections."""
        ...


@runtime_checkable
class AsyncOperatorReadDriver(Protocol):
    """Optional async operator reads; offered by having all three coroutines."""

    async def get_run(self, environment: str, run_id: str) -> object | None:
        """The visible run with its summary, or ``None``."""
        ...

    async def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> object:
        """One page of visible runs."""
        ...

    async def list_run_events(
        self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
    ) -> object:
        """One page of the run's events in ascending sequence order."""
        ...


@runtime_checkable
class AsyncStoreHandle(Protocol):
    """``StoreHandle`` for asyncio: connecting and closing are awaited; the address is not."""

    async def connect(self, *, clock: Clock | None = None) -> AsyncStorageDriver:
        """A new, independent driver instance on this store."""
        ...

    def address(self) -> object | None:
        """A picklable address a child process can attach to, or ``None``."""
        ...

    async def close(self) -> None:
        """Drop the store and everything in it."""
        ...


@runtime_checkable
class AsyncProxiedStore(Protocol):
    """Optional: like ``ProxiedStore``, so the faults suite can put its TCP proxy in front of the server."""

    def proxy_target(self) -> tuple[str, int]:
        """The ``(host, port)`` this store's instances connect to."""
        ...

    async def connect_through(
        self, address: tuple[str, int], *, clock: Clock | None = None
    ) -> AsyncStorageDriver:
        """An instance exactly like ``connect`` gives, whose connections all go to ``address``."""
        ...


@runtime_checkable
class AsyncSettlingStore(Protocol):
    """Optional: like ``SettlingStore``, for eventually consistent indexes."""

    async def settle(self, *, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for every index to catch up; whether it did."""
        ...


@runtime_checkable
class AsyncDriverHarness(Protocol):
    """``DriverHarness`` for asyncio: what an async driver package supplies."""

    async def open_store(self) -> AsyncStoreHandle:
        """A new, empty, isolated store."""
        ...

    async def attach(self, address: object) -> AsyncStoreHandle:
        """A handle on an existing store by address (child processes); does not own it."""
        ...

    async def close(self) -> None:
        """Release what the harness holds."""
        ...


AsyncHarnessFactory = Callable[[Mapping[str, str]], Awaitable[AsyncDriverHarness]]
"""An async driver's factory: awaited on the adapter's loop with the ``--option`` pairs."""


class CallbackAborted(RunlaneError):
    """What an async driver sees in place of a callback's ``BaseException`` that is not an ``Exception``.

    Raising ``KeyboardInterrupt`` or ``SystemExit`` inside a running event
    loop would stop the loop itself, so the driver gets this instead, rolls
    back and propagates it; the adapter then re-raises ``original`` on the
    suite's thread.
    """

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"the transaction callback raised {type(original).__name__}")
        self.original = original


# -- the loop ----------------------------------------------------------------------------------------


class EventLoopThread:
    """An asyncio event loop running forever on its own daemon thread until ``close()``.

    ``run`` submits a coroutine from any other thread and blocks for its
    result; calling it from the loop's own thread would deadlock, so it is
    refused with ``StorageUsageError``.
    """

    def __init__(self, *, name: str = "runlane-aio-loop") -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

        self._thread = threading.Thread(target=serve, name=name, daemon=True)
        self._thread.start()
        started.wait()
        self._closed = False

    @property
    def thread(self) -> threading.Thread:
        """The thread the loop runs on."""
        return self._thread

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; the returned future's ``cancel()`` cancels its task."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise StorageUsageError(
                "a synchronous adapter call was made from its own event loop thread; "
                "it would wait on itself forever"
            )
        if self._closed:
            coroutine.close()
            raise StorageUsageError("this async adapter's event loop was closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and return its result; overrunning ``timeout`` cancels it.

        A timeout or a cancellation becomes ``StorageUnavailableError``: the
        calls run this way (connect, query, close...) commit nothing.
        """
        future = self.submit(coroutine)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise StorageUnavailableError(f"the async driver did not answer within {timeout} s") from None
        except concurrent.futures.CancelledError:
            raise StorageUnavailableError("the async driver's call was cancelled") from None

    def close(self) -> None:
        """Cancel whatever is still running, stop the loop and wait for its thread to end."""
        if self._closed:
            return
        self._closed = True

        async def cancel_rest() -> None:
            current = asyncio.current_task()
            rest = [task for task in asyncio.all_tasks() if task is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


# -- the attempt facade ------------------------------------------------------------------------------


class _AttemptDoomed(StorageUnavailableError):
    """Internal: an attempt whose call timed out or was cancelled; it is never committed."""


@dataclass(frozen=True)
class _Outcome:
    """What a callback (or a whole transaction) ended with: a value, or the exception to raise."""

    value: object = None
    error: BaseException | None = None


@dataclass(frozen=True)
class _AttemptStarted:
    """The bridge's message: run the callback on this facade, then resolve ``answer``."""

    facade: SyncAttemptFacade
    answer: asyncio.Future[object]


@dataclass(frozen=True)
class _TransactionEnded:
    outcome: _Outcome


class SyncAttemptFacade:
    """A synchronous ``StorageTransaction`` whose every call is one awaited call of the async attempt.

    Calls are submitted to the adapter's loop and waited for on the calling
    thread, so the driver's own guards judge them, including calls after the
    attempt ended: the facade adds no rule of its own that could hide a
    driver's missing one.
    """

    def __init__(self, attempt: Any, loop: EventLoopThread, timeout: float | None) -> None:
        self._attempt = attempt
        self._loop = loop
        self._timeout = timeout
        #: The error that doomed this attempt (a call timed out or was cancelled), if any.
        self.doomed: _AttemptDoomed | None = None

    def _call(self, operation: str, coroutine: Coroutine[Any, Any, T]) -> T:
        future = self._loop.submit(coroutine)
        try:
            return future.result(self._timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self.doomed = _AttemptDoomed(
                f"{operation}() did not answer within {self._timeout} s; nothing of this attempt commits"
            )
        except concurrent.futures.CancelledError:
            self.doomed = _AttemptDoomed(f"{operation}() was cancelled; nothing of this attempt commits")
        raise self.doomed

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        """The async attempt's ``get``."""
        return self._call("get", self._attempt.get(keys))

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        """The async attempt's ``query_candidates``."""
        return self._call(  # type: ignore[no-any-return]
            "query_candidates", self._attempt.query_candidates(command, mode=mode)
        )

    def now(self) -> datetime:
        """The async attempt's ``now``."""
        return self._call("now", self._attempt.now())  # type: ignore[no-any-return]

    def create(self, record: NewStorageRecord) -> None:
        """The async attempt's ``create``."""
        self._call("create", self._attempt.create(record))

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        """The async attempt's ``replace``."""
        self._call("replace", self._attempt.replace(current, record))

    def delete(self, current: StoredRecord) -> None:
        """The async attempt's ``delete``."""
        self._call("delete", self._attempt.delete(current))

    def append(self, command: AppendRecordsCommand) -> None:
        """The async attempt's ``append``; an attempt without one does not offer append."""
        method = getattr(self._attempt, "append", None)
        if method is None:
            raise StorageUnsupportedError("this async driver's attempts do not offer append")
        self._call("append", method(command))


# -- the driver adapter ------------------------------------------------------------------------------


class SyncDriverFromAsync:
    """A synchronous ``StorageDriver`` serving an ``AsyncStorageDriver`` living on ``loop``.

    See the module docstring for how a transaction is bridged; the adapter
    adds no locking of its own, so concurrent transactions from several
    threads reach the driver concurrently.
    """

    def __init__(
        self, driver: AsyncStorageDriver, loop: EventLoopThread, *, timeout: float | None = None
    ) -> None:
        self._driver = driver
        self._loop = loop
        self._timeout = timeout

    @property
    def profile(self) -> StorageProfile:
        """The async driver's profile, unchanged."""
        return self._driver.profile

    @property
    def async_driver(self) -> AsyncStorageDriver:
        """The wrapped async driver (for tests that look behind the adapter)."""
        return self._driver

    def transaction(self, callback: Callable[[StorageTransaction], T]) -> T:
        """Run the async driver's transaction, with ``callback`` running on this thread for every attempt."""
        channel: queue.SimpleQueue[_AttemptStarted | _TransactionEnded] = queue.SimpleQueue()
        loop = self._loop
        timeout = self._timeout

        async def bridge(attempt: Any) -> object:
            facade = SyncAttemptFacade(attempt, loop, timeout)
            answer: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            channel.put(_AttemptStarted(facade, answer))
            value = await answer
            if facade.doomed is not None:
                raise facade.doomed
            return value

        async def run() -> None:
            try:
                value = await self._driver.transaction(bridge)
            except BaseException as error:  # every ending is reported to the waiting thread
                channel.put(_TransactionEnded(_Outcome(error=error)))
                if isinstance(error, asyncio.CancelledError):
                    raise
            else:
                channel.put(_TransactionEnded(_Outcome(value=value)))

        task = loop.submit(run())
        answered = False  # a callback returned a value to the driver: from then on a commit may happen
        while True:
            try:
                message = channel.get(timeout=timeout)
            except queue.Empty:
                task.cancel()
                if answered:
                    raise StorageCommitUnknownError(
                        f"the async driver's transaction did not finish within {timeout} s after its "
                        "callback returned; it may have committed"
                    ) from None
                raise StorageUnavailableError(
                    f"the async driver's transaction did not start an attempt within {timeout} s"
                ) from None
            if isinstance(message, _TransactionEnded):
                return cast(T, _unwrap(message.outcome, answered))
            outcome = _run_callback(callback, message.facade)
            if outcome.error is None:
                answered = True
            loop.loop.call_soon_threadsafe(_resolve, message.answer, outcome)

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        """The async driver's ``query``; a timeout or cancellation is ``StorageUnavailableError``."""
        return self._loop.run(self._driver.query(command), timeout=self._timeout)

    def close(self) -> None:
        """Close the async driver instance."""
        self._loop.run(self._driver.close(), timeout=self._timeout)


class SyncOperatorDriverFromAsync(SyncDriverFromAsync):
    """``SyncDriverFromAsync`` for a driver offering operator reads: the three reads are bridged too."""

    def get_run(self, environment: str, run_id: str) -> object | None:
        """The async driver's ``get_run``."""
        driver = cast(AsyncOperatorReadDriver, self._driver)
        return self._loop.run(driver.get_run(environment, run_id), timeout=self._timeout)

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> object:
        """The async driver's ``list_runs``."""
        driver = cast(AsyncOperatorReadDriver, self._driver)
        return self._loop.run(
            driver.list_runs(environment, limit=limit, cursor=cursor), timeout=self._timeout
        )

    def list_run_events(
        self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
    ) -> object:
        """The async driver's ``list_run_events``."""
        driver = cast(AsyncOperatorReadDriver, self._driver)
        return self._loop.run(
            driver.list_run_events(environment, run_id, limit=limit, cursor=cursor), timeout=self._timeout
        )


def _offers_operator_reads(driver: object) -> bool:
    return all(callable(getattr(driver, name, None)) for name in ("get_run", "list_runs", "list_run_events"))


def wrap_driver(
    driver: AsyncStorageDriver, loop: EventLoopThread, *, timeout: float | None = None
) -> SyncDriverFromAsync:
    """The synchronous adapter for ``driver``, offering operator reads exactly when the driver does."""
    kind = SyncOperatorDriverFromAsync if _offers_operator_reads(driver) else SyncDriverFromAsync
    return kind(driver, loop, timeout=timeout)


def _run_callback(callback: Callable[[StorageTransaction], object], facade: SyncAttemptFacade) -> _Outcome:
    try:
        return _Outcome(value=callback(facade))
    except BaseException as error:  # handed to the driver (or re-raised after its rollback)
        return _Outcome(error=error)


def _resolve(answer: asyncio.Future[object], outcome: _Outcome) -> None:
    """On the loop: give the bridge the callback's outcome, unless the driver already cancelled it."""
    if answer.done():
        return
    error = outcome.error
    if error is None:
        answer.set_result(outcome.value)
    elif isinstance(error, Exception) and not isinstance(error, (StopIteration, StopAsyncIteration)):
        answer.set_exception(error)
    else:
        answer.set_exception(CallbackAborted(error))


def _unwrap(outcome: _Outcome, answered: bool) -> object:
    """The transaction's result on the suite thread: the value, or the error mapped to the contract."""
    error = outcome.error
    if error is None:
        return outcome.value
    if isinstance(error, CallbackAborted):
        raise error.original
    if isinstance(error, asyncio.CancelledError):
        if answered:
            raise StorageCommitUnknownError(
                "the async driver's transaction was cancelled after a callback returned; "
                "it may have committed"
            ) from error
        raise StorageUnavailableError(
            "the async driver's transaction was cancelled before any attempt finished; nothing committed"
        ) from error
    raise error


# -- stores and harnesses ----------------------------------------------------------------------------


class SyncStoreFromAsync:
    """A synchronous ``StoreHandle`` over an ``AsyncStoreHandle``; optional hooks are bridged when offered."""

    def __init__(
        self, store: AsyncStoreHandle, loop: EventLoopThread, *, timeout: float | None = None
    ) -> None:
        self._store = store
        self._loop = loop
        self._timeout = timeout
        if isinstance(store, AsyncProxiedStore):
            self.proxy_target = store.proxy_target
            self.connect_through = self._connect_through
        if isinstance(store, AsyncSettlingStore):
            self.settle = self._settle

    def connect(self, *, clock: Clock | None = None) -> SyncDriverFromAsync:
        """A new async driver instance on this store, behind its own adapter."""
        driver = self._loop.run(self._store.connect(clock=clock), timeout=self._timeout)
        return wrap_driver(driver, self._loop, timeout=self._timeout)

    def _connect_through(
        self, address: tuple[str, int], *, clock: Clock | None = None
    ) -> SyncDriverFromAsync:
        store = cast(AsyncProxiedStore, self._store)
        driver = self._loop.run(store.connect_through(address, clock=clock), timeout=self._timeout)
        return wrap_driver(driver, self._loop, timeout=self._timeout)

    def _settle(self, *, timeout: float) -> bool:
        store = cast(AsyncSettlingStore, self._store)
        return self._loop.run(store.settle(timeout=timeout))

    def address(self) -> object | None:
        """The async store's address."""
        return self._store.address()

    def close(self) -> None:
        """Drop the async store."""
        self._loop.run(self._store.close(), timeout=self._timeout)


class SyncHarnessFromAsync:
    """A synchronous ``DriverHarness`` that owns the event loop every store and instance of it runs on.

    ``close()`` closes the async harness, then stops the loop, so nothing
    the driver started outlives it.
    """

    def __init__(
        self, harness: AsyncDriverHarness, loop: EventLoopThread, *, timeout: float | None = None
    ) -> None:
        self._harness = harness
        self._loop = loop
        self._timeout = timeout

    @property
    def loop(self) -> EventLoopThread:
        """The loop the async driver runs on."""
        return self._loop

    def open_store(self) -> SyncStoreFromAsync:
        """A new async store behind its adapter."""
        store = self._loop.run(self._harness.open_store(), timeout=self._timeout)
        return SyncStoreFromAsync(store, self._loop, timeout=self._timeout)

    def attach(self, address: object) -> SyncStoreFromAsync:
        """An existing async store, by address."""
        store = self._loop.run(self._harness.attach(address), timeout=self._timeout)
        return SyncStoreFromAsync(store, self._loop, timeout=self._timeout)

    def close(self) -> None:
        """Close the async harness and stop its loop (the loop stops even if closing fails)."""
        try:
            self._loop.run(self._harness.close(), timeout=self._timeout)
        finally:
            self._loop.close()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def async_harness(factory: AsyncHarnessFactory, *, timeout: float | None = None) -> HarnessFactory:
    """Turn an async driver's harness factory into the entry point target every driver registers.

    The returned factory starts a loop thread, awaits ``factory(options)`` on
    it (so the async harness may create loop-bound objects) and returns a
    ``SyncHarnessFromAsync``. If the async factory raises, the loop is
    stopped and the error propagates, so the loader reports it in one line.
    """

    def build(options: Mapping[str, str]) -> DriverHarness:
        loop = EventLoopThread()
        try:
            harness = loop.run(_awaited(factory(dict(options))), timeout=timeout)
        except BaseException:
            loop.close()
            raise
        return SyncHarnessFromAsync(harness, loop, timeout=timeout)

    return build
