"""A correct driver with small, coherent limits that it enforces itself, at its own boundary.

The freedom: a driver may advertise limits far below the reference's, as long as they fit together
(the transaction byte limit is at least one record's and reachable within the record limit) and it
refuses, with the contract's limit error, every call that goes past them. Here the reference store
underneath keeps its own, much larger limits, so every refusal a check sees comes from this
driver's boundary, measured with the shared meter (``StorageTransactionMeter``), as the contract
asks providers to measure:

* ``get()`` past three point reads in one attempt, or past three distinct records read or written;
* ``query_candidates()`` and ``query()`` asking for pages of more than one reference;
* a create or replace whose record is over 1000 bytes, or that takes the attempt past 3000 bytes.

Each read is checked as the call returns, each write as it is staged: nothing over a limit is ever
handed back, and an attempt that hit a limit can never commit, even when its callback swallowed the
error (the transaction raises it once the callback returns, and the attempt rolls back).

Exclusive candidates and faults pass through to the reference; append and operator reads are not
offered (their sizes are the reference's to meter, not this boundary's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from runlane_conformance import (
    StorageLimitError,
    StorageLimits,
    StorageTransactionMeter,
    parse_new_storage_record,
)
from runlane_conformance.harness import load_harness
from tests.mutants.wrapping import WrappedHarness
from tests.profiles.drivers import NoAppendTransaction, ProfiledDriver

T = TypeVar("T")

#: Core's floor of point reads and records, pages of one, records of at most 1000 bytes, and a
#: transaction byte limit that three such records reach exactly: small, and coherent.
SMALL = StorageLimits(
    max_point_reads=3,
    max_query_results=1,
    max_transaction_records=3,
    max_record_bytes=1000,
    max_transaction_bytes=3000,
)


class BoundaryTransaction(NoAppendTransaction):
    """Meters every call against ``SMALL`` with its own meter; remembers the first limit it hit."""

    def __init__(self, inner: Any, driver: Any) -> None:
        super().__init__(inner, driver)
        self.meter = StorageTransactionMeter(SMALL)
        self.limit_error: StorageLimitError | None = None

    def _charge(self, action: Callable[[], None]) -> None:
        try:
            action()
        except StorageLimitError as error:
            self.limit_error = self.limit_error or error
            raise

    def get(self, keys: Sequence[Any]) -> list[Any]:
        records = super().get(keys)
        self._charge(lambda: self.meter.add_point_reads(tuple(keys)))
        return records

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        page = super().query_candidates(command, **kwargs)
        self._charge(lambda: self.meter.check_query(command))
        return page

    # A write is parsed once, here (a mapping or a mutable record is read at the call, as the contract
    # asks); the reference stages the parsed record and the meter measures that same one.

    def create(self, record: Any) -> None:
        parsed = parse_new_storage_record(record)
        super().create(parsed)
        self._charge(lambda: self.meter.add_write(parsed.key, parsed))

    def replace(self, current: Any, record: Any) -> None:
        parsed = parse_new_storage_record(record)
        super().replace(current, parsed)
        self._charge(lambda: self.meter.add_write(parsed.key, parsed))

    def delete(self, current: Any) -> None:
        super().delete(current)
        self._charge(lambda: self.meter.add_write(current.key, None))


class SmallLimitsDriver(ProfiledDriver):
    """Advertises ``SMALL`` (and no append); an attempt that went past it rolls back with its error."""

    changes = {"limits": SMALL, "append": False}
    transaction_class = BoundaryTransaction

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> T:
            wrapped = BoundaryTransaction(tx, self)
            result = callback(wrapped)
            if wrapped.limit_error is not None:
                raise wrapped.limit_error
            return result

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]

    def query(self, command: Any) -> Any:
        page = self.inner.query(command)
        StorageTransactionMeter(SMALL).check_query(command)
        return page


def harness(options: Mapping[str, str]) -> WrappedHarness:
    """The reference store (its own default limits) behind this driver's small-limit boundary."""
    return WrappedHarness(load_harness("local", options), SmallLimitsDriver)
