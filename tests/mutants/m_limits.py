"""Broken drivers for the limits area.

The off-by-one mutants advertise a limit one away from what the reference
driver enforces: advertising one less makes the driver accept N + 1 of the
advertised N; advertising one more makes it refuse the advertised N.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance import (
    QueryRecordsResult,
    StorageCandidateMode,
    StorageLimitError,
    StorageLimitName,
    create_storage_limit_error,
    encode_storage_query_cursor,
)
from runlane_conformance.catalogue import append, limits
from runlane_conformance.contract.limits import StorageTransactionMeter
from runlane_conformance.contract.streams import materialize_storage_append, parse_append_records_command
from runlane_conformance.contract.values import NewStorageRecord, StorageRecordKey
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


def off_by_one(limit: StorageLimitName, delta: int) -> type[WrappedDriver]:
    """A driver class advertising ``limit`` at (enforced + ``delta``)."""

    class OffByOne(WrappedDriver):
        @property
        def profile(self) -> Any:
            real = self.inner.profile
            value = getattr(real.limits, limit.value) + delta
            return replace(real, limits=replace(real.limits, **{limit.value: value}))

    OffByOne.__name__ = f"OffByOne_{limit.name}_{'plus' if delta > 0 else 'minus'}"
    return OffByOne


class MislabelsPointReads(WrappedDriver):
    """Reports a point-read overflow as a transaction-record overflow."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        try:
            return super().transaction(callback)
        except StorageLimitError as error:
            if error.limit is StorageLimitName.POINT_READS:
                raise create_storage_limit_error(
                    StorageLimitName.TRANSACTION_RECORDS, error.maximum, error.actual
                ) from None
            raise


class RemembersCreates(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.staged: list[Any] = []

    def create(self, record: Any) -> None:
        self.inner.create(record)
        self.staged.append(record)


class SplitsOversizedWork(WrappedDriver):
    """When an attempt grows past a limit, commits what fitted before refusing the rest."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[RemembersCreates] = []

        def run(tx: Any) -> T:
            wrapped = RemembersCreates(tx, self)
            attempts.append(wrapped)
            return callback(wrapped)

        try:
            return self.inner.transaction(run)  # type: ignore[no-any-return]
        except StorageLimitError:
            fitted = attempts[-1].staged if attempts else []
            if fitted:

                def commit_part(tx: Any) -> None:
                    for record in fitted:
                        tx.create(record)

                self.inner.transaction(commit_part)
            raise


_REQUIREMENT = {
    StorageLimitName.POINT_READS: limits.POINT_READS,
    StorageLimitName.QUERY_RESULTS: limits.QUERY_RESULTS,
    StorageLimitName.RECORD_BYTES: limits.RECORD_BYTES,
    StorageLimitName.TRANSACTION_RECORDS: limits.TRANSACTION_RECORDS,
    StorageLimitName.TRANSACTION_BYTES: limits.TRANSACTION_BYTES,
}

MUTANTS: list[Mutant] = []
for _limit, _requirement in _REQUIREMENT.items():
    _slug = _limit.value.removeprefix("max_").replace("_", "-")
    for _delta, _what in ((-1, "accepts-one-past"), (1, "refuses-exactly")):
        _factory = f"{_what.replace('-', '_')}_{_limit.name.lower()}"
        globals()[_factory] = mutant_harness(off_by_one(_limit, _delta))
        MUTANTS.append(
            Mutant(
                f"{_what}-{_slug}",
                f"tests.mutants.m_limits:{_factory}",
                _requirement,
                f"{'accepts N + 1' if _delta < 0 else 'refuses N'} for {_limit.value}",
            )
        )

MUTANTS += [
    Mutant(
        "mislabels-point-read-limit",
        "tests.mutants.m_limits:mislabels_point_reads",
        limits.POINT_READS,
        "names the wrong limit in the point-read limit error",
    ),
    Mutant(
        "splits-oversized-work",
        "tests.mutants.m_limits:splits_oversized_work",
        limits.ALL_OR_NOTHING,
        "commits the part of an oversized transaction that fitted",
    ),
]

mislabels_point_reads = mutant_harness(MislabelsPointReads)
splits_oversized_work = mutant_harness(SplitsOversizedWork)


# -- meters that count the wrong unit or leave work out ---------------------------------------------


class _BrokenMeter(StorageTransactionMeter):
    """The shared meter with switches for the mistakes below (all off by default)."""

    record_unit_characters = False
    total_unit_characters = False
    count_reads = True
    count_deletes = True
    replacing = False  # set by the wrapper while a replacement is being staged
    replacements_add_bytes = True

    def add_point_reads(self, keys: Sequence[StorageRecordKey]) -> None:
        total = self.point_reads + len(keys)
        if total > self.limits.max_point_reads:
            raise create_storage_limit_error(StorageLimitName.POINT_READS, self.limits.max_point_reads, total)
        self.point_reads = total
        if self.count_reads:
            self._touch(key.encoded for key in keys)

    def add_encoded_write(self, encoded_key: str, record: NewStorageRecord | None) -> None:
        limits = self.limits
        size = 0
        if record is not None:
            measured = len(record.document.text) if self.record_unit_characters else record.document.size
            if measured > limits.max_record_bytes:
                raise create_storage_limit_error(
                    StorageLimitName.RECORD_BYTES, limits.max_record_bytes, measured
                )
            size = len(record.document.text) if self.total_unit_characters else record.document.size
            if self.replacing and not self.replacements_add_bytes:
                size = 0
        if record is not None or self.count_deletes:
            self._touch([encoded_key])
        self._add_bytes(size)


def meter_mutant(**switches: bool) -> type[WrappedTransaction]:
    """A transaction wrapper that swaps the reference attempt's meter for a broken one with ``switches``."""
    meter_class = type("BrokenMeter", (_BrokenMeter,), switches)

    class SwapsMeter(WrappedTransaction):
        def __init__(self, inner: Any, driver: WrappedDriver) -> None:
            super().__init__(inner, driver)
            self.meter: _BrokenMeter = meter_class(inner._meter.limits)
            inner._meter = self.meter

        def replace(self, current: Any, record: Any) -> None:
            self.meter.replacing = True
            try:
                self.inner.replace(current, record)
            finally:
                self.meter.replacing = False

    return SwapsMeter


class MeasuresAppendAtAllocatedPosition(WrappedTransaction):
    """Sizes an append batch as it will be stored from position 1, not at the widest position it could get."""

    def append(self, command: Any) -> None:
        parsed = parse_append_records_command(command)
        real = self.inner._meter
        limits = real.limits
        narrow = materialize_storage_append(parsed, 1)
        sizes = [record.document.size for record in narrow.records]
        for size in sizes:
            if size > limits.max_record_bytes:
                raise create_storage_limit_error(StorageLimitName.RECORD_BYTES, limits.max_record_bytes, size)
        roomy = replace(
            limits, max_record_bytes=10**12, max_transaction_bytes=10**12, max_transaction_records=10**9
        )
        self.inner._meter = StorageTransactionMeter(roomy)
        try:
            self.inner.append(parsed)
        finally:
            self.inner._meter = real
        keys = [record.key.encoded for record in narrow.records] + [narrow.head.key.encoded]
        real.add_appended(keys, [*sizes, narrow.head.document.size])


MUTANTS += [
    Mutant(
        "record-bytes-in-characters",
        "tests.mutants.m_limits:record_bytes_in_characters",
        limits.RECORD_BYTES,
        "a document is measured in characters against max_record_bytes",
    ),
    Mutant(
        "transaction-bytes-in-characters",
        "tests.mutants.m_limits:transaction_bytes_in_characters",
        limits.TRANSACTION_BYTES,
        "the transaction byte total adds up characters, not UTF-8 bytes",
    ),
    Mutant(
        "replacements-add-no-bytes",
        "tests.mutants.m_limits:replacements_add_no_bytes",
        limits.TRANSACTION_BYTES,
        "replacement documents are left out of the transaction byte total",
    ),
    Mutant(
        "counts-only-written-keys",
        "tests.mutants.m_limits:counts_only_written_keys",
        limits.TRANSACTION_RECORDS,
        "point reads (present or absent) and deletes do not count toward max_transaction_records",
    ),
    Mutant(
        "measures-append-at-allocated-position",
        "tests.mutants.m_limits:measures_append_narrow",
        append.LIMITS,
        "an append batch is sized at the positions it gets, not at the widest position",
    ),
]

record_bytes_in_characters = mutant_harness(transaction_class=meter_mutant(record_unit_characters=True))
transaction_bytes_in_characters = mutant_harness(transaction_class=meter_mutant(total_unit_characters=True))
replacements_add_no_bytes = mutant_harness(transaction_class=meter_mutant(replacements_add_bytes=False))
counts_only_written_keys = mutant_harness(
    transaction_class=meter_mutant(count_reads=False, count_deletes=False)
)
measures_append_narrow = mutant_harness(transaction_class=MeasuresAppendAtAllocatedPosition)


# -- a budget kept per transaction() call instead of per attempt ----------------------------------------


class _CallWideReads(WrappedTransaction):
    def get(self, keys: Sequence[Any]) -> list[Any]:
        driver: Any = self.driver
        driver.point_reads += len(keys)
        maximum = driver.profile.limits.max_point_reads
        if driver.point_reads > maximum:
            raise create_storage_limit_error(StorageLimitName.POINT_READS, maximum, driver.point_reads)
        return self.inner.get(keys)  # type: ignore[no-any-return]


class PointReadsSpanAttempts(WrappedDriver):
    """Counts point reads over every attempt of one transaction() call, so a replay inherits the count."""

    transaction_class = _CallWideReads

    def transaction(self, callback: Callable[[Any], T]) -> T:
        self.point_reads = 0
        return super().transaction(callback)


point_reads_span_attempts = mutant_harness(PointReadsSpanAttempts)

MUTANTS += [
    Mutant(
        "point-reads-span-attempts",
        "tests.mutants.m_limits:point_reads_span_attempts",
        limits.POINT_READS,
        "the point-read meter is kept per transaction() call, so a replayed attempt starts over the limit",
    ),
]


# -- the page limit checked on first pages only ------------------------------------------------------------


def _first_pages_only(scan: Callable[[Any], Any], command: Any, limit: int) -> Any:
    """Serves a continued page of any size: only a command without a cursor is checked against the limit."""
    if command.cursor is None or command.limit <= limit:
        return scan(command)
    items: list[Any] = []
    current = replace(command, limit=limit)
    while len(items) < command.limit:
        page = scan(current)
        items.extend(page.items)
        if page.cursor is None:
            break
        current = current.with_cursor(page.cursor)
    chosen = items[: command.limit]
    cursor = encode_storage_query_cursor(command, chosen[-1]) if len(items) > len(chosen) else None
    return QueryRecordsResult(tuple(chosen), cursor)


class _FirstPageLimitTransaction(WrappedTransaction):
    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        limit = self.driver.profile.limits.max_query_results
        return _first_pages_only(lambda c: self.inner.query_candidates(c, **kwargs), command, limit)


class FirstPageLimitOnly(WrappedDriver):
    transaction_class = _FirstPageLimitTransaction

    def query(self, command: Any) -> Any:
        return _first_pages_only(self.inner.query, command, self.profile.limits.max_query_results)


query_limit_on_first_pages_only = mutant_harness(FirstPageLimitOnly)

MUTANTS += [
    Mutant(
        "query-limit-on-first-pages-only",
        "tests.mutants.m_limits:query_limit_on_first_pages_only",
        limits.QUERY_RESULTS,
        "max_query_results is checked when a scan starts, not on pages continued from a cursor",
    ),
]


class _ExclusivePageUnchecked(WrappedTransaction):
    """max_query_results is checked for advisory scans only; an exclusive page of any size is served."""

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode") is not StorageCandidateMode.EXCLUSIVE:
            return self.inner.query_candidates(command, **kwargs)
        meter = self.inner._rules.meter
        check = meter.check_query
        meter.check_query = lambda command: None
        try:
            return self.inner.query_candidates(command, **kwargs)
        finally:
            meter.check_query = check


exclusive_page_limit_unchecked = mutant_harness(transaction_class=_ExclusivePageUnchecked)

MUTANTS += [
    Mutant(
        "exclusive-page-limit-unchecked",
        "tests.mutants.m_limits:exclusive_page_limit_unchecked",
        limits.QUERY_RESULTS,
        "serves an exclusive page larger than max_query_results",
    ),
]
