"""A reference-driver harness whose point reads lock what they read until the transaction ends.

As a pessimistic driver does (``SELECT ... FOR UPDATE``): a second transaction's read of the same
key waits inside the driver, across round trips, until the first one commits or rolls back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runlane_conformance.local.harness import LocalHarness, LocalStoreHandle, local_harness


class _Locks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[object, threading.Lock] = {}

    def lock(self, key: object) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


class LockingStoreHandle(LocalStoreHandle):
    locks: _Locks

    def connect(self, *, clock: Any = None) -> Any:
        driver = super().connect(clock=clock)
        transaction = driver.transaction
        locks = self.locks

        def locking(callback: Callable[..., Any]) -> Any:
            held: list[threading.Lock] = []

            def wrapped(tx: Any) -> Any:
                get = tx.get

                def get_and_lock(keys: Sequence[Any]) -> Any:
                    for key in keys:
                        lock = locks.lock(key)
                        if lock not in held:
                            lock.acquire()
                            held.append(lock)
                    return get(keys)

                tx.get = get_and_lock
                return callback(tx)

            try:
                return transaction(wrapped)
            finally:
                for lock in held:
                    lock.release()

        driver.transaction = locking  # type: ignore[method-assign]
        return driver


class LockingHarness(LocalHarness):
    def open_store(self) -> LocalStoreHandle:
        handle = LockingStoreHandle(self.limits, self.max_transaction_attempts)
        handle.locks = _Locks()
        self._stores.append(handle)
        return handle


def harness(options: Mapping[str, str]) -> LockingHarness:
    base = local_harness(options)
    return LockingHarness(base.limits, base.max_transaction_attempts)


class OneCallAtATimeStoreHandle(LocalStoreHandle):
    """Each attempt serves one call at a time: a second call waits for the first (a plain lock)."""

    def connect(self, *, clock: Any = None) -> Any:
        driver = super().connect(clock=clock)
        transaction = driver.transaction

        def serialized(callback: Callable[..., Any]) -> Any:
            def wrapped(tx: Any) -> Any:
                lock = threading.Lock()
                for name in ("get", "query_candidates", "now", "create", "replace", "delete"):
                    call = getattr(tx, name)

                    def one_at_a_time(*args: Any, _call: Any = call, **kwargs: Any) -> Any:
                        with lock:
                            return _call(*args, **kwargs)

                    setattr(tx, name, one_at_a_time)
                return callback(tx)

            return transaction(wrapped)

        driver.transaction = serialized  # type: ignore[method-assign]
        return driver


class OneCallAtATimeHarness(LocalHarness):
    def open_store(self) -> LocalStoreHandle:
        handle = OneCallAtATimeStoreHandle(self.limits, self.max_transaction_attempts)
        self._stores.append(handle)
        return handle


def one_call_at_a_time(options: Mapping[str, str]) -> OneCallAtATimeHarness:
    base = local_harness(options)
    return OneCallAtATimeHarness(base.limits, base.max_transaction_attempts)
