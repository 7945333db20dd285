"""The searches the model checks run over differential programs, and the metamorphic relations.

``differential_search`` draws the profile's programs (``program_count``: from
the Hypothesis profile, never the clock) and runs each against the reference;
``relations_search`` judges relations that must hold whatever legitimate
choice a driver makes (descending is ascending reversed, adjacent sub-ranges
join to the range, an uncontended exclusive scan equals an advisory one, every
instance reads the same, a tombstoned run vanishes everywhere at once and
leaves the operator read model). ``dimensions`` lists every cell of the
coverage matrix, so a cell never recorded shows as empty.

Guarantees: a failure is a shrunk ``Divergence`` (or a broken relation)
reported under its rule family; running out of budget is never reported as a
failed rule.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from runlane_conformance.contract.catalog import (
    StorageIndexName,
    StorageQueryDirection,
    StorageTableName,
)
from runlane_conformance.contract.errors import (
    StorageConflictError,
    StorageLimitError,
)
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import (
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import indexes_are_eventual, until_store_indexed
from runlane_conformance.fixtures.hypothesis_profiles import stateful_step_count
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites import _differential_faults as crossing
from runlane_conformance.suites._cursors_support import ScanItem
from runlane_conformance.suites._differential_oracle import (
    _ERROR_KINDS,
    InjectedClock,
    _content,
    _describe_scan,
    _end,
    run_program,
    run_scan,
    run_transact,
)
from runlane_conformance.suites._differential_programs import (
    _ENDS,
    _SHAPES,
    ENVIRONMENTS,
    JUMPS,
    RAISES,
    RUN_IDS,
    SHIFTS,
    Divergence,
    Program,
    Scan,
    Transact,
    _cover,
    _decode_sort,
    _tables,
)
from runlane_conformance.suites._hypothesis_support import SearchBudget

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
        "hold": ("open together", "rival waited"),
        "shift": tuple(name for name, _ in SHIFTS),
        "sweep": tuple(table.value for table in _tables()),
        "compete": ("write skew", "blind create"),
        "append": ("committed", *(kind.__name__ for kind in _ERROR_KINDS)),
        "operator": tuple(f"instance {n}" for n in range(INSTANCES)),
        "order": (
            "first, then second",
            "second, then first",
            "not applied",
            "applied once, then the other",
            "the other, then applied once",
        ),
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


def program_count() -> int:
    """How many programs one search runs under the active Hypothesis profile (never the clock)."""
    return max(2, min(settings().max_examples // 5, MAX_PROGRAMS))


def _reference_store(limits: StorageLimits) -> Any:
    from runlane_conformance.local.harness import LocalHarness

    return LocalHarness(limits=limits).open_store()


def differential_search(
    harness: DriverHarness,
    family: str,
    budget: SearchBudget,
    *,
    seed: int | None = None,
    workers: Any | None = None,
) -> None:
    """The profile's programs on ``harness`` against the reference; fails with the first divergence of
    ``family`` after Hypothesis shrank it. A divergence of another family ends that program quietly: its
    own check reports it, under its own requirement. ``workers`` (a ``WorkerPool``), where the store
    has an address, runs some steps in another OS process."""
    opened: list[Any] = []
    leases = contextlib.ExitStack()

    def worker_for(store: Any) -> Any:
        address = store.address()
        if workers is None or address is None:
            return None
        return leases.enter_context(workers.workers(address, 1))[0]

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
                worker_for=worker_for,
                crossing=crossing,
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
            leases.close()
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
