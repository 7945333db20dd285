"""Broken drivers for the profile area: profiles that contradict themselves or overstate the driver."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from runlane_conformance import (
    NewStorageRecord,
    QueryRecordsResult,
    StorageClockAuthority,
    StorageDurability,
    StorageIndexName,
    StorageLimits,
    StorageProfile,
)
from runlane_conformance.catalogue import profile
from runlane_conformance.harness import load_harness
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import (
    WrappedDriver,
    WrappedHarness,
    WrappedStore,
    WrappedTransaction,
    mutant_harness,
)
from tests.profiles.drivers import StoreSampledTransaction, TransactionAuthoritativeDriver, store_clock

T = TypeVar("T")


def _unchecked(cls: type[T], **values: Any) -> T:
    """A frozen dataclass instance built without running its validation (mutants lie on purpose)."""
    made = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(made, name, value)
    return made


def _as_dict(value: Any) -> dict[str, Any]:
    return {item.name: getattr(value, item.name) for item in fields(value)}


class IncoherentLimits(WrappedDriver):
    """Advertises a transaction byte limit smaller than its record byte limit."""

    @property
    def profile(self) -> Any:
        real = self.inner.profile
        limits = _as_dict(real.limits)
        limits["max_transaction_bytes"] = limits["max_record_bytes"] - 1
        return _unchecked(StorageProfile, **{**_as_dict(real), "limits": _unchecked(StorageLimits, **limits)})


class UnknownDurability(WrappedDriver):
    """Advertises a durability that is not in the contract."""

    @property
    def profile(self) -> Any:
        return _unchecked(StorageProfile, **{**_as_dict(self.inner.profile), "durability": "forever"})


_instances = itertools.count()


class DiffersPerInstance(WrappedDriver):
    """Every second instance advertises one point read fewer than the first."""

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self.number = next(_instances)

    @property
    def profile(self) -> Any:
        real = self.inner.profile
        if self.number % 2 == 0:
            return real
        return replace(real, limits=replace(real.limits, max_point_reads=real.limits.max_point_reads - 1))


def _hide_fresh(driver: WrappedDriver, page: QueryRecordsResult) -> QueryRecordsResult:
    """Drop references committed by another instance that this instance has not been shown yet."""
    fresh: dict[str, int] = driver.store.shared.setdefault("fresh", {})
    kept = []
    for item in page.items:
        owner = fresh.get(item.key.encoded)
        if owner is not None and owner != id(driver):
            del fresh[item.key.encoded]  # it shows up next time: an eventually consistent index
            continue
        kept.append(item)
    return QueryRecordsResult(tuple(kept), page.cursor)


class RecordsWrites(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.written: list[str] = []

    def create(self, record: Any) -> None:
        self.inner.create(record)
        if isinstance(record, NewStorageRecord):
            self.written.append(record.key.encoded)

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(current, record)
        self.written.append(current.key.encoded)

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.driver.filter_page(self.inner.query_candidates(command, **kwargs))  # type: ignore[attr-defined]

    def get(self, keys: Sequence[Any]) -> list[Any]:
        return self.driver.filter_records(keys, self.inner.get(keys))  # type: ignore[attr-defined, no-any-return]


class RecordingDriver(WrappedDriver):
    """Knows which keys each committed attempt wrote (for the visibility and durability mutants)."""

    transaction_class = RecordsWrites

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[RecordsWrites] = []

        def run(tx: Any) -> T:
            wrapped = RecordsWrites(tx, self)
            attempts.append(wrapped)
            return callback(wrapped)

        result = self.inner.transaction(run)
        if attempts:
            self.committed(attempts[-1].written)
        return result  # type: ignore[no-any-return]

    def committed(self, keys: list[str]) -> None:
        pass

    def filter_page(self, page: QueryRecordsResult) -> QueryRecordsResult:
        return page

    def filter_records(self, keys: Sequence[Any], records: list[Any]) -> list[Any]:
        return records

    def query(self, command: Any) -> Any:
        return self.filter_page(self.inner.query(command))


class HidesOtherInstancesCommits(RecordingDriver):
    """Claims strong index consistency, but an instance sees another's new entries only on a second look."""

    def committed(self, keys: list[str]) -> None:
        fresh = self.store.shared.setdefault("fresh", {})
        for key in keys:
            fresh[key] = id(self)

    def filter_page(self, page: QueryRecordsResult) -> QueryRecordsResult:
        return _hide_fresh(self, page)


class ClaimsDurableLosesData(RecordingDriver):
    """Claims durable storage, but everything committed is gone once every instance has closed."""

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self.store.shared.setdefault("open", set()).add(id(self))

    @property
    def profile(self) -> Any:
        return replace(self.inner.profile, durability=StorageDurability.DURABLE)

    def committed(self, keys: list[str]) -> None:
        self.store.shared.setdefault("written", set()).update(keys)

    def close(self) -> None:
        opened: set[int] = self.store.shared.setdefault("open", set())
        opened.discard(id(self))
        if not opened:
            self.store.shared["lost"] = set(self.store.shared.get("written", set()))
        super().close()

    def filter_page(self, page: QueryRecordsResult) -> QueryRecordsResult:
        lost = self.store.shared.get("lost", set())
        return QueryRecordsResult(tuple(i for i in page.items if i.key.encoded not in lost), page.cursor)

    def filter_records(self, keys: Sequence[Any], records: list[Any]) -> list[Any]:
        lost = self.store.shared.get("lost", set())
        return [None if key.encoded in lost else record for key, record in zip(keys, records, strict=True)]


class CachesFirstClockReading(WrappedTransaction):
    """Seals like the real driver, but every attempt of an instance reuses the instance's first reading."""

    def now(self) -> datetime:
        sampled = self.inner.now()
        first: datetime = self.driver.__dict__.setdefault("first_now", sampled)
        return first


# -- one index outside the strong promise, a profile read lazily, a skewed "authoritative" clock -----


class LagsOneIndex(WrappedTransaction):
    """Remembers its writes and hides other instances' fresh SchedulesByNextOccurrence rows."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.written: list[str] = []

    def create(self, record: Any) -> None:
        self.inner.create(record)
        self.written.append(record.key.encoded)

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(current, record)
        self.written.append(current.key.encoded)

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.driver.lagging(command, self.inner.query_candidates(command, **kwargs))  # type: ignore[attr-defined]


class ScheduleIndexLags(WrappedDriver):
    """Claims strong index consistency, but the schedule index is filled by a background sweep."""

    transaction_class = LagsOneIndex

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[LagsOneIndex] = []

        def run(tx: Any) -> T:
            attempts.append(LagsOneIndex(tx, self))
            return callback(attempts[-1])

        result: T = self.inner.transaction(run)
        fresh = self.store.shared.setdefault("fresh", {})
        for key in attempts[-1].written:
            fresh[key] = id(self)
        return result

    def lagging(self, command: Any, page: QueryRecordsResult) -> QueryRecordsResult:
        if command.index is not StorageIndexName.SCHEDULES_BY_NEXT_OCCURRENCE:
            return page
        return _hide_fresh(self, page)

    def query(self, command: Any) -> Any:
        return self.lagging(command, self.inner.query(command))


class LoadsProfileLazily(WrappedDriver):
    """Advertises default limits until its first transaction has fetched the server's smaller ones."""

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        super().__init__(inner, store)
        self.loaded = False

    @property
    def profile(self) -> Any:
        real = self.inner.profile
        if self.loaded:
            return real
        return replace(real, limits=replace(real.limits, max_query_results=real.limits.max_query_results + 1))

    def transaction(self, callback: Callable[[Any], T]) -> T:
        self.loaded = True
        return super().transaction(callback)


class ClaimsAuthoritativeClock(WrappedDriver):
    """Claims transaction_authoritative time, but each instance reads its own host clock (skewed by hours)."""

    @property
    def profile(self) -> Any:
        return replace(self.inner.profile, clock_authority=StorageClockAuthority.TRANSACTION_AUTHORITATIVE)


class SkewedHosts(WrappedStore):
    """Every instance gets a host clock of its own: the n-th instance runs n hours behind."""

    def connect(self, *, clock: Any = None) -> WrappedDriver:
        skew = timedelta(hours=len(self.shared.setdefault("hosts", [])))
        self.shared["hosts"].append(skew)
        return self.driver_class(self.inner.connect(clock=lambda: datetime.now(UTC) - skew), self)


def claims_authoritative_clock(options: Mapping[str, str]) -> WrappedHarness:
    class Harness(WrappedHarness):
        def open_store(self) -> WrappedStore:
            return SkewedHosts(self.inner.open_store(), self.driver_class)

        def attach(self, address: object) -> WrappedStore:
            return SkewedHosts(self.inner.attach(address), self.driver_class)

    return Harness(load_harness("local", options), ClaimsAuthoritativeClock)


MUTANTS = [
    Mutant(
        "incoherent-limits",
        "tests.mutants.m_profile:incoherent_limits",
        profile.COHERENT,
        "advertises max_transaction_bytes below max_record_bytes",
    ),
    Mutant(
        "two-point-reads",
        "tests.mutants.m_profile:two_point_reads",
        profile.CORE_ROOM,
        "enforces and advertises two point reads per attempt, too few for core's smallest atomic steps",
    ),
    Mutant(
        "unknown-durability",
        "tests.mutants.m_profile:unknown_durability",
        profile.COHERENT,
        "advertises a durability outside the contract",
    ),
    Mutant(
        "profile-differs-per-instance",
        "tests.mutants.m_profile:differs_per_instance",
        profile.STABLE,
        "instances on one store advertise different limits",
    ),
    Mutant(
        "hides-other-instances-commits",
        "tests.mutants.m_profile:hides_other_instances_commits",
        profile.STRONG_INDEX,
        "claims strong index consistency but lags on other instances",
    ),
    Mutant(
        "caches-first-clock-reading",
        "tests.mutants.m_profile:caches_first_clock_reading",
        profile.CLIENT_CLOCK,
        "claims a client clock but reads it once per instance",
    ),
    Mutant(
        "claims-durable-loses-data",
        "tests.mutants.m_profile:claims_durable_loses_data",
        profile.DURABLE,
        "claims durability but loses data once every instance closed",
    ),
    Mutant(
        "schedule-index-lags",
        "tests.mutants.m_profile:schedule_index_lags",
        profile.STRONG_INDEX,
        "claims strong index consistency, but SchedulesByNextOccurrence lags on other instances",
    ),
    Mutant(
        "profile-loaded-lazily",
        "tests.mutants.m_profile:loads_profile_lazily",
        profile.STABLE,
        "an instance advertises other limits before its first transaction than after it",
    ),
    Mutant(
        "claims-authoritative-clock",
        "tests.mutants.m_profile:claims_authoritative_clock",
        profile.AUTHORITATIVE,
        "claims transaction_authoritative time while every instance reads its own skewed clock",
    ),
]

schedule_index_lags = mutant_harness(ScheduleIndexLags)
loads_profile_lazily = mutant_harness(LoadsProfileLazily)
incoherent_limits = mutant_harness(IncoherentLimits)
unknown_durability = mutant_harness(UnknownDurability)
# Honest about its limits (the reference driver configured so), but they are below core's floor.
two_point_reads = mutant_harness(base_options={"max_point_reads": "2"})
differs_per_instance = mutant_harness(DiffersPerInstance)
hides_other_instances_commits = mutant_harness(HidesOtherInstancesCommits)
caches_first_clock_reading = mutant_harness(transaction_class=CachesFirstClockReading)
claims_durable_loses_data = mutant_harness(ClaimsDurableLosesData)


# -- clocks the store owns: the label changed, the mechanics not ------------------------------------


class _StoreClockLabel(WrappedDriver):
    """Advertises a store-owned clock authority (set by the subclass) over the reference driver."""

    authority: StorageClockAuthority = StorageClockAuthority.CLIENT

    @property
    def profile(self) -> Any:
        return replace(self.inner.profile, clock_authority=self.authority)


class ServerSampledLabelOnly(_StoreClockLabel):
    """Says server_sampled but still answers now() from the clock given to connect()."""

    authority = StorageClockAuthority.SERVER_SAMPLED


class AuthoritativeLabelOnly(_StoreClockLabel):
    """Says transaction_authoritative but each instance keeps reading its own client clock."""

    authority = StorageClockAuthority.TRANSACTION_AUTHORITATIVE


class SampledAtBegin(StoreSampledTransaction):
    """Reads the shared store clock when the attempt begins, before its reads (PostgreSQL's now() is the
    transaction's start time): a record committed after the start can then carry a later time."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.frozen = store_clock(driver)()


class AuthoritativeSampledAtBegin(TransactionAuthoritativeDriver):
    transaction_class = SampledAtBegin


MUTANTS += [
    Mutant(
        "server-sampled-label-on-client-clock",
        "tests.mutants.m_profile:server_sampled_label_only",
        profile.SERVER_SAMPLED,
        "advertises server_sampled time but answers from the injected client clock",
    ),
    Mutant(
        "authoritative-label-on-client-clock",
        "tests.mutants.m_profile:authoritative_label_only",
        profile.AUTHORITATIVE,
        "advertises transaction_authoritative time but each instance reads its own client clock",
    ),
    Mutant(
        "authoritative-time-sampled-at-begin",
        "tests.mutants.m_profile:authoritative_sampled_at_begin",
        profile.AUTHORITATIVE,
        "samples the shared clock when the attempt begins, before its read set is sealed",
    ),
]

server_sampled_label_only = mutant_harness(ServerSampledLabelOnly)
authoritative_label_only = mutant_harness(AuthoritativeLabelOnly)
authoritative_sampled_at_begin = mutant_harness(AuthoritativeSampledAtBegin)
