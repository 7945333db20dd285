"""Random transaction histories checked against a model: the driver must behave like a serial store.

A Hypothesis state machine runs random transaction plans (point reads, an
index query, conditional creates, replacements, deletes, blind creates, a
callback that raises, and a competing transaction committed by a second
instance from inside the first attempt) on a fresh store, and runs the same
plans on a dictionary. Every written value is unique, so a lost update, a
stale read or an index entry left behind cannot hide behind an equal value.

After every step the driver's whole key universe (6 names in 2
environments) and every index scan must equal the model's state after
*some* serial order of the step's committed transactions: competitor first
or main transaction first, whichever the driver chose (an optimistic driver
replays the main transaction, a locking driver makes the competitor wait).
Anything no serial order explains fails the run, and Hypothesis shrinks it to
a short history.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from runlane_conformance.catalogue.model import (
    DIFFERENTIAL_READS,
    DIFFERENTIAL_SCANS,
    SCAN_RELATIONS,
    SERIALIZABLE,
)
from runlane_conformance.contract.catalog import StorageIndexName, StorageQueryDirection, StorageTableName
from runlane_conformance.contract.cursors import parse_query_records_result
from runlane_conformance.contract.encodings import iso_date_codec
from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageLimits,
    StorageRecordKey,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import indexes_are_eventual, until_store_indexed
from runlane_conformance.fixtures.evidence import CheckInconclusive, record_search
from runlane_conformance.fixtures.hypothesis_profiles import stateful_step_count
from runlane_conformance.fixtures.interleave import Competitor, CompetitorPace, compete
from runlane_conformance.fixtures.records import BASE_TIME
from runlane_conformance.fixtures.replay_guard import ReplayGuardedDriver, ReplayWithoutBound
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites._cursors_support import ScanItem, expected_scan
from runlane_conformance.suites._hypothesis_support import (
    SearchBudget,
    check_seconds,
    plain_hypothesis_errors,
    searches,
)

ENVIRONMENTS = ("east", "west")
NAMES = ("a", "b", "c", "d", "e", "f")
DIRECTIONS = tuple(StorageQueryDirection)
#: How long the main attempt waits for its competitor's callback to start (a locking driver may block it).
COMPETITOR_START_GRACE = 0.02
#: How long it then waits for the started competitor to finish (it may block on a row lock), until the
#: driver has shown that it blocks competitors; then the grace follows the driver's pace (CompetitorPace).
COMPETITOR_FINISH_GRACE = 1.0
#: Upper bound on histories per run, whatever the profile asks for (each history is a whole fresh store).
MAX_HISTORIES = 150
#: The share of the check's time limit the search may spend before it stops and reports.
SEARCH_SHARE = 0.8

Slot = tuple[str, str]  # (environment, name)
State = Mapping[Slot, NewStorageRecord]


class Boom(Exception):
    """Raised by a callback on purpose: the attempt must roll back and nothing of it may remain."""


@dataclass(frozen=True)
class Write:
    """One planned write. ``put`` replaces what it read or creates what it read as absent;
    ``delete`` removes what it read (if present); ``blind`` creates without reading first."""

    slot: Slot
    kind: str
    at: int
    indexed: bool


@dataclass(frozen=True)
class Plan:
    """One transaction: its reads, an optional index page, its writes, and whether it raises at the end.

    The main plan may carry a ``competitor``: another plan that a second
    instance commits from inside the main plan's first attempt, right after
    its reads.
    """

    instance: int
    reads: tuple[Slot, ...]
    query: tuple[str, StorageQueryDirection, int] | None
    writes: tuple[Write, ...]
    raises: bool = False
    competitor: Plan | None = None

    @property
    def read_slots(self) -> tuple[Slot, ...]:
        """Every slot the callback point-reads, in order (duplicates kept)."""
        return self.reads + tuple(w.slot for w in self.writes if w.kind != "blind")


@functools.cache
def _key(slot: Slot) -> StorageRecordKey:
    return StorageRecordKey(StorageTableName.LEASES, slot)


def _record(write: Write, serial: int) -> NewStorageRecord:
    """A lease whose content is unique to ``serial``: a unique holder, or a unique expiry when unindexed."""
    environment, name = write.slot
    at = write.at if write.indexed else 1000 + serial
    return build_storage_record(
        StorageTableName.LEASES,
        {
            "environment": environment,
            "name": name,
            "holder": f"v{serial}" if write.indexed else None,
            "expiresAt": iso_date_codec.encode(BASE_TIME + timedelta(seconds=at)),
        },
    )


def _scan(state: State, environment: str, direction: StorageQueryDirection) -> list[ScanItem]:
    entries = [
        (entry.sort, record.key.encoded)
        for record in state.values()
        for entry in record.indexes
        if entry.index is StorageIndexName.LEASES_BY_EXPIRY and entry.partition == environment
    ]
    return expected_scan(entries, direction=direction)


def _content(record: NewStorageRecord | StoredRecord | None) -> tuple[str, frozenset[Any]] | None:
    return None if record is None else (record.document.text, frozenset(record.indexes))


def _holders(state: Mapping[Slot, NewStorageRecord | StoredRecord]) -> str:
    """A short picture of a state for failure messages: each slot's unique value."""
    return str(
        {
            f"{environment}/{name}": record.document.value.get("holder") or record.document.value["expiresAt"]
            for (environment, name), record in sorted(state.items())
        }
    )


@dataclass
class Outcome:
    """What the model says one transaction does when it runs on ``before``."""

    state: dict[Slot, NewStorageRecord]
    observed: tuple[Any, ...] | None
    errors: frozenset[type[BaseException]] = frozenset()


Staged = Sequence[tuple[Write, NewStorageRecord]]


def _run_model(before: State, plan: Plan, writes: Staged, *, exact_pages: bool = True) -> Outcome:
    reads = tuple(_content(before.get(slot)) for slot in plan.read_slots)
    page: tuple[ScanItem, ...] = ()
    if plan.query is not None and exact_pages:
        environment, direction, limit = plan.query
        page = tuple(_scan(before, environment, direction)[:limit])
    after = dict(before)
    errors: set[type[BaseException]] = set()
    for write, record in writes:
        if write.kind == "put":
            after[write.slot] = record
        elif write.kind == "delete":
            after.pop(write.slot, None)
        elif write.slot in before:  # a blind create of a present key can never commit
            errors.add(StorageConflictError)
        else:
            after[write.slot] = record
    if plan.raises:
        errors.add(Boom)
    if errors:
        # Either failure may surface first (a driver may refuse the create at once or at commit).
        return Outcome(dict(before), None, frozenset(errors))
    return Outcome(after, (reads, page))


def _run_driver(
    tx: StorageTransaction,
    plan: Plan,
    writes: Staged,
    between: Callable[[], None],
    *,
    exact_pages: bool = True,
) -> Any:
    """The plan as a callback body: reads, ``between()``, writes decided by what was read, maybe raise.

    Without ``exact_pages`` (an eventual index) the page is still requested and
    validated, but not returned for comparison: it may lag the model.
    """
    read_slots = plan.read_slots
    records = tx.get([_key(slot) for slot in read_slots]) if read_slots else []
    page: tuple[ScanItem, ...] = ()
    if plan.query is not None:
        environment, direction, limit = plan.query
        index = StorageIndexName.LEASES_BY_EXPIRY
        command = QueryRecordsCommand(index, environment, limit, direction=direction)
        result = parse_query_records_result(command, tx.query_candidates(command))
        if exact_pages:
            page = tuple((item.sort, item.key.encoded) for item in result.items)
    between()
    current = dict(zip(read_slots, records, strict=True))
    for write, record in writes:
        existing = current.get(write.slot)
        if write.kind == "blind" or (write.kind == "put" and existing is None):
            tx.create(record)
        elif write.kind == "put" and existing is not None:
            tx.replace(existing, record)
        elif existing is not None:
            tx.delete(existing)
    if plan.raises:
        raise Boom("the callback raised on purpose")
    return (tuple(_content(record) for record in records), page)


UNIVERSE: tuple[Slot, ...] = tuple((environment, name) for environment in ENVIRONMENTS for name in NAMES)
# Strategies are built once: building them inside every draw dominates the cost of a run and of shrinking.
_SLOT_INDEX = st.integers(0, len(UNIVERSE) - 1)
_NEAR_INDEX = st.integers(0, 5)
_MAIN_KINDS = st.sampled_from(("put", "put", "delete", "blind"))
_RIVAL_KINDS = st.sampled_from(("put", "delete"))
_AT = st.integers(0, 2)
_COUNT = st.integers(0, 3)
_BOOLEANS = st.booleans()
_RAISES = st.integers(0, 5)
_INSTANCE = st.integers(0, 1)
_QUERIES = st.none() | st.tuples(
    st.sampled_from(ENVIRONMENTS), st.sampled_from(DIRECTIONS), st.integers(1, 4)
)


def _draw_slot(draw: st.DrawFn, near: Sequence[Slot], avoid: frozenset[Slot] = frozenset()) -> Slot | None:
    """A slot, half the time one of ``near`` (the other plan's slots), never one of ``avoid``."""
    pick_near: bool = draw(_BOOLEANS)
    slot = near[draw(_NEAR_INDEX) % len(near)] if near and pick_near else UNIVERSE[draw(_SLOT_INDEX)]
    return None if slot in avoid else slot


def _draw_plan(draw: st.DrawFn, *, main: bool, near: tuple[Slot, ...] = ()) -> Plan:
    """A random plan; ``near`` biases a competitor towards the slots the main plan touches.

    A plain function over ``draw`` rather than a nested strategy: building a
    fresh strategy per competitor (its ``near`` differs every time) made
    Hypothesis validate it on every draw, which dominated the cost of
    generating and, above all, of shrinking a failing history.
    """
    kinds = _MAIN_KINDS if main else _RIVAL_KINDS
    targets: dict[Slot, None] = {}
    for _ in range(draw(_COUNT) if main else 1):
        slot = _draw_slot(draw, near)
        if slot is not None:
            targets[slot] = None
    writes = tuple(Write(slot, draw(kinds), draw(_AT), draw(_BOOLEANS)) for slot in targets)
    blind = frozenset(write.slot for write in writes if write.kind == "blind")
    reads = tuple(
        slot
        for slot in (_draw_slot(draw, near, blind) for _ in range(draw(_COUNT) if main else draw(_AT)))
        if slot is not None
    )
    query = draw(_QUERIES)
    if not main:
        return Plan(0, reads, query, writes)
    raises = draw(_RAISES) == 0
    touched = tuple(dict.fromkeys([*(write.slot for write in writes), *reads]))
    competitor = _draw_plan(draw, main=False, near=touched) if draw(_BOOLEANS) else None
    return Plan(draw(_INSTANCE), reads, query, writes, raises, competitor)


def fit_plan(plan: Plan, limits: StorageLimits) -> Plan:
    """``plan`` cut down to what one attempt may do under ``limits``: reads dropped from the end, then
    writes, until its point reads and distinct keys fit, and its page no larger than a page may be.

    The drawn plans touch at most six keys and ask for pages of at most four, so at the contract's
    defaults (and any limits at least that large) every plan runs exactly as drawn.
    """
    reads, writes = list(plan.reads), list(plan.writes)

    def fits() -> bool:
        slots = [*reads, *(w.slot for w in writes if w.kind != "blind")]
        keys = {*reads, *(w.slot for w in writes)}
        return len(slots) <= limits.max_point_reads and len(keys) <= limits.max_transaction_records

    while not fits():
        if reads:
            reads.pop()
        else:
            writes.pop()
    query = plan.query
    if query is not None and query[2] > limits.max_query_results:
        query = (query[0], query[1], limits.max_query_results)
    competitor = None if plan.competitor is None else fit_plan(plan.competitor, limits)
    return replace(plan, reads=tuple(reads), writes=tuple(writes), query=query, competitor=competitor)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """A main plan, with a competitor half of the time (shrinking drops the competitor first)."""
    return _draw_plan(draw, main=True)


@dataclass
class _Observation:
    attempts: int = 0
    competitor: Competitor[Any] | None = None
    result: Any = None
    error: BaseException | None = None
    history: list[str] = field(default_factory=list)


class StoreMachine(RuleBasedStateMachine):
    """Driver and model side by side on one fresh store per Hypothesis example."""

    harness: DriverHarness
    budget: SearchBudget
    pace: CompetitorPace

    def __init__(self) -> None:
        super().__init__()
        # Once the search is stopped (out of budget, or the driver replays without bound) every
        # further example does nothing, so Hypothesis ends the run at once; see SearchBudget.
        self.active = self.budget.active()
        self.steps: list[Plan] = []
        self.store: Any = None
        self.drivers: tuple[StorageDriver, ...] = ()
        self.eventual = False
        if self.active:
            self.store = self.harness.open_store()
            self.drivers = (
                ReplayGuardedDriver(self.store.connect()),
                ReplayGuardedDriver(self.store.connect()),
            )
            # An eventual index may lag inside a step, so only scans made after it settles are compared.
            self.eventual = indexes_are_eventual(self.drivers[0])
        self.model: dict[Slot, NewStorageRecord] = {}
        self.serials = itertools.count(1)
        self.versions: dict[Slot, set[str]] = {}
        self.last: dict[Slot, tuple[str, tuple[str, frozenset[Any]] | None]] = {}
        # The universe as the step just read it, so the invariant that runs next need not read it again.
        self.after_step: dict[Slot, StoredRecord] | None = None

    def teardown(self) -> None:
        for driver in self.drivers:
            driver.close()
        if self.store is not None:
            self.store.close()

    # -- the one rule: run a plan on both sides ---------------------------------------------------

    def _failed(self, failure: AssertionError) -> None:
        """Remember the first failing history (so a search out of time can still show it)."""
        steps = "\n".join(f"  step {i}: {step}" for i, step in enumerate(self.steps, 1))
        self.budget.note_failure(f"{steps}\n{failure}")

    @rule(plan=plans())
    def run_plan(self, plan: Plan) -> None:
        if self.active and self.budget.expired():
            self.active = False  # out of time in the middle of a history: its remaining steps do nothing
        if not self.active:
            return
        self.budget.step()
        plan = fit_plan(plan, self.drivers[0].profile.limits)
        self.steps.append(plan)
        try:
            self._run_plan(plan)
        except ReplayWithoutBound as error:
            # Shrinking this would replay a thousand attempts per try; stop the search and say why.
            self.budget.stop(str(error))
            self.active = False
        except CheckInconclusive as error:
            # A competitor still running at its bound: no evidence, so the search ends without a verdict.
            self.budget.give_up(error.what)
            self.active = False
        except AssertionError as error:
            self._failed(error)
            raise

    def _run_plan(self, plan: Plan) -> None:
        main_writes = [(write, _record(write, next(self.serials))) for write in plan.writes]
        rival = plan.competitor
        rival_writes = [] if rival is None else [(w, _record(w, next(self.serials))) for w in rival.writes]
        driver = self.drivers[plan.instance]
        other = self.drivers[1 - plan.instance]
        seen = _Observation()

        started = threading.Event()

        def competing() -> Any:
            assert rival is not None, (
                "the history planned a competitor but has none (a fault in the check, not the driver)"
            )

            def callback(tx: StorageTransaction) -> Any:
                started.set()
                return _run_driver(tx, rival, rival_writes, lambda: None, exact_pages=not self.eventual)

            return other.transaction(callback)

        def start_competitor() -> None:
            if rival is not None and seen.attempts == 1:
                seen.competitor = compete(competing, grace=0)
                # A driver that lets the competitor in runs it to the end now, so the interleaving (and a
                # failing example) is the same on every run; one that blocks it at the start costs only
                # the short wait for ``started``.
                if started.wait(COMPETITOR_START_GRACE):
                    self.pace.note(seen.competitor.wait_briefly(self.pace.grace()))

        def main(tx: StorageTransaction) -> Any:
            seen.attempts += 1
            return _run_driver(tx, plan, main_writes, start_competitor, exact_pages=not self.eventual)

        def run() -> Any:
            return driver.transaction(main)

        try:
            # A step without a competitor measures the driver's pace (see CompetitorPace).
            seen.result = run() if rival is not None else self.pace.timed(run)
        except (Boom, StorageConflictError) as error:
            seen.error = error
        rival_result: Any = None
        if seen.competitor is not None:
            outcome = seen.competitor.outcome()
            if isinstance(outcome, BaseException) and not isinstance(outcome, StorageConflictError):
                raise outcome
            rival_result = outcome
        event(f"attempts={min(seen.attempts, 3)} rival={rival is not None} error={type(seen.error).__name__}")
        self._match(plan, main_writes, rival_writes, seen, rival_result)

    def _match(
        self, plan: Plan, main_writes: Staged, rival_writes: Staged, seen: _Observation, rival_result: Any
    ) -> None:
        actual = self.after_step = self._read_universe()
        rival = plan.competitor if seen.competitor is not None else None
        rival_committed = rival is not None and not isinstance(rival_result, StorageConflictError)
        orders = [("competitor", "main"), ("main", "competitor")] if rival_committed else [("main",)]
        explanations = []
        for order in orders:
            state: dict[Slot, NewStorageRecord] = dict(self.model)
            agrees = True
            for actor in order:
                if actor == "competitor":
                    assert rival is not None, (
                        "the history planned a competitor but has none (a fault in the check, not the driver)"
                    )
                    outcome = _run_model(state, rival, rival_writes, exact_pages=not self.eventual)
                    agrees = agrees and outcome.observed == rival_result
                    state = outcome.state
                else:
                    outcome = _run_model(state, plan, main_writes, exact_pages=not self.eventual)
                    agrees = agrees and self._main_agrees(outcome, seen, rival is not None)
                    if seen.error is None:
                        state = outcome.state
            if agrees and self._same(state, actual):
                self.model = state
                return
            explanations.append(f"{' then '.join(order)}: model {_holders(state)}")
        returned = repr(seen.error) if seen.error is not None else repr(seen.result)
        raise AssertionError(
            "no serial order explains this step of a random history; where a conflicts.*, mutations.* or "
            "cursors.* check failed too, it names the rule this breaks\n"
            f"plan: {plan}\nmain returned {returned} after "
            f"{seen.attempts} attempt(s); competitor returned {rival_result!r}\n"
            f"store: {_holders(actual)}\n" + "\n".join(explanations)
        )

    @staticmethod
    def _main_agrees(model: Outcome, seen: _Observation, had_competitor: bool) -> bool:
        if seen.error is None:
            return not model.errors and seen.result == model.observed
        if type(seen.error) in model.errors:
            return True
        # A conflict no serial order predicts is still acceptable when a competitor forced the attempt
        # out and the driver gave up: the transaction then changed nothing, which the state check proves.
        return isinstance(seen.error, StorageConflictError) and had_competitor

    # -- reading the driver's whole universe ------------------------------------------------------

    def _read_universe(self) -> dict[Slot, StoredRecord]:
        """Every slot's record, read in as few attempts as the driver's max_point_reads allows (one at
        the contract's defaults); nothing else runs between them, so together they are one state."""
        driver = self.drivers[0]
        limits = driver.profile.limits
        # Every key read is one of the attempt's records as well as one of its point reads.
        chunk = max(1, min(limits.max_point_reads, limits.max_transaction_records))
        found: dict[Slot, StoredRecord] = {}
        for start in range(0, len(UNIVERSE), chunk):
            part = UNIVERSE[start : start + chunk]
            keys = [_key(slot) for slot in part]

            def read(
                tx: StorageTransaction, keys: Sequence[StorageRecordKey] = keys
            ) -> list[StoredRecord | None]:
                return tx.get(keys)

            records = driver.transaction(read)
            found.update(
                (slot, record) for slot, record in zip(part, records, strict=True) if record is not None
            )
        return found

    @staticmethod
    def _same(model: State, actual: Mapping[Slot, StoredRecord]) -> bool:
        return set(model) == set(actual) and all(
            _content(model[slot]) == _content(actual[slot]) for slot in model
        )

    # -- invariants over the whole universe -------------------------------------------------------

    @invariant()
    def every_record_equals_the_model_with_fresh_versions(self) -> None:
        if not self.active:
            return
        try:
            self._records_match()
        except AssertionError as error:
            self._failed(error)
            raise

    def _records_match(self) -> None:
        actual = self._read_universe() if self.after_step is None else self.after_step
        self.after_step = None
        for slot in UNIVERSE:
            record = actual.get(slot)
            expected = _content(self.model.get(slot))
            content = _content(record)
            assert content == expected, f"{slot}: store has {content}, model has {expected}"
            previous = self.last.get(slot)
            if record is None:
                self.last[slot] = ("", None)
                continue
            version = record.version.value
            if previous is not None and previous[1] == content:
                assert version == previous[0], f"{slot}: an unchanged record changed version"
            else:
                seen = self.versions.setdefault(slot, set())
                assert version not in seen, f"{slot}: version {version} was handed out again"
                seen.add(version)
            self.last[slot] = (version, content)

    @invariant()
    def every_index_scan_equals_the_model(self) -> None:
        if not self.active:
            return
        try:
            until_store_indexed(self.store, self._compare_scans, eventual=self.eventual)
        except AssertionError as error:
            self._failed(error)
            raise

    def _compare_scans(self) -> None:
        limit = min(len(NAMES), self.drivers[0].profile.limits.max_query_results)
        for environment in ENVIRONMENTS:
            for direction in DIRECTIONS:
                expected = _scan(self.model, environment, direction)
                command = QueryRecordsCommand(
                    StorageIndexName.LEASES_BY_EXPIRY, environment, limit, direction=direction
                )
                for name, read in self._scanners(command).items():
                    items: list[ScanItem] = []
                    current = command
                    for _page in range(len(NAMES) + 1):
                        page = parse_query_records_result(current, read(current))
                        items.extend((item.sort, item.key.encoded) for item in page.items)
                        if page.cursor is None:
                            break
                        current = command.with_cursor(page.cursor)
                    assert items == expected, (
                        f"{name} of {environment} ({direction.value}) must list the model's index entries "
                        f"in order after the step: expected {expected}, got {items}"
                    )

    def _scanners(self, command: QueryRecordsCommand) -> dict[str, Callable[[QueryRecordsCommand], Any]]:
        driver = self.drivers[1]
        return {
            "query": driver.query,
            "query_candidates": lambda current: driver.transaction(lambda tx: tx.query_candidates(current)),
        }


@SERIALIZABLE
@searches
def test_random_histories_match_a_serial_model(
    runlane_harness: DriverHarness, request: pytest.FixtureRequest
) -> None:
    # The search runs the profile's histories and steps, whatever the machine's speed: that is the
    # evidence, and the seed fixes it. The guard (SEARCH_SHARE of the check's generous hang limit) only
    # lets a search that cannot finish say so, inconclusive, before the outside deadline kills it.
    budget = SearchBudget(check_seconds(request) * SEARCH_SHARE)
    # One pace for the whole search: once the driver shows it blocks competitors, later histories wait
    # for a blocked competitor about as long as its transactions take, not a full second each.
    pace = CompetitorPace(ceiling=COMPETITOR_FINISH_GRACE)
    machine = type(
        "RunlaneStoreMachine", (StoreMachine,), {"harness": runlane_harness, "budget": budget, "pace": pace}
    )
    # settings() inherits the active profile (no deadline, printed blob); steps come from the profile and
    # examples are capped at 150 so the thorough profile stays inside the check's timeout on a locking driver.
    active = settings()
    run_machine: Any = run_state_machine_as_test  # typed only in newer Hypothesis releases
    try:
        with plain_hypothesis_errors("random histories against the serial model", budget):
            run_machine(
                machine,
                settings=settings(
                    active,
                    stateful_step_count=stateful_step_count(),
                    max_examples=min(active.max_examples, MAX_HISTORIES),
                ),
            )
    finally:
        record_search(budget.examples, budget.steps)


# -- the differential workload: the driver and the reference run the same random programs -------------------


def _require_settle_hook(harness: DriverHarness) -> None:
    """Skip (``NO_SETTLE_REASON``, which the verdict makes inconclusive) when the driver's indexes are
    eventual and its store has no ``settle`` hook: a scan that lags a commit cannot be told from a wrong
    one then, and waiting proves nothing."""
    from runlane_conformance.fixtures.gating import NO_SETTLE_REASON
    from runlane_conformance.harness import settle_store

    store = harness.open_store()
    try:
        driver = store.connect()
        eventual = indexes_are_eventual(driver)
        driver.close()
        if eventual and settle_store(store, timeout=1.0) is None:
            pytest.skip(NO_SETTLE_REASON)
    finally:
        store.close()


def _has_address(harness: DriverHarness) -> bool:
    store = harness.open_store()
    try:
        return store.address() is not None
    finally:
        store.close()


def _differential(runlane_harness: DriverHarness, request: pytest.FixtureRequest, family: str) -> None:
    """Run the profile's programs, failing with the first divergence of ``family`` (shrunk)."""
    from runlane_conformance.suites._differential_support import differential_search

    if family == "scans":
        _require_settle_hook(runlane_harness)
    budget = SearchBudget(check_seconds(request) * SEARCH_SHARE)
    # Where the store has an address, some steps run in a worker process (the session's pool).
    workers = request.getfixturevalue("runlane_worker_pool") if _has_address(runlane_harness) else None
    try:
        with plain_hypothesis_errors(f"random programs against the reference ({family})", budget):
            differential_search(runlane_harness, family, budget, workers=workers)
    finally:
        record_search(budget.examples, budget.steps)


@DIFFERENTIAL_READS
@searches
def test_random_programs_read_and_leave_what_the_reference_does(
    runlane_harness: DriverHarness, request: pytest.FixtureRequest
) -> None:
    """Every table, key shape, value shape, instance and clock jump crossed at random: the reads, errors and
    content must be the serial outcome (the reference driver given the same limits computes it)."""
    _differential(runlane_harness, request, "reads")


@DIFFERENTIAL_SCANS
@searches
def test_random_scans_inside_random_programs_match_the_reference(
    runlane_harness: DriverHarness, request: pytest.FixtureRequest
) -> None:
    """Scans of every catalogued index, with ranges, directions, pages and modes drawn at random between
    random writes, on any instance: each joins to the entries of the serial outcome."""
    _differential(runlane_harness, request, "scans")


@SCAN_RELATIONS
@searches
def test_scans_and_reads_keep_their_metamorphic_relations(
    runlane_harness: DriverHarness, request: pytest.FixtureRequest
) -> None:
    """No reference is consulted: each relation compares two answers of the driver itself, so a driver
    with its own legitimate choices (eventual indexes, locks, short exclusive pages) is judged fairly."""
    from runlane_conformance.suites._differential_support import relations_search

    _require_settle_hook(runlane_harness)
    budget = SearchBudget(check_seconds(request) * SEARCH_SHARE)
    try:
        with plain_hypothesis_errors("metamorphic relations on random programs", budget):
            relations_search(runlane_harness, budget)
    finally:
        record_search(budget.examples, budget.steps)
