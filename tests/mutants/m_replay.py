"""Broken drivers for the replay area: each wraps the reference driver and breaks one attempt rule."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from runlane_conformance import StorageConflictError, StorageDuplicateMutationError, StorageError
from runlane_conformance.catalogue import replay
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


class _PerCallState(WrappedDriver):
    """Gives each attempt of one ``transaction()`` call a shared ``memory`` dict (the bug's carrier)."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        memory: dict[str, Any] = {}

        def attempt(tx: Any) -> T:
            wrapped = self.transaction_class(tx, self)
            wrapped.memory = memory  # type: ignore[attr-defined]
            return callback(wrapped)

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]


class CachesReadsAcrossAttempts(WrappedTransaction):
    """Serves a replay the records an earlier attempt of the same call read (stale data leaks in)."""

    memory: dict[str, Any]

    def get(self, keys: Sequence[Any]) -> list[Any]:
        fresh = self.inner.get(keys)
        cache = self.memory.setdefault("reads", {})
        results = []
        for key, record in zip(keys, fresh, strict=True):
            results.append(cache.setdefault(key.encoded, record))
        return results


class RemembersReadSet(WrappedTransaction):
    """Keeps the keys earlier attempts read as present and refuses to create them in a replay."""

    memory: dict[str, Any]

    def get(self, keys: Sequence[Any]) -> list[Any]:
        results = self.inner.get(keys)
        present = self.memory.setdefault("present", set())
        present.update(key.encoded for key, record in zip(keys, results, strict=True) if record is not None)
        return results  # type: ignore[no-any-return]

    def create(self, record: Any) -> None:
        if record.key.encoded in self.memory.get("present", set()):
            raise StorageDuplicateMutationError("key was read as present (in an earlier attempt)")
        self.inner.create(record)


class ReturnsFirstAttemptValue(WrappedDriver):
    """Returns what the first attempt returned, even when a later attempt is the one that committed."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        first: list[T] = []

        def attempt(tx: Any) -> T:
            value = callback(self.transaction_class(tx, self))
            if not first:
                first.append(value)
            return value

        self.inner.transaction(attempt)
        return first[0]


class CommitsAbandonedCreates(WrappedDriver):
    """After the committing attempt, also stores the creates that abandoned attempts had staged."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        staged: list[list[Any]] = []
        driver = self

        class Recording(WrappedTransaction):
            def create(self, record: Any) -> None:
                staged[-1].append(record)
                self.inner.create(record)

        def attempt(tx: Any) -> T:
            staged.append([])
            return callback(Recording(tx, driver))

        result = self.inner.transaction(attempt)
        for creates in staged[:-1]:
            for record in creates:
                with contextlib.suppress(StorageError):
                    self.inner.transaction(lambda tx, record=record: tx.create(record))
        return result  # type: ignore[no-any-return]


class ReplaysForever(WrappedDriver):
    """Never gives up: when the inner driver runs out of attempts, it simply starts again."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        while True:
            try:
                return super().transaction(callback)
            except StorageConflictError:
                continue


class SwallowsConflicts(WrappedDriver):
    """Returns None instead of raising when the attempts run out, as if the work had committed."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageConflictError:
            return None  # type: ignore[return-value]


class SwallowsCallbackErrors(WrappedDriver):
    """Rolls back on a callback error but returns None instead of raising it."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageError:
            raise
        except Exception:
            return None  # type: ignore[return-value]


class WrapsCallbackErrors(WrappedDriver):
    """Raises a new StorageError in place of the callback's own exception."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageError:
            raise
        except Exception as error:
            raise StorageError(f"transaction failed: {error}") from error


class CommitsBeforeRaising(WrappedDriver):
    """Commits what the callback staged before its error, then raises the error."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        failure: list[BaseException] = []

        def attempt(tx: Any) -> Any:
            try:
                return callback(self.transaction_class(tx, self))
            except Exception as error:
                failure.append(error)
                return None

        result = self.inner.transaction(attempt)
        if failure:
            raise failure[-1]
        return result  # type: ignore[no-any-return]


MUTANTS = [
    Mutant(
        "caches-reads-across-attempts",
        "tests.mutants.m_replay:caches_reads",
        replay.FRESH_ATTEMPT,
        "a replay is served the records an abandoned attempt read",
    ),
    Mutant(
        "remembers-read-set-across-attempts",
        "tests.mutants.m_replay:remembers_read_set",
        replay.FRESH_ATTEMPT,
        "keys read as present by an abandoned attempt cannot be created by the replay",
    ),
    Mutant(
        "returns-first-attempt-value",
        "tests.mutants.m_replay:first_value",
        replay.COMMITTED_VALUE,
        "transaction() returns the first attempt's value, not the committed one",
    ),
    Mutant(
        "commits-abandoned-creates",
        "tests.mutants.m_replay:commits_abandoned",
        replay.NO_TRACE,
        "creates staged by abandoned attempts are stored after the commit",
    ),
    Mutant(
        "replays-forever",
        "tests.mutants.m_replay:replays_forever",
        replay.BOUNDED,
        "never gives up after conflicts",
    ),
    Mutant(
        "swallows-conflicts",
        "tests.mutants.m_replay:swallows_conflicts",
        replay.BOUNDED,
        "returns None instead of raising StorageConflictError when attempts run out",
    ),
    Mutant(
        "swallows-callback-errors",
        "tests.mutants.m_replay:swallows_errors",
        replay.CALLBACK_ERROR,
        "a callback's exception is swallowed",
    ),
    Mutant(
        "wraps-callback-errors",
        "tests.mutants.m_replay:wraps_errors",
        replay.CALLBACK_ERROR,
        "a callback's exception is replaced by a new StorageError",
    ),
    Mutant(
        "commits-before-raising",
        "tests.mutants.m_replay:commits_before_raising",
        replay.CALLBACK_ERROR,
        "staged writes are committed before the callback's exception is raised",
    ),
]

caches_reads = mutant_harness(_PerCallState, transaction_class=CachesReadsAcrossAttempts)
remembers_read_set = mutant_harness(_PerCallState, transaction_class=RemembersReadSet)
first_value = mutant_harness(ReturnsFirstAttemptValue)
commits_abandoned = mutant_harness(CommitsAbandonedCreates)
replays_forever = mutant_harness(ReplaysForever)
swallows_conflicts = mutant_harness(SwallowsConflicts)
swallows_errors = mutant_harness(SwallowsCallbackErrors)
wraps_errors = mutant_harness(WrapsCallbackErrors)
commits_before_raising = mutant_harness(CommitsBeforeRaising)


# -- callback errors that are not Exceptions (``except Exception`` where BaseException was meant) -------


def _is_base_only(error: BaseException) -> bool:
    return not isinstance(error, Exception)


class CommitsOnInterrupt(WrappedDriver):
    """Treats a BaseException that is no Exception (KeyboardInterrupt...) as a normal return: commits."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        interrupted: list[BaseException] = []

        def attempt(tx: Any) -> Any:
            try:
                return callback(self.transaction_class(tx, self))
            except BaseException as error:
                if not _is_base_only(error):
                    raise
                interrupted.append(error)
                return None

        result = self.inner.transaction(attempt)
        if interrupted:
            raise interrupted[-1]
        return result  # type: ignore[no-any-return]


class ReplaysOnInterrupt(WrappedDriver):
    """Retries the whole transaction once after a BaseException, as if it were a lost connection."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        last: BaseException | None = None
        for _ in range(2):
            try:
                return super().transaction(callback)
            except BaseException as error:
                if not _is_base_only(error):
                    raise
                last = error
        assert last is not None
        raise last


class WrapsInterrupt(WrappedDriver):
    """Turns a BaseException from the callback into a StorageError of its own."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except BaseException as error:
            if not _is_base_only(error):
                raise
            raise StorageError(f"the transaction was aborted: {error!r}") from error


class _RecordsCreates(WrappedTransaction):
    def create(self, record: Any) -> None:
        self.inner.create(record)
        self.driver.staged.append(record)  # type: ignore[attr-defined]


class LeftoverAfterInterrupt(WrappedDriver):
    """Rolls back only on Exception: after a BaseException the attempt stays open on this instance's
    connection, and its staged creates commit with that instance's next transaction."""

    transaction_class = _RecordsCreates

    def __init__(self, inner: Any, store: Any) -> None:
        super().__init__(inner, store)
        self.staged: list[Any] = []
        self.leftover: list[Any] = []

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> Any:
            self.staged = []
            try:
                result = callback(self.transaction_class(tx, self))
            except BaseException as error:
                if _is_base_only(error):
                    self.leftover = list(self.staged)
                raise
            carried, self.leftover = self.leftover, []
            for record in carried:
                tx.create(record)
            return result

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]


commits_on_interrupt = mutant_harness(CommitsOnInterrupt)
replays_on_interrupt = mutant_harness(ReplaysOnInterrupt)
wraps_interrupt = mutant_harness(WrapsInterrupt)
leftover_after_interrupt = mutant_harness(LeftoverAfterInterrupt)

MUTANTS += [
    Mutant(
        "commits-on-interrupt",
        "tests.mutants.m_replay:commits_on_interrupt",
        replay.CALLBACK_ERROR,
        "a KeyboardInterrupt/SystemExit/GeneratorExit from the callback commits what was staged",
    ),
    Mutant(
        "replays-on-interrupt",
        "tests.mutants.m_replay:replays_on_interrupt",
        replay.CALLBACK_ERROR,
        "a BaseException from the callback is retried like a lost connection",
    ),
    Mutant(
        "wraps-interrupt",
        "tests.mutants.m_replay:wraps_interrupt",
        replay.CALLBACK_ERROR,
        "a BaseException from the callback reaches the caller as a new StorageError",
    ),
    Mutant(
        "leftover-after-interrupt",
        "tests.mutants.m_replay:leftover_after_interrupt",
        replay.CALLBACK_ERROR,
        "rollback only in except Exception: interrupted creates commit with the next transaction",
    ),
]


class ReturnsLastValueWhenAttemptsRunOut(WrappedDriver):
    """When every attempt lost its race, returns what the last (uncommitted) attempt returned."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        values: list[Any] = []

        def attempt(tx: Any) -> Any:
            value = callback(self.transaction_class(tx, self))
            values.append(value)
            return value

        try:
            return self.inner.transaction(attempt)  # type: ignore[no-any-return]
        except StorageConflictError:
            if values:
                return values[-1]  # type: ignore[no-any-return]
            raise


returns_last_value_when_attempts_run_out = mutant_harness(ReturnsLastValueWhenAttemptsRunOut)

MUTANTS += [
    Mutant(
        "returns-last-value-when-attempts-run-out",
        "tests.mutants.m_replay:returns_last_value_when_attempts_run_out",
        replay.BOUNDED,
        "when every attempt lost, transaction() returns the last uncommitted attempt's value",
    ),
]


class _EagerDeletes(WrappedTransaction):
    """Deletes at once (a store without transactions), instead of staging the delete for the commit."""

    def delete(self, current: Any) -> None:
        self.driver.store.inner.connect().transaction(lambda tx: tx.delete(tx.get([current.key])[0]))


deletes_eagerly = mutant_harness(transaction_class=_EagerDeletes)

MUTANTS += [
    Mutant(
        "deletes-eagerly",
        "tests.mutants.m_replay:deletes_eagerly",
        replay.NO_TRACE,
        "delete() is applied at once, so an abandoned attempt's delete stays applied",
    ),
]
