"""A differential workload: the driver under test and the reference driver run the same random program.

A *program* is a sequence of steps drawn over every dimension at once: which
of several driver instances runs the step, how far the injected clock jumps
before it, which table and which key shapes a write touches (environments and
run ids that are prefixes of one another, code points from the whole of
Unicode), what JSON shape a document carries (deep nesting, every number
spelling the codecs accept), whether the callback raises (an ``Exception``, a
``BaseException`` subclass), and which index, partition, range, direction,
page size and selection mode a scan uses.

Each step runs on the driver under test and on a fresh reference store
(``runlane_conformance.local``, given the same limits), strictly one after
the other. With no two transactions in flight at once, the contract allows
exactly one outcome for each step: the serial one (competing steps below
excepted). So every observable must
match: what each point read returns position by position (documents, index
entries, misses), the joined pages of each scan, the type of each error, and,
at the end of the program, every key and every index scope the program
touched. Versions are opaque and never compared by value: each driver's own
versions must follow the contract's rules (equal within a read and while a
record is unchanged, new on each commit that writes it, never handed out
again for the key). An eventual index is settled before it is compared.

After the drawn steps, a *sweep* crosses each table of the catalogue (a drawn
half of them per program) with what its records meet: neighbours whose run ids
or names prefix one another and whose dates lie across 2038, another
environment, a read on one instance after others committed, two transactions
that overlap (a write skew, two blind creates of one key), and an identical
rewrite. Overlapping transactions are the one place the serial outcome is not
unique: the reference runs both serial orders from the same state, and the
driver's answers and the state it leaves must be one of the two. Appends (and
callbacks that raise after them) are drawn too, and the read-back covers
stream heads and the operator read model.

A mismatch raises ``Divergence``: the rule family it breaks (the requirement
the check reports), the program up to the step that diverged, and both
answers in words; Hypothesis shrinks the program first.

``COVERAGE`` records which cells of the dimension matrix the run exercised
(``benchmarks/differential_matrix.py`` prints it).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from runlane_conformance.contract.catalog import (
    StorageCandidateMode,
    StorageIndexName,
    StorageQueryDirection,
    StorageTableName,
)
from runlane_conformance.contract.cursors import parse_query_records_result
from runlane_conformance.contract.errors import (
    StorageConflictError,
    StorageCorruptionError,
    StorageCursorError,
    StorageError,
    StorageLimitError,
    StorageUnsupportedError,
    StorageUsageError,
    StorageValidationError,
)
from runlane_conformance.contract.json_boundary import thaw_json
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import indexes_are_eventual, until_store_indexed
from runlane_conformance.fixtures.hypothesis_profiles import stateful_step_count
from runlane_conformance.fixtures.interleave import Competitor, CompetitorPace, compete
from runlane_conformance.fixtures.records import BASE_TIME
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites._callback_errors import CallbackAbort
from runlane_conformance.suites._cursors_support import ScanItem, catalog_records
from runlane_conformance.suites._hypothesis_support import SearchBudget

__all__ = [
    "COVERAGE",
    "FAMILIES",
    "Divergence",
    "Program",
    "run_program",
]

#: What a program draws with: ``data.draw`` of a Hypothesis ``st.data()``.
Draw = Callable[..., Any]

# -- the rule families a divergence is reported under ---------------------------------------------------

#: Point reads, logical content, versions and errors: what a transaction reads and what it leaves.
READS = "reads"
#: Index scans: every index, partition, range, direction, page size, cursor and selection mode.
SCANS = "scans"
FAMILIES = (READS, SCANS)


class Divergence(AssertionError):
    """The driver under test answered a step differently from the one serial outcome the contract allows."""

    def __init__(self, family: str, message: str) -> None:
        super().__init__(message)
        self.family = family


# -- the dimension matrix ---------------------------------------------------------------------------------

#: Cells exercised by every program run in this process: (family, dimension, value) -> count.
COVERAGE: Counter[tuple[str, str, str]] = Counter()


def dimensions() -> dict[str, tuple[str, ...]]:
    """Every value each dimension of the matrix can take: a value never recorded is an empty cell."""
    return {
        "instance": tuple(str(n) for n in range(INSTANCES)),
        "process": ("this process", "another OS process"),
        "jump": tuple(JUMPS),
        "table": tuple(table.value for table in StorageTableName),
        "write": ("put", "delete", "blind"),
        "shape": (*_SHAPES, "template"),
        "raises": ("no", *RAISES),
        "outcome": ("committed", *(kind.__name__ for kind in _ERROR_KINDS)),
        "index": tuple(index.value for index in StorageIndexName),
        "direction": tuple(direction.value for direction in StorageQueryDirection),
        "via": ("query", "candidates", "exclusive"),
        "page": ("first-last", "first", "later", "later-last"),
        "range": tuple(f"{low}..{high}" for low in _ENDS for high in _ENDS),
        "fault": ("none", "lost commit reply", "broken connection"),
        "shift": tuple(name for name, _ in SHIFTS),
        "sweep": tuple(table.value for table in _tables()),
        "compete": ("write skew", "blind create"),
        "append": ("committed", *(kind.__name__ for kind in _ERROR_KINDS)),
        "operator": tuple(f"instance {n}" for n in range(INSTANCES)),
        "order": ("first, then second", "second, then first"),
        "repeated": ("no", "yes"),
        "readback index": tuple(index.value for index in StorageIndexName),
        "relation": (
            "descending is ascending reversed",
            "adjacent sub-ranges join to the range",
            "uncontended exclusive equals advisory",
            "every instance reads the same",
            "a tombstoned run vanishes everywhere at once",
            "a tombstoned run leaves the operator read model",
        ),
    }


_ENDS = ("open", "inclusive", "exclusive")


def _cover(family: str, **cells: object) -> None:
    for dimension, value in cells.items():
        COVERAGE[(family, dimension, str(value))] += 1


# -- key and value shapes -----------------------------------------------------------------------------------

#: Environments: "a" is a prefix of the next three, "a/b" joined naively with the run id "b/r" collides with
#: "a" and "a/b/r", and the last two reach the top of the code-point range.
ENVIRONMENTS = ("a", "ab", "a/b", "a\U0010ffff", "\u00e9\U0001f600")
#: Run ids, again prefixes of one another, one holding the separator a naive key join would use.
RUN_IDS = ("r", "r-1", "b/r", "r\U0010ffffz")
#: How far the injected clock may jump between two steps: nothing the contract keeps may expire.
#: How far a slot's dates are moved from its template's (2030): none, days, and past 2038-01-19 (where a
#: 32-bit timestamp column wraps).
SHIFTS: tuple[tuple[str, timedelta], ...] = (
    ("as drawn", timedelta(0)),
    ("days later", timedelta(days=3)),
    ("past 2038", timedelta(days=365 * 12)),
)
JUMPS: dict[str, timedelta] = {
    "none": timedelta(0),
    "seconds": timedelta(seconds=7),
    "hours": timedelta(hours=5),
    "days": timedelta(days=3),
    "years": timedelta(days=365 * 40),
}
_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=["Cs"]), max_size=6)
_NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from((0.1, 1e300, -1e-300, 5e-324, 2.5, 1e21, 123456789.125)),
)
_SHAPES = ("flat", "numbers", "nested", "deep", "unicode")


_NUMBER_LISTS = st.lists(_NUMBERS, min_size=1, max_size=4)
_NESTED: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | _NUMBERS | _TEXT | st.just({}) | st.just([]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_UNICODE = st.dictionaries(_TEXT, _TEXT, min_size=1, max_size=3)
_DEPTH = st.integers(20, 130)
_AMOUNT = st.integers(0, 99)


def _shape_value(draw: Draw, shape: str) -> Any:
    """A JSON value of ``shape`` for a document's free-form field (strategies built once: building
    them per draw dominated the cost of a program)."""
    if shape == "numbers":
        return draw(_NUMBER_LISTS)
    if shape == "unicode":
        return draw(_UNICODE)
    if shape == "deep":
        value: Any = draw(_NUMBERS)
        for level in range(draw(_DEPTH)):
            value = [value] if level % 2 else {"n": value}
        return value
    if shape == "nested":
        return draw(_NESTED)
    return {"amount": draw(_AMOUNT)}


@functools.cache
def _bases() -> tuple[NewStorageRecord, ...]:
    """One valid record of every table (the golden vectors), the templates every slot is made from."""
    return tuple(sorted(catalog_records(), key=lambda record: record.key.encoded))


def _substituted(value: Any, swaps: dict[str, str]) -> Any:
    if isinstance(value, str):
        return swaps.get(value, value)
    if isinstance(value, dict):
        return {key: _substituted(child, swaps) for key, child in value.items()}
    if isinstance(value, list):
        return [_substituted(child, swaps) for child in value]
    return value


def _shifted(value: Any, delta: timedelta) -> Any:
    """``value`` with every instant the contract's date codec reads moved by ``delta`` (all by the same
    amount, so the order between a record's own dates is kept)."""
    from runlane_conformance.contract.encodings import iso_date_codec

    if isinstance(value, str):
        try:
            return iso_date_codec.encode(iso_date_codec.decode(value) + delta)
        except (StorageError, ValueError, OverflowError):
            return value
    if isinstance(value, dict):
        return {key: _shifted(child, delta) for key, child in value.items()}
    if isinstance(value, list):
        return [_shifted(child, delta) for child in value]
    return value


def _rederived(table: StorageTableName, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` with the identities the contract derives from other fields (a step's token, a schedule's
    occurrence ids) computed again from them, so a moved template stays a valid record."""
    from runlane_conformance.contract.table_definitions import schedule_occurrence_id, step_token

    value = dict(value)
    if table is StorageTableName.STEPS:
        value["token"] = step_token(
            value["environment"], value["runId"], value["stepName"], int(value["sequence"])
        )
    elif table is StorageTableName.SCHEDULES:
        for at, identity in (
            ("nextOccurrenceAt", "nextOccurrenceId"),
            ("lastOccurrenceAt", "lastOccurrenceId"),
        ):
            if isinstance(value.get(at), str):
                value[identity] = schedule_occurrence_id(value["environment"], value["scheduleId"], value[at])
    return value


@functools.cache
def _variant(base: int, environment: int, run: int, shift: int = 0) -> NewStorageRecord:
    """Template ``base`` moved to environment and run id number ``environment`` and ``run``, its dates
    moved by ``SHIFTS[shift]``.

    The run id also renames the last component of the template's key when that is a name of its own
    (a lease, a queue, an idempotency key, a schedule), so every table has records that differ in a
    key component that prefixes another's. Identities the contract derives (step tokens, occurrence
    ids) are derived again; a move that still makes an invalid record keeps what it can (the run id,
    then the name, then the environment), so every slot is a valid record.
    """
    record = _bases()[base]
    table = record.key.table
    thawed = thaw_json(record.document.value)
    assert isinstance(thawed, dict), f"template {base!r}: a document value is a JSON object, got {thawed!r}"
    value: dict[str, Any] = thawed
    if shift:
        moved = _shifted(value, SHIFTS[shift][1])
        try:
            record = build_storage_record(table, _rederived(table, moved))
            value = moved
        except (StorageError, ValueError, KeyError, TypeError):
            pass
    old_environment, old_run = value.get("environment"), value.get("runId")
    name = record.key.id[-1] if record.key.id else None
    environments = {old_environment: ENVIRONMENTS[environment]} if isinstance(old_environment, str) else {}
    runs = {old_run: RUN_IDS[run]} if isinstance(old_run, str) else {}
    names = (
        {name: RUN_IDS[run]}
        if isinstance(name, str) and name not in (old_environment, old_run) and name in value.values()
        else {}
    )
    for attempt in (
        {**environments, **runs, **names},
        {**environments, **runs},
        {**environments, **names},
        environments,
    ):
        try:
            moved = _substituted(value, attempt)
            assert isinstance(moved, dict)
            return build_storage_record(table, _rederived(table, moved))
        except (StorageError, ValueError, KeyError, TypeError, AssertionError):
            continue
    return record


@dataclass(frozen=True)
class Slot:
    """A record place: a template moved to an environment and run id, with a value shape when it has a
    free-form field. Two slots with equal ``key`` are the same record place."""

    base: int
    environment: int
    run: int
    shift: int = 0

    @property
    def template(self) -> NewStorageRecord:
        return _variant(self.base, self.environment, self.run, self.shift)

    def record(self, shape: str, payload: Any) -> NewStorageRecord:
        template = self.template
        value = thaw_json(template.document.value)
        assert isinstance(value, dict), (
            f"template {self.base!r}: a document value is a JSON object, got {value!r}"
        )
        for free in ("input", "payload"):
            if free in value and shape != "template":
                value[free] = payload
                try:
                    return build_storage_record(template.key.table, value)
                except (StorageError, ValueError):
                    return template
        return template

    @property
    def free_field(self) -> bool:
        """Whether the template has a free-form JSON field a value shape can fill."""
        value = self.template.document.value
        return "input" in value or "payload" in value

    @property
    def table(self) -> StorageTableName:
        return self.template.key.table

    def __str__(self) -> str:
        key = self.template.key
        return f"{key.table.value}{tuple(key.id)!r}"


# -- steps ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One planned mutation: ``put`` creates or replaces what the attempt read, ``delete`` removes what it
    read, ``blind`` creates without reading first (a conditional insert of a key perhaps present)."""

    slot: Slot
    kind: str
    record: NewStorageRecord
    shape: str

    def __str__(self) -> str:
        return f"{self.kind} {self.slot} ({self.shape})"


@dataclass(frozen=True)
class Transact:
    """A transaction on instance ``instance``: point reads (duplicates kept), writes, maybe a raise."""

    instance: int
    reads: tuple[Slot, ...]
    writes: tuple[Write, ...]
    raises: str | None

    @property
    def read_slots(self) -> tuple[Slot, ...]:
        return self.reads + tuple(write.slot for write in self.writes if write.kind != "blind")

    def __str__(self) -> str:
        parts = [f"instance {self.instance}: transaction reading {[str(s) for s in self.read_slots]}"]
        parts.extend(f"  {write}" for write in self.writes)
        if self.raises:
            parts.append(f"  then raises {self.raises}")
        return "\n".join(parts)


@dataclass(frozen=True)
class Scan:
    """Every page of one scan on instance ``instance``, each page read separately."""

    instance: int
    index: StorageIndexName
    partition: str
    range: StorageQueryRange
    direction: StorageQueryDirection
    limit: int
    via: str  # "query", "candidates" or "exclusive"
    repeated: bool = False

    def command(self) -> QueryRecordsCommand:
        return QueryRecordsCommand(self.index, self.partition, self.limit, self.range, self.direction)

    def __str__(self) -> str:
        def bound(end: StorageRangeBound | None) -> str:
            return "open" if end is None else f"{'[' if end.inclusive else '('}{_decode_sort(end.value)}"

        return (
            f"instance {self.instance}: {'the same ' if self.repeated else ''}{self.via} scan of "
            f"{self.index.value} in {self.partition!r}, "
            f"{self.direction.value}, pages of {self.limit}, range {bound(self.range.lower)} .. "
            f"{bound(self.range.upper)}"
        )


@dataclass(frozen=True)
class Jump:
    """The injected clock of every instance moves forward by ``by``."""

    name: str

    def __str__(self) -> str:
        return f"clock jumps forward by {self.name} ({JUMPS[self.name]})"


@dataclass(frozen=True)
class Compete:
    """Two transactions that overlap: ``second`` runs whole on another instance while ``first`` is open
    (after its first attempt's reads, before its writes).

    ``second`` reads what ``first`` writes and writes what ``first`` read (a write skew), or both
    blindly create one key: whichever order a driver picks (an optimistic one makes ``first`` conflict
    and replay, a locking one makes ``second`` wait), the answers and the state left must be those of
    one of the two serial orders.
    """

    kind: str
    first: Transact
    second: Transact

    def __str__(self) -> str:
        return (
            f"{self.kind}: {self.first}\n  and, after its first attempt's reads, {self.second}\n"
            "  (the two overlap: the outcome of one of the two serial orders is expected)"
        )


@dataclass(frozen=True)
class Append:
    """An append of ``count`` observations to one environment's stream on instance ``instance`` (the
    attempt perhaps raising after it appended)."""

    instance: int
    environment: int
    count: int
    raises: str | None

    def command(self, tag: str) -> Any:
        from runlane_conformance.suites._append_support import batch

        return batch(ENVIRONMENTS[self.environment], tag, self.count)

    def __str__(self) -> str:
        raised = f", then raises {self.raises}" if self.raises else ""
        return (
            f"instance {self.instance}: appends {self.count} observations to the stream of "
            f"{ENVIRONMENTS[self.environment]!r}{raised}"
        )


Step = Transact | Scan | Jump | Compete | Append


def _decode_sort(encoded: str) -> str:
    from runlane_conformance.contract.encodings import storage_tuple_codec

    try:
        return repr(storage_tuple_codec.decode(encoded))
    except (StorageError, ValueError):
        return repr(encoded)


class Boom(Exception):
    """Raised by a callback on purpose: the attempt rolls back and the same exception reaches the caller."""


RAISES: dict[str, type[BaseException]] = {"Exception": Boom, "BaseException": CallbackAbort}


# -- drawing a program ---------------------------------------------------------------------------------------

#: A slot's date shift (an index into ``SHIFTS``): most keep the template's dates.
_SHIFT = st.sampled_from((0, 0, 1, 2))
_CHOICE = st.sampled_from(("fresh", "fresh", "again", "other run", "other run", "other template"))


@functools.cache
def _tables() -> tuple[StorageTableName, ...]:
    """Every table a template exists for (all but the stream heads, which only ``append`` writes)."""
    return tuple(sorted({base.key.table for base in _bases()}, key=lambda table: table.value))


_TABLES = st.deferred(lambda: st.sampled_from(_tables()))


@functools.cache
def _templates_of(table: StorageTableName) -> tuple[int, ...]:
    return tuple(i for i, base in enumerate(_bases()) if base.key.table is table)


@dataclass
class Program:
    """Draws steps one at a time (each choice may depend on what the program wrote so far)."""

    instances: int
    limits: StorageLimits
    exclusive: bool
    append: bool = False
    slots: list[Slot] = field(default_factory=list)
    written: dict[str, NewStorageRecord] = field(default_factory=dict)
    scans: list[Scan] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Each step is one draw of a composite strategy built once per program: Hypothesis checks its
        # global random state on every ``data.draw``, which cost more than running the step.
        self.steps: st.SearchStrategy[Step] = st.composite(lambda draw: self.draw(draw))()
        self.writes: st.SearchStrategy[Transact] = st.composite(lambda draw: self._transact(draw))()
        self.sweeps: st.SearchStrategy[list[Step]] = st.composite(lambda draw: self.sweep(draw))()
        self.scopes: st.SearchStrategy[tuple[Scan, int]] = st.composite(
            lambda draw: (self._scan(draw), draw(st.integers(0, 50)))
        )()

    def _slot(self, draw: Draw) -> Slot:
        """A slot: one used before, a neighbour of one (same partition, another key), or a fresh one.

        Neighbours fill index partitions with several entries, so scans have second pages and ranges
        have something to cut; they share a table and environment and differ in the run id (ids that
        are prefixes of one another) or in the template.
        """
        choice = draw(_CHOICE) if self.slots else "fresh"
        if choice == "again":
            return self.slots[draw(st.integers(0, len(self.slots) - 1))]
        if choice in ("other run", "other template"):
            near = self.slots[draw(st.integers(0, len(self.slots) - 1))]
            if choice == "other run":
                slot = Slot(near.base, near.environment, draw(st.integers(0, len(RUN_IDS) - 1)), draw(_SHIFT))
            else:
                siblings = _templates_of(near.table)
                slot = Slot(
                    siblings[draw(st.integers(0, len(siblings) - 1))], near.environment, near.run, near.shift
                )
        else:
            siblings = _templates_of(draw(_TABLES))
            slot = Slot(
                siblings[draw(st.integers(0, len(siblings) - 1))],
                draw(st.integers(0, len(ENVIRONMENTS) - 1)),
                draw(st.integers(0, len(RUN_IDS) - 1)),
                draw(_SHIFT),
            )
        self.slots.append(slot)
        return slot

    def draw(self, draw: Draw) -> Step:
        kinds = ("write", "write", "write", "scan", "scan", "jump") + (("append",) if self.append else ())
        kind = draw(st.sampled_from(kinds))
        if kind == "jump":
            return Jump(draw(st.sampled_from(tuple(JUMPS))))
        if kind == "append":
            return Append(
                draw(st.integers(0, self.instances - 1)),
                draw(st.integers(0, len(ENVIRONMENTS) - 1)),
                draw(st.integers(1, 3)),
                draw(st.sampled_from((None, None, None, "Exception", "BaseException"))),
            )
        if kind == "scan" and self.written:
            return self._scan(draw)
        return self._transact(draw)

    def _transact(self, draw: Draw) -> Transact:
        instance = draw(st.integers(0, self.instances - 1))
        targets: dict[str, Slot] = {}
        for _ in range(draw(st.integers(1, 3))):
            slot = self._slot(draw)
            targets.setdefault(slot.template.key.encoded, slot)
        writes = []
        for slot in targets.values():
            kind = draw(st.sampled_from(("put", "put", "put", "delete", "blind")))
            shape = draw(st.sampled_from(_SHAPES)) if slot.free_field else "template"
            record = slot.record(shape, _shape_value(draw, shape) if shape != "template" else None)
            writes.append(Write(slot, kind, record, shape))
        reads = tuple(self._slot(draw) for _ in range(draw(st.integers(0, 2))))
        raises = draw(st.sampled_from((None, None, None, None, None, None, "Exception", "BaseException")))
        return self._fit(Transact(instance, reads, tuple(writes), raises))

    def _fit(self, step: Transact) -> Transact:
        """``step`` cut to what one attempt may do under the driver's limits (reads first, then writes)."""
        reads, writes = list(step.reads), list(step.writes)

        def fits() -> bool:
            positions = len(reads) + sum(1 for w in writes if w.kind != "blind")
            keys = {_key(s) for s in reads} | {_key(w.slot) for w in writes}
            # Written documents count toward the byte limits; deletes and reads add no bytes.
            sizes = [w.record.document.size for w in writes if w.kind != "delete"]
            return (
                positions <= self.limits.max_point_reads
                and len(keys) <= self.limits.max_transaction_records
                and sum(sizes) <= self.limits.max_transaction_bytes
                and all(size <= self.limits.max_record_bytes for size in sizes)
            )

        while not fits():
            if reads:
                reads.pop()
            else:
                writes.pop()
        return Transact(step.instance, tuple(reads), tuple(writes), step.raises)

    def _scan(self, draw: Draw) -> Scan:
        # A third of the scans repeat an earlier one, on an instance drawn again: the same command after
        # other instances committed must see their commits (a page cache per instance would not).
        if self.scans and draw(st.integers(0, 2)) == 0:
            earlier = self.scans[draw(st.integers(0, len(self.scans) - 1))]
            return replace(earlier, instance=draw(st.integers(0, self.instances - 1)), repeated=True)
        scan = self._fresh_scan(draw)
        self.scans.append(scan)
        return scan

    def _fresh_scan(self, draw: Draw) -> Scan:
        records = list(self.written.values())
        entries = [entry for record in records for entry in record.indexes]
        if not entries:
            return Scan(
                0, StorageIndexName.LEASES_BY_EXPIRY, "a", StorageQueryRange(), *self._scan_shape(draw)
            )
        # Of two entries drawn, the one whose scope holds more: scans with second pages, cuttable ranges.
        population = Counter((e.index, e.partition) for e in entries)
        entry = max(
            (entries[draw(st.integers(0, len(entries) - 1))] for _ in range(2)),
            key=lambda e: population[(e.index, e.partition)],
        )
        sorts = sorted(
            {
                other.sort
                for other in entries
                if other.index is entry.index and other.partition == entry.partition
            }
        )

        def bound() -> StorageRangeBound | None:
            if draw(st.integers(0, 2)) == 0:
                return None
            return StorageRangeBound(sorts[draw(st.integers(0, len(sorts) - 1))], draw(st.booleans()))

        scope = StorageQueryRange(bound(), bound())
        instance = draw(st.integers(0, self.instances - 1))
        direction, limit, via = self._scan_shape(draw)
        return Scan(instance, entry.index, entry.partition, scope, direction, limit, via)

    def _scan_shape(self, draw: Draw) -> tuple[StorageQueryDirection, int, str]:
        direction = draw(st.sampled_from(tuple(StorageQueryDirection)))
        limit = draw(st.integers(1, max(1, min(3, self.limits.max_query_results))))
        vias = ("query", "candidates", "exclusive") if self.exclusive else ("query", "candidates")
        return direction, limit, draw(st.sampled_from(vias))

    def note(self, step: Step) -> None:
        transacts = (step.first, step.second) if isinstance(step, Compete) else (step,)
        for transact in transacts:
            if isinstance(transact, Transact):
                for write in transact.writes:
                    self.written[write.record.key.encoded] = write.record

    def _write(self, draw: Draw, slot: Slot, kind: str) -> Write:
        shape = draw(st.sampled_from(_SHAPES)) if slot.free_field else "template"
        return Write(
            slot, kind, slot.record(shape, _shape_value(draw, shape) if shape != "template" else None), shape
        )

    def sweep(self, draw: Draw) -> list[Step]:
        """After the drawn steps, each table of the catalogue (a drawn half of them; every table over a
        search's programs) crossed with what its records meet: instances, prefix run ids, another
        environment, shifted dates, overlapping transactions and identical rewrites.

        Per table, three slots of one drawn template: ``near`` and ``tie`` share an environment and
        differ in run ids the first prefixes (ties and second pages in every index of the table),
        ``far`` sits in another environment (partition isolation). Then: instance c reads ``near`` and
        ``far``; instance a reads ``near`` and writes ``far`` while instance b reads ``far`` and writes
        ``near`` (a write skew on perhaps absent keys); c reads both again (what another instance
        committed is what every instance reads); a and another instance blindly create ``tie`` at
        once (one winner); b rewrites ``near`` with identical content and a reads it (a new version).
        """
        order = draw(st.permutations(range(self.instances)))
        a, b, c = order[0], order[1 % len(order)], order[2 % len(order)]
        contended = (
            self.instances > 1 and min(self.limits.max_transaction_records, self.limits.max_point_reads) >= 4
        )
        steps: list[Step] = []
        for table in _tables():
            if not draw(st.booleans()):
                continue
            siblings = _templates_of(table)
            base = siblings[draw(st.integers(0, len(siblings) - 1))]
            environment = draw(st.integers(0, len(ENVIRONMENTS) - 1))
            elsewhere = (environment + draw(st.integers(1, len(ENVIRONMENTS) - 1))) % len(ENVIRONMENTS)
            shift = draw(_SHIFT)
            near = Slot(base, environment, 0, shift)
            tie = Slot(base, environment, draw(st.integers(1, len(RUN_IDS) - 1)), shift)
            late = Slot(
                base,
                environment,
                draw(st.integers(1, len(RUN_IDS) - 1)),
                0 if shift == len(SHIFTS) - 1 else len(SHIFTS) - 1,
            )
            far = Slot(base, elsewhere, 0, draw(_SHIFT))
            if len({_key(near), _key(tie), _key(far)}) < 3:
                continue  # a template whose key ignores the run or environment: nothing to cross
            _cover(READS, sweep=table.value)
            to_far, to_near = self._write(draw, far, "put"), self._write(draw, near, "put")
            look = self._fit(Transact(c, (near, far), (), None))
            steps.append(look)
            # Instance c scans near's index scopes before and after the others commit into them (with a
            # read of its own in between): what it lists the second time must include their commits.
            scopes = [
                Scan(
                    c,
                    entry.index,
                    entry.partition,
                    StorageQueryRange(),
                    StorageQueryDirection.ASCENDING,
                    1,
                    "query",
                )
                for entry in near.template.indexes[:1]
            ]
            steps.extend(scopes)
            if contended:
                steps.append(
                    Compete(
                        "write skew",
                        self._fit(Transact(a, (near,), (to_far,), None)),
                        self._fit(Transact(b, (far,), (to_near,), None)),
                    )
                )
            else:
                steps.append(self._fit(Transact(a, (near,), (to_far,), None)))
                steps.append(self._fit(Transact(b, (far,), (to_near,), None)))
            steps.extend(replace(scan, repeated=True) for scan in scopes)
            steps.append(look)
            create = self._write(draw, tie, "blind")
            if contended:
                steps.append(
                    Compete(
                        "blind create",
                        self._fit(Transact(a, (), (create,), None)),
                        self._fit(Transact(c if c != a else b, (), (create,), None)),
                    )
                )
            else:
                steps.append(self._fit(Transact(a, (), (create,), None)))
                steps.append(self._fit(Transact(b, (), (create,), None)))
            # b rewrites near with identical content (a new version all the same) and adds ``late``, a
            # neighbour whose dates lie across 2038-01-19 from near's (past it when near's are not).
            steps.append(self._fit(Transact(b, (), (to_near, self._write(draw, late, "put")), None)))
            steps.append(self._fit(Transact(a, (near, tie), (), None)))
        return steps


def _key(slot: Slot) -> str:
    return slot.template.key.encoded


# -- running a step on one driver ----------------------------------------------------------------------------

Content = tuple[str, frozenset[Any]] | None


def _content(record: StoredRecord | NewStorageRecord | None) -> Content:
    return None if record is None else (record.document.text, frozenset(record.indexes))


@dataclass(frozen=True)
class Answer:
    """What one driver did with one transaction: the reads it returned, or the kind of error it raised."""

    reads: tuple[Content, ...] | None
    versions: tuple[str | None, ...]
    error: str | None

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {self.error}"
        shown = [_describe_content(content) for content in self.reads or ()]
        return f"committed, having read {shown}"


def _describe_content(content: Content) -> str:
    if content is None:
        return "absent"
    text, indexes = content
    return f"{text[:160]}{'...' if len(text) > 160 else ''} with {len(indexes)} index entries"


_ERROR_KINDS: tuple[type[BaseException], ...] = (
    StorageConflictError,
    StorageLimitError,
    StorageCursorError,
    StorageValidationError,
    StorageUnsupportedError,
    StorageCorruptionError,
    StorageUsageError,
    Boom,
    CallbackAbort,
)


def error_kind(error: BaseException) -> str:
    """The contract's name for what ``error`` means: its family, never its message or driver class."""
    for kind in _ERROR_KINDS:
        if isinstance(error, kind):
            return kind.__name__
    return f"{type(error).__name__} (not a contract error)"


def run_transact(
    driver: StorageDriver, step: Transact, *, after_reads: Callable[[int], None] | None = None
) -> Answer:
    """``step`` as one callback on ``driver``; errors (any ``BaseException``) become their kind.
    ``after_reads(attempt)`` runs in each attempt between the reads and the writes (attempts count
    from 1)."""
    keys = [s.template.key for s in step.read_slots]
    attempts = [0]

    def body(tx: StorageTransaction) -> list[StoredRecord | None]:
        attempts[0] += 1
        got = list(tx.get(keys)) if keys else []
        if after_reads is not None:
            after_reads(attempts[0])
        # The attempt's time seals the reads; a driver that keys housekeeping (expiry, retention) on the
        # attempt times it has seen now sees the injected clock's jumps.
        tx.now()
        current = {key.encoded: record for key, record in zip(keys, got, strict=True)}
        for write in step.writes:
            existing = current.get(write.record.key.encoded)
            if write.kind == "blind" or (write.kind == "put" and existing is None):
                tx.create(write.record)
            elif write.kind == "put" and existing is not None:
                tx.replace(existing, write.record)
            elif existing is not None:
                tx.delete(existing)
        if step.raises is not None:
            raise RAISES[step.raises]("the callback raised on purpose")
        return got

    try:
        got = driver.transaction(body)
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return Answer(None, (), error_kind(error))
    return Answer(
        tuple(_content(record) for record in got),
        tuple(None if record is None else record.version.value for record in got),
        None,
    )


def _candidates(tx: StorageTransaction, *, command: QueryRecordsCommand, mode: StorageCandidateMode) -> Any:
    return tx.query_candidates(command, mode=mode)


def run_scan(
    driver: StorageDriver, step: Scan, *, max_pages: int, family: str = SCANS
) -> tuple[list[ScanItem], list[int]]:
    """Every page of ``step`` joined, and each page's size; each page read in its own attempt."""
    command = step.command()
    items: list[ScanItem] = []
    sizes: list[int] = []
    current = command
    mode = StorageCandidateMode.EXCLUSIVE if step.via == "exclusive" else StorageCandidateMode.ADVISORY
    for _ in range(max_pages):
        if step.via == "query":
            raw: object = driver.query(current)
        else:
            page_command = current
            raw = driver.transaction(functools.partial(_candidates, command=page_command, mode=mode))
        try:
            page = parse_query_records_result(current, raw)
        except StorageError as error:
            raise Divergence(
                family,
                f"{step}: a page broke the query contract ({error_kind(error)}: {error})",
            ) from None
        assert len(page.items) <= step.limit, (
            f"a page of limit {step.limit} returned {len(page.items)} references"
        )
        items.extend((item.sort, item.key.encoded) for item in page.items)
        sizes.append(len(page.items))
        if page.cursor is None:
            return items, sizes
        current = command.with_cursor(page.cursor)
    raise Divergence(family, f"{step} did not end within {max_pages} pages: the cursors never run out")


# -- the clock -----------------------------------------------------------------------------------------------


@dataclass
class InjectedClock:
    """The clock every instance of both stores is connected with; only the program moves it."""

    at: datetime = BASE_TIME

    def __call__(self) -> datetime:
        return self.at


# -- the differential run ------------------------------------------------------------------------------------


@dataclass
class Sides:
    """The driver under test (several instances on one store) and the reference (one instance)."""

    tested: Sequence[StorageDriver]
    reference: StorageDriver
    store: object
    reference_store: object
    clock: InjectedClock
    history: list[str] = field(default_factory=list)
    versions: dict[str, set[str]] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    keys: dict[str, Any] = field(default_factory=dict)
    scopes: set[tuple[StorageIndexName, str]] = field(default_factory=set)

    def fail(self, family: str, what: str, tested: str, reference: str) -> Divergence:
        program = "\n".join(f"  step {n}: {line}" for n, line in enumerate(self.history, 1))
        return Divergence(
            family,
            f"{what}\nthe driver under test: {tested}\nthe one serial outcome (reference driver): "
            f"{reference}\nthe program, up to the step that diverged (step {len(self.history)}):\n{program}",
        )


def _check_versions(sides: Sides, step: Transact, answer: Answer) -> None:
    """The driver's own versions follow the contract's rules; their values are never compared."""
    assert answer.reads is not None, (
        f"step {step!r} committed but its answer holds no reads to judge versions by"
    )
    _judge_versions(
        sides,
        [
            (_key(slot), str(slot), version)
            for slot, version in zip(step.read_slots, answer.versions, strict=True)
        ],
    )


def _judge_versions(sides: Sides, reads: Sequence[tuple[str, str, str | None]]) -> None:
    """``reads`` (key, its name, the version read) of one committed read, judged by the version rules."""
    within: dict[str, str | None] = {}
    for key, slot, version in reads:
        if key in within and within[key] != version:
            raise sides.fail(
                READS,
                f"one get() returned two versions for {slot}",
                f"{within[key]} and {version}",
                "one version per key within a read",
            )
        within[key] = version
    for key, version in within.items():
        if version is None:
            sides.current.pop(key, None)
            continue
        seen = sides.versions.setdefault(key, set())
        if key in sides.dirty or key not in sides.current:
            if version in seen:
                raise sides.fail(
                    READS,
                    f"a commit wrote {key} but the record came back with version {version}, which this key "
                    "already had: every commit that writes a record gives it a new version",
                    f"version {version} again",
                    "a version never handed out for this key before",
                )
        elif sides.current[key] != version:
            raise sides.fail(
                READS,
                f"{key} changed version from {sides.current[key]} to {version} though nothing wrote it",
                f"version {version}",
                f"version {sides.current[key]} (unchanged record, unchanged version)",
            )
        seen.add(version)
        sides.current[key] = version
        sides.dirty.discard(key)


def do_transact(sides: Sides, step: Transact, pace: CompetitorPace | None = None) -> None:
    expected = run_transact(sides.reference, step)
    tested = sides.tested[step.instance]
    # An uncontended transaction's time paces how long a competitor may run before it counts as
    # made to wait (a locking driver then costs a few of these per competing step, not a second).
    got = run_transact(tested, step) if pace is None else pace.timed(lambda: run_transact(tested, step))
    _cover(
        READS,
        process="this process",
        fault="none",
        instance=step.instance,
        outcome=expected.error or "committed",
        raises=step.raises or "no",
        shapes="+".join(sorted({w.shape for w in step.writes})) or "read-only",
        tables="+".join(sorted({w.slot.table.value for w in step.writes})) or "none",
    )
    for write in step.writes:
        _cover(
            READS,
            table=write.slot.table.value,
            write=write.kind,
            shape=write.shape,
            shift=SHIFTS[write.slot.shift][0],
        )
    if got.error != expected.error or got.reads != expected.reads:
        raise sides.fail(READS, "a transaction's outcome differs", got.describe(), expected.describe())
    if got.error is None:
        _check_versions(sides, step, got)
        for write in step.writes:
            key = write.record.key.encoded
            sides.keys[key] = write.record.key
            sides.dirty.add(key)
            sides.scopes.update((entry.index, entry.partition) for entry in write.record.indexes)


def run_append(driver: StorageDriver, step: Append, tag: str) -> Answer:
    """``step`` as one callback on ``driver``: committed, or the kind of error it raised."""
    command = step.command(tag)

    def body(tx: StorageTransaction) -> list[StoredRecord | None]:
        # An appending attempt may not read the stream it appends to: the head is judged afterwards,
        # by the read-back of every key the program touched.
        got: list[StoredRecord | None] = []
        tx.append(command)
        if step.raises is not None:
            raise RAISES[step.raises]("the callback raised on purpose")
        return got

    try:
        got = driver.transaction(body)
    except BaseException as error:
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        return Answer(None, (), error_kind(error))
    return Answer(
        tuple(_content(record) for record in got),
        tuple(None if record is None else record.version.value for record in got),
        None,
    )


def do_append(sides: Sides, step: Append) -> None:
    """The append on both sides: same head read, same error kind; what it placed (its records and the new
    head) joins the keys and scopes the read-back compares."""
    from runlane_conformance.contract.streams import materialize_storage_append, read_storage_stream_position
    from runlane_conformance.suites._append_support import LAYOUT, OBSERVATIONS

    tag = f"a{len(sides.history)}"
    expected = run_append(sides.reference, step, tag)
    got = run_append(sides.tested[step.instance], step, tag)
    _cover(
        READS,
        instance=step.instance,
        append=expected.error or "committed",
        raises=step.raises or "no",
        table="stream_heads",
        write="append",
    )
    if got.error != expected.error or got.reads != expected.reads:
        raise sides.fail(READS, "an append's outcome differs", got.describe(), expected.describe())
    if got.error is not None:
        return
    command = step.command(tag)
    head_key = LAYOUT.head_key(command.partition)
    head = _read_all(sides.reference, [head_key])[0]
    # The reference has committed: its head now says where the batch ended, so where it began.
    end = read_storage_stream_position(OBSERVATIONS, command.partition, head)
    placed = materialize_storage_append(command, end - step.count)
    for record in (*placed.records, placed.head):
        sides.keys[record.key.encoded] = record.key
        sides.dirty.add(record.key.encoded)
        sides.scopes.update((entry.index, entry.partition) for entry in record.indexes)


def _read_all(driver: StorageDriver, keys: Sequence[Any]) -> list[StoredRecord | None]:
    return list(driver.transaction(lambda tx: list(tx.get(keys))))


def _restore(driver: StorageDriver, keys: Sequence[Any], wanted: Sequence[StoredRecord | None]) -> None:
    """Write ``wanted`` (contents read earlier) back over ``keys``: the reference's way to try the other
    serial order from the same state (versions move on, which the oracle never compares)."""

    def body(tx: StorageTransaction) -> None:
        for now, want in zip(tx.get(keys), wanted, strict=True):
            if _content(now) == _content(want):
                continue
            if want is None:
                assert now is not None, "a record that differs from an absent one is present"
                tx.delete(now)
                continue
            record = NewStorageRecord(want.key, want.document, want.indexes)
            if now is None:
                tx.create(record)
            else:
                tx.replace(now, record)

    driver.transaction(body)


def _outcome(answer: Answer) -> tuple[str | None, tuple[Content, ...] | None]:
    return answer.error, answer.reads


def do_compete(sides: Sides, step: Compete, pace: CompetitorPace) -> None:
    """Run ``step`` overlapped on the driver under test; its answers and the state it leaves must be one
    of the two serial orders', both computed on the reference from the same state."""
    first, second = step.first, step.second
    keys = list(
        {
            slot.template.key.encoded: slot.template.key
            for transact in (first, second)
            for slot in (*transact.read_slots, *(write.slot for write in transact.writes))
        }.values()
    )
    reference = sides.reference
    before = _read_all(reference, keys)
    one_two = (run_transact(reference, first), run_transact(reference, second))
    after_one_two = _read_all(reference, keys)
    _restore(reference, keys, before)
    second_alone = run_transact(reference, second)
    two_one = (run_transact(reference, first), second_alone)
    after_two_one = _read_all(reference, keys)
    serial = {
        "first, then second": (one_two, after_one_two),
        "second, then first": (two_one, after_two_one),
    }
    tested_second = sides.tested[second.instance]
    competitor: list[Competitor[Answer]] = []

    def start_second(attempt: int) -> None:
        if attempt == 1:
            competitor.append(compete(lambda: run_transact(tested_second, second), grace=pace.grace()))
            pace.note(competitor[0].finished_while_open)

    got_first = run_transact(sides.tested[first.instance], first, after_reads=start_second)
    got_second = competitor[0].settle() if competitor else run_transact(tested_second, second)
    observer = sides.tested[(first.instance + second.instance) % len(sides.tested)]
    state = [_content(record) for record in _read_all(observer, keys)]
    matched = [
        order
        for order, ((one, two), after) in serial.items()
        if (_outcome(got_first), _outcome(got_second)) == (_outcome(one), _outcome(two))
        and state == [_content(record) for record in after]
    ]
    _cover(READS, compete=step.kind, order=matched[0] if matched else "none")
    for write in (*first.writes, *second.writes):
        _cover(
            READS,
            table=write.slot.table.value,
            write=write.kind,
            shape=write.shape,
            shift=SHIFTS[write.slot.shift][0],
        )
    if not matched:

        def describe(one: Answer, two: Answer, after: Sequence[Content]) -> str:
            return (
                f"first {one.describe()}; second {two.describe()}; then "
                f"{[_describe_content(content) for content in after]}"
            )

        raise sides.fail(
            READS,
            "two overlapping transactions ended in neither serial order's outcome",
            describe(got_first, got_second, state),
            " or ".join(
                f"({order}) " + describe(one, two, [_content(record) for record in after])
                for order, ((one, two), after) in serial.items()
            ),
        )
    if matched[0] == "first, then second":
        _restore(reference, keys, after_one_two)
    for answer, transact in ((got_first, first), (got_second, second)):
        if answer.error is None:
            for write in transact.writes:
                key = write.record.key.encoded
                sides.keys[key] = write.record.key
                sides.dirty.add(key)
                sides.scopes.update((entry.index, entry.partition) for entry in write.record.indexes)


def do_scan(sides: Sides, step: Scan, *, eventual: bool, cover: bool = True) -> None:
    expected, _ = run_scan(sides.reference, step, max_pages=10_000)
    bound = len(expected) + 2

    def compare() -> None:
        got, sizes = run_scan(sides.tested[step.instance], step, max_pages=bound)
        if got != expected:
            raise sides.fail(
                SCANS,
                "the scan's pages, joined, differ from the one right answer",
                _describe_scan(got),
                _describe_scan(expected),
            )
        for position in range(len(sizes) if cover else 0):
            _cover(
                SCANS,
                page=("first" if position == 0 else "later")
                + ("-last" if position == len(sizes) - 1 else ""),
            )

    until_store_indexed(sides.store, compare, eventual=eventual)
    if not cover:
        return
    _cover(
        SCANS,
        process="this process",
        fault="none",
        instance=step.instance,
        index=step.index.value,
        direction=step.direction.value,
        via=step.via,
        range=f"{_end(step.range.lower)}..{_end(step.range.upper)}",
    )


def _variants(step: Scan) -> tuple[Scan, ...]:
    """The drawn scan, the same scope the other way round, and the same scope one entry per page.

    Running a scope three ways costs far less than drawing three scans, and every scope with two
    entries then has a second page in both directions, where paging and ordering bugs hide.
    """
    other = (
        StorageQueryDirection.DESCENDING
        if step.direction is StorageQueryDirection.ASCENDING
        else StorageQueryDirection.ASCENDING
    )
    return (
        step,
        replace(step, direction=other),
        replace(step, limit=1, direction=other if step.limit == 1 else step.direction),
    )


def _end(bound: StorageRangeBound | None) -> str:
    return "open" if bound is None else ("inclusive" if bound.inclusive else "exclusive")


def _describe_scan(items: Sequence[ScanItem]) -> str:
    from runlane_conformance.contract.encodings import storage_record_key_codec

    shown = []
    for sort, key in items[:12]:
        try:
            table, parts = storage_record_key_codec.decode_parts(key)
            name = f"{table}{parts!r}"
        except (StorageError, ValueError):
            name = key
        shown.append(f"{name} at {_decode_sort(sort)}")
    more = f" and {len(items) - 12} more" if len(items) > 12 else ""
    return f"{len(items)} references: {shown}{more}"


def compare_everything(
    sides: Sides, *, eventual: bool, limits: StorageLimits, scans: bool = True, pages: Sequence[int] = (1,)
) -> None:
    """Every key and every index scope the program touched, read back on each instance of the driver."""
    keys = list(sides.keys.values())
    for driver in (*sides.tested, sides.reference):
        driver.transaction(lambda tx: tx.now())  # every instance has now lived through the last jump
    chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records))
    for instance, driver in enumerate(sides.tested):
        for start in range(0, len(keys), chunk):
            part = keys[start : start + chunk]

            def read(tx: StorageTransaction, part: Sequence[Any] = part) -> list[StoredRecord | None]:
                found = list(tx.get(part))
                tx.now()
                return found

            records = driver.transaction(read)
            got = [_content(r) for r in records]
            expected = [_content(r) for r in sides.reference.transaction(read)]
            _judge_versions(
                sides,
                [
                    (
                        key.encoded,
                        f"{key.table.value}{tuple(key.id)!r}",
                        None if r is None else r.version.value,
                    )
                    for key, r in zip(part, records, strict=True)
                ],
            )
            for key, mine, theirs in zip(part, got, expected, strict=True):
                if mine != theirs:
                    raise sides.fail(
                        READS,
                        f"after the program, instance {instance} reads {key.table.value}{tuple(key.id)!r} "
                        "differently from the store's logical content",
                        _describe_content(mine),
                        _describe_content(theirs),
                    )
        _cover(READS, readback=f"instance {instance}")
    _compare_operator_reads(sides, eventual=eventual)
    if not scans:
        return
    # One entry per page: every scope holding two entries then continues a cursor in both directions;
    # a larger page then puts several entries (ties among them) in one page, in both directions.
    for index, partition in sorted(sides.scopes):
        for page in pages:
            for direction in StorageQueryDirection:
                step = Scan(
                    len(sides.tested) - 1, index, partition, StorageQueryRange(), direction, page, "query"
                )
                do_scan(sides, step, eventual=eventual, cover=False)
        _cover(SCANS, **{"readback index": index.value})


def _operator_view(
    driver: StorageDriver, environments: Sequence[str], runs: Sequence[tuple[str, str]]
) -> Any:
    """What the operator read model shows of ``environments`` and ``runs``: each environment's runs
    listed (pages of 2), and each run's own read and its events listed (pages of 2)."""
    from runlane_conformance.suites._operator_support import collect_pages, document_of

    operator: Any = driver
    page = max(1, min(2, driver.profile.limits.max_query_results))
    view: list[object] = []

    def runs_of(environment: str) -> Callable[[str | None], object]:
        return lambda cursor: operator.list_runs(environment, limit=page, cursor=cursor)

    def events_of(environment: str, run_id: str) -> Callable[[str | None], object]:
        return lambda cursor: operator.list_run_events(environment, run_id, limit=page, cursor=cursor)

    for environment in environments:
        listed = collect_pages(runs_of(environment), limit=page)
        view.append(("list_runs", environment, [document_of(item) for item in listed]))
    for environment, run_id in runs:
        found = operator.get_run(environment, run_id)
        view.append(("get_run", environment, run_id, None if found is None else document_of(found)))
        events = collect_pages(events_of(environment, run_id), limit=page)
        view.append(("list_run_events", environment, run_id, [document_of(item) for item in events]))
    return view


def _offers_operator_reads(driver: StorageDriver) -> bool:
    return all(callable(getattr(driver, name, None)) for name in ("get_run", "list_runs", "list_run_events"))


def _compare_operator_reads(sides: Sides, *, eventual: bool) -> None:
    """Where both drivers offer operator reads: every environment and run the program touched reads the
    same through them on each instance as on the reference (settled first on an eventual index)."""
    if not (_offers_operator_reads(sides.reference) and all(map(_offers_operator_reads, sides.tested))):
        return
    from runlane_conformance.contract.catalog import StorageTableName as Table

    runs = sorted(
        {
            (str(key.id[0]), str(key.id[1]))
            for key in sides.keys.values()
            if key.table in (Table.RUNS, Table.EVENTS, Table.TOMBSTONES) and len(key.id) >= 2
        }
    )
    environments = sorted({environment for environment, _ in runs})
    if not runs:
        return
    expected = _operator_view(sides.reference, environments, runs)
    for instance, driver in enumerate(sides.tested):

        def compare(driver: StorageDriver = driver, instance: int = instance) -> None:
            got = _operator_view(driver, environments, runs)
            for mine, theirs in zip(got, expected, strict=True):
                if mine != theirs:
                    raise sides.fail(
                        READS,
                        f"after the program, instance {instance}'s operator read {theirs[0]} of "
                        f"{theirs[1:-1]!r} differs",
                        repr(mine[-1])[:400],
                        repr(theirs[-1])[:400],
                    )

        until_store_indexed(sides.store, compare, eventual=eventual)
        _cover(READS, operator=f"instance {instance}")


def run_program(
    open_tested: Callable[[InjectedClock], tuple[object, Sequence[StorageDriver]]],
    open_reference: Callable[[InjectedClock, StorageLimits], tuple[object, StorageDriver]],
    draw: Draw,
    *,
    steps: int,
    instances: int,
    family_filter: str | None = None,
) -> Iterator[str]:
    """Run one random program of ``steps`` steps; yields each step's description as it runs.

    Raises ``Divergence`` at the first step whose answers differ.
    """
    clock = InjectedClock()
    store, tested = open_tested(clock)
    limits = tested[0].profile.limits
    reference_store, reference = open_reference(clock, limits)
    sides = Sides(tested, reference, store, reference_store, clock)
    eventual = indexes_are_eventual(tested[0])
    program = Program(
        instances,
        limits,
        bool(tested[0].profile.exclusive_candidates),
        append=bool(tested[0].profile.append) and bool(reference.profile.append),
    )
    pace = CompetitorPace()

    def run(step: Step) -> None:
        if isinstance(step, Jump):
            clock.at += JUMPS[step.name]
            _cover(READS, jump=step.name)
            _cover(SCANS, jump=step.name)
        elif isinstance(step, Transact):
            do_transact(sides, step, pace)
        elif isinstance(step, Compete):
            do_compete(sides, step, pace)
        elif isinstance(step, Append):
            do_append(sides, step)
        elif family_filter != READS:
            for variant in _variants(step):
                do_scan(sides, variant, eventual=eventual)
            _cover(SCANS, repeated="yes" if step.repeated else "no")
        program.note(step)

    for number in itertools.count(1):
        if number > steps:
            break
        step = draw(program.steps)
        sides.history.append(str(step))
        yield str(step)
        run(step)
    for step in draw(program.sweeps):
        sides.history.append(f"(sweep) {step}")
        yield str(step)
        run(step)
    pages = (1, draw(st.integers(2, max(2, min(3, limits.max_query_results)))))
    # Read back decades later: nothing the contract keeps may expire, whatever dates it carries.
    clock.at += JUMPS["years"]
    sides.history.append(
        "(after the program, the clock decades later) every touched key and index scope read back"
    )
    compare_everything(sides, eventual=eventual, limits=limits, scans=family_filter != READS, pages=pages)


def coverage_json() -> str:
    return json.dumps(sorted([[*cell, count] for cell, count in COVERAGE.items()]))


# -- metamorphic relations: what must hold whatever legitimate choices a driver makes ------------------------

RELATIONS = "relations"


@dataclass(frozen=True)
class Relation:
    """One scope to judge by relations: a range split at ``middle`` into two adjacent sub-ranges."""

    index: StorageIndexName
    partition: str
    range: StorageQueryRange
    limit: int

    def __str__(self) -> str:
        return (
            f"{self.index.value} in {self.partition!r}, range {_end(self.range.lower)} "
            f"{'' if self.range.lower is None else _decode_sort(self.range.lower.value)} .. "
            f"{_end(self.range.upper)} "
            f"{'' if self.range.upper is None else _decode_sort(self.range.upper.value)}"
            f", pages of {self.limit}"
        )


def _scan_items(
    driver: StorageDriver,
    index: StorageIndexName,
    partition: str,
    scope: StorageQueryRange,
    direction: StorageQueryDirection,
    limit: int,
    via: str,
    bound: int,
) -> list[ScanItem]:
    step = Scan(0, index, partition, scope, direction, limit, via)
    return run_scan(driver, step, max_pages=bound, family=RELATIONS)[0]


def check_relations(
    drivers: Sequence[StorageDriver], relation: Relation, keys: Sequence[Any], middle: int, *, bound: int
) -> None:
    """Every relation on ``relation``'s scope, with no reference: each side must equal the other.

    Raises ``Divergence(RELATIONS, ...)`` naming the relation that broke.
    """
    first = drivers[0]
    index, partition, scope, limit = relation.index, relation.partition, relation.range, relation.limit
    asc = StorageQueryDirection.ASCENDING
    desc = StorageQueryDirection.DESCENDING
    whole = _scan_items(first, index, partition, scope, asc, limit, "query", bound)

    def broke(name: str, got: Sequence[ScanItem], expected: Sequence[ScanItem]) -> Divergence:
        return Divergence(
            RELATIONS,
            f"relation broken: {name}\nscope: {relation}\ngot: {_describe_scan(got)}\n"
            f"the whole ascending scan: {_describe_scan(expected)}",
        )

    descending = _scan_items(first, index, partition, scope, desc, limit, "candidates", bound)
    _cover(RELATIONS, relation="descending is ascending reversed", index=index.value)
    if descending != list(reversed(whole)):
        raise broke("the descending scan is the ascending scan reversed", list(reversed(descending)), whole)
    if whole:
        split = whole[middle % len(whole)][0]
        # Cut at ``split`` both ways (it ends the first half, or starts the second), and read the
        # halves in both directions: each bound kind then meets each direction.
        for split_low in (True, False):
            first_half = StorageQueryRange(scope.lower, StorageRangeBound(split, split_low))
            second_half = StorageQueryRange(StorageRangeBound(split, not split_low), scope.upper)
            halves = _scan_items(first, index, partition, first_half, asc, limit, "query", bound)
            halves += _scan_items(first, index, partition, second_half, asc, limit, "candidates", bound)
            _cover(RELATIONS, relation="adjacent sub-ranges join to the range")
            if halves != whole:
                raise broke(
                    f"the range cut at {_decode_sort(split)} into two adjacent sub-ranges (ascending) "
                    "joins to the whole",
                    halves,
                    whole,
                )
            backwards = _scan_items(first, index, partition, second_half, desc, limit, "query", bound)
            backwards += _scan_items(first, index, partition, first_half, desc, limit, "candidates", bound)
            _cover(RELATIONS, relation="adjacent sub-ranges join to the range", direction="desc")
            if backwards != list(reversed(whole)):
                raise broke(
                    f"the range cut at {_decode_sort(split)} into two adjacent sub-ranges, each read "
                    "descending, joins to the whole reversed",
                    list(reversed(backwards)),
                    whole,
                )
    if first.profile.exclusive_candidates:
        for direction in (asc, desc):
            exclusive = _scan_items(first, index, partition, scope, direction, limit, "exclusive", bound)
            expected = whole if direction is asc else list(reversed(whole))
            _cover(RELATIONS, relation="uncontended exclusive equals advisory", direction=direction.value)
            if exclusive != expected:
                raise broke(
                    f"an uncontended exclusive selection ({direction.value}) returns what an advisory "
                    "one does",
                    exclusive if direction is asc else list(reversed(exclusive)),
                    whole,
                )
    for number, other in enumerate(drivers[1:], 2):
        theirs = _scan_items(other, index, partition, scope, asc, limit, "query", bound)
        _cover(RELATIONS, relation="every instance reads the same", instance=number - 1)
        if theirs != whole:
            raise broke(f"instance {number} scans what instance 1 scans", theirs, whole)
    if keys:
        readings = []
        for driver in drivers:
            records = driver.transaction(lambda tx: list(tx.get(keys)))
            readings.append([None if r is None else (_content(r), r.version.value) for r in records])
        for number, reading in enumerate(readings[1:], 2):
            if reading != readings[0]:
                changed = [
                    f"{key.table.value}{tuple(key.id)!r}"
                    for key, mine, theirs in zip(keys, reading, readings[0], strict=True)
                    if mine != theirs
                ]
                raise Divergence(
                    RELATIONS,
                    f"relation broken: every instance reads the same record and version after a commit\n"
                    f"instance {number} differs from instance 1 on {changed}",
                )


# -- the searches the model checks run (and the coverage benchmark runs directly) ----------------------------

#: Driver instances on the store under test; each step runs on one of them, drawn at random.
INSTANCES = 3
#: Programs per search: a fifth of the profile's examples (5 in quick, 20 in default), at most this many.
MAX_PROGRAMS = 40
#: Random writes before the relations are judged, and scopes judged per store.
RELATION_WRITES = 8
RELATION_SCOPES = 3


def program_count() -> int:
    """How many programs one search runs under the active Hypothesis profile (never the clock)."""
    return max(2, min(settings().max_examples // 5, MAX_PROGRAMS))


def _reference_store(limits: StorageLimits) -> Any:
    from runlane_conformance.local.harness import LocalHarness

    return LocalHarness(limits=limits).open_store()


def differential_search(
    harness: DriverHarness, family: str, budget: SearchBudget, *, seed: int | None = None
) -> None:
    """The profile's programs on ``harness`` against the reference; fails with the first divergence of
    ``family`` after Hypothesis shrank it. A divergence of another family ends that program quietly: its
    own check reports it, under its own requirement."""
    opened: list[Any] = []

    def open_tested(clock: InjectedClock) -> tuple[object, list[StorageDriver]]:
        store = harness.open_store()
        opened.append(store)
        return store, [store.connect(clock=clock) for _ in range(INSTANCES)]

    def open_reference(clock: InjectedClock, limits: StorageLimits) -> tuple[object, StorageDriver]:
        store = _reference_store(limits)
        opened.append(store)
        return store, store.connect(clock=clock)

    @settings(settings(), max_examples=program_count(), report_multiple_bugs=False)
    @given(data=st.data())
    def search(data: st.DataObject) -> None:
        if not budget.active():
            return
        try:
            for _step in run_program(
                open_tested,
                open_reference,
                data.draw,
                steps=stateful_step_count(),
                instances=INSTANCES,
                family_filter=family,
            ):
                budget.step()
                if budget.expired():
                    return
        except Divergence as divergence:
            if divergence.family != family:
                return
            budget.note_failure(str(divergence))
            raise AssertionError(
                f"{divergence}\nmodel.differential-{family}: no two transactions of the program overlap, so "
                "the contract allows exactly one outcome for each step"
            ) from None
        finally:
            while opened:
                opened.pop().close()

    (search if seed is None else hypothesis_seed(seed)(search))()


def relations_search(harness: DriverHarness, budget: SearchBudget, *, seed: int | None = None) -> None:
    """The profile's programs of random writes on ``harness``, then the relations on random scopes."""

    @settings(settings(), max_examples=program_count(), report_multiple_bugs=False)
    @given(data=st.data())
    def search(data: st.DataObject) -> None:
        if not budget.active():
            return
        store = harness.open_store()
        try:
            _relations_program(store, data, budget)
        finally:
            store.close()

    (search if seed is None else hypothesis_seed(seed)(search))()


def _relations_program(store: Any, data: st.DataObject, budget: SearchBudget) -> None:
    clock = InjectedClock()
    drivers = [store.connect(clock=clock) for _ in range(INSTANCES)]
    limits = drivers[0].profile.limits
    program = Program(INSTANCES, limits, bool(drivers[0].profile.exclusive_candidates))
    history: list[str] = []
    for _ in range(RELATION_WRITES):
        drawn = data.draw(program.writes)
        step = Transact(drawn.instance, drawn.reads, drawn.writes, None)
        history.append(str(step))
        if run_transact(drivers[step.instance], step).error is None:
            program.note(step)
        budget.step()
    keys = [record.key for record in program.written.values()]
    chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records))
    bound = len(program.written) + 2
    eventual = indexes_are_eventual(drivers[0])
    for _ in range(RELATION_SCOPES):
        if not program.written:
            break
        probe, middle = data.draw(program.scopes)
        relation = Relation(probe.index, probe.partition, probe.range, probe.limit)
        history.append(f"relations on {relation}")
        for start in range(0, max(1, len(keys)), chunk):
            part = keys[start : start + chunk]
            try:
                until_store_indexed(
                    store,
                    functools.partial(check_relations, drivers, relation, part, middle, bound=bound),
                    eventual=eventual,
                )
            except Divergence as divergence:
                text = "\n".join(f"  step {n}: {line}" for n, line in enumerate(history, 1))
                message = f"{divergence}\nthe program:\n{text}\nmodel.scan-relations"
                budget.note_failure(message)
                raise AssertionError(message) from None
        budget.step()
    flow = data.draw(tombstonings(INSTANCES))
    history.append(str(flow))
    try:
        run_tombstoning(drivers, flow, store, eventual=eventual)
    except Divergence as divergence:
        text = "\n".join(f"  step {n}: {line}" for n, line in enumerate(history, 1))
        message = f"{divergence}\nthe program:\n{text}\nmodel.scan-relations"
        budget.note_failure(message)
        raise AssertionError(message) from None
    budget.step()


# -- the core flow: a run tombstoned vanishes from every index and read model at once ---------------------


@dataclass(frozen=True)
class Tombstoning:
    """A run created on one instance (with events, steps and outbox messages), finished on another and
    tombstoned on a third: the core flow whose last commit must hide the run everywhere at once."""

    environment: str
    run_id: str
    instances: tuple[int, int, int]
    children: tuple[int, int, int]

    def __str__(self) -> str:
        return (
            f"run {self.environment!r}/{self.run_id!r}: created on instance {self.instances[0]} with "
            f"{self.children[0]} events, {self.children[1]} steps, {self.children[2]} messages; finished "
            f"on instance {self.instances[1]}; tombstoned on instance {self.instances[2]}"
        )


def tombstonings(instances: int) -> st.SearchStrategy[Tombstoning]:
    index = st.integers(0, instances - 1)
    return st.builds(
        Tombstoning,
        st.sampled_from(ENVIRONMENTS),
        st.sampled_from(RUN_IDS),
        st.tuples(index, index, index),
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 2)),
    )


def run_tombstoning(
    drivers: Sequence[StorageDriver], flow: Tombstoning, store: object, *, eventual: bool
) -> None:
    """Run ``flow``; then every scope the visible run was indexed in, on every instance, and the operator
    read model where offered, must show the tombstoned run exactly as its own record now says."""
    from runlane_conformance.contract.table_definitions import run_record_key, tombstone_record_key
    from runlane_conformance.core.pruning import TombstoneOutcome, tombstone_run
    from runlane_conformance.core.runs import RunChildren, add_run_children, create_run, finish_run

    environment, run_id = flow.environment, flow.run_id
    key = run_record_key(environment, run_id)
    events, steps, messages = flow.children
    children = RunChildren(
        events, tuple(f"s{n}" for n in range(steps)), tuple(f"m{n}" for n in range(messages))
    )
    limits = drivers[0].profile.limits
    if children.size + 1 > min(limits.max_transaction_records, limits.max_point_reads):
        children = RunChildren()

    def create(tx: StorageTransaction) -> bool:
        # Only a run id the program left entirely free (no run, no tombstone) starts the flow: a template
        # tombstone written at random would make core refuse to tombstone, which says nothing of the driver.
        if any(record is not None for record in tx.get([key, tombstone_record_key(environment, run_id)])):
            return False
        create_run(tx, environment, run_id)
        return True

    def grow(tx: StorageTransaction) -> None:
        add_run_children(tx, environment, run_id, children)

    def read(tx: StorageTransaction) -> StoredRecord | None:
        return tx.get([key])[0]

    first, middle, last = (drivers[n] for n in flow.instances)
    if not first.transaction(create):
        return
    if children.size:
        # The program's random writes may already have made one of these children, or the children's
        # documents may be more bytes than one attempt may write (a limit error the contract asks for,
        # with nothing committed): then the run stays childless.
        with contextlib.suppress(StorageConflictError, StorageLimitError):
            first.transaction(grow)
    middle.transaction(lambda tx: finish_run(tx, environment, run_id))
    visible = middle.transaction(read)
    assert visible is not None, f"run {environment}/{run_id} vanished before it was tombstoned"
    outcome = last.transaction(lambda tx: tombstone_run(tx, environment, run_id))
    if outcome is not TombstoneOutcome.TOMBSTONED:
        raise Divergence(RELATIONS, f"{flow}: tombstoning a finished run answered {outcome}, not tombstoned")

    def check() -> None:
        for number, driver in enumerate(drivers, 1):
            hidden = driver.transaction(read)
            if hidden is None:
                raise Divergence(RELATIONS, f"{flow}: instance {number} no longer finds the tombstoned run")
            now_in = {(e.index, e.partition, e.sort) for e in hidden.indexes}
            for entry in visible.indexes:
                step = Scan(
                    0,
                    entry.index,
                    entry.partition,
                    StorageQueryRange(),
                    StorageQueryDirection.ASCENDING,
                    1,
                    "query",
                )
                found = {
                    (entry.index, entry.partition, sort)
                    for sort, encoded in run_scan(driver, step, max_pages=10_000, family=RELATIONS)[0]
                    if encoded == key.encoded
                }
                expected = {item for item in now_in if item[:2] == (entry.index, entry.partition)}
                _cover(
                    RELATIONS,
                    relation="a tombstoned run vanishes everywhere at once",
                    index=entry.index.value,
                )
                if found != expected:
                    raise Divergence(
                        RELATIONS,
                        f"relation broken: a tombstoned run vanishes from every index at once\n{flow}\n"
                        f"instance {number}: index {entry.index.value} in {entry.partition!r} lists the run "
                        "at "
                        f"{sorted(_decode_sort(s) for _, _, s in found)}; the run's own record, read in the "
                        f"same state, is indexed there at {sorted(_decode_sort(s) for _, _, s in expected)}",
                    )
            _operator_hides(driver, number, flow)

    until_store_indexed(store, check, eventual=eventual)


def _operator_hides(driver: StorageDriver, number: int, flow: Tombstoning) -> None:
    """Where the driver offers operator reads: the tombstoned run and its history are gone from them."""
    from runlane_conformance.suites._operator_support import collect_pages, document_of

    get_run = getattr(driver, "get_run", None)
    list_runs = getattr(driver, "list_runs", None)
    list_events = getattr(driver, "list_run_events", None)
    if not (callable(get_run) and callable(list_runs) and callable(list_events)):
        return
    _cover(RELATIONS, relation="a tombstoned run leaves the operator read model")
    problems = []
    if get_run(flow.environment, flow.run_id) is not None:
        problems.append("get_run still returns it")
    page = max(1, min(2, driver.profile.limits.max_query_results))
    listed = collect_pages(lambda cursor: list_runs(flow.environment, limit=page, cursor=cursor), limit=page)
    if any(document_of(item).get("runId") == flow.run_id for item in listed):
        problems.append("list_runs still lists it")
    history = collect_pages(
        lambda cursor: list_events(flow.environment, flow.run_id, limit=page, cursor=cursor), limit=page
    )
    if history:
        problems.append(f"list_run_events still returns {len(history)} events")
    if problems:
        raise Divergence(
            RELATIONS,
            f"relation broken: a tombstoned run leaves the operator read model in the same commit\n{flow}\n"
            f"instance {number}: " + "; ".join(problems),
        )
