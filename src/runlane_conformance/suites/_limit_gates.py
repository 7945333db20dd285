"""Checks whose work cannot be built at every advertised limit, and the plan's rule for each.

A limit check builds "exactly N" and "N + 1" of one measure while staying
inside every other advertised limit. For some limit values that work does not
exist (a record limit below the smallest test document, a byte limit that no
allowed number of records can reach) or is out of a check's reach (a million
point reads in one attempt). Such a check cannot judge its rule, so it is
gated, and the gate is the plan's: each gate here is a pure function of the
advertised ``StorageLimits``, evaluated by the supervisor from the preflight
probe before anything runs and by the check's fixture before its body starts.
The two always agree, because both call the same function, and the planners in
``_limits_support`` make the same arithmetic that the check bodies then use.

Below ``CORE_FLOOR`` point reads or transaction records no check means anything: core itself could
not take its smallest atomic steps on such a driver. There the plan gates every check but the one of
``CORE_FLOOR_REQUIREMENT``, which refuses the profile and says why.

A check names its gate with ``@limit_gated("name")``. A gated check's outcome
is ``gated``, with a reason that starts ``profile:`` and names the limit, so the
report says which rules went unexercised at which limit values.

Sizing ordinary work. Most checks are not about a limit at all, yet every one
reads keys, stages records or pages through an index, and each must fit any
coherent profile, down to core's floor (three point reads, three records, pages
of one). Such a check never writes a literal batch, page or read size: it
declares a ``Size`` (``reads``, ``records``, ``values``, ``page``) naming how
much it would like, the least with which it still judges its rule, and what
else the same attempt spends of that limit, and asks the size of the driver
it judges with ``size.of(driver)``. The same declaration is its gate
(``size.mark``): where the advertised limit leaves less than the least, the
plan gates the check with a ``profile:`` reason before it runs. A size whose
least fits core's floor gates nothing; only a rule that genuinely needs more
than the floor (two rows on one page, four reads in one call) can be gated,
and the report then names the limit that kept it from running. Reading more
keys than one attempt may read goes through ``chunks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import pytest

from ..catalogue.profile import CORE_FLOOR, CORE_FLOOR_REQUIREMENT
from ..contract.errors import StorageLimitError
from ..contract.values import StorageLimits
from ..fixtures.records import Leases
from ._limits_support import (
    PRACTICAL_BYTES,
    PRACTICAL_COUNT,
    lease_floor,
    plan_distinct_keys,
    split_sizes,
)

__all__ = [
    "AT_LEAST",
    "CORE_FLOOR",
    "CORE_FLOOR_REQUIREMENT",
    "GATES",
    "LIMIT_GATE_MARKER",
    "Size",
    "chunks",
    "core_floor_reason",
    "limit_gate_reason",
    "limit_gated",
    "limit_gates_reason",
    "page",
    "positions",
    "reads",
    "records",
    "values",
]

#: The marker a gated check carries; its one argument names an entry of ``GATES``.
LIMIT_GATE_MARKER = "runlane_limit_gate"

#: Template lease builders with the environment-name lengths the checks use: documents built from them
#: have exactly the sizes the checks' own documents have (sizes depend on the name's length only).
_CHECK_LEASES = Leases(environment="env-00000000")
_SEARCH_LEASES = Leases(environment="env-000000000000")

#: The widest a single appended record may be for the append checks to build one past it.
APPEND_RECORD_BYTES = 8 * 1024 * 1024
#: The record limit past which an append check would append more values than it reasonably can.
APPEND_RECORDS = 2000
#: The page limit past which an operator-read check would write more runs than it reasonably can.
OPERATOR_PAGE = 500

Gate = Callable[[StorageLimits], "str | None"]

# CORE_FLOOR and CORE_FLOOR_REQUIREMENT are the catalogue's (catalogue/profile.py): the floor is a rule.


def core_floor_reason(limits: StorageLimits) -> str | None:
    """Why no check can mean anything at ``limits`` (below ``CORE_FLOOR``), or ``None`` when they can."""
    low = [
        f"{name} = {value}"
        for name, value in (
            ("max_point_reads", limits.max_point_reads),
            ("max_transaction_records", limits.max_transaction_records),
        )
        if value < CORE_FLOOR
    ]
    if not low:
        return None
    return (
        f"profile: {' and '.join(low)} {'are' if len(low) > 1 else 'is'} below the floor of {CORE_FLOOR} "
        "that core's smallest atomic steps need (a pruning pass reads a tombstone, a link and its token; "
        "a run put to wait is read with its source run and its marker), so no check can certify this "
        "profile"
    )


#: The records the faults checks' mixed attempt touches: two creates, a replace, a delete, and an
#: append of two values with its stream head.
FAULT_BATCH_RECORDS = 7
#: Its compact form, for drivers allowing fewer: one create, a replace, a delete, one appended value
#: and the head. Below that the mix would lose a kind of write.
FAULT_BATCH_COMPACT_RECORDS = 5


def _fault_batch(limits: StorageLimits) -> str | None:
    if limits.max_transaction_records < FAULT_BATCH_COMPACT_RECORDS:
        return (
            f"profile: max_transaction_records = {limits.max_transaction_records} is below the "
            f"{FAULT_BATCH_COMPACT_RECORDS} records of the faults checks' smallest mixed attempt (a create, "
            "a replace, a delete and an append of one value with its stream head)"
        )
    return None


def _reach(value: int, what: str, bound: int) -> str | None:
    if value > bound:
        return f"profile: {what} = {value} is beyond what a check builds (at most {bound})"
    return None


def _record_size(limits: StorageLimits, leases: Leases) -> str | None:
    floor = lease_floor(leases)
    if limits.max_record_bytes < floor:
        return (
            f"profile: max_record_bytes = {limits.max_record_bytes} is below the smallest test document "
            f"({floor} bytes)"
        )
    return _reach(limits.max_record_bytes, "max_record_bytes", PRACTICAL_BYTES)


def _keys(limits: StorageLimits, count: int) -> str | None:
    reason = _reach(limits.max_transaction_records, "max_transaction_records", PRACTICAL_COUNT)
    if reason is None and plan_distinct_keys(_CHECK_LEASES, count, limits) is None:
        reason = (
            f"profile: {count} distinct keys cannot be touched within max_point_reads = "
            f"{limits.max_point_reads} and max_transaction_bytes = {limits.max_transaction_bytes}"
        )
    return reason


def _byte_sizes(limits: StorageLimits, total: int) -> list[int] | str:
    reason = _reach(limits.max_transaction_bytes, "max_transaction_bytes", PRACTICAL_BYTES)
    if reason is not None:
        return reason
    sizes = split_sizes(
        total, lease_floor(_CHECK_LEASES), limits.max_record_bytes, limits.max_transaction_records
    )
    if sizes is None:
        return (
            f"profile: {total} bytes cannot be written in at most {limits.max_transaction_records} test "
            f"documents of at most {limits.max_record_bytes} bytes"
        )
    return sizes


def _bytes(limits: StorageLimits, total: int) -> str | None:
    sizes = _byte_sizes(limits, total)
    return sizes if isinstance(sizes, str) else None


def _past_bytes_in_records(limits: StorageLimits) -> str | None:
    if limits.max_transaction_bytes + 1 > limits.max_transaction_records * limits.max_record_bytes:
        return (
            "profile: one byte past max_transaction_bytes needs one record past max_transaction_records "
            f"({limits.max_transaction_records} records of at most {limits.max_record_bytes} bytes)"
        )
    return _bytes(limits, limits.max_transaction_bytes + 1)


def _one_byte_past(limits: StorageLimits) -> str | None:
    # Where one byte more needs one record more, the check writes the full budget plus one record.
    total = limits.max_transaction_bytes + 1
    if total > limits.max_transaction_records * limits.max_record_bytes:
        return _bytes(limits, limits.max_transaction_bytes)
    return _bytes(limits, total)


def _read_and_write_once(limits: StorageLimits) -> str | None:
    reason = _keys(limits, limits.max_transaction_records)
    if reason is not None:
        return reason
    plan = plan_distinct_keys(_CHECK_LEASES, limits.max_transaction_records, limits)
    assert plan is not None, "plan_distinct_keys refused a count that _keys accepted (a fault in the gates)"
    if not plan.creates or limits.max_point_reads < len(plan.reads) + 1:
        return "profile: the advertised limits leave no room to read a key that is also written"
    return None


def _delete_beside_full_bytes(limits: StorageLimits) -> str | None:
    sizes = _byte_sizes(limits, limits.max_transaction_bytes)
    if isinstance(sizes, str):
        return sizes
    if len(sizes) >= limits.max_transaction_records or len(sizes) + 1 > limits.max_point_reads:
        return "profile: the advertised limits leave no room for a delete beside a full-byte transaction"
    return None


def replaced_count(records: int, share: float) -> int:
    """How many of a replacement check's ``records`` are replaced rather than created."""
    return max(1, int(records * share))


def _replacements(limits: StorageLimits, total: int, share: float) -> str | None:
    sizes = _byte_sizes(limits, total)
    if isinstance(sizes, str):
        return sizes
    if replaced_count(len(sizes), share) > limits.max_point_reads:
        return "profile: the advertised point-read limit cannot read every record to be replaced"
    return None


def _replacements_past(limits: StorageLimits, share: float) -> str | None:
    if limits.max_transaction_bytes + 1 > limits.max_transaction_records * limits.max_record_bytes:
        return _past_bytes_in_records(limits)
    return _replacements(limits, limits.max_transaction_bytes + 1, share)


def dependency_mix(limits: StorageLimits, count: int) -> tuple[int, int]:
    """(keys only read or deleted, keys created) for a check touching ``count`` distinct keys."""
    reads = min(limits.max_point_reads, count - 1)
    return reads, count - reads


def _dependencies(limits: StorageLimits) -> str | None:
    reason = _reach(limits.max_transaction_records, "max_transaction_records", PRACTICAL_COUNT)
    if reason is not None:
        return reason
    reads, creates = dependency_mix(limits, limits.max_transaction_records + 1)
    if reads < 2 or creates * lease_floor(_CHECK_LEASES) > limits.max_transaction_bytes:
        return "profile: the advertised limits leave no room for a mix of reads and creates at this size"
    return None


def _append_records(limits: StorageLimits) -> str | None:
    reason = _reach(limits.max_transaction_records, "max_transaction_records", APPEND_RECORDS)
    if reason is not None:
        return reason
    from ..contract.streams import StorageAppendMeasurement, measure_storage_append
    from ._append_support import batch

    # The check appends one value past what fits beside the head (and beside one create): those
    # values must stay within the byte limits, or the refusal would name a byte limit instead.
    past = max(1, limits.max_transaction_records - 1)
    roomy = StorageLimits(
        max_transaction_records=past + 1,
        max_record_bytes=PRACTICAL_BYTES,
        max_transaction_bytes=PRACTICAL_BYTES,
    )
    measured: StorageAppendMeasurement = measure_storage_append(
        batch("env-00000000", f"n{past}", past), roomy
    )
    # The create beside them, with a holder as long as any the process's counter gives (fixed, so the
    # plan and the check's fixture compute the same reason).
    create = _CHECK_LEASES.record(f"w{past}", holder="holder-999999999").document.size
    needed = measured.bytes + create
    if needed > limits.max_transaction_bytes or max(measured.sizes) > limits.max_record_bytes:
        return (
            f"profile: the {past} appended values that reach past max_transaction_records = "
            f"{limits.max_transaction_records} take {needed} bytes, more than max_transaction_bytes = "
            f"{limits.max_transaction_bytes} allows"
        )
    return None


def _append_record_bytes(limits: StorageLimits) -> str | None:
    return _reach(limits.max_record_bytes, "max_record_bytes", APPEND_RECORD_BYTES)


def _append_transaction_bytes(limits: StorageLimits) -> str | None:
    from ..contract.streams import measure_storage_append
    from ._append_support import append_byte_plan, batch

    reason = _reach(limits.max_transaction_bytes, "max_transaction_bytes", PRACTICAL_BYTES)
    if reason is not None:
        return reason
    try:
        appended = measure_storage_append(batch("env-00000000", "bytes", 1), limits).bytes
    except StorageLimitError:
        return "profile: one observation record and its head do not fit the transaction limits"
    for over in (0, 1):
        if append_byte_plan(_CHECK_LEASES, limits, appended, over) is None:
            return (
                f"profile: max_transaction_bytes + {over} cannot be staged beside an append in at most "
                f"{limits.max_transaction_records} records of at most {limits.max_record_bytes} bytes"
            )
    return None


def _widest_batches(limits: StorageLimits) -> str | None:
    from ._append_support import batch

    reason = _append_record_bytes(limits)
    # The check builds one batch one byte past the limit ("over") and one exactly at it ("exact").
    for tag, widest in (("over", limits.max_record_bytes + 1), ("exact", limits.max_record_bytes)):
        base = batch("env-00000000", tag, 1).widest_sizes[0]
        if reason is None and widest < base:
            reason = f"profile: max_record_bytes is below the smallest observation record ({base} bytes)"
    if reason is None:
        # The exact batch must commit: its widest record and the head, together, within the transaction.
        from ..contract.streams import measure_storage_append

        exact = batch("env-00000000", "exact", 1, padding=limits.max_record_bytes - base)
        try:
            measure_storage_append(exact, limits)
        except StorageLimitError:
            reason = (
                "profile: a record of max_record_bytes beside the stream head does not fit "
                f"max_transaction_bytes = {limits.max_transaction_bytes}"
            )
    return reason


#: The most children a pruning check builds to make cleanup take several full passes.
PRUNING_CHILDREN = 20_000


def _pruning_gate(passes: int, limits: StorageLimits) -> str | None:
    """Gate a pruning check that must make cleanup take ``passes`` passes, the last one partial."""
    from ..core.pruning import PassBudget, PruningLimitsError

    try:
        budget = PassBudget.from_limits(limits)
    except PruningLimitsError:
        return core_floor_reason(limits)
    per_pass = min(budget.page, budget.point_reads - 1, budget.records - 1)
    children = (passes - 1) * per_pass + (1 if passes > 2 else 2)
    if children > PRUNING_CHILDREN:
        return (
            f"profile: a cleanup pass of these limits takes {per_pass} children; {passes} passes need "
            f"{children}, beyond what a check builds (at most {PRUNING_CHILDREN})"
        )
    return None


def _pruning_passes(limits: StorageLimits) -> str | None:
    return _pruning_gate(5, limits)


def _pruning_two_passes(limits: StorageLimits) -> str | None:
    return _pruning_gate(2, limits)


#: Every gate a check may name, by name.
GATES: dict[str, Gate] = {
    "point-reads": lambda limits: _reach(limits.max_point_reads, "max_point_reads", PRACTICAL_COUNT),
    "query-results": lambda limits: _reach(limits.max_query_results, "max_query_results", PRACTICAL_COUNT),
    "record-bytes": lambda limits: _record_size(limits, _CHECK_LEASES),
    "record-bytes-search": lambda limits: _record_size(limits, _SEARCH_LEASES),
    "keys-at-limit": lambda limits: _keys(limits, limits.max_transaction_records),
    "keys-past-limit": lambda limits: _keys(limits, limits.max_transaction_records + 1),
    "read-and-write-once": _read_and_write_once,
    "bytes-at-limit": lambda limits: _bytes(limits, limits.max_transaction_bytes),
    "one-byte-past": _one_byte_past,
    "delete-beside-full-bytes": _delete_beside_full_bytes,
    "bytes-past-in-records": _past_bytes_in_records,
    "replacements-at-limit": lambda limits: _replacements(limits, limits.max_transaction_bytes, 1.0),
    "replacements-past-all": lambda limits: _replacements_past(limits, 1.0),
    "replacements-past-half": lambda limits: _replacements_past(limits, 0.5),
    "dependencies": _dependencies,
    "append-records": _append_records,
    "append-record-bytes": _append_record_bytes,
    "append-widest-batches": _widest_batches,
    "append-transaction-bytes": _append_transaction_bytes,
    "pruning-passes": _pruning_passes,
    "pruning-two-passes": _pruning_two_passes,
    "operator-page": lambda limits: _reach(limits.max_query_results, "max_query_results", OPERATOR_PAGE),
    "fault-batch": _fault_batch,
}


def limit_gate_reason(name: str, limits: StorageLimits) -> str | None:
    """``None`` when a check gated by ``name`` can be built at ``limits``; otherwise why not.

    ``name`` is an entry of ``GATES`` or a ``Size``'s gate (``at-least:LIMIT:N``). Raises ``KeyError``
    for a gate nobody defined (a fault in the suites).
    """
    least = _parse_at_least(name)
    if least is not None:
        return _at_least_reason(limits, *least)
    return GATES[name](limits)


def limit_gates_reason(names: Iterable[str], limits: StorageLimits) -> str | None:
    """The reason of the first of ``names`` that gates a check at ``limits``; ``None`` if none does."""
    for name in names:
        reason = limit_gate_reason(name, limits)
        if reason is not None:
            return reason
    return None


def limit_gated(*names: str) -> pytest.MarkDecorator:
    """Mark a check as buildable only where every named gate lets it (see the module docstring)."""
    for name in names:
        if name not in GATES and _parse_at_least(name) is None:
            raise KeyError(f"unknown limit gate {name!r}")
    marker: pytest.MarkDecorator = getattr(pytest.mark, LIMIT_GATE_MARKER)
    return marker(*names)


# --- Sizing ordinary work from the advertised limits -------------------------------------------------

#: The prefix of a ``Size``'s gate name: ``at-least:LIMIT[+LIMIT]:N`` gates a check where a LIMIT < N.
AT_LEAST = "at-least"

#: What one unit of each counted limit is, for a gate's reason.
_UNITS = {
    "max_point_reads": "point reads in one attempt",
    "max_query_results": "results on one page",
    "max_transaction_records": "records in one attempt",
}


def _parse_at_least(name: str) -> tuple[tuple[str, ...], int] | None:
    prefix, _, rest = name.partition(":")
    counted, _, count = rest.partition(":")
    names = tuple(counted.split("+"))
    if prefix != AT_LEAST or not all(limit in _UNITS for limit in names) or not count.isdigit():
        return None
    return names, int(count)


def _at_least_reason(limits: StorageLimits, names: tuple[str, ...], count: int) -> str | None:
    for limit in names:
        value: int = getattr(limits, limit)
        if value < count:
            return f"profile: {limit} = {value} is below the {count} {_UNITS[limit]} this check needs"
    return None


class _Profiled(Protocol):
    @property
    def profile(self) -> object: ...


T = TypeVar("T")


def _limits_of(source: StorageLimits | _Profiled) -> StorageLimits:
    if isinstance(source, StorageLimits):
        return source
    limits = getattr(source.profile, "limits", None)
    if not isinstance(limits, StorageLimits):
        raise TypeError(f"{source!r} advertises no StorageLimits in its profile")
    return limits


@dataclass(frozen=True)
class Size:
    """How much of the counted limits a check's work takes, sized from the limits the driver advertises.

    ``limits`` names the ``StorageLimits`` fields the work is counted in (a distinct key read is
    both a point read and one of the attempt's records); ``wanted`` is what the check uses when the
    driver allows it; ``least`` is the fewest with which the check still judges its rule; ``beside``
    is what the same attempt (or page) spends of those limits on other things (the stream head
    beside appended values, a key read beside them). ``of`` answers ``min(wanted, limit - beside)``
    over the named limits; where that is below ``least`` the check cannot be built, and its gate
    (``mark``, the same arithmetic, evaluated by the plan before the check runs) has already gated
    it with a ``profile:`` reason, so ``of`` then raises: reaching it is a fault in the suites.
    """

    limits: tuple[str, ...]
    wanted: int
    least: int = 1
    beside: int = 0

    def __post_init__(self) -> None:
        if not self.limits or not all(limit in _UNITS for limit in self.limits):
            raise ValueError(f"{self.limits!r} are not counted limits ({', '.join(_UNITS)})")
        if not 1 <= self.least <= self.wanted or self.beside < 0:
            raise ValueError(f"a size needs 1 <= least <= wanted and beside >= 0, got {self}")

    @property
    def needs(self) -> int:
        """The fewest units of each named limit the check's attempt (or page) takes."""
        return self.least + self.beside

    @property
    def gate(self) -> str:
        """The gate name the plan and the check's fixture evaluate (``limit_gate_reason``)."""
        return f"{AT_LEAST}:{'+'.join(self.limits)}:{self.needs}"

    @property
    def mark(self) -> pytest.MarkDecorator:
        """The check's gate as a marker: put ``@size.mark`` on a check (or a parameter) using the size."""
        return limit_gated(self.gate)

    def of(self, source: StorageLimits | _Profiled) -> int:
        """The size to use with ``source``'s limits (a driver or its ``StorageLimits``)."""
        limits = _limits_of(source)
        room: list[int] = [getattr(limits, limit) - self.beside for limit in self.limits]
        size = min(self.wanted, *room)
        if size < self.least:
            raise AssertionError(
                f"the check ran although {_at_least_reason(limits, self.limits, self.needs)}; its gate "
                f"{self.gate!r} is missing (a fault in the suites)"
            )
        return size


def reads(wanted: int, *, least: int = 1, beside: int = 0) -> Size:
    """Distinct keys one attempt reads: each is a point read and one of the attempt's records."""
    return Size(("max_point_reads", "max_transaction_records"), wanted, least, beside)


def positions(wanted: int, *, least: int = 1, beside: int = 0) -> Size:
    """Positions ``get()`` calls of one attempt ask for, repeats included (counted in
    ``max_point_reads`` alone; the caller keeps its distinct keys within a ``reads`` size)."""
    return Size(("max_point_reads",), wanted, least, beside)


def records(wanted: int, *, least: int = 1, beside: int = 0) -> Size:
    """Records one attempt reads, writes or appends (counted in ``max_transaction_records``)."""
    return Size(("max_transaction_records",), wanted, least, beside)


def values(wanted: int, *, least: int = 1, beside: int = 0) -> Size:
    """Values of one append batch: each is a record, and the stream head is one more beside them."""
    return Size(("max_transaction_records",), wanted, least, beside + 1)


def page(wanted: int, *, least: int = 1) -> Size:
    """Results one page of a query holds (counted in ``max_query_results``)."""
    return Size(("max_query_results",), wanted, least)


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in order, cut into consecutive pieces of at most ``size`` (for reads that must span
    several attempts because one may not read them all)."""
    if size < 1:
        raise ValueError(f"a chunk holds at least one item, not {size}")
    return [list(items[start : start + size]) for start in range(0, len(items), size)]
