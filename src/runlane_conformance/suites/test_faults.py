"""Faults: a broken connection at any point of an attempt leaves no partial work and no false report.

Every check here breaks the driver's traffic to its store at each write of a
transaction (see ``_faults_support``): before the first statement, in the
middle, on the commit, and after the commit with its answer lost. Each fault
runs on a fresh store, and a plain instance then reads what was committed.
The rules:

* the store shows all of an attempt or none of it;
* what the store derives from the records stays in step with them: the index
  shows exactly the records the store holds, a stream's head names the
  position after its last committed record, and a failed attempt's reads or
  writes are not left counted against the instance's limits;
* what ``transaction()`` reported agrees with the store: success means
  committed exactly once, ``StorageUnavailableError`` means nothing,
  ``StorageCommitUnknownError`` means at most once;
* no callback runs again after an attempt that may have committed;
* a fault surfaces as one of those two errors, never as a client library's
  own exception;
* once the fault is lifted, the instance and new instances work again.

The checks need a way to inject faults: the harness's stores either name
their server for the loopback proxy (``proxy_target``/``connect_through``) or
offer an in-process hook (``connect_with_faults``). Without either, the area
is skipped with a ``profile:`` reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest

from runlane_conformance.catalogue import Requirement
from runlane_conformance.catalogue.faults import (
    FAILURES_ARE_TYPED,
    HOLDS_RELEASED,
    INDEXES_MATCH_RECORDS,
    LIMITS_NOT_INFLATED,
    NO_PARTIAL_WRITES,
    NO_REPLAY_AFTER_POSSIBLE_COMMIT,
    OUTCOME_MATCHES_STORE,
    STREAM_HEAD_FOLLOWS_RECORDS,
    USABLE_AFTER_FAULT,
)
from runlane_conformance.contract.errors import StorageCommitUnknownError, StorageUnavailableError
from runlane_conformance.fixtures.limit_gates import limit_gated, page
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites._faults_support import (
    FAULT_ERRORS,
    BatchTrial,
    CounterRun,
    CounterTrial,
    HoldTrial,
    batch_trials,
    counter_trials,
    describe_error,
    hold_trials,
    report,
)

T = TypeVar("T", CounterTrial, BatchTrial, HoldTrial)


@pytest.fixture(scope="module")
def counter_run(runlane_harness: DriverHarness) -> CounterRun:
    """The counter increment without a fault and under every calibrated fault (computed once)."""
    return counter_trials(runlane_harness)


@pytest.fixture(scope="module")
def under_counter_faults(counter_run: CounterRun) -> list[CounterTrial]:
    """The counter increment under every calibrated fault, judged by several checks."""
    return list(counter_run.trials)


@pytest.fixture(scope="module")
def under_batch_faults(runlane_harness: DriverHarness) -> list[BatchTrial]:
    """The multi-record transaction under every calibrated fault."""
    return batch_trials(runlane_harness)


def _fired(trials: Sequence[T]) -> list[T]:
    """The trials, once every scheduled fault is known to have taken effect.

    A fault at write N always fires when the driver repeats what its
    calibration run did, since everything before write N is unchanged. One
    that did not fire means the driver's writes vary between runs, so that
    point of the attempt went untested: that is a failure, not a pass.
    """
    missed = [trial.where() for trial in trials if not trial.fired]
    assert not missed, (
        f"{len(missed)} of {len(trials)} scheduled faults never took effect, because the driver made "
        f"fewer writes than in its fault-free calibration run; untested: {missed[:5]}"
    )
    return list(trials)


@NO_PARTIAL_WRITES
@limit_gated("fault-batch")
def test_a_fault_at_any_point_leaves_all_of_the_attempt_or_none_of_it(
    under_batch_faults: list[BatchTrial],
) -> None:
    problems = []
    fired = _fired(under_batch_faults)
    for trial in fired:
        if trial.inspect_error is not None:
            problems.append(
                f"{trial.where()}: the store could not be read back: {describe_error(trial.inspect_error)}"
            )
            continue
        applied = sorted(piece for piece, done in trial.pieces.items() if done)
        missing = sorted(piece for piece, done in trial.pieces.items() if not done)
        if applied and missing:
            problems.append(
                f"{trial.where()}: partial commit (transaction() gave {describe_error(trial.error)}); "
                f"the store holds {applied} but not {missing}"
            )
    assert not problems, report(problems, len(fired))


def _derived_state_problems(trials: list[BatchTrial], kind: str) -> list[str]:
    """Each trial's ``kind`` problems ("index" or "stream"), or why the store could not be read back."""
    problems = []
    for trial in trials:
        if trial.inspect_error is not None:
            problems.append(
                f"{trial.where()}: the store could not be read back: {describe_error(trial.inspect_error)}"
            )
            continue
        found = trial.index_problems if kind == "index" else trial.stream_problems
        problems.extend(
            f"{trial.where()}: {problem} (transaction() gave {describe_error(trial.error)})"
            for problem in found
        )
    return problems


@INDEXES_MATCH_RECORDS
@limit_gated("fault-batch")
def test_after_a_fault_the_index_shows_exactly_the_records_the_store_holds(
    under_batch_faults: list[BatchTrial],
) -> None:
    fired = _fired(under_batch_faults)
    problems = _derived_state_problems(fired, "index")
    assert not problems, report(problems, len(fired))


@STREAM_HEAD_FOLLOWS_RECORDS
@limit_gated("fault-batch")
def test_after_a_fault_the_stream_head_follows_the_committed_records(
    under_batch_faults: list[BatchTrial],
) -> None:
    fired = _fired(under_batch_faults)
    problems = _derived_state_problems(fired, "stream")
    assert not problems, report(problems, len(fired))


@LIMITS_NOT_INFLATED
def test_a_failed_attempt_leaves_nothing_counted_against_the_instances_limits(
    counter_run: CounterRun,
) -> None:
    calibration = counter_run.calibration
    assert calibration.budget is None, (
        f"even without a fault, {calibration.budget}; the limits area judges that on its own, and this "
        "check cannot tell a fault's leftovers from it"
    )
    fired = _fired(counter_run.trials)
    problems = [f"{trial.where()}: afterwards, {trial.budget}" for trial in fired if trial.budget is not None]
    assert not problems, report(problems, len(fired))


@OUTCOME_MATCHES_STORE
def test_what_transaction_reports_after_a_fault_agrees_with_the_store(
    under_counter_faults: list[CounterTrial],
) -> None:
    problems = []
    fired = _fired(under_counter_faults)
    for trial in fired:
        if trial.inspect_error is not None:
            problems.append(f"{trial.where()}: {trial.applied()}")
            continue
        run, stored = trial.run, trial.stored
        said = describe_error(run.error)
        if run.error is None:
            if stored != 1:
                problems.append(
                    f"{trial.where()}: transaction() succeeded but {trial.applied()} (expected 1)"
                )
            elif run.value != 0:
                problems.append(
                    f"{trial.where()}: transaction() returned {run.value!r}, not the value its committed "
                    "attempt read (0)"
                )
        elif isinstance(run.error, StorageUnavailableError):
            if stored != 0:
                problems.append(f"{trial.where()}: {said}, yet {trial.applied()} (it must hold 0)")
        elif stored not in (0, 1):
            problems.append(f"{trial.where()}: {said}, and {trial.applied()} (applied more than once)")
    assert not problems, report(problems, len(fired))


@NO_REPLAY_AFTER_POSSIBLE_COMMIT
def test_a_callback_never_runs_again_after_an_attempt_that_may_have_committed(
    under_counter_faults: list[CounterTrial],
) -> None:
    problems = []
    fired = _fired(under_counter_faults)
    for trial in fired:
        reads = trial.run.reads
        replays_after_commit = [value for value in reads[1:] if value != 0]
        if replays_after_commit:
            problems.append(
                f"{trial.where()}: the callback ran again after an attempt that committed "
                f"(its runs read {list(reads)}); transaction() gave {describe_error(trial.run.error)} "
                f"and {trial.applied()}"
            )
        elif trial.stored is not None and trial.stored > 1:
            problems.append(f"{trial.where()}: the work was applied {trial.stored} times ({trial.applied()})")
    assert not problems, report(problems, len(fired))


@FAILURES_ARE_TYPED
def test_an_unresolved_fault_surfaces_as_unavailable_or_commit_unknown(
    under_counter_faults: list[CounterTrial],
) -> None:
    problems = []
    fired = _fired(under_counter_faults)
    for trial in fired:
        error = trial.run.error
        if error is not None and not isinstance(error, FAULT_ERRORS):
            problems.append(
                f"{trial.where()}: transaction() raised {describe_error(error)}; a fault must surface as "
                f"{StorageUnavailableError.__name__} or {StorageCommitUnknownError.__name__}"
            )
    assert not problems, report(problems, len(fired))


@USABLE_AFTER_FAULT
def test_the_instance_and_new_instances_work_once_the_fault_is_lifted(
    under_counter_faults: list[CounterTrial],
) -> None:
    problems = []
    fired = _fired(under_counter_faults)
    for trial in fired:
        if trial.follow_up is not None:
            problems.append(f"{trial.where()}: {trial.follow_up}")
    assert not problems, report(problems, len(fired))


@pytest.fixture
def under_hold_faults(runlane_requirement: Requirement, runlane_harness: DriverHarness) -> list[HoldTrial]:
    """The exclusive select-and-write under every calibrated fault (after the requirement's gate)."""
    return hold_trials(runlane_harness)


@HOLDS_RELEASED
@page(2, least=2).mark
def test_rows_a_faulted_attempt_held_are_free_again(under_hold_faults: list[HoldTrial]) -> None:
    fired = _fired(under_hold_faults)
    problems = [
        f"{trial.where()}: {trial.problem} (transaction() gave {describe_error(trial.error)})"
        for trial in fired
        if trial.problem is not None
    ]
    assert not problems, report(problems, len(fired))
