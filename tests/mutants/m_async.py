"""Broken async drivers, served through the async adapter: each breaks one rule in a coroutine.

Every mutant here is the reference driver ported to async
(``tests.mutants.async_wrapping``) with one coroutine overridden, and is
judged through ``runlane_conformance.aio``. Each breaks a rule that an
in-process mutant breaks too, and must be killed by the same requirement:
the adapter may neither hide a bug nor invent one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from runlane_conformance import StorageAttemptEndedError, StorageConcurrentUseError
from runlane_conformance.catalogue import point_reads, replay, sealing
from tests.mutants.async_wrapping import AsyncDriverFromSync, AsyncWrappedTransaction, async_port_harness
from tests.mutants.catalog import Mutant

T = TypeVar("T")


class ReversesPositions(AsyncWrappedTransaction):
    """An async get whose results come back in reverse request order."""

    async def get(self, keys: Sequence[Any]) -> list[Any]:
        return list(reversed(await super().get(keys)))


class MovingNow(AsyncWrappedTransaction):
    """An async now() that advances by a microsecond on every call of one attempt."""

    calls = 0

    async def now(self) -> datetime:
        self.calls += 1
        return await super().now() + timedelta(microseconds=self.calls)


class CommitsAfterCallbackError(AsyncDriverFromSync):
    """Catches an exception from the async callback, commits the attempt, then raises it."""

    async def transaction(self, callback: Callable[[Any], Awaitable[T]]) -> T:
        caught: list[Exception] = []

        async def swallowing(tx: Any) -> T | None:
            try:
                return await callback(tx)
            except Exception as error:  # the bug: the attempt still commits
                caught.append(error)
                return None

        result = await super().transaction(swallowing)
        if caught:
            raise caught[-1]
        return result  # type: ignore[return-value]


class ServesOverlappingCalls(AsyncWrappedTransaction):
    """A read overlapping a pending call of its attempt is served from a side transaction, not refused."""

    async def get(self, keys: Sequence[Any]) -> list[Any]:
        try:
            return await super().get(keys)
        except StorageConcurrentUseError:
            return await self._off_loop(self.driver.inner.transaction, lambda tx: tx.get(keys))

    async def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        try:
            return await super().query_candidates(command, **kwargs)
        except StorageConcurrentUseError:
            return await self._off_loop(
                self.driver.inner.transaction, lambda tx: tx.query_candidates(command, **kwargs)
            )


class ServesEndedAttempt(AsyncWrappedTransaction):
    """An attempt that has ended still answers reads, each from a side transaction."""

    async def get(self, keys: Sequence[Any]) -> list[Any]:
        try:
            return await super().get(keys)
        except StorageAttemptEndedError:
            return await self._off_loop(self.driver.inner.transaction, lambda tx: tx.get(keys))

    async def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        try:
            return await super().query_candidates(command, **kwargs)
        except StorageAttemptEndedError:
            return await self._off_loop(
                self.driver.inner.transaction, lambda tx: tx.query_candidates(command, **kwargs)
            )


reverses_positions = async_port_harness(transaction_class=ReversesPositions)
moving_now = async_port_harness(transaction_class=MovingNow)
commits_after_callback_error = async_port_harness(CommitsAfterCallbackError)
serves_overlapping_calls = async_port_harness(transaction_class=ServesOverlappingCalls)
serves_ended_attempt = async_port_harness(transaction_class=ServesEndedAttempt)

MUTANTS = [
    Mutant(
        "async-reversed-positions",
        "tests.mutants.m_async:reverses_positions",
        point_reads.POSITIONS,
        "an async get() answers in reverse request order",
    ),
    Mutant(
        "async-moving-now",
        "tests.mutants.m_async:moving_now",
        sealing.FROZEN_NOW,
        "an async now() advances between calls of one attempt",
    ),
    Mutant(
        "async-commits-after-callback-error",
        "tests.mutants.m_async:commits_after_callback_error",
        replay.CALLBACK_ERROR,
        "an async transaction commits the attempt whose callback raised, then raises",
    ),
    Mutant(
        "async-serves-overlapping-calls",
        "tests.mutants.m_async:serves_overlapping_calls",
        sealing.OVERLAP,
        "an async read overlapping a pending call of its attempt is served from a side transaction",
    ),
    Mutant(
        "async-serves-ended-attempt",
        "tests.mutants.m_async:serves_ended_attempt",
        sealing.ENDED,
        "an ended async attempt still answers reads from side transactions",
    ),
]
