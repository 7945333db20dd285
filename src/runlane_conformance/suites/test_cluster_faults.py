"""Cluster faults: a member of a replicated store dying, failing over or cut off loses no acknowledged work.

The same rules as the ``faults`` area, with a whole member of the store taken away instead of one
connection: the store shows all of an attempt or none of it; what ``transaction()`` reported agrees with
the store; no callback runs again after an attempt that may have committed; every acknowledged commit is
still there once another member serves the store, and reads show it at once; a member cut off from its
peers acknowledges nothing that does not survive.

These checks run only when the harness's store declares its cluster (``StoreHandle.cluster()``) and
offers a fault mechanism; otherwise every one is gated with a ``profile:`` reason and reported as not
applicable. The scenarios are in ``_cluster_faults_support``; the seed of the run fixes where each kill
lands.
"""

from __future__ import annotations

import pytest

from runlane_conformance.catalogue import Requirement
from runlane_conformance.catalogue.cluster_faults import (
    ACKNOWLEDGED_SURVIVE_FAILOVER,
    MINORITY_NEVER_ACKNOWLEDGES,
    NO_REPLAY_AFTER_FAILOVER,
    OUTCOME_MATCHES_STORE_AFTER_KILL,
    READS_SEE_ACKNOWLEDGED_COMMITS,
)
from runlane_conformance.fixtures.gating import CLUSTER_NOT_OFFERED, cluster_facts, fault_skip_reason
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites._cluster_faults_support import (
    ClusterRunError,
    FailoverRun,
    KillTrial,
    PartitionRun,
    failover_run,
    inconclusive,
    kill_trials,
    outcome_kind,
    pair_problems,
    partition_run,
)
from runlane_conformance.suites._faults_support import describe_error, report

#: What a dead member may surface as.
STORAGE_ERRORS = "StorageUnavailableError or StorageCommitUnknownError"


def _skip_unless_offered(harness: DriverHarness) -> None:
    """Skip with the requirements' own gate reason (cluster first, then faults) before a scenario runs.

    A module-scoped fixture is set up before the per-check gate, so without this a store with neither
    would be skipped by the scenario's fault rig with a reason the gate does not give, and the check
    would count as not run instead of not applicable.
    """
    store = harness.open_store()
    try:
        if not cluster_facts(store)["cluster"]:
            pytest.skip(CLUSTER_NOT_OFFERED)
        reason = fault_skip_reason(store)
        if reason is not None:
            pytest.skip(reason)
    finally:
        store.close()


def _seed(request: pytest.FixtureRequest) -> int:
    seed = getattr(request.config.option, "hypothesis_seed", None)
    return int(seed) if seed is not None else 0


@pytest.fixture(scope="module")
def under_kills(
    request: pytest.FixtureRequest, runlane_harness: DriverHarness
) -> list[KillTrial] | ClusterRunError:
    """The two-counter increment with the serving member killed at each scheduled write (computed once)."""
    _skip_unless_offered(runlane_harness)
    try:
        return kill_trials(runlane_harness, _seed(request))
    except ClusterRunError as error:
        return error


@pytest.fixture(scope="module")
def under_failover(
    request: pytest.FixtureRequest, runlane_harness: DriverHarness
) -> FailoverRun | ClusterRunError:
    """Workers committing pairs while the serving member is killed and another takes over (computed once)."""
    _skip_unless_offered(runlane_harness)
    try:
        return failover_run(runlane_harness, _seed(request))
    except ClusterRunError as error:
        return error


def _fired_kills(trials: list[KillTrial] | ClusterRunError) -> list[KillTrial]:
    if isinstance(trials, ClusterRunError):
        raise inconclusive(trials)
    missed = [trial.where() for trial in trials if not trial.fired]
    assert not missed, (
        f"{len(missed)} of {len(trials)} scheduled kills never landed, because the driver made fewer writes "
        f"than in its fault-free calibration run; untested: {missed}"
    )
    return trials


def _failover(run: FailoverRun | ClusterRunError) -> FailoverRun:
    if isinstance(run, ClusterRunError):
        raise inconclusive(run)
    assert run.fired, (
        f"{run.where()}: the kill never landed (the workers made fewer than {run.kill_at} writes), so no "
        "failover was tested"
    )
    return run


@OUTCOME_MATCHES_STORE_AFTER_KILL
def test_what_transaction_reports_after_the_primary_dies_agrees_with_the_store(
    under_kills: list[KillTrial] | ClusterRunError,
) -> None:
    trials = _fired_kills(under_kills)
    problems = []
    for trial in trials:
        if trial.inspect_error is not None or trial.stored is None:
            problems.append(f"{trial.where()}: {trial.applied()}")
            continue
        first, second = trial.stored
        said = describe_error(trial.error)
        kind = outcome_kind(trial.error)
        if first != second:
            problems.append(f"{trial.where()}: partial commit (transaction() gave {said}); {trial.applied()}")
        elif kind == "acknowledged":
            if first != 1:
                problems.append(
                    f"{trial.where()}: transaction() succeeded but {trial.applied()} (expected 1)"
                )
            elif trial.value != 0:
                problems.append(
                    f"{trial.where()}: transaction() returned {trial.value!r}, not what its committed "
                    "attempt read (0)"
                )
        elif kind == "unavailable":
            if first != 0:
                problems.append(f"{trial.where()}: {said}, yet {trial.applied()} (it must hold 0)")
        elif kind == "unknown":
            if first not in (0, 1):
                problems.append(f"{trial.where()}: {said}, and {trial.applied()} (applied more than once)")
        else:
            problems.append(
                f"{trial.where()}: transaction() raised {said}; a dead member must surface as "
                f"{STORAGE_ERRORS}"
            )
    assert not problems, report(problems, len(trials))


@NO_REPLAY_AFTER_FAILOVER
def test_a_callback_never_runs_again_after_a_commit_the_failover_may_have_kept(
    under_kills: list[KillTrial] | ClusterRunError,
) -> None:
    trials = _fired_kills(under_kills)
    problems = []
    for trial in trials:
        replays = [value for value in trial.reads[1:] if value != 0]
        if replays:
            problems.append(
                f"{trial.where()}: the callback ran again after an attempt that had committed (its runs read "
                f"{list(trial.reads)}); transaction() gave {describe_error(trial.error)} and "
                f"{trial.applied()}"
            )
        elif trial.stored is not None and max(trial.stored) > 1:
            problems.append(f"{trial.where()}: the work was applied more than once ({trial.applied()})")
    assert not problems, report(problems, len(trials))


@ACKNOWLEDGED_SURVIVE_FAILOVER
def test_every_acknowledged_commit_is_on_the_new_primary(
    under_failover: FailoverRun | ClusterRunError,
) -> None:
    run = _failover(under_failover)
    lost, other = pair_problems(
        run.outcomes, run.stored, "read back from the member serving it after the failover"
    )
    problems = lost + other
    acknowledged = sum(outcome.kind == "acknowledged" for outcome in run.outcomes)
    assert not problems, report([f"{run.where()}: {problem}" for problem in problems], len(run.outcomes))
    assert run.acknowledged_after > 0, (
        f"{run.where()}: no commit was acknowledged after the failover ({acknowledged} before it), so "
        "nothing shows the store came back"
    )


@READS_SEE_ACKNOWLEDGED_COMMITS
def test_a_read_after_an_acknowledged_commit_sees_it(under_failover: FailoverRun | ClusterRunError) -> None:
    run = _failover(under_failover)
    assert not run.stale, report([f"{run.where()}: {problem}" for problem in run.stale], len(run.outcomes))


@pytest.fixture
def under_partition(
    runlane_requirement: Requirement, runlane_harness: DriverHarness
) -> PartitionRun | ClusterRunError:
    """The serving member cut off from its peers and healed (after the requirement's gate)."""
    try:
        return partition_run(runlane_harness)
    except ClusterRunError as error:
        return error


@MINORITY_NEVER_ACKNOWLEDGES
def test_a_member_cut_off_from_its_peers_acknowledges_nothing_that_is_lost(
    under_partition: PartitionRun | ClusterRunError,
) -> None:
    if isinstance(under_partition, ClusterRunError):
        raise inconclusive(under_partition)
    run = under_partition
    lost, other = pair_problems(run.outcomes, run.stored, "once the partition healed")
    problems = [f"{run.where()}: {problem}" for problem in lost + other]
    assert not problems, report(problems, len(run.outcomes))
