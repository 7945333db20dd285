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
from collections.abc import Callable
from typing import Any

import pytest

from runlane_conformance.contract.catalog import StorageIndexName
from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import StorageLimits
from runlane_conformance.core.pruning import (
    CleanupPass,
    PassBudget,
    PassStatus,
    TombstoneOutcome,
    cleanup_pass,
    tombstone_run,
)
from runlane_conformance.core.runs import ChildKind, child_counts
from runlane_conformance.fixtures.convergence import until_indexed
from runlane_conformance.fixtures.gating import OPERATOR_READ_METHODS
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.requirements import RequirementLevel, requirement
from runlane_conformance.suites._lifecycle_support import (
    BuiltRun,
    build_run,
    counted_children,
    fresh_environment,
    index_scan,
    prune_fully,
    read_all,
    stored_entries,
    tombstone_counts,
)
from runlane_conformance.suites._operator_support import document_of, page_of

CLAUSE = "Preserve pruning invariants"

COUNTERS = requirement(
    "pruning.counters-exact",
    RequirementLevel.MUST,
    CLAUSE,
    "A run's four child counts, the tombstone's copy of them and every count a cleanup pass leaves equal "
    "the children that really exist; linked tokens lose exactly the links deleted; nothing of another run "
    "is touched.",
)
HIDDEN = requirement(
    "pruning.tombstone-hides-in-one-commit",
    RequirementLevel.MUST,
    "Preserve pruning invariants; Keep operator reads separate",
    "The commit that tombstones a run removes it from every operational index (at once on strong indexes, "
    "eventually on eventual ones) and, where operator reads are offered, from them at once, while the run "
    "stays point-readable and its tombstone is listed by TombstonesByPruneAfter.",
)
STALE = requirement(
    "pruning.stale-page-never-ends-cleanup",
    RequirementLevel.MUST,
    CLAUSE,
    "While a counter is above zero the run and its tombstone stay, whatever the index pages show; once the "
    "index has caught up, cleanup finishes with no child left behind.",
)
RACE = requirement(
    "pruning.racing-passes-exact",
    RequirementLevel.MUST,
    CLAUSE,
    "Two cleanup passes racing on two instances end serializably: no child deleted twice into the counts, "
    "no counter lowered for a child that still exists, no orphan.",
)
INTERRUPTED = requirement(
    "pruning.interrupted-pass-resumes",
    RequirementLevel.MUST,
    CLAUSE,
    "A pass whose callback raises after staging some of its deletes leaves nothing behind, and cleanup "
    "resumes to the same end state.",
)
LIMITS = requirement(
    "pruning.passes-fit-advertised-limits",
    RequirementLevel.MUST,
    "Preserve pruning invariants; Report a profile that is true",
    "Cleanup passes sized to the driver's advertised limits (point reads, query page, records, bytes) are "
    "accepted, and a run with more children than one pass can hold is pruned over several passes.",
)


def _budget(driver: StorageDriver) -> PassBudget:
    return PassBudget.from_limits(driver.profile.limits)


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


def _plain(counts: dict[ChildKind, int]) -> dict[str, int]:
    return {kind.value: count for kind, count in counts.items()}


@COUNTERS
def test_counts_are_copied_to_the_tombstone_and_lowered_exactly_by_each_pass(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("prune")
    built = build_run(driver, env, "r1", events=3, steps=2, outbox=2, tokens=("t1", "t2"))
    sibling = build_run(other_driver, env, "r10", events=2, steps=1, tokens=("t3",))  # its id extends "r1"
    [run] = read_all(other_driver, [built.key])
    assert run is not None
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
    small = PassBudget(3, 3, 1, driver.profile.limits.max_transaction_bytes)  # one or two children per pass
    for number in range(1, 40):
        result = _one_pass(driver if number % 2 else other_driver, built, small)
        _assert_counters_match(other_driver, built, f"after pass {number}")
        if result.status is PassStatus.FINISHED:
            break
        if result.status is PassStatus.STALLED:
            prune_fully(driver, env, built.run_id)
            break
    _assert_gone(other_driver, built)
    _assert_counters_match(driver, sibling, "the sibling run after pruning r1")
    assert counted_children(driver, sibling)[ChildKind.EVENTS] == 2, "pruning r1 deleted children of r10"


@HIDDEN
def test_tombstoning_removes_the_run_from_operational_and_operator_reads_in_its_commit(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("prune")
    built = build_run(driver, env, "hidden", events=2)
    keep = build_run(driver, env, "kept", events=1)
    operator = all(callable(getattr(other_driver, name, None)) for name in OPERATOR_READ_METHODS)
    _tombstone(driver, built)
    if operator:
        viewer: Any = other_driver
        assert viewer.get_run(env, "hidden") is None, "get_run still returns a tombstoned run"
        items, _cursor = page_of(viewer.list_run_events(env, "hidden", limit=10))
        assert not items, "list_run_events still returns the tombstoned run's history"
        listed = [document_of(item)["runId"] for item in page_of(viewer.list_runs(env, limit=10))[0]]
        assert listed == ["kept"], f"list_runs shows {listed} right after tombstoning 'hidden'"
        assert viewer.get_run(env, "kept") is not None
    [run] = read_all(other_driver, [built.key])
    assert run is not None and run.document.value["tombstonedAt"] is not None, (
        "the tombstoned run must stay readable"
    )

    def operational() -> None:
        for index in (StorageIndexName.RUNS_BY_STATUS, StorageIndexName.RUNS_BY_CREATED_AT):
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
    room = driver.profile.limits.max_transaction_bytes
    mine, theirs = PassBudget(3, 3, 2, room), PassBudget(3, 3, 1, room)
    started: list[Competitor[CleanupPass]] = []

    def race() -> None:
        if not started:
            started.append(compete(lambda: _one_pass(other_driver, built, theirs)))

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


@INTERRUPTED
@pytest.mark.parametrize("after", [1, 2, 4])
def test_a_pass_that_raises_midway_leaves_nothing_and_cleanup_resumes(
    driver: StorageDriver, other_driver: StorageDriver, after: int
) -> None:
    env = fresh_environment("prune")
    built = build_run(driver, env, "cut", events=3, steps=2, tokens=("t1",))
    _tombstone(driver, built)
    until_indexed(driver, lambda: _children_listed(driver, built))
    before = counted_children(other_driver, built)

    def boom() -> None:
        raise Interrupted(f"interrupted before staged write {after}")

    def interrupted(tx: StorageTransaction) -> CleanupPass:
        return cleanup_pass(_staging_tripwire(tx, after, boom), env, built.run_id, _budget(driver))

    with pytest.raises(Interrupted):
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
    assert max(deleted) == per_pass, (
        f"no pass used the whole budget of {per_pass} children that limits {limits} allow: {deleted}"
    )
    assert sum(1 for count in deleted if count) >= 2, (
        f"{total} children were pruned in passes deleting {deleted}"
    )
    _assert_gone(driver, built)
