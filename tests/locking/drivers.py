"""A correct *locking* driver for the toolkit's own tests: the reference driver behind one FIFO lock.

Every attempt holds its store's lock from the moment it begins until it ends,
so competitors wait, exactly as they do on a locking database. When an
attempt's callback has returned and another transaction is queued for the
lock, the attempt is rolled back and replayed behind it, once per
transaction, and only by an attempt that took the lock without waiting (a
waiter never yields back): a deterministic stand-in for a deadlock victim.
``store.shared["victims"]`` counts them. Each committed
attempt ran alone, so every history this driver produces is serial, while it
shows the checks the interleavings a real locking driver (examples/mysql on
MariaDB) shows them: a competitor blocked until the first transaction ends,
the first transaction replayed after the competitor's commit, and a replay
that runs between two separate commits of the competitor.

``--runlane-driver tests.locking.drivers:harness`` (or ``run_suites``) loads it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from runlane_conformance.harness import load_harness
from tests.mutants.wrapping import WrappedDriver, WrappedHarness

T = TypeVar("T")


class TicketLock:
    """A lock handed out in arrival order that can tell whether anyone is waiting for it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._issued = 0
        self._serving = 0

    def acquire(self) -> bool:
        """Take the lock; True if that meant waiting for another holder."""
        with self._cond:
            ticket = self._issued
            self._issued += 1
            waited = self._serving != ticket
            while self._serving != ticket:
                self._cond.wait()
            return waited

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()

    def contended(self) -> bool:
        """Whether another caller is queued behind the current holder."""
        with self._cond:
            return self._issued > self._serving + 1


class _Victim(Exception):
    """Internal: this attempt yields to a queued competitor and replays after it."""


class LockingDriver(WrappedDriver):
    """Serializes attempts with the store's ``TicketLock``; yields once per transaction to a waiter."""

    def _lock(self) -> TicketLock:
        lock = self.store.shared.setdefault("lock", TicketLock())
        assert isinstance(lock, TicketLock)
        return lock

    def transaction(self, callback: Callable[[Any], T]) -> T:
        lock = self._lock()
        yielded = False
        while True:
            if lock.acquire():
                yielded = True  # it waited for a holder: it goes first now and never yields back
            try:

                def attempt(tx: Any, may_yield: bool = not yielded) -> T:
                    result = callback(self.transaction_class(tx, self))
                    if may_yield and lock.contended():
                        raise _Victim
                    return result

                return self.inner.transaction(attempt)  # type: ignore[no-any-return]
            except _Victim:
                yielded = True
                self.store.shared["victims"] = self.store.shared.get("victims", 0) + 1
            finally:
                lock.release()


def harness(options: Mapping[str, str]) -> WrappedHarness:
    """The reference driver made a locking driver (options go to the reference driver)."""
    return WrappedHarness(load_harness("local", options), LockingDriver)
