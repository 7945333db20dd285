"""What a differential program is and how one is drawn (the lower half of the differential workload).

A program is a sequence of steps drawn over every dimension at once: which of
several driver instances runs a step, how far the injected clock jumps before
it, which table and key shapes a write touches (environments and run ids that
prefix one another, code points across the whole of Unicode), what JSON shape
a document carries, whether the callback raises, and which index, partition,
range, direction, page size and selection mode a scan uses. After the drawn
steps a per-table sweep adds neighbours, other environments, overlapping
transactions and identical rewrites.

Guarantees: drawing is a pure function of the Hypothesis data (no clock, no
driver), so the same seed draws the same program; every value drawn is one
the contract accepts; ``COVERAGE`` counts each cell of the dimension matrix a
drawn program exercises, and ``Divergence`` carries the rule family a
mismatch is reported under. Running and comparing lives in
``_differential_oracle``, the searches in ``_differential_sweep``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from runlane_conformance.contract.catalog import (
    StorageIndexName,
    StorageQueryDirection,
    StorageTableName,
)
from runlane_conformance.contract.errors import (
    StorageError,
)
from runlane_conformance.contract.json_boundary import thaw_json
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
)
from runlane_conformance.suites._callback_errors import CallbackAbort
from runlane_conformance.suites._cursors_support import catalog_records

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
            assert isinstance(moved, dict), f"a substituted document must stay a mapping, got {moved!r}"
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


#: Where a fault breaks the faulted instance's attempt, and how.
FAULT_POINTS = ("lost commit reply", "broken connection at commit", "broken connection at a read")


@dataclass(frozen=True)
class Faulted:
    """``step`` on the instance whose store exchanges pass the fault hook, broken at ``point``, while
    ``other`` (on a plain instance) commits in between: right after the store applied the commit whose
    reply is lost, or while the attempt whose connection broke is still open.

    The outcomes allowed are exactly the serializable ones: ``step`` not applied (a connection error
    says so, never success), applied once before ``other`` (success, or an unknown commit), or applied
    once after it (replayed when nothing reached the store, or its commit run after the other's).
    Never applied twice, never in part.
    """

    step: Transact
    point: str
    other: Transact

    def __str__(self) -> str:
        return (
            f"the instance behind the fault hook: {self.step}\n  broken: {self.point}; meanwhile {self.other}"
        )


@dataclass(frozen=True)
class Hold:
    """Instance ``holder`` selects ``scan``'s first page exclusively and keeps its attempt open while the
    clock jumps by ``jump`` and instance ``rival`` selects the same page exclusively: the two
    selections, both while the holder is open, share no record."""

    holder: int
    rival: int
    scan: Scan
    jump: str

    def __str__(self) -> str:
        return (
            f"instance {self.holder} holds an exclusive selection ({self.scan}) open while the clock jumps "
            f"by {self.jump} and instance {self.rival} selects the same page exclusively"
        )


@dataclass(frozen=True)
class Elsewhere:
    """``step`` run by an instance in another OS process (a worker attached to the store by address)."""

    step: Transact

    def __str__(self) -> str:
        named = f"instance {self.step.instance}"
        return f"in another OS process, {str(self.step).replace(named, 'an instance', 1)}"


Step = Transact | Scan | Jump | Compete | Append | Faulted | Hold | Elsewhere


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
_HOLD_JUMPS = st.sampled_from(("hours", "days", "years"))
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
    #: Whether the store routes an instance's exchanges through a fault hook (faulted steps drawn).
    faults: bool = False
    #: Whether a worker in another OS process is attached to the store (steps run elsewhere drawn).
    elsewhere: bool = False
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
        kinds = (
            ("write", "write", "write", "scan", "scan", "jump")
            + (("append",) if self.append else ())
            + (("fault",) if self.faults else ())
            + (("hold",) if self.exclusive and self.instances > 1 else ())
            + (("elsewhere",) if self.elsewhere else ())
        )
        kind = draw(st.sampled_from(kinds))
        if kind == "fault":
            return self._faulted(draw)
        if kind == "hold" and self.written:
            scan = self._fresh_scan(draw)
            holder = draw(st.integers(0, self.instances - 1))
            rival = (holder + draw(st.integers(1, self.instances - 1))) % self.instances
            return Hold(holder, rival, replace(scan, via="exclusive", instance=holder), draw(_HOLD_JUMPS))
        if kind == "elsewhere":
            return Elsewhere(replace(self._transact(draw), raises=None))
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

    def _faulted(self, draw: Draw) -> Faulted:
        """A transaction for the faulted instance and the commit another instance makes in between.

        The other reads what it writes (its answer then shows which order it saw). At a lost reply or a
        broken commit it writes the faulted step's written keys, either the very records the faulted
        step stages (a driver that "resolves" a failed commit by looking for its own content is fooled
        by them) or other content; at a broken read it rewrites what the faulted step read.
        """
        step = replace(self._transact(draw), raises=None)
        point = draw(st.sampled_from(FAULT_POINTS))
        read = list(dict.fromkeys(step.read_slots))
        if point == FAULT_POINTS[2] and len(read) < 2:
            point = FAULT_POINTS[draw(st.integers(0, 1))]
        targets = read[:2] if point == FAULT_POINTS[2] else [w.slot for w in step.writes] or read[:1]
        same = draw(st.booleans())
        staged = {w.record.key.encoded: w for w in step.writes if w.kind != "delete"}
        writes = []
        for slot in dict.fromkeys(targets):
            if same and _key(slot) in staged:
                writes.append(replace(staged[_key(slot)], kind="put"))
            else:
                writes.append(self._write(draw, slot, draw(st.sampled_from(("put", "put", "delete")))))
        instance = draw(st.integers(0, self.instances - 1))
        other = self._fit(Transact(instance, (), tuple(writes), None))
        return Faulted(step, point, other)

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
        transacts: tuple[Step, ...] = (step,)
        if isinstance(step, Compete):
            transacts = (step.first, step.second)
        elif isinstance(step, Faulted):
            transacts = (step.step, step.other)
        elif isinstance(step, Elsewhere):
            transacts = (step.step,)
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
            if self.exclusive and self.instances > 1 and not any(isinstance(s, Hold) for s in steps):
                # Once per sweep: an exclusive hold on near's scope (near, tie and late in it) kept open
                # while the clock jumps far past any lease a driver might take its hold for.
                steps.extend(
                    Hold(a, b if b != a else c, replace(scan, instance=a, via="exclusive"), draw(_HOLD_JUMPS))
                    for scan in scopes
                )
            if self.elsewhere:
                steps.extend(
                    self._elsewhere(draw, c, Slot(base, elsewhere, 1 + draw(st.integers(0, 2)), shift))
                )
        return steps

    def _elsewhere(self, draw: Draw, c: int, away: Slot) -> list[Step]:
        """Instance c reads ``away`` and scans its first index scope (with no transaction between the two
        scans); an instance in another OS process then writes it; c scans and reads again: what the
        other process committed is what c must see (a cache one process keeps would not)."""
        look = self._fit(Transact(c, (away,), (), None))
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
            for entry in away.template.indexes[:1]
        ]
        write = Elsewhere(self._fit(Transact(c, (), (self._write(draw, away, "put"),), None)))
        return [look, *scopes, write, *(replace(scan, repeated=True) for scan in scopes), look]


def _key(slot: Slot) -> str:
    return slot.template.key.encoded
