"""Broken drivers for the limits area.

The off-by-one mutants advertise a limit one away from what the reference
driver enforces: advertising one less makes the driver accept N + 1 of the
advertised N; advertising one more makes it refuse the advertised N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from runlane_conformance import (
    StorageLimitError,
    StorageLimitName,
    create_storage_limit_error,
)
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
    StorageLimitName.POINT_READS: "limits.point-reads-boundary",
    StorageLimitName.QUERY_RESULTS: "limits.query-results-boundary",
    StorageLimitName.RECORD_BYTES: "limits.record-bytes-boundary",
    StorageLimitName.TRANSACTION_RECORDS: "limits.transaction-records-boundary",
    StorageLimitName.TRANSACTION_BYTES: "limits.transaction-bytes-boundary",
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
        "limits.point-reads-boundary",
        "names the wrong limit in the point-read limit error",
    ),
    Mutant(
        "splits-oversized-work",
        "tests.mutants.m_limits:splits_oversized_work",
        "limits.oversized-work-never-split",
        "commits the part of an oversized transaction that fitted",
    ),
]

mislabels_point_reads = mutant_harness(MislabelsPointReads)
splits_oversized_work = mutant_harness(SplitsOversizedWork)
