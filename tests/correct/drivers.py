"""Correct drivers that take the contract's freedoms: the twin of ``tests/mutants``.

Every driver here honours the contract and differs from the reference driver
in one freedom the contract grants it (see ``docs/correct-drivers.md`` for the
table). Each is built by wrapping the reference driver, whose optimistic
read-set validation stays underneath, so none of them can commit a
non-serializable history; what they change is what a check *observes*: a
competitor that waits for a lock, an attempt rolled back and replayed far more
often than the reference would, an index that lags until ``settle`` waits for an
indexer thread, versions that are opaque and never increase, a clock that is
the store's. A check that refuses one of them is wrong.

Drivers reused from elsewhere rather than copied: the whole-store lock
(``tests.locking.drivers``), the store-sampled and authoritative clocks and
every combination of optional capabilities (``tests.profiles.drivers``), the
async port (``tests.mutants.async_wrapping:reference``).
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.records import parse_new_storage_record
from runlane_conformance.contract.values import StorageRecordVersion
from runlane_conformance.harness import load_harness
from tests.locking.drivers import LockingDriver
from tests.mutants.wrapping import WrappedHarness, WrappedStore, WrappedTransaction
from tests.profiles.drivers import (
    DurableDriver,
    OperatorReadsDriver,
    ProfiledDriver,
    StoreSampledTransaction,
    TransactionAuthoritativeDriver,
)

T = TypeVar("T")

#: How many attempts the replaying wrappers make before giving up with ``StorageConflictError``, as the
#: reference does after its own budget: generous, since conservative conflicts replay often.
MAX_ATTEMPTS = 256


# -- a store handle that keeps the reference store's settle hook -------------------------------------


class SettlingWrappedStore(WrappedStore):
    """A wrapped store that offers ``settle``: it hands the catch-up to an indexer thread of its own and
    waits for that thread, bounded by ``timeout``, as a driver whose indexes another process maintains
    would. ``False`` when the indexer did not finish in time."""

    def settle(self, *, timeout: float) -> bool:
        done = threading.Event()

        def indexer() -> None:
            hook = getattr(self.inner, "settle", None)
            if callable(hook):
                hook(timeout=timeout)
            done.set()

        threading.Thread(target=indexer, name="corpus-indexer", daemon=True).start()
        return done.wait(timeout)


class SettlingWrappedHarness(WrappedHarness):
    def open_store(self) -> SettlingWrappedStore:
        return SettlingWrappedStore(self.inner.open_store(), self.driver_class)

    def attach(self, address: object) -> SettlingWrappedStore:
        return SettlingWrappedStore(self.inner.attach(address), self.driver_class)


def durable_eventual(options: Mapping[str, str]) -> SettlingWrappedHarness:
    """Durable, with eventual indexes (trailing by up to three commits) and a ``settle`` that waits for
    an indexer thread: the freedom to index eventually, on a store that outlives its instances."""
    driver_class = type("DurableEventualDriver", (DurableDriver, OperatorReadsDriver), {})
    return SettlingWrappedHarness(load_harness("local", {"index_lag": "3", **options}), driver_class)


# -- locks -------------------------------------------------------------------------------------------


class StoreLockAuthoritativeDriver(LockingDriver, TransactionAuthoritativeDriver, OperatorReadsDriver):
    """One store-wide lock taken when the attempt *starts*, and the store's clock sampled after now()
    sealed the read set: every point read is locked before the clock is sampled, as the
    ``transaction_authoritative`` sentence allows."""


def store_lock_authoritative(options: Mapping[str, str]) -> WrappedHarness:
    """Whole-store lock from the attempt's start, exclusive candidates, transaction-authoritative clock."""
    return WrappedHarness(load_harness("local", options), StoreLockAuthoritativeDriver)


class _Wounded(StorageConflictError):
    """This attempt asked for a key an older transaction holds: it rolls back and replays (wait-die)."""

    def __init__(self, key: str) -> None:
        super().__init__("deadlock avoided: an older transaction holds a key this attempt asked for")
        self.key = key


class KeyLocks:
    """Exclusive per-key locks with wait-die: an older transaction waits for a younger holder, a younger
    one is refused (and replays once the key is free). No cycle of waits can form, so there is no
    deadlock and no timeout; a transaction keeps its age across replays, so it cannot starve."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owners: dict[str, int] = {}
        self._ages = itertools.count()

    def age(self) -> int:
        return next(self._ages)

    def acquire(self, key: str, me: int) -> None:
        with self._cond:
            while True:
                owner = self._owners.get(key)
                if owner is None or owner == me:
                    self._owners[key] = me
                    return
                if me > owner:
                    raise _Wounded(key)
                self._cond.wait()

    def release_all(self, me: int) -> None:
        with self._cond:
            for key in [key for key, owner in self._owners.items() if owner == me]:
                del self._owners[key]
            self._cond.notify_all()

    def wait_free(self, key: str) -> None:
        with self._cond:
            while key in self._owners:
                self._cond.wait()


class KeyLockTransaction(StoreSampledTransaction):
    """Locks every key it point-reads or creates, from that call until the transaction ends.

    ``age`` is the transaction's (kept across its replays); once the attempt has ended (``live`` is
    False) nothing is locked any more, so a call on an ended attempt is refused by the store below
    and leaves no lock behind that nobody would release."""

    doomed: _Wounded | None = None
    age: int = -1
    live: bool = True

    def _lock(self, keys: Sequence[Any]) -> None:
        driver = self.driver
        assert isinstance(driver, KeyLockDriver)
        if not self.live:
            return
        try:
            for key in keys:
                driver.locks().acquire(key.encoded, self.age)
        except _Wounded as wounded:
            self.doomed = wounded
            raise

    def get(self, keys: Sequence[Any]) -> list[Any]:
        self._lock(keys)
        return super().get(keys)

    def create(self, record: Any) -> None:
        # Staged first: a plain mapping is parsed (and a malformed one refused) exactly as the reference
        # does; the key is locked before the attempt can commit, which is all a lock on a write needs.
        super().create(record)
        self._lock([parse_new_storage_record(record).key])


class KeyLockDriver(TransactionAuthoritativeDriver, OperatorReadsDriver):
    """Per-key locks taken at the first read of each key (wait-die), exclusive candidates, and the store's
    clock sampled once now() sealed a read set whose every key is locked."""

    transaction_class = KeyLockTransaction

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self._age = threading.local()

    def locks(self) -> KeyLocks:
        locks = self.store.shared.setdefault("key_locks", KeyLocks())
        assert isinstance(locks, KeyLocks)
        return locks

    def current_age(self) -> int:
        return int(self._age.value)

    def transaction(self, callback: Callable[[Any], T]) -> T:
        locks = self.locks()
        self._age.value = locks.age()
        try:
            for _ in range(MAX_ATTEMPTS):
                attempts: list[KeyLockTransaction] = []

                def attempt(tx: Any, attempts: list[KeyLockTransaction] = attempts) -> T:
                    wrapped = self.transaction_class(tx, self)
                    assert isinstance(wrapped, KeyLockTransaction)
                    wrapped.age = self.current_age()
                    attempts.append(wrapped)
                    try:
                        result = callback(wrapped)
                    finally:
                        wrapped.live = False
                    if wrapped.doomed is not None:  # the callback swallowed the refusal: still a replay
                        raise wrapped.doomed
                    return result

                try:
                    return self.inner.transaction(attempt)  # type: ignore[no-any-return]
                except _Wounded as wounded:
                    if not attempts or attempts[-1].doomed is not wounded:
                        raise
                    locks.release_all(self.current_age())
                    self.store.shared["victims"] = self.store.shared.get("victims", 0) + 1
                    locks.wait_free(wounded.key)
            raise StorageConflictError(f"gave up after {MAX_ATTEMPTS} attempts refused by older lock holders")
        finally:
            locks.release_all(self.current_age())


def key_locks(options: Mapping[str, str]) -> WrappedHarness:
    """Per-key locks from each key's first read, exclusive candidates, transaction-authoritative clock."""
    return WrappedHarness(load_harness("local", options), KeyLockDriver)


# -- conservative conflicts --------------------------------------------------------------------------


class _Coarse(StorageConflictError):
    """Internal: some other transaction committed a write since this attempt began."""


class WriteTrackingTransaction(WrappedTransaction):
    wrote = False

    def create(self, record: Any) -> None:
        self.wrote = True
        super().create(record)

    def replace(self, current: Any, record: Any) -> None:
        self.wrote = True
        super().replace(current, record)

    def delete(self, current: Any) -> None:
        self.wrote = True
        super().delete(current)

    def append(self, command: Any) -> None:
        self.wrote = True
        super().append(command)


class CoarseConflictDriver(OperatorReadsDriver):
    """Detects conflicts at store granularity: an attempt that finds any write committed on the store
    since it began is rolled back and replayed, whatever it read, so it replays far more often than the
    reference (which compares exact read sets). ``store.shared["replays"]`` counts the replays."""

    transaction_class = WriteTrackingTransaction

    def transaction(self, callback: Callable[[Any], T]) -> T:
        shared = self.store.shared
        lock = shared.setdefault("commit_lock", threading.Lock())
        for _ in range(MAX_ATTEMPTS):
            began = shared.get("writes", 0)
            wrote: list[bool] = []

            def attempt(tx: Any, began: int = began, wrote: list[bool] = wrote) -> T:
                wrapped = self.transaction_class(tx, self)
                result = callback(wrapped)
                if shared.get("writes", 0) != began:
                    raise _Coarse("another transaction wrote since this attempt began")
                wrote.append(bool(getattr(wrapped, "wrote", False)))
                return result

            try:
                result = self.inner.transaction(attempt)
            except _Coarse:
                with lock:
                    shared["replays"] = shared.get("replays", 0) + 1
                continue
            if wrote and wrote[-1]:
                with lock:
                    shared["writes"] = shared.get("writes", 0) + 1
            return result  # type: ignore[no-any-return]
        raise StorageConflictError(f"gave up after {MAX_ATTEMPTS} attempts lost to other writers")


def coarse_conflicts(options: Mapping[str, str]) -> WrappedHarness:
    """Conflicts detected store-wide: correct, and replays often."""
    return WrappedHarness(load_harness("local", options), CoarseConflictDriver)


# -- opaque versions ---------------------------------------------------------------------------------


def _opaque(key: str, version: str) -> str:
    """A positive decimal unrelated to the order of commits (a hash), so versions never increase."""
    digest = hashlib.sha256(f"{key}\x00{version}".encode()).digest()
    return str(int.from_bytes(digest[:12], "big") + 1)


class OpaqueVersionTransaction(WrappedTransaction):
    """Hands out, for every committed state of a record, a version that is a hash: opaque, stable for
    that state, different for the next one, and in no order. Writes present the reference's own."""

    def _known(self) -> dict[tuple[str, str], Any]:
        known: dict[tuple[str, str], Any] = self.driver.store.shared.setdefault("versions", {})
        return known

    def get(self, keys: Sequence[Any]) -> list[Any]:
        known = self._known()
        out: list[Any] = []
        for record in self.inner.get(keys):
            if record is not None:
                outer = StorageRecordVersion(_opaque(record.key.encoded, record.version.value))
                known[(record.key.encoded, outer.value)] = record
                record = replace(record, version=outer)
            out.append(record)
        return out

    def _inner(self, current: Any) -> Any:
        # A version this driver never handed out cannot match the stored one: pass it on as it is.
        return self._known().get((current.key.encoded, current.version.value), current)

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(self._inner(current), record)

    def delete(self, current: Any) -> None:
        self.inner.delete(self._inner(current))


def opaque_versions(options: Mapping[str, str]) -> WrappedHarness:
    """Versions that are opaque positive decimals in no order."""
    driver_class = type(
        "OpaqueVersionDriver", (ProfiledDriver,), {"transaction_class": OpaqueVersionTransaction}
    )
    return WrappedHarness(load_harness("local", options), driver_class)
