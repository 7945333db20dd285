"""Run pruning: exact counters, tombstones that hide at once, and bounded cleanup that never orphans.

Core prunes a finished run in two phases (``runlane_conformance.core.pruning``):
one commit tombstones it with an exact copy of its child counts, then
bounded cleanup passes delete children found through the run's child
indexes and lower the tombstone's counters in the same commit, until every
counter is zero and the run and tombstone go together. The driver's part is
to make each pass atomic and fenced (two racing passes never both commit on
the same counters), to roll a failed pass back completely, to keep counts
durable and exact, to deliver index entries (at once, or eventually), and to
accept every pass that fits its advertised limits.

Every check compares counters with the children that really exist, read by
point reads on another instance, never by trusting an index page.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from runlane_conformance.catalogue.pruning import (
    BOUNDED,
    COUNTERS,
    HIDDEN,
    INTERRUPTED,
    LIMITS,
    MODEL,
    RACE,
    STALE,
)
from runlane_conformance.contract.catalog import StorageIndexName
from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.table_definitions import (
    run_record_key,
    tombstone_record_key,
    wait_token_link_record_key,
    wait_token_record_key,
)
from runlane_conformance.contract.values import (
    QueryRecordsCommand,
    StorageLimits,
    StorageQueryRange,
    StorageRecordKey,
)
from runlane_conformance.core.pruning import (
    CleanupPass,
    PassBudget,
    PassStatus,
    TombstoneOutcome,
    cleanup_pass,
    tombstone_run,
)
from runlane_conformance.core.runs import (
    ChildKind,
    RunChildren,
    add_run_children,
    child_counts,
    create_run,
    finish_run,
)
from runlane_conformance.core.wait_tokens import link_run
from runlane_conformance.fixtures.convergence import (
    forget_instance,
    index_waiter,
    register_instance,
    until_indexed,
)
from runlane_conformance.fixtures.gating import OPERATOR_READ_METHODS
from runlane_conformance.fixtures.hypothesis_profiles import machine_settings
from runlane_conformance.fixtures.interleave import Competitor
from runlane_conformance.fixtures.limit_gates import limit_gated
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites._hypothesis_support import (
    CountedMachine,
    SearchBudget,
    plain_hypothesis_errors,
    record_machine,
    searches,
)
from runlane_conformance.suites._lifecycle_support import (
    BuiltRun,
    build_run,
    counted_children,
    fresh_environment,
    index_scan,
    make_token,
    prune_fully,
    read_all,
    start_rival,
    stored_entries,
    token_spec,
    tombstone_counts,
)
from runlane_conformance.suites._messages import missing, propagated
from runlane_conformance.suites._operator_support import collect_pages, document_of, page_of


def _budget(driver: StorageDriver) -> PassBudget:
    return PassBudget.from_limits(driver.profile.limits)


def _small(driver: StorageDriver, *, page: int = 1) -> PassBudget:
    """The smallest pass: the tombstone plus one or two children (within the driver's limits)."""
    return PassBudget.from_limits(driver.profile.limits, point_reads=3, records=3, page=page)


def _one_pass(driver: StorageDriver, built: BuiltRun, budget: PassBudget | None = None) -> CleanupPass:
    chosen = budget or _budget(driver)
    return driver.transaction(lambda tx: cleanup_pass(tx, built.environment, built.run_id, chosen))


def _tombstone(driver: StorageDriver, built: BuiltRun) -> None:
    outcome = driver.transaction(lambda tx: tombstone_run(tx, built.environment, built.run_id))
    assert outcome is TombstoneOutcome.TOMBSTONED, f"tombstoning {built.run_id} returned {outcome}"


def _assert_counters_match(reader: StorageDriver, built: BuiltRun, when: str) -> None:
    """The tombstone (or the visible run) counts exactly the children that exist; tokens count their links."""
    actual = counted_children(reader, built)
    counts = tombstone_counts(reader, built)
    if counts is None:
        [run] = read_all(reader, [built.key])
        if run is None:
            assert not any(actual.values()), (
                f"{when}: run and tombstone are gone but children remain: {actual}"
            )
            return
        counts = child_counts(run)
    assert counts == actual, (
        f"{when}: counters say {_plain(counts)} but the children that exist are {_plain(actual)}"
    )
    _assert_token_links(reader, built, when)


def _assert_token_links(reader: StorageDriver, built: BuiltRun, when: str) -> None:
    links = read_all(reader, list(built.children.get(ChildKind.WAIT_TOKEN_LINKS, ())))
    tokens = read_all(reader, built.token_keys)
    for token_id, link, token in zip(built.tokens, links, tokens, strict=True):
        assert token is not None, f"{when}: wait token {token_id} vanished while pruning a run linked to it"
        expected = 1 if link is not None else 0
        count = int(str(token.document.value["linkCount"]))
        assert count == expected, f"{when}: token {token_id} counts {count} links, {expected} exist"


def _assert_gone(reader: StorageDriver, built: BuiltRun) -> None:
    left = [
        key
        for key, record in zip(built.all_children, read_all(reader, built.all_children), strict=True)
        if record
    ]
    assert not left, f"cleanup finished but children remain (orphans): {left}"
    assert read_all(reader, [built.key, built.tombstone_key]) == [None, None], (
        "the run or its tombstone remains"
    )
    _assert_token_links(reader, built, "after cleanup")


#: Each index a pruned run, its tombstone or its children could still be listed under, with the sort prefix
#: that selects the run (``None``: the whole partition, scanned for the tombstone's key).
_RUN_INDEXES: tuple[tuple[StorageIndexName, bool], ...] = (
    (StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER, False),
    (StorageIndexName.EVENTS_BY_RUN, True),
    (StorageIndexName.STEPS_BY_RUN, True),
    (StorageIndexName.OUTBOX_BY_RUN, True),
    (StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, True),
)


def _assert_unindexed(reader: StorageDriver, built: BuiltRun) -> None:
    """No index still lists the pruned run's tombstone or children: deletes took their entries along."""
    gone = {built.tombstone_key.encoded, *(key.encoded for key in built.all_children)}

    def check() -> None:
        for index, by_run in _RUN_INDEXES:
            scope = StorageQueryRange.prefix((built.run_id,)) if by_run else StorageQueryRange()
            command = QueryRecordsCommand(
                index, built.environment, max(1, min(50, reader.profile.limits.max_query_results)), scope
            )
            listed: list[str] = []
            for _ in range(200):
                page = reader.query(command)
                listed.extend(item.key.encoded for item in page.items)
                if page.cursor is None:
                    break
                command = command.with_cursor(page.cursor)
            stale = sorted(key for key in listed if key in gone)
            assert not stale, (
                f"after cleanup deleted run {built.run_id} and its tombstone and children, {index.value} "
                f"still lists {len(stale)} of those deleted records: deleting a record removes its index "
                "entries in the same commit"
            )

    until_indexed(reader, check)


def _plain(counts: dict[ChildKind, int]) -> dict[str, int]:
    return {kind.value: count for kind, count in counts.items()}


@COUNTERS
def test_counts_are_copied_to_the_tombstone_and_lowered_exactly_by_each_pass(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("prune")
    built = build_run(driver, env, "r1", events=3, steps=2, outbox=2, tokens=("t1", "t2"))
    sibling = build_run(other_driver, env, "r10", events=2, steps=1, tokens=("t3",))  # its id extends "r1"
    # The same run id in a neighbour environment (whose name extends this one): nothing of it is touched.
    neighbour = build_run(other_driver, f"{env}x", "r1", events=2, steps=1, outbox=1, tokens=("t1",))
    [run] = read_all(other_driver, [built.key])
    assert run is not None, missing("the built run r1", written="the check built it just before")
    expected = {
        ChildKind.EVENTS: 3,
        ChildKind.STEPS: 2,
        ChildKind.OUTBOX_MESSAGES: 2,
        ChildKind.WAIT_TOKEN_LINKS: 2,
    }
    assert child_counts(run) == expected, (
        f"the run counts {_plain(child_counts(run))}, {_plain(expected)} were added"
    )
    _tombstone(driver, built)
    assert tombstone_counts(other_driver, built) == expected, (
        "the tombstone is not an exact copy of the run's counts"
    )
    small = _small(driver)  # one or two children per pass
    for number in range(1, 40):
        result = _one_pass(driver if number % 2 else other_driver, built, small)
        _assert_counters_match(other_driver, built, f"after pass {number}")
        if result.status is PassStatus.FINISHED:
            break
        if result.status is PassStatus.STALLED:
            prune_fully(driver, env, built.run_id)
            break
    _assert_gone(other_driver, built)
    _assert_unindexed(other_driver, built)
    _assert_counters_match(driver, sibling, "the sibling run after pruning r1")
    assert counted_children(driver, sibling)[ChildKind.EVENTS] == 2, "pruning r1 deleted children of r10"
    _assert_counters_match(driver, neighbour, "r1 of the neighbour environment after pruning r1")
    assert counted_children(driver, neighbour)[ChildKind.EVENTS] == 2, (
        "pruning r1 deleted children of the neighbour environment's r1"
    )


@HIDDEN
def test_tombstoning_removes_the_run_from_operational_and_operator_reads_in_its_commit(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("prune")
    # Both are children of one parent run, so RunsByParent lists them like the status and creation indexes.
    built = build_run(driver, env, "hidden", events=2, parent="root")
    keep = build_run(driver, env, "kept", events=1, parent="root")
    operator = all(callable(getattr(other_driver, name, None)) for name in OPERATOR_READ_METHODS)
    _tombstone(driver, built)
    if operator:
        viewer: Any = other_driver
        assert viewer.get_run(env, "hidden") is None, "get_run still returns a tombstoned run"
        page = min(10, other_driver.profile.limits.max_query_results)
        items, _cursor = page_of(viewer.list_run_events(env, "hidden", limit=page))
        assert not items, "list_run_events still returns the tombstoned run's history"
        runs = collect_pages(lambda cursor: viewer.list_runs(env, limit=page, cursor=cursor), limit=page)
        listed = [document_of(item)["runId"] for item in runs]
        assert listed == ["kept"], f"list_runs shows {listed} right after tombstoning 'hidden'"
        assert viewer.get_run(env, "kept") is not None, (
            "get_run of a run that was not tombstoned must still return it"
        )
    [run] = read_all(other_driver, [built.key])
    assert run is not None and run.document.value["tombstonedAt"] is not None, (
        "the tombstoned run must stay readable"
    )

    def operational() -> None:
        for index in (
            StorageIndexName.RUNS_BY_STATUS,
            StorageIndexName.RUNS_BY_CREATED_AT,
            StorageIndexName.RUNS_BY_PARENT,
        ):
            for path, items in index_scan(other_driver, index, env).items():
                keys = [key for _sort, key in items]
                assert built.key.encoded not in keys, (
                    f"{index.value} via {path} still lists the tombstoned run"
                )
                assert keep.key.encoded in keys, f"{index.value} via {path} lost a visible run"
        stones = read_all(other_driver, [built.tombstone_key])
        expected = stored_entries(stones, StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER)
        for path, items in index_scan(other_driver, StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER, env).items():
            assert items == expected, f"TombstonesByPruneAfter via {path} holds {items}, expected {expected}"

    until_indexed(other_driver, operational)


@STALE
def test_passes_on_a_lagging_or_empty_page_never_finish_early(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("prune")
    # All children in the last few commits before cleanup starts, so a lagging index has not listed them.
    built = build_run(driver, env, "stale", events=3, steps=2, outbox=1)
    _tombstone(driver, built)
    for number in range(1, 6):  # straight after the writes: an eventual index may still be behind
        result = _one_pass(other_driver, built)
        _assert_counters_match(driver, built, f"after early pass {number}")
        if result.status is PassStatus.FINISHED:
            break
    passes = prune_fully(other_driver, env, built.run_id)
    assert passes[-1].status in (PassStatus.FINISHED, PassStatus.GONE), f"cleanup ended with {passes[-1]}"
    _assert_gone(driver, built)


def _tripwire(
    tx: StorageTransaction, method: str, nth: int, action: Callable[[], None]
) -> StorageTransaction:
    """``tx`` with ``action`` run just before its ``nth`` call of ``method`` (``get``, ``delete`` ...)."""
    calls = {"count": 0}

    class Tripwire:
        def __getattr__(self, name: str) -> Any:
            target = getattr(tx, name)
            if name != method:
                return target

            def wrapped(*args: Any, **kwargs: Any) -> Any:
                calls["count"] += 1
                if calls["count"] == nth:
                    action()
                return target(*args, **kwargs)

            return wrapped

    return Tripwire()


@RACE
@pytest.mark.parametrize("race_point", ["query_candidates", "get", "delete"])
def test_two_passes_racing_on_two_instances_never_double_count_or_orphan(
    driver: StorageDriver, other_driver: StorageDriver, race_point: str
) -> None:
    env = fresh_environment("prune")
    built = build_run(driver, env, "raced", events=4, steps=2, outbox=1, tokens=("t1", "t2"))
    _tombstone(driver, built)
    until_indexed(driver, lambda: _children_listed(driver, built))
    # Two small, different budgets: mine takes two events, theirs one event and one step, so the passes
    # overlap in part and each leaves work behind; only a fence on the tombstone keeps both counts exact.
    mine, theirs = _small(driver, page=2), _small(driver)
    started: list[Competitor[CleanupPass]] = []

    def race() -> None:
        if not started:
            started.append(start_rival(other_driver, lambda tx: cleanup_pass(tx, env, built.run_id, theirs)))

    nth = 2 if race_point == "get" else 1

    def main(tx: StorageTransaction) -> CleanupPass:
        return cleanup_pass(_tripwire(tx, race_point, nth, race), env, built.run_id, mine)

    with contextlib.suppress(StorageConflictError):  # giving up after conflicts is allowed; the state decides
        driver.transaction(main)
    assert started, f"the race point {race_point} was never reached"
    outcome = started[0].outcome()
    if isinstance(outcome, BaseException) and not isinstance(outcome, StorageConflictError):
        raise outcome
    _assert_counters_match(other_driver, built, "after two racing passes")
    prune_fully(driver, env, built.run_id)
    _assert_gone(other_driver, built)


def _children_listed(driver: StorageDriver, built: BuiltRun) -> None:
    for kind in ChildKind:
        keys = built.children.get(kind, ())
        if keys:
            listed = {key for _sort, key in index_scan(driver, kind.index_name, built.environment)["query"]}
            missing = [key for key in keys if key.encoded not in listed]
            assert not missing, f"{kind.index_name.value} does not list children {missing}"


class Interrupted(Exception):
    """Raised from inside a cleanup pass on purpose, after it staged some of its work."""


class Halted(BaseException):
    """Like ``Interrupted`` but not an Exception (as KeyboardInterrupt): cleanup for Exception misses it."""


@INTERRUPTED
@pytest.mark.parametrize("after", [1, 2, 3])  # the smallest pass stages three writes
@pytest.mark.parametrize("raised", [Interrupted, Halted], ids=["exception", "base-exception"])
def test_a_pass_that_raises_midway_leaves_nothing_and_cleanup_resumes(
    driver: StorageDriver, other_driver: StorageDriver, after: int, raised: type[BaseException]
) -> None:
    env = fresh_environment("prune")
    built = build_run(driver, env, "cut", events=3, steps=2, tokens=("t1",))
    _tombstone(driver, built)
    until_indexed(driver, lambda: _children_listed(driver, built))
    before = counted_children(other_driver, built)

    def boom() -> None:
        raise raised(f"interrupted before staged write {after}")

    def interrupted(tx: StorageTransaction) -> CleanupPass:
        return cleanup_pass(_staging_tripwire(tx, after, boom), env, built.run_id, _budget(driver))

    with propagated(
        raised, what=f"the cleanup pass's callback raised {raised.__name__} after its staged write {after}"
    ):
        driver.transaction(interrupted)
    assert counted_children(other_driver, built) == before, "a pass that raised deleted children"
    _assert_counters_match(other_driver, built, "after the interrupted pass")
    prune_fully(other_driver, env, built.run_id)
    _assert_gone(driver, built)


def _staging_tripwire(tx: StorageTransaction, after: int, action: Callable[[], None]) -> StorageTransaction:
    """``tx`` that runs ``action`` once ``after`` writes (deletes or replaces) were staged."""
    staged = {"count": 0}

    class Staging:
        def __getattr__(self, name: str) -> Any:
            target = getattr(tx, name)
            if name not in ("delete", "replace", "create"):
                return target

            def wrapped(*args: Any, **kwargs: Any) -> Any:
                result = target(*args, **kwargs)
                staged["count"] += 1
                if staged["count"] == after:
                    action()
                return result

            return wrapped

    return Staging()


@LIMITS
@limit_gated("pruning-two-passes")
def test_a_run_larger_than_one_pass_is_pruned_in_passes_the_driver_accepts(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    limits: StorageLimits = driver.profile.limits
    budget = _budget(driver)
    per_pass = min(budget.page, budget.point_reads - 1, budget.records - 1)
    env = fresh_environment("prune")
    built = build_run(driver, env, "big", events=per_pass + 2, steps=1, tokens=("t1",))
    _tombstone(driver, built)
    passes = prune_fully(other_driver, env, built.run_id)
    deleted = [sum(result.deleted.values()) for result in passes]
    total = len(built.all_children)
    assert max(deleted) >= per_pass, (
        f"no pass used the whole budget of {per_pass} children that limits {limits} allow: {deleted}"
    )
    assert sum(1 for count in deleted if count) >= 2, (
        f"{total} children were pruned in passes deleting {deleted}"
    )
    _assert_gone(driver, built)


# -- random histories --------------------------------------------------------------------------------


#: At most this many histories per run, whatever the profile asks: each one opens a fresh store.
MAX_HISTORIES = 150
#: Runs per history and steps per history at most: few runs make deep lifecycles (children, tombstone,
#: several passes) likely within the steps, and short histories keep shrinking a failure to seconds.
MAX_RUNS, MAX_STEPS = 2, 16


@dataclass
class _ModelRun:
    state: str = "running"  # running | finished | tombstoned | gone
    children: dict[ChildKind, set[StorageRecordKey]] = field(
        default_factory=lambda: {k: set() for k in ChildKind}
    )
    tokens: set[str] = field(default_factory=set)


class PruningMachine(CountedMachine):
    """Core's pruning flow on a fresh store per example, checked against a small model after every step."""

    harness: DriverHarness

    def __init__(self) -> None:
        super().__init__()
        self.store = self.harness.open_store()
        self.drivers = (self.store.connect(), self.store.connect())
        for instance in self.drivers:
            register_instance(instance, self.store)
        self.env = "pruning-model"
        self.runs: dict[str, _ModelRun] = {}
        self.tokens: set[str] = set()
        self.small = _small(self.drivers[0])

    def teardown(self) -> None:
        for instance in self.drivers:
            forget_instance(instance)
            instance.close()
        self.store.close()

    def _has(self, state: str) -> bool:
        return any(run.state == state for run in self.runs.values())

    def _in(self, state: str) -> list[str]:
        return sorted(run_id for run_id, run in self.runs.items() if run.state == state)

    @precondition(lambda self: len(self.runs) < MAX_RUNS)
    @rule()
    def new_run(self) -> None:
        """A run that starts with two events, so every later cleanup of it has more than one pass of work."""
        run_id = f"r{len(self.runs)}"
        self.drivers[0].transaction(lambda tx: create_run(tx, self.env, run_id))
        self.runs[run_id] = model = _ModelRun()
        first = RunChildren(events=2)
        keys = self.drivers[0].transaction(lambda tx: add_run_children(tx, self.env, run_id, first))
        model.children[ChildKind.EVENTS].update(keys)

    @rule(
        data=st.data(), kind=st.sampled_from([ChildKind.EVENTS, ChildKind.STEPS, ChildKind.OUTBOX_MESSAGES])
    )
    def add_children(self, data: st.DataObject, kind: ChildKind) -> None:
        running = self._in("running")
        if not running:
            return
        run_id = data.draw(st.sampled_from(running), label="run")
        model = self.runs[run_id]
        most = min(3, self.drivers[0].profile.limits.max_transaction_records - 1)  # the run is rewritten too
        count = data.draw(st.integers(1, max(1, most)), label="count")
        serial = sum(len(keys) for keys in model.children.values())
        children = RunChildren(
            events=count if kind is ChildKind.EVENTS else 0,
            steps=tuple(f"s{serial + n}" for n in range(count)) if kind is ChildKind.STEPS else (),
            outbox_messages=tuple(f"m{serial + n}" for n in range(count))
            if kind is ChildKind.OUTBOX_MESSAGES
            else (),
        )
        keys = self.drivers[1].transaction(lambda tx: add_run_children(tx, self.env, run_id, children))
        model.children[kind].update(keys)

    @precondition(lambda self: self._has("running"))
    @rule(data=st.data())
    def link_token(self, data: st.DataObject) -> None:
        running = self._in("running")
        if not running:
            return
        run_id = data.draw(st.sampled_from(running), label="run")
        choices = sorted(self.tokens - self.runs[run_id].tokens)
        token = data.draw(st.sampled_from([*choices, f"t{len(self.tokens)}"]), label="token")
        if token not in self.tokens:
            make_token(self.drivers[0], token_spec(self.env, token, run_id))
            self.tokens.add(token)
        self.drivers[1].transaction(lambda tx: link_run(tx, self.env, token, run_id))
        self.runs[run_id].tokens.add(token)
        self.runs[run_id].children[ChildKind.WAIT_TOKEN_LINKS].add(
            wait_token_link_record_key(self.env, token, run_id)
        )

    @precondition(lambda self: self._has("running"))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        running = self._in("running")
        if running:
            run_id = data.draw(st.sampled_from(running), label="run")
            self.drivers[0].transaction(lambda tx: finish_run(tx, self.env, run_id))
            self.runs[run_id].state = "finished"

    @precondition(lambda self: self._has("finished"))
    @rule(data=st.data())
    def tombstone(self, data: st.DataObject) -> None:
        finished = self._in("finished")
        if finished:
            run_id = data.draw(st.sampled_from(finished), label="run")
            outcome = self.drivers[1].transaction(lambda tx: tombstone_run(tx, self.env, run_id))
            assert outcome is TombstoneOutcome.TOMBSTONED, f"tombstoning {run_id} returned {outcome}"
            self.runs[run_id].state = "tombstoned"

    @precondition(lambda self: self._has("tombstoned"))
    @rule(data=st.data(), instance=st.integers(0, 1), size=st.sampled_from(["small", "medium", "full"]))
    def cleanup(self, data: st.DataObject, instance: int, size: str) -> None:
        run_id = data.draw(st.sampled_from(self._in("tombstoned")), label="run")
        budget = self._budgets()[size]
        result = self.drivers[instance].transaction(lambda tx: cleanup_pass(tx, self.env, run_id, budget))
        self._observe(run_id, result)

    def _budgets(self) -> dict[str, PassBudget]:
        return {
            "small": self.small,
            "medium": _small(self.drivers[0], page=2),  # two of one kind: overlaps a small pass in part
            "full": PassBudget.from_limits(self.drivers[0].profile.limits),
        }

    @precondition(lambda self: self._has("tombstoned"))
    @rule(data=st.data(), size=st.sampled_from(["medium", "full"]))
    def racing_cleanups(self, data: st.DataObject, size: str) -> None:
        run_id = data.draw(st.sampled_from(self._in("tombstoned")), label="run")
        started: list[Competitor[CleanupPass]] = []
        mine = self._budgets()[size]  # against the rival's small pass

        def main(tx: StorageTransaction) -> CleanupPass:
            def start() -> None:
                if not started:
                    rival = self.drivers[1]
                    started.append(
                        start_rival(rival, lambda t: cleanup_pass(t, self.env, run_id, self.small))
                    )

            return cleanup_pass(_tripwire(tx, "get", 2, start), self.env, run_id, mine)

        results: list[Any] = []
        with contextlib.suppress(
            StorageConflictError
        ):  # a driver may give up after conflicts; the state decides
            results.append(self.drivers[0].transaction(main))
        if started:
            outcome = started[0].outcome()
            if isinstance(outcome, BaseException) and not isinstance(outcome, StorageConflictError):
                raise outcome
            results.append(outcome)
        # Observe a finishing pass first: the other one may then have found the run already gone.
        passes = sorted(
            (result for result in results if isinstance(result, CleanupPass)),
            key=lambda result: result.status is not PassStatus.FINISHED,
        )
        for result in passes:
            self._observe(run_id, result)

    @precondition(lambda self: self._has("tombstoned"))
    @rule(data=st.data())
    def prune_to_the_end(self, data: st.DataObject) -> None:
        run_id = data.draw(st.sampled_from(self._in("tombstoned")), label="run")
        for instance in (0, 1, 0, 1):  # a few small passes from alternating instances, then the rest at once
            result = self.drivers[instance].transaction(
                lambda tx: cleanup_pass(tx, self.env, run_id, self.small)
            )
            self._observe(run_id, result)
            if self.runs[run_id].state == "gone":
                return
        prune_fully(self.drivers[0], self.env, run_id)
        self.runs[run_id].state = "gone"

    def _observe(self, run_id: str, result: CleanupPass) -> None:
        if result.status is PassStatus.FINISHED:
            self.runs[run_id].state = "gone"
        elif result.status is PassStatus.GONE:
            assert self.runs[run_id].state == "gone", f"cleanup found {run_id} gone while it was tombstoned"

    @invariant()
    def every_record_agrees_with_the_model(self) -> None:
        reader = self.drivers[1]
        links_per_token: dict[str, int] = dict.fromkeys(self.tokens, 0)
        for run_id, model in self.runs.items():
            keys = [
                key for kind in ChildKind for key in sorted(model.children[kind], key=lambda k: k.encoded)
            ]
            run, stone, *children = read_all(
                reader, [run_record_key(self.env, run_id), tombstone_record_key(self.env, run_id), *keys]
            )
            present = dict(zip(keys, children, strict=True))
            existing = {kind: sum(1 for key in model.children[kind] if present[key]) for kind in ChildKind}
            for token in model.tokens:
                if present[wait_token_link_record_key(self.env, token, run_id)]:
                    links_per_token[token] += 1
            if model.state == "gone":
                assert run is None and stone is None, f"{run_id} was pruned but its run or tombstone remains"
                assert not any(existing.values()), f"{run_id} was pruned but left children {existing}"
                continue
            assert run is not None, f"run {run_id} ({model.state}) is missing"
            if model.state in ("running", "finished"):
                expected = {kind: len(keys) for kind, keys in model.children.items()}
                assert stone is None, f"visible run {run_id} has a tombstone"
                assert existing == expected, f"visible run {run_id} lost children: {existing} of {expected}"
                assert child_counts(run) == expected, (
                    f"run {run_id} counts {child_counts(run)}, has {expected}"
                )
            else:
                assert stone is not None, f"tombstoned run {run_id} has no tombstone"
                assert child_counts(stone) == existing, (
                    f"tombstone of {run_id} counts {child_counts(stone)} but {existing} children exist"
                )
        token_records = read_all(
            reader, [wait_token_record_key(self.env, token) for token in sorted(self.tokens)]
        )
        for token, record in zip(sorted(self.tokens), token_records, strict=True):
            assert record is not None, f"token {token} vanished"
            count = int(str(record.document.value["linkCount"]))
            assert count == links_per_token[token], (
                f"token {token} counts {count} links, {links_per_token[token]} exist"
            )


@MODEL
@searches
def test_random_pruning_histories_keep_the_invariants(runlane_harness: DriverHarness) -> None:
    tally = SearchBudget(seconds=None)
    machine = type("RunlanePruningMachine", (PruningMachine,), {"harness": runlane_harness, "tally": tally})
    run_machine: Any = run_state_machine_as_test  # typed only in newer Hypothesis releases
    # Histories and steps come from the profile and the seed; the check's deadline only guards hangs.
    try:
        with plain_hypothesis_errors("random pruning histories"):
            run_machine(machine, settings=machine_settings(MAX_HISTORIES, MAX_STEPS))
    finally:
        record_machine(tally)


# -- bounded passes ----------------------------------------------------------------------------------


#: (point reads, records, page, bytes tight): each dimension in turn the tight one, and the smallest
#: pass of three keys. A tight byte budget fits the tombstone and one rewritten token, no more.
TIGHT_BUDGETS: tuple[tuple[int, int, int, bool], ...] = (
    (3, 3, 1, False),
    (7, 4, 5, False),
    (4, 7, 5, False),
    (8, 8, 5, True),
)


@dataclass
class _AttemptUse:
    """What one attempt of a cleanup pass asked of the driver."""

    reads: int = 0
    writes: int = 0
    bytes: int = 0  # of the documents created or rewritten (deletes cost none)
    pages: list[tuple[int, int]] = field(default_factory=list)  # (page size asked, items returned)


def _metered(tx: StorageTransaction, use: _AttemptUse) -> StorageTransaction:
    """``tx`` that counts the keys each call reads or writes, and each candidate page's length."""

    class Metered:
        def __getattr__(self, name: str) -> Any:
            return getattr(tx, name)

        def get(self, keys: Any) -> Any:
            use.reads += len(keys)
            return tx.get(keys)

        def query_candidates(self, command: Any, **kwargs: Any) -> Any:
            result = tx.query_candidates(command, **kwargs)
            use.pages.append((command.limit, len(result.items)))
            return result

        def create(self, record: Any) -> None:
            use.writes += 1
            use.bytes += record.document.size
            tx.create(record)

        def replace(self, current: Any, record: Any) -> None:
            use.writes += 1
            use.bytes += record.document.size
            tx.replace(current, record)

        def delete(self, current: Any) -> None:
            use.writes += 1
            tx.delete(current)

    return Metered()


@BOUNDED
@pytest.mark.parametrize(
    "tight", TIGHT_BUDGETS, ids=[f"{r}-{w}-{p}{'-bytes' if b else ''}" for r, w, p, b in TIGHT_BUDGETS]
)
def test_every_cleanup_attempt_stays_within_the_budget_it_was_sized_to(
    driver: StorageDriver, other_driver: StorageDriver, tight: tuple[int, int, int, bool]
) -> None:
    reads, records, page, tight_bytes = tight
    budget = PassBudget.from_limits(driver.profile.limits, point_reads=reads, records=records, page=page)
    env = fresh_environment("bounded")
    built = build_run(driver, env, "r1", events=4, steps=2, outbox=2, tokens=("t1", "t2"))
    _tombstone(driver, built)
    if tight_bytes:
        stone, token = read_all(other_driver, [built.tombstone_key, built.token_keys[0]])
        assert stone is not None and token is not None, missing(
            "r1's tombstone and token t1", written="the check tombstoned r1 just before"
        )
        budget = dataclasses.replace(budget, bytes=stone.document.size + token.document.size)
    waiter = index_waiter(driver)
    stalls = 0
    for number in range(1, 60):
        attempts: list[_AttemptUse] = []

        def one_pass(tx: StorageTransaction, attempts: list[_AttemptUse] = attempts) -> CleanupPass:
            use = _AttemptUse()
            attempts.append(use)
            return cleanup_pass(_metered(tx, use), env, built.run_id, budget)

        result = driver.transaction(one_pass)
        for use in attempts:
            for asked, returned in use.pages:
                assert returned <= asked, (
                    f"pass {number}: query_candidates returned {returned} candidates for a page of {asked}"
                )
            assert use.reads <= budget.point_reads and use.writes <= budget.records, (
                f"pass {number} with budget {budget} point-read {use.reads} and wrote {use.writes} keys"
            )
            assert use.bytes <= budget.bytes, (
                f"pass {number} with budget {budget} rewrote {use.bytes} bytes of documents"
            )
        if result.status in (PassStatus.FINISHED, PassStatus.GONE):
            break
        if result.status is not PassStatus.STALLED:
            stalls = 0
            continue
        stalls += 1  # an eventual index behind: wait (boundedly) for it, as core's prune_run does
        assert stalls <= waiter.max_calls, f"cleanup stalled {stalls} passes in a row with budget {budget}"
        waiter()
    else:
        pytest.fail(f"cleanup with budget {budget} did not finish in 59 passes")
    _assert_gone(other_driver, built)


def _token_links(reader: StorageDriver, built: BuiltRun) -> list[int]:
    """The ``linkCount`` of each of ``built``'s tokens, read on ``reader``."""
    tokens = read_all(reader, built.token_keys)
    counts = []
    for token_id, token in zip(built.tokens, tokens, strict=True):
        assert token is not None, f"wait token {token_id} vanished while a run still links it"
        counts.append(int(str(token.document.value["linkCount"])))
    return counts


@COUNTERS
def test_a_token_shared_by_two_runs_loses_exactly_one_link_per_pruned_run(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """A token two runs wait on counts both links; pruning one run lowers it by one, not to zero."""
    env = fresh_environment("shared")
    first = build_run(driver, env, "r1", events=1, tokens=("t1", "t2"))
    second = build_run(other_driver, env, "r2", events=1, tokens=("t1",))
    assert _token_links(other_driver, first) == [2, 1], (
        f"tokens t1 (linked by r1 and r2) and t2 (by r1) count {_token_links(other_driver, first)} links"
    )
    _tombstone(driver, first)
    prune_fully(driver, env, first.run_id)
    left = [
        key
        for key, record in zip(first.all_children, read_all(other_driver, first.all_children), strict=True)
        if record
    ]
    assert not left, f"cleanup of r1 finished but its children remain (orphans): {left}"
    assert read_all(other_driver, [first.key, first.tombstone_key]) == [None, None], (
        "r1 or its tombstone remains"
    )
    assert _token_links(other_driver, first)[1] == 0, (
        "after pruning r1, token t2 (linked by r1 only) counts links"
    )
    [remaining] = _token_links(other_driver, second)
    assert remaining == 1, f"after pruning r1, token t1 (still linked by r2) counts {remaining} links"
    _tombstone(other_driver, second)
    prune_fully(other_driver, env, second.run_id)
    _assert_gone(driver, second)
    assert _token_links(driver, second) == [0], "after pruning both runs, token t1 still counts links"


@limit_gated("pruning-passes")
@LIMITS
def test_a_run_needing_five_full_passes_is_pruned_to_the_end(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """Cleanup keeps going pass after full pass until every counter is zero, however many passes it takes."""
    budget = _budget(driver)
    per_pass = min(budget.page, budget.point_reads - 1, budget.records - 1)
    env = fresh_environment("prune")
    built = build_run(driver, env, "long", events=4 * per_pass + 1)
    _tombstone(driver, built)
    passes = prune_fully(other_driver, env, built.run_id)
    deleted = [sum(result.deleted.values()) for result in passes]
    assert sum(deleted) == len(built.all_children) and sum(1 for count in deleted if count) >= 5, (
        f"{len(built.all_children)} children, at most {per_pass} a pass, were pruned in passes "
        f"deleting {deleted}"
    )
    _assert_gone(driver, built)
