"""The caller's retry: how Runlane core treats a transaction that ends with a typed conflict.

The contract lets a provider replay the callback after a conflict; it does not oblige it to. A
driver that never replays ends a lost attempt with ``StorageConflictError``, and core then runs the
whole transaction again, a bounded number of times. Checks that provoke a race run their racing
transactions through ``transact_with_retries`` so that such a driver is judged on what it
committed, exactly as a replaying driver is.

The retry is accepted only where a competitor could have caused the conflict: the caller passes
the list its competitors are appended to (or any sized collection), and a conflict raised while it
is empty propagates at once, so an uncontended transaction that raises a conflict still fails.
The bound is a number of attempts, never a duration, so the same seed gives the same verdict on
fast and slow machines.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import TypeVar

from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction

T = TypeVar("T")

#: Whole-transaction attempts the caller makes before it lets the conflict propagate. A check's
#: competitor runs once, so after it the retry is uncontended: two attempts suffice, the rest is slack.
CALLER_ATTEMPTS = 8


def transact_with_retries(
    driver: StorageDriver,
    callback: Callable[[StorageTransaction], T],
    contenders: Sized,
    attempts: int = CALLER_ATTEMPTS,
) -> T:
    """``driver.transaction(callback)``, run again on ``StorageConflictError`` while ``contenders``
    is non-empty (someone raced it), at most ``attempts`` times in all."""
    for attempt in range(1, attempts + 1):
        try:
            return driver.transaction(callback)
        except StorageConflictError:
            if not len(contenders) or attempt == attempts:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


RACING = (True,)
"""``contenders`` for a transaction that is itself the competitor of one already in flight."""
