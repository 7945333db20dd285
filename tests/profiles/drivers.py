"""Correct drivers under every profile the contract allows, built by wrapping the reference driver.

Each wrapper changes one mechanic honestly and advertises exactly that change,
so certifying it proves that the suites accept the profile rather than only the
reference driver's: a clock sampled from a shared store clock
(``server_sampled``), a shared advancing clock read after the read set is
sealed (``transaction_authoritative``), a store that outlives its instances
(``durable``), optional capabilities switched off one at a time, and a driver
that caches parsed records and hands out the same frozen value twice.

None of these is a mutant: every one of them must certify.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from runlane_conformance import StorageCandidateMode, StorageClockAuthority, StorageDurability
from runlane_conformance.contract.errors import StorageUnsupportedError
from runlane_conformance.harness import load_harness
from tests.locking.drivers import LockingDriver
from tests.mutants.wrapping import WrappedDriver, WrappedHarness, WrappedStore, WrappedTransaction

T = TypeVar("T")


class StoreClock:
    """One clock per store, shared by every instance on it: the UTC wall clock, never going backwards
    and strictly advancing between two readings (a database server's clock, as the instances see it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = datetime.min.replace(tzinfo=UTC)

    def __call__(self) -> datetime:
        with self._lock:
            reading = max(datetime.now(UTC), self._last + timedelta(microseconds=1))
            self._last = reading
            return reading


def store_clock(driver: WrappedDriver) -> StoreClock:
    """The one clock of the store ``driver`` is connected to (made on first use)."""
    clock = driver.store.shared.get("clock")
    if clock is None:
        clock = driver.store.shared.setdefault("clock", StoreClock())
    assert isinstance(clock, StoreClock)
    return clock


class StoreSampledTransaction(WrappedTransaction):
    """now() seals the attempt like the reference driver, then answers one reading of the store's
    clock, frozen for the attempt; the clock given to connect() is never consulted for it."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.frozen: datetime | None = None

    def now(self) -> datetime:
        self.inner.now()  # seals the read set (and refuses a now() after the attempt ended)
        if self.frozen is None:
            self.frozen = store_clock(self.driver)()
        return self.frozen


class ProfiledDriver(WrappedDriver):
    """A wrapped reference driver advertising ``changes`` to its profile (and honouring them)."""

    changes: Mapping[str, Any] = {}

    @property
    def profile(self) -> Any:
        return replace(self.inner.profile, **self.changes)


class ServerSampledDriver(ProfiledDriver):
    changes = {"clock_authority": StorageClockAuthority.SERVER_SAMPLED}
    transaction_class = StoreSampledTransaction


class TransactionAuthoritativeDriver(ProfiledDriver):
    """The reference driver validates its whole read set at commit and takes its snapshot at the first
    read; sampling the shared, strictly advancing store clock only after now() sealed that read set
    means every record an attempt read was committed by an attempt that sampled earlier."""

    changes = {"clock_authority": StorageClockAuthority.TRANSACTION_AUTHORITATIVE}
    transaction_class = StoreSampledTransaction


class DurableDriver(ProfiledDriver):
    """The reference store lives as long as its store handle, whatever instances come and go."""

    changes = {"durability": StorageDurability.DURABLE}


class NoAppendTransaction(WrappedTransaction):
    def append(self, command: Any) -> None:
        raise StorageUnsupportedError("this driver does not offer append")


class NoExclusiveTransaction(WrappedTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        mode = kwargs.get("mode")
        if mode is not None and StorageCandidateMode(mode) is not StorageCandidateMode.ADVISORY:
            raise StorageUnsupportedError("this driver does not offer exclusive candidates")
        return self.inner.query_candidates(command, **kwargs)


class OperatorReadsDriver(ProfiledDriver):
    """Passes the reference driver's operator reads through."""

    def get_run(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_run(*args, **kwargs)

    def list_runs(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.list_runs(*args, **kwargs)

    def list_run_events(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.list_run_events(*args, **kwargs)


class CachingTransaction(WrappedTransaction):
    """Hands out, for a key and version read before, the very same parsed record it handed out then."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        cache: dict[tuple[str, str], Any] = self.driver.store.shared.setdefault("parsed", {})
        results = []
        for record in self.inner.get(keys):
            if record is not None:
                record = cache.setdefault((record.key.encoded, record.version.value), record)
            results.append(record)
        return results


def _classes(append: bool, exclusive: bool) -> type[WrappedTransaction]:
    bases: list[type[WrappedTransaction]] = []
    if not append:
        bases.append(NoAppendTransaction)
    if not exclusive:
        bases.append(NoExclusiveTransaction)
    if not bases:
        return WrappedTransaction
    return type("CapabilityTransaction", tuple(bases), {})


def capabilities(append: bool, exclusive: bool, operator_reads: bool) -> Callable[[Mapping[str, str]], Any]:
    """A harness factory for the reference driver with exactly these optional capabilities."""
    base: type[WrappedDriver] = OperatorReadsDriver if operator_reads else ProfiledDriver
    driver_class = type(
        "CapabilityDriver",
        (base,),
        {
            "changes": {"append": append, "exclusive_candidates": exclusive},
            "transaction_class": _classes(append, exclusive),
        },
    )
    return _factory(driver_class)


def _factory(driver_class: type[WrappedDriver]) -> Callable[[Mapping[str, str]], WrappedHarness]:
    def factory(options: Mapping[str, str]) -> WrappedHarness:
        return WrappedHarness(load_harness("local", options), driver_class)

    return factory


def _with_reads(driver_class: type[ProfiledDriver]) -> type[WrappedDriver]:
    return type(driver_class.__name__, (driver_class, OperatorReadsDriver), {})


server_sampled = _factory(_with_reads(ServerSampledDriver))
transaction_authoritative = _factory(_with_reads(TransactionAuthoritativeDriver))
durable = _factory(_with_reads(DurableDriver))
caching = _factory(type("CachingDriver", (OperatorReadsDriver,), {"transaction_class": CachingTransaction}))


#: The lock-style reference configuration: the reference driver behind one store-wide lock held by each
#: attempt from its first call to its end, offering every optional capability the reference offers
#: (append, exclusive candidates, operator reads) and the fault hook. Competitors wait for the lock, and
#: an attempt that finds one queued behind it is rolled back and replayed once (a deadlock victim), so
#: the checks see all three shapes a locking database shows them. It must reach the top level.
store_locked = _factory(type("StoreLockedDriver", (LockingDriver, OperatorReadsDriver), {}))


#: Every combination of the optional capabilities, by factory name (``with_<...>`` lists what is offered).
COMBINATIONS: dict[str, tuple[bool, bool, bool]] = {}
for _append in (False, True):
    for _exclusive in (False, True):
        for _reads in (False, True):
            _offered = [
                name
                for name, on in (("append", _append), ("exclusive", _exclusive), ("operator_reads", _reads))
                if on
            ]
            _name = "with_" + ("_".join(_offered) or "nothing_optional")
            COMBINATIONS[_name] = (_append, _exclusive, _reads)
            globals()[_name] = capabilities(_append, _exclusive, _reads)


class SlowTransaction(WrappedTransaction):
    """Waits ``delay`` seconds before every call, as a driver on a far-away server would."""

    def _wait(self) -> None:
        time.sleep(self.driver.store.shared.get("delay", 0.0))

    def get(self, keys: Sequence[Any]) -> list[Any]:
        self._wait()
        return super().get(keys)

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        self._wait()
        return super().query_candidates(command, **kwargs)

    def create(self, record: Any) -> None:
        self._wait()
        super().create(record)

    def replace(self, current: Any, record: Any) -> None:
        self._wait()
        super().replace(current, record)

    def delete(self, current: Any) -> None:
        self._wait()
        super().delete(current)


class SlowHarness(WrappedHarness):
    """The reference driver, slowed by ``delay`` seconds (option ``delay``, default 0.002) per call."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.delay = float(options.get("delay", "0.002"))
        rest = {key: value for key, value in options.items() if key != "delay"}
        super().__init__(load_harness("local", rest), SlowDriver)

    def open_store(self) -> WrappedStore:
        store = super().open_store()
        store.shared["delay"] = self.delay
        return store

    def attach(self, address: object) -> WrappedStore:
        store = super().attach(address)
        store.shared["delay"] = self.delay
        return store


class SlowDriver(OperatorReadsDriver):
    transaction_class = SlowTransaction


def slow(options: Mapping[str, str]) -> SlowHarness:
    """A correct driver that is merely slow: certifies when given time, inconclusive when not."""
    return SlowHarness(options)


def unsettled(options: Mapping[str, str]) -> WrappedHarness:
    """The reference driver with lagging (eventual) indexes behind a store handle with no ``settle``
    hook: correct, but nothing tells a check when its indexes have caught up."""
    return WrappedHarness(load_harness("local", {"index_lag": "3", **options}), WrappedDriver)
