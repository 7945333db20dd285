"""More correct drivers, each taking one freedom no other corpus driver takes.

* ``never_replays``: the contract says a provider *may* replay the callback after a conflict; this
  one never does. A conflicting attempt rolls back and the transaction raises
  ``StorageConflictError`` at once (the reference driver with a budget of one attempt).
* ``reconnaissance_attempt``: every transaction that writes runs its callback twice. The first
  attempt learns what the callback touches and is rolled back; the second, on a fresh snapshot,
  commits (the shape of drivers that plan their lock set before executing). Only the committed
  attempt's value escapes, so this is a replay, which the contract allows at any time.
* ``large_limits``: limits well above the reference's (1000 point reads, pages of 1000, 1000
  records, 1 MiB records, 16 MiB transactions), coherent and enforced by the store below.
* ``fresh_copies``: every point read hands out a new record object (a fresh copy of the stored
  one, as a driver that decodes each row does), never the object an earlier read returned;
  replace and delete accept the copies this attempt handed out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.json_boundary import StorageDocument, thaw_json
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.harness import load_harness
from tests.mutants.wrapping import WrappedHarness, WrappedTransaction
from tests.profiles.drivers import OperatorReadsDriver

T = TypeVar("T")


def never_replays(options: Mapping[str, str]) -> Any:
    """The reference driver with one attempt per transaction: a conflict is raised, never replayed."""
    return load_harness("local", {**options, "max_transaction_attempts": "1"})


def large_limits(options: Mapping[str, str]) -> Any:
    """The reference driver with larger, coherent limits than its defaults."""
    limits = {
        "max_point_reads": "1000",
        "max_query_results": "1000",
        "max_transaction_records": "1000",
        "max_record_bytes": str(1024 * 1024),
        "max_transaction_bytes": str(16 * 1024 * 1024),
    }
    return load_harness("local", {**limits, **options})


class _Reconnaissance(StorageConflictError):
    """Internal: the planning attempt is over; replay the callback for real."""


class _WriteNoticingTransaction(WrappedTransaction):
    wrote = False

    def create(self, record: Any) -> None:
        super().create(record)
        self.wrote = True

    def replace(self, current: Any, record: Any) -> None:
        super().replace(current, record)
        self.wrote = True

    def delete(self, current: Any) -> None:
        super().delete(current)
        self.wrote = True

    def append(self, command: Any) -> None:
        super().append(command)
        self.wrote = True


class ReconnaissanceDriver(OperatorReadsDriver):
    """Runs a writing callback once to plan, rolls that attempt back, then replays it to commit."""

    transaction_class = _WriteNoticingTransaction

    def transaction(self, callback: Callable[[Any], T]) -> T:
        planned: list[bool] = []

        def attempt(tx: Any) -> T:
            wrapped = _WriteNoticingTransaction(tx, self)
            result = callback(wrapped)
            if wrapped.wrote and not planned:
                planned.append(True)
                raise _Reconnaissance("planning attempt: replay to commit")
            return result

        try:
            return self.inner.transaction(attempt)  # type: ignore[no-any-return]
        except _Reconnaissance:
            return self.inner.transaction(attempt)  # type: ignore[no-any-return]


def reconnaissance_attempt(options: Mapping[str, str]) -> WrappedHarness:
    return WrappedHarness(load_harness("local", options), ReconnaissanceDriver)


def _copy(record: StoredRecord) -> StoredRecord:
    stored = object.__new__(StoredRecord)
    stored.__dict__.update(
        key=record.key,
        version=record.version,
        document=StorageDocument(thaw_json(record.document.value)),
        indexes=record.indexes,
    )
    return stored


class FreshCopyTransaction(WrappedTransaction):
    """Every read returns new record objects; writes map them back to what the store handed out."""

    def __init__(self, inner: Any, driver: Any) -> None:
        super().__init__(inner, driver)
        self.originals: dict[int, tuple[StoredRecord, StoredRecord]] = {}

    def get(self, keys: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for record in self.inner.get(keys):
            if record is not None:
                copy = _copy(record)
                self.originals[id(copy)] = (copy, record)
                record = copy
            out.append(record)
        return out

    def _original(self, current: Any) -> Any:
        known = self.originals.get(id(current))
        return current if known is None or known[0] is not current else known[1]

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(self._original(current), record)

    def delete(self, current: Any) -> None:
        self.inner.delete(self._original(current))


class FreshCopyDriver(OperatorReadsDriver):
    transaction_class = FreshCopyTransaction

    def get_run(self, *args: Any, **kwargs: Any) -> Any:
        record = self.inner.get_run(*args, **kwargs)
        return None if record is None else _copy(record)


def fresh_copies(options: Mapping[str, str]) -> WrappedHarness:
    return WrappedHarness(load_harness("local", options), FreshCopyDriver)
