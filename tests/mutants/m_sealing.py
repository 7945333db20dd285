"""Broken drivers for the sealing area."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from runlane_conformance import StorageAttemptEndedError, StorageConcurrentUseError, StorageSealedError
from runlane_conformance.catalogue import sealing
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


class MovingNow(WrappedTransaction):
    """Every now() call returns a slightly later time than the one before, within one attempt."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.calls = 0

    def now(self) -> datetime:
        self.calls += 1
        return self.inner.now() + timedelta(microseconds=self.calls)  # type: ignore[no-any-return]


class IgnoresInjectedClock(WrappedTransaction):
    """Seals like the real driver but answers now() from the wall clock, not the injected clock."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.frozen: datetime | None = None

    def now(self) -> datetime:
        self.inner.now()
        if self.frozen is None:
            self.frozen = datetime.now(UTC)
        return self.frozen


class ReadsAfterNow(WrappedTransaction):
    """Samples now() in a side transaction, so this attempt's read set is never sealed by it."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.frozen: datetime | None = None

    def now(self) -> datetime:
        if self.frozen is None:
            self.frozen = self.driver.inner.transaction(lambda tx: tx.now())
        return self.frozen


class DefersMutations(WrappedTransaction):
    """Buffers mutations until the callback returns, so reads after a mutation still work."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.pending: list[Callable[[], None]] = []

    def create(self, record: Any) -> None:
        self.pending.append(lambda: self.inner.create(record))

    def replace(self, current: Any, record: Any) -> None:
        self.pending.append(lambda: self.inner.replace(current, record))

    def delete(self, current: Any) -> None:
        self.pending.append(lambda: self.inner.delete(current))

    def flush(self) -> None:
        for action in self.pending:
            action()


class DeferringDriver(WrappedDriver):
    def transaction(self, callback: Callable[[Any], T]) -> T:
        def run(tx: Any) -> T:
            wrapped = DefersMutations(tx, self)
            result = callback(wrapped)
            wrapped.flush()
            return result

        return self.inner.transaction(run)  # type: ignore[no-any-return]


class UsableAfterAttempt(WrappedTransaction):
    """Once its attempt has ended, the transaction object quietly runs each call in a new transaction."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.last_now: datetime | None = None

    def _or_later(self, call: Callable[[Any], Any]) -> Any:
        try:
            return call(self.inner)
        except StorageAttemptEndedError:
            return self.driver.inner.transaction(call)

    def get(self, keys: Sequence[Any]) -> list[Any]:
        return self._or_later(lambda tx: tx.get(keys))  # type: ignore[no-any-return]

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self._or_later(lambda tx: tx.query_candidates(command, **kwargs))

    def now(self) -> datetime:
        try:
            self.last_now = self.inner.now()
        except StorageAttemptEndedError:
            if self.last_now is None:
                self.last_now = datetime.now(UTC)
        assert self.last_now is not None
        return self.last_now

    def create(self, record: Any) -> None:
        self._or_later(lambda tx: tx.create(record))

    def replace(self, current: Any, record: Any) -> None:
        try:
            self.inner.replace(current, record)
        except StorageAttemptEndedError:
            self.driver.inner.transaction(lambda tx: tx.replace(tx.get([current.key])[0], record))

    def delete(self, current: Any) -> None:
        try:
            self.inner.delete(current)
        except StorageAttemptEndedError:
            self.driver.inner.transaction(lambda tx: tx.delete(tx.get([current.key])[0]))


MUTANTS = [
    Mutant(
        "moving-now",
        "tests.mutants.m_sealing:moving_now",
        sealing.FROZEN_NOW,
        "now() advances between calls of one attempt",
    ),
    Mutant(
        "ignores-injected-clock",
        "tests.mutants.m_sealing:ignores_injected_clock",
        sealing.INJECTED_CLOCK,
        "now() comes from the wall clock although a client clock was injected",
    ),
    Mutant(
        "reads-after-now",
        "tests.mutants.m_sealing:reads_after_now",
        sealing.SEALED_BY_NOW,
        "now() does not seal the read set",
    ),
    Mutant(
        "reads-after-mutation",
        "tests.mutants.m_sealing:reads_after_mutation",
        sealing.SEALED_BY_MUTATION,
        "mutations are deferred, so reads after them are served",
    ),
    Mutant(
        "usable-after-attempt",
        "tests.mutants.m_sealing:usable_after_attempt",
        sealing.ENDED,
        "a transaction object keeps working after its attempt ended",
    ),
]

moving_now = mutant_harness(transaction_class=MovingNow)
ignores_injected_clock = mutant_harness(transaction_class=IgnoresInjectedClock)
reads_after_now = mutant_harness(transaction_class=ReadsAfterNow)
reads_after_mutation = mutant_harness(DeferringDriver)
usable_after_attempt = mutant_harness(transaction_class=UsableAfterAttempt)


# -- overlapping calls ---------------------------------------------------------------------------------


class _PooledOverlap(WrappedTransaction):
    """Serves a read that finds the attempt busy on another pooled connection instead of refusing it."""

    def _pooled(self) -> Any:
        return self.driver.store.inner.connect()

    def get(self, keys: Sequence[Any]) -> list[Any]:
        try:
            return self.inner.get(keys)
        except StorageConcurrentUseError:
            return self._pooled().transaction(lambda tx: tx.get(keys))  # type: ignore[no-any-return]


class _PooledOverlapQuery(WrappedTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        try:
            return self.inner.query_candidates(command, **kwargs)
        except StorageConcurrentUseError:
            return self.driver.store.inner.connect().query(command)


overlapping_get_served = mutant_harness(transaction_class=_PooledOverlap)
overlapping_query_served = mutant_harness(transaction_class=_PooledOverlapQuery)

MUTANTS += [
    Mutant(
        "overlapping-get-served",
        "tests.mutants.m_sealing:overlapping_get_served",
        sealing.OVERLAP,
        "a get() that overlaps a running call of its attempt is served on another pooled connection",
    ),
    Mutant(
        "overlapping-query-served",
        "tests.mutants.m_sealing:overlapping_query_served",
        sealing.OVERLAP,
        "a query_candidates() that overlaps a running call is answered by an advisory query elsewhere",
    ),
]


class _MillisecondNow(WrappedTransaction):
    """now() passes through a millisecond-precision clock type (a JavaScript Date, DATETIME(3))."""

    def now(self) -> datetime:
        value = self.inner.now()
        return value.replace(microsecond=value.microsecond // 1000 * 1000)  # type: ignore[no-any-return]


now_in_milliseconds = mutant_harness(transaction_class=_MillisecondNow)

MUTANTS += [
    Mutant(
        "now-in-milliseconds",
        "tests.mutants.m_sealing:now_in_milliseconds",
        sealing.INJECTED_CLOCK,
        "now() keeps milliseconds only, so an injected instant with microseconds comes back changed",
    ),
]


class _UsableAfterInterrupt(UsableAfterAttempt):
    """Ends attempts in ``except Exception`` only: after a BaseException the object keeps working."""

    leaked = False

    def _or_later(self, call: Callable[[Any], Any]) -> Any:
        if self.leaked:
            return super()._or_later(call)
        return call(self.inner)

    def create(self, record: Any) -> None:
        self._or_later(lambda tx: tx.create(record))

    def now(self) -> datetime:
        return super().now() if self.leaked else self.inner.now()  # type: ignore[no-any-return]

    def replace(self, current: Any, record: Any) -> None:
        if self.leaked:
            super().replace(current, record)
        else:
            self.inner.replace(current, record)

    def delete(self, current: Any) -> None:
        if self.leaked:
            super().delete(current)
        else:
            self.inner.delete(current)


class UsableAfterInterrupt(WrappedDriver):
    transaction_class = _UsableAfterInterrupt

    def transaction(self, callback: Callable[[Any], T]) -> T:
        handed: list[_UsableAfterInterrupt] = []

        def attempt(tx: Any) -> Any:
            wrapped = _UsableAfterInterrupt(tx, self)
            handed.append(wrapped)
            return callback(wrapped)

        try:
            return self.inner.transaction(attempt)  # type: ignore[no-any-return]
        except BaseException as error:
            if not isinstance(error, Exception):
                for wrapped in handed:
                    wrapped.leaked = True
            raise


usable_after_interrupt = mutant_harness(UsableAfterInterrupt)

MUTANTS += [
    Mutant(
        "usable-after-interrupt",
        "tests.mutants.m_sealing:usable_after_interrupt",
        sealing.ENDED,
        "an attempt ended by KeyboardInterrupt/SystemExit/GeneratorExit keeps serving calls",
    ),
]


class _NowSealsWrites(WrappedTransaction):
    """Reads now() as the end of the whole attempt: replace() and delete() after it are refused."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.timed = False

    def now(self) -> datetime:
        self.timed = True
        return self.inner.now()  # type: ignore[no-any-return]

    def _refuse_after_now(self, operation: str) -> None:
        if self.timed:
            raise StorageSealedError(f"{operation}() after now(): the attempt is sealed")

    def replace(self, current: Any, record: Any) -> None:
        self._refuse_after_now("replace")
        self.inner.replace(current, record)

    def delete(self, current: Any) -> None:
        self._refuse_after_now("delete")
        self.inner.delete(current)


now_seals_writes = mutant_harness(transaction_class=_NowSealsWrites)

MUTANTS += [
    Mutant(
        "now-seals-writes",
        "tests.mutants.m_sealing:now_seals_writes",
        sealing.WRITES_AFTER_SEAL,
        "now() seals the whole attempt: replaces and deletes after it are refused",
    ),
]


# -- answers kept for the attempt and handed out after it ended --------------------------------------


class _FrozenNowAfterEnd(WrappedTransaction):
    """Keeps the attempt's frozen time and returns it before looking at whether the attempt ended."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.frozen: datetime | None = None

    def now(self) -> datetime:
        if self.frozen is None:
            self.frozen = self.inner.now()
        return self.frozen


class _PageCacheAfterEnd(WrappedTransaction):
    """Serves a repeated scan from the pages the attempt already fetched, even after the attempt ended."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.pages: dict[Any, Any] = {}

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if command not in self.pages:
            self.pages[command] = self.inner.query_candidates(command, **kwargs)
        return self.pages[command]


frozen_now_after_end = mutant_harness(transaction_class=_FrozenNowAfterEnd)
page_cache_after_end = mutant_harness(transaction_class=_PageCacheAfterEnd)

MUTANTS += [
    Mutant(
        "frozen-now-after-end",
        "tests.mutants.m_sealing:frozen_now_after_end",
        sealing.ENDED,
        "now() returns the attempt's frozen time after the attempt ended",
    ),
    Mutant(
        "page-cache-after-end",
        "tests.mutants.m_sealing:page_cache_after_end",
        sealing.ENDED,
        "a repeated scan is answered from the attempt's cached pages after the attempt ended",
    ),
]


class _TimeAcrossReplays(WrappedDriver):
    """Samples the clock once per transaction() call: every replayed attempt gets the first one's time."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        first: list[datetime] = []
        driver = self

        class _Attempt(WrappedTransaction):
            def now(self) -> datetime:
                value = self.inner.now()
                if not first:
                    first.append(value)
                return first[0]

        return self.inner.transaction(lambda tx: callback(_Attempt(tx, driver)))  # type: ignore[no-any-return]


time_across_replays = mutant_harness(_TimeAcrossReplays)

MUTANTS += [
    Mutant(
        "time-kept-across-replays",
        "tests.mutants.m_sealing:time_across_replays",
        sealing.INJECTED_CLOCK,
        "a replayed attempt's now() returns the time the abandoned attempt sampled",
    ),
]
