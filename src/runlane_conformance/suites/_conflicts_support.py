"""Shared helpers for the ``replay`` and ``conflicts`` suites: lease views, attempt counters, a serial model.

The interleaving checks compare what two transactions did with what some
serial order of them could have done. ``LeaseModel`` is that serial world:
a dictionary of lease records with the same point-read, index-scan and
conditional-write rules as the contract, small enough to trust by reading.
``run_plan`` executes one ``Plan`` (reads, then writes derived from what was
read) against either a driver attempt or the model, so the two can be
compared outcome for outcome.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..contract.catalog import StorageCandidateMode
from ..contract.errors import StorageConflictError
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageIndexReference,
    StorageRecordKey,
    StorageRecordVersion,
    StoredRecord,
)
from ..fixtures.records import Leases

__all__ = [
    "CONFLICT",
    "Attempts",
    "LeaseModel",
    "LeaseView",
    "Plan",
    "PlanRead",
    "PlanWrite",
    "conflict_or",
    "holder",
    "lease_views",
    "run_plan",
    "serial_outcomes",
    "view",
    "write_leases",
]

#: What a transaction "returns" in an outcome when it ended with ``StorageConflictError``.
CONFLICT = "conflict"

#: A lease as the checks compare it: (holder, expiresAt), or ``None`` when absent.
LeaseView = tuple[str | None, str] | None


def holder(record: StoredRecord | None) -> str | None:
    """The holder field of a lease record (``None`` for a released lease)."""
    assert record is not None, "expected a lease record, the read returned None"
    value = record.document.value["holder"]
    assert value is None or isinstance(value, str), (
        f"the lease record's holder must read back as written (a string or null), got {value!r}"
    )
    return value


def view(record: StoredRecord | None) -> LeaseView:
    """The comparable content of a lease record, ``None`` when absent."""
    if record is None:
        return None
    value = record.document.value
    expires = value["expiresAt"]
    assert isinstance(expires, str), (
        f"the lease record's expiresAt must read back as written (a string), got {expires!r}"
    )
    held = value["holder"]
    assert held is None or isinstance(held, str), (
        f"the lease record's holder must read back as written (a string or null), got {held!r}"
    )
    return (held, expires)


def write_leases(driver: StorageDriver, *records: NewStorageRecord) -> None:
    """Create ``records`` in one committed transaction, or in as few as the driver's limits allow when
    they are more than one transaction may hold (a check's setup, before its attempts begin)."""
    from ._mutations_support import batches

    for group in batches(records, driver.profile.limits):

        def create(tx: StorageTransaction, group: list[NewStorageRecord] = group) -> None:
            for record in group:
                tx.create(record)

        driver.transaction(create)


def lease_views(driver: StorageDriver, leases: Leases, names: Sequence[str]) -> dict[str, LeaseView]:
    """The committed content of each named lease, read in one transaction."""
    records = driver.transaction(lambda tx: tx.get([leases.key(name) for name in names]))
    return {name: view(record) for name, record in zip(names, records, strict=True)}


@dataclass
class Attempts:
    """Counts the attempts of one transaction callback (the callback calls ``begin()`` first)."""

    count: int = 0
    transactions: list[object] = field(default_factory=list)

    def begin(self, tx: object) -> int:
        self.count += 1
        self.transactions.append(tx)
        return self.count


# -- plans: reads, then writes decided from what was read -------------------------------------


@dataclass(frozen=True)
class PlanRead:
    """One read step: a point read of ``names`` (in order), or, when ``names`` is empty, an index scan."""

    names: tuple[str, ...] = ()

    @property
    def is_query(self) -> bool:
        return not self.names


@dataclass(frozen=True)
class PlanWrite:
    """One write decided after the reads: ``hold`` or ``release`` the lease ``name``, or ``delete`` it.

    A lease the plan point-read is replaced (or created, when it read as
    absent); one it did not read is created blindly; ``delete`` only touches
    a lease read as present.
    """

    name: str
    kind: str
    at: int = 0


@dataclass(frozen=True)
class Plan:
    label: str
    reads: tuple[PlanRead, ...]
    writes: tuple[PlanWrite, ...]


def _digest(observed: object) -> str:
    return hashlib.blake2s(repr(observed).encode(), digest_size=4).hexdigest()


class _TransactionLike:
    """The subset of ``StorageTransaction`` a plan uses (a driver attempt or the model)."""

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        raise NotImplementedError

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        raise NotImplementedError

    def create(self, record: NewStorageRecord) -> None:
        raise NotImplementedError

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        raise NotImplementedError

    def delete(self, current: StoredRecord) -> None:
        raise NotImplementedError


def run_plan(
    tx: StorageTransaction | _TransactionLike,
    leases: Leases,
    plan: Plan,
    hook: Callable[[int], None] | None = None,
) -> tuple[object, ...]:
    """Run ``plan`` in ``tx`` and return what it observed.

    ``hook(i)`` runs before read step ``i``, before the writes (``i ==
    len(reads)``) and after them (``len(reads) + 1``): that is where an
    interleaving check starts its competitor. Every written holder embeds a
    digest of everything observed so far, so a write made from a stale view
    differs from the same write made from a current one.
    """
    observed: list[object] = []
    seen: dict[str, StoredRecord | None] = {}
    for step, read in enumerate(plan.reads):
        if hook is not None:
            hook(step)
        if read.is_query:
            page = tx.query_candidates(leases.query())
            observed.append(("query", tuple(str(ref.key.id[1]) for ref in page.items)))
        else:
            records = tx.get([leases.key(name) for name in read.names])
            seen.update(zip(read.names, records, strict=True))
            observed.append(
                ("get", tuple((name, view(r)) for name, r in zip(read.names, records, strict=True)))
            )
    if hook is not None:
        hook(len(plan.reads))
    digest = _digest(observed)
    for write in plan.writes:
        new_holder = None if write.kind == "release" else f"{plan.label}-{write.name}-{digest}"
        record = leases.record(write.name, at=write.at, holder=new_holder)
        if write.name in seen:
            current = seen[write.name]
            if current is None:
                if write.kind != "delete":
                    tx.create(record)
            elif write.kind == "delete":
                tx.delete(current)
            else:
                tx.replace(current, record)
        elif write.kind != "delete":
            tx.create(record)
    if hook is not None:
        hook(len(plan.reads) + 1)
    return tuple(observed)


class _ModelConflict(Exception):
    """A blind create met an existing record: in a serial world that transaction cannot commit."""


class LeaseModel(_TransactionLike):
    """One serial attempt over a dictionary of lease records (encoded key -> record)."""

    def __init__(self, state: Mapping[str, StoredRecord]) -> None:
        self.state = dict(state)
        self._staged: dict[str, StoredRecord | None] = {}

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        return [self.state.get(key.encoded) for key in keys]

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        hits = sorted(
            (entry.sort, encoded, record.key)
            for encoded, record in self.state.items()
            for entry in record.indexes
            if entry.index is command.index
            and entry.partition == command.partition
            and command.range.contains(entry.sort)
        )
        return QueryRecordsResult(
            tuple(StorageIndexReference(key, sort) for sort, _, key in hits[: command.limit])
        )

    def _put(self, record: NewStorageRecord | None, key: StorageRecordKey) -> None:
        self._staged[key.encoded] = (
            None if record is None else StoredRecord.committed(record, StorageRecordVersion("1"))
        )

    def create(self, record: NewStorageRecord) -> None:
        if record.key.encoded in self.state:
            raise _ModelConflict(str(record.key))
        self._put(record, record.key)

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        self._put(record, record.key)

    def delete(self, current: StoredRecord) -> None:
        self._put(None, current.key)

    def committed(self) -> dict[str, StoredRecord]:
        state = dict(self.state)
        for encoded, record in self._staged.items():
            if record is None:
                state.pop(encoded, None)
            else:
                state[encoded] = record
        return state


Outcome = tuple[tuple[tuple[str, LeaseView], ...], tuple[object, ...]]


def serial_outcomes(
    leases: Leases, names: Sequence[str], initial: Iterable[NewStorageRecord], plans: Sequence[Plan]
) -> set[Outcome]:
    """Every (final state of ``names``, per-plan result) some serial execution can produce.

    A plan may also end in a conflict without effect (a driver may give up
    after its attempt budget; a blind create of an existing key can never
    commit), so every subset of the plans, in every order, is a serial
    execution; a plan left out reports ``CONFLICT``.
    """
    start = {
        record.key.encoded: StoredRecord.committed(record, StorageRecordVersion("1")) for record in initial
    }
    outcomes: set[Outcome] = set()
    indices = range(len(plans))
    for size in range(len(plans) + 1):
        for chosen in itertools.permutations(indices, size):
            state = dict(start)
            results: list[object] = [CONFLICT] * len(plans)
            for index in chosen:
                model = LeaseModel(state)
                try:
                    results[index] = run_plan(model, leases, plans[index])
                except _ModelConflict:
                    continue
                state = model.committed()
            final = tuple((name, view(state.get(leases.key(name).encoded))) for name in names)
            outcomes.add((final, tuple(results)))
    return outcomes


def conflict_or(run: Callable[[], object]) -> object:
    """``run()``'s value, or ``CONFLICT`` when it ends with ``StorageConflictError``."""
    try:
        return run()
    except StorageConflictError:
        return CONFLICT
