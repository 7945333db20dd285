"""The machinery of the cluster_faults suite: kills landed on counted writes, failovers, partitions.

A harness declares the cluster its store lives on (``StoreHandle.cluster()``, see
``harness_protocols.DeclaredCluster``). Each scenario opens a fresh store with the ``faults`` suite's
rig, so the instances under test reach the member serving the store through the fault switch (the
loopback proxy, or the in-process hook), and the switch counts their writes. A kill is armed on one
write number: the switch calls back the moment that write lands (``ArmedSwitch.when_fired``), and the
callback kills the member. So where each kill lands depends only on what the driver does and on the
seed, never on timing.

Scenarios, each bounded in faults and in time:

* **kill trials**: a fault-free calibration counts the writes W of one read-modify-write of two
  records; then the serving member is killed before write W is sent (the commit not sent), after
  write W was answered (the commit sent and applied, its answer lost), before write W-1 is sent (for a
  driver that confirms its commit in a last write of its own, that is the commit not sent), and at one
  earlier write the seed picks. After each kill the cluster is given time to fail over (``settle``),
  the killed member is restarted and the store read back from whichever member serves it now.
* **failover run**: three workers commit pairs of records through the switch; a plain instance reads
  each acknowledged pair right away; the serving member is killed at a write the seed picks; after the
  failover and the restart every worker commits a few more pairs; then every pair is read back.
* **partition run** (clusters that can partition): the serving member is cut off from its peers; an
  instance connected to it keeps committing, and one opened after the cut commits on the other side;
  the cut heals; every pair is read back.

A cluster that does not recover within ``FAILOVER_TIMEOUT`` makes the check inconclusive (no evidence),
never a failure.
"""

from __future__ import annotations

import functools
import random
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from ..contract.errors import StorageCommitUnknownError, StorageUnavailableError
from ..contract.protocols import StorageDriver, StorageTransaction
from ..faults.plan import Fault, FaultKind
from ..fixtures.evidence import CheckInconclusive
from ..fixtures.gating import CLUSTER_NOT_OFFERED, CLUSTER_PARTITION_NOT_OFFERED
from ..fixtures.records import Leases
from ..harness import ClusterStore, DeclaredCluster, DriverHarness, PartitionableCluster
from ._faults_support import FaultRig, Trial, bounded, describe_error

__all__ = [
    "FAILOVER_TIMEOUT",
    "ClusterRunError",
    "FailoverRun",
    "KillTrial",
    "PairOutcome",
    "PartitionRun",
    "failover_run",
    "kill_schedule",
    "kill_trials",
    "outcome_kind",
    "pair_problems",
    "partition_run",
]

#: How long the cluster may take to serve the store again after a kill, a restart or a heal (seconds).
FAILOVER_TIMEOUT = 60.0
#: How long one transaction may take while a member is dying; longer counts as wedged.
TRANSACTION_TIMEOUT = 45.0
#: Workers of the failover run, and the pairs each commits after the failover.
WORKERS = 3
AFTER_FAILOVER = 3
#: Bounds on the failover run: transaction calls per worker before the kill, and after it.
CALLS_BEFORE = 40
CALLS_AFTER = 20
#: Pairs committed on each side of a partition.
PARTITION_PAIRS = 3


class ClusterRunError(Exception):
    """A scenario could not be run to the end (the cluster did not recover); no evidence either way."""


def declared_cluster(rig: FaultRig) -> DeclaredCluster:
    store = rig.store
    if not isinstance(store, ClusterStore):
        pytest.skip(CLUSTER_NOT_OFFERED)
    return store.cluster()


def outcome_kind(error: BaseException | None) -> str:
    """``acknowledged``, ``unavailable``, ``unknown`` or ``other`` for what ``transaction()`` did."""
    if error is None:
        return "acknowledged"
    if isinstance(error, StorageUnavailableError):
        return "unavailable"
    if isinstance(error, StorageCommitUnknownError):
        return "unknown"
    return "other"


def _kill_now(cluster: DeclaredCluster, member: str, done: list[object]) -> Callable[[Fault], None]:
    def kill(_fault: Fault) -> None:
        try:
            cluster.kill(member)
            done.append(member)
        except Exception as error:  # reported by the scenario: a harness that cannot kill gives no evidence
            done.append(error)

    return kill


def _recover(cluster: DeclaredCluster, killed: Sequence[object], victim: str) -> None:
    """Let the cluster fail over, restart the killed member, let it catch up; ``ClusterRunError`` if not."""
    errors = [item for item in killed if isinstance(item, BaseException)]
    if errors:
        raise ClusterRunError(f"the harness could not kill member {victim}: {describe_error(errors[0])}")
    if not cluster.settle(timeout=FAILOVER_TIMEOUT):
        raise ClusterRunError(f"no member served the store within {FAILOVER_TIMEOUT:g}s of killing {victim}")
    if killed:
        cluster.restart(victim)
        if not cluster.settle(timeout=FAILOVER_TIMEOUT):
            raise ClusterRunError(
                f"member {victim} did not rejoin within {FAILOVER_TIMEOUT:g}s of its restart"
            )


# -- kill trials: one read-modify-write of two records, the serving member killed at one write --------


@dataclass(frozen=True)
class KillTrial:
    """Two counters incremented together, from 0, with the serving member killed at ``fault``."""

    fault: Fault | None
    victim: str
    planned: int
    fired: bool
    value: object
    error: BaseException | None
    reads: tuple[int, ...]
    stored: tuple[int, int] | None
    inspect_error: BaseException | None
    writes: int = 0

    def where(self) -> str:
        if self.fault is None:
            return "fault-free calibration"
        if self.fault.kind is FaultKind.CUT:
            moment = f"before write {self.fault.at} was sent"
        else:
            moment = f"after write {self.fault.at} was answered (the answer lost)"
        return (
            f"member {self.victim} (serving the store) killed {moment}; a fault-free run makes "
            f"{self.planned} writes"
        )

    def applied(self) -> str:
        if self.inspect_error is not None:
            return f"the store could not be read afterwards ({describe_error(self.inspect_error)})"
        return f"the new primary holds counters={self.stored}"


def kill_schedule(writes: int, seed: int) -> list[Fault]:
    """Where the kills land: before write ``writes`` (the last) is sent and after it was answered,
    before the write ahead of it is sent (a driver that confirms its commit in a write of its own, such
    as a replication wait, sends the commit there), and at one earlier write the seed picks; no kill
    twice on one spot, at most four."""
    faults = [Fault(FaultKind.CUT, writes), Fault(FaultKind.LOSE_REPLY, writes)]
    if writes > 1:
        faults.append(Fault(FaultKind.CUT, writes - 1))
        rng = random.Random(f"cluster_faults/kill/{seed}")
        seeded = Fault(rng.choice((FaultKind.CUT, FaultKind.LOSE_REPLY)), rng.randint(1, writes - 1))
        if seeded not in faults:
            faults.append(seeded)
    return faults


def _increment_both(leases: Leases, reads: list[int]) -> Callable[[StorageTransaction], int]:
    def increment(tx: StorageTransaction) -> int:
        first, second = tx.get([leases.key("counter-a"), leases.key("counter-b")])
        assert first is not None and second is not None, "a counter record vanished"
        value = int(str(first.document.value["holder"]))
        reads.append(value)
        tx.replace(first, leases.record("counter-a", holder=str(value + 1)))
        tx.replace(
            second, leases.record("counter-b", holder=str(int(str(second.document.value["holder"])) + 1))
        )
        return value

    return increment


def _read_counters(driver: StorageDriver, leases: Leases) -> tuple[int, int]:
    first, second = driver.transaction(lambda tx: tx.get([leases.key("counter-a"), leases.key("counter-b")]))
    assert first is not None and second is not None, "a counter record vanished"
    return int(str(first.document.value["holder"])), int(str(second.document.value["holder"]))


def _kill_trial(harness: DriverHarness, fault: Fault | None, planned: int) -> KillTrial:
    with FaultRig(harness) as rig:
        cluster = declared_cluster(rig)
        if not cluster.settle(timeout=FAILOVER_TIMEOUT):
            raise ClusterRunError(f"the cluster did not serve the store within {FAILOVER_TIMEOUT:g}s")
        victim = cluster.primary()
        leases = Leases(environment=f"cluster-{uuid.uuid4().hex[:8]}")
        with rig.trial() as trial:
            faulty = trial.connect_faulty()

            def create(tx: StorageTransaction) -> None:
                tx.create(leases.record("counter-a", holder="0"))
                tx.create(leases.record("counter-b", holder="0"))

            faulty.transaction(create)
            reads: list[int] = []
            killed: list[object] = []
            if fault is not None:
                trial.switch.when_fired(_kill_now(cluster, victim, killed))
            trial.switch.arm(fault)
            value, error = bounded(
                lambda: faulty.transaction(_increment_both(leases, reads)), TRANSACTION_TIMEOUT
            )
            writes, fired = trial.switch.writes, trial.switch.fired
            trial.switch.disarm()
            trial.switch.when_fired(None)
            _recover(cluster, killed, victim)
            stored, inspect_error = _read_back(trial, leases)
            return KillTrial(
                fault, victim, planned, fired, value, error, tuple(reads), stored, inspect_error, writes
            )


def _read_back(trial: Trial, leases: Leases) -> tuple[tuple[int, int] | None, BaseException | None]:
    reader, error = bounded(trial.fresh, TRANSACTION_TIMEOUT)
    if error is not None:
        return None, error
    stored, error = bounded(lambda: _read_counters(reader, leases), TRANSACTION_TIMEOUT)
    return stored, error


def kill_trials(harness: DriverHarness, seed: int) -> list[KillTrial]:
    """A calibration, then one trial per kill of ``kill_schedule`` (at most four kills)."""
    calibration = _kill_trial(harness, None, 0)
    if calibration.error is not None or calibration.stored != (1, 1):
        raise AssertionError(
            "without any fault, incrementing two counters together gave "
            f"{describe_error(calibration.error)} and {calibration.applied()}; the other areas judge that "
            "on their own, and this check cannot judge faults on top of it"
        )
    planned = calibration.writes
    if planned < 1:
        raise AssertionError(
            "the fault-free transaction made no write through the fault switch, so no kill can be landed on "
            "it: the store's faulty instances must reach the serving member through proxy_target()/"
            "connect_through() or connect_with_faults()"
        )
    return [_kill_trial(harness, fault, planned) for fault in kill_schedule(planned, seed)]


# -- pairs: the failover and partition runs --------------------------------------------------------


@dataclass(frozen=True)
class PairOutcome:
    """One transaction creating records ``<tag>-a`` and ``<tag>-b`` together, and what it reported."""

    tag: str
    kind: str
    error: BaseException | None
    after_kill: bool = False
    side: str = ""


def _commit_pair(driver: StorageDriver, leases: Leases, tag: str) -> BaseException | None:
    def create(tx: StorageTransaction) -> None:
        tx.create(leases.record(f"{tag}-a", holder=tag))
        tx.create(leases.record(f"{tag}-b", holder=tag))

    _, error = bounded(lambda: driver.transaction(create), TRANSACTION_TIMEOUT)
    return error


def _pair_present(driver: StorageDriver, leases: Leases, tag: str) -> tuple[bool, bool]:
    first, second = driver.transaction(lambda tx: tx.get([leases.key(f"{tag}-a"), leases.key(f"{tag}-b")]))
    return first is not None, second is not None


def pair_problems(
    outcomes: Sequence[PairOutcome], stored: dict[str, tuple[bool, bool]], what: str
) -> tuple[list[str], list[str]]:
    """(lost or partial acknowledged work, other rule breaks) of ``outcomes`` against ``stored``."""
    lost: list[str] = []
    other: list[str] = []
    for outcome in outcomes:
        present = stored.get(outcome.tag)
        if present is None:
            continue
        where = f"pair {outcome.tag}{' (' + outcome.side + ')' if outcome.side else ''}"
        if present[0] != present[1]:
            lost.append(
                f"{where}: only one of its two records is in the store ({what}); the commit was partial"
            )
        elif outcome.kind == "acknowledged" and not present[0]:
            lost.append(f"{where}: acknowledged, but not in the store {what}")
        elif outcome.kind == "unavailable" and present[0]:
            other.append(
                f"{where}: reported {describe_error(outcome.error)} (nothing committed), "
                "yet it is in the store"
            )
        elif outcome.kind == "other":
            other.append(f"{where}: transaction() raised {describe_error(outcome.error)}")
    return lost, other


def _read_pairs(trial: Trial, leases: Leases, tags: Sequence[str]) -> dict[str, tuple[bool, bool]]:
    reader, error = bounded(trial.fresh, TRANSACTION_TIMEOUT)
    if error is not None:
        raise ClusterRunError(f"no instance could be opened to read the store back: {describe_error(error)}")
    stored: dict[str, tuple[bool, bool]] = {}
    for tag in tags:
        present, error = bounded(functools.partial(_pair_present, reader, leases, tag), TRANSACTION_TIMEOUT)
        if error is not None:
            raise ClusterRunError(f"the store could not be read back: {describe_error(error)}")
        stored[tag] = present
    return stored


@dataclass
class FailoverRun:
    """What the failover run saw: each pair's outcome, stale reads, the stored pairs, the kill's write."""

    victim: str
    kill_at: int
    fired: bool = False
    outcomes: list[PairOutcome] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    stored: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    acknowledged_after: int = 0

    def where(self) -> str:
        return (
            f"{WORKERS} workers committing pairs; member {self.victim} (serving the store) killed after "
            f"write {self.kill_at} of their traffic was answered"
        )


def failover_run(harness: DriverHarness, seed: int) -> FailoverRun:
    """The failover run (see the module docstring); ``ClusterRunError`` when the cluster did not recover."""
    rng = random.Random(f"cluster_faults/failover/{seed}")
    with FaultRig(harness) as rig:
        cluster = declared_cluster(rig)
        if not cluster.settle(timeout=FAILOVER_TIMEOUT):
            raise ClusterRunError(f"the cluster did not serve the store within {FAILOVER_TIMEOUT:g}s")
        run = FailoverRun(cluster.primary(), rng.randint(2 * WORKERS, 6 * WORKERS))
        leases = Leases(environment=f"cluster-{uuid.uuid4().hex[:8]}")
        with rig.trial() as trial:
            writers = [trial.connect_faulty() for _ in range(WORKERS)]
            readers = [trial.fresh() for _ in range(WORKERS)]
            killed: list[object] = []
            kill = _kill_now(cluster, run.victim, killed)
            landed = threading.Event()
            resume = threading.Event()
            lock = threading.Lock()

            def on_fire(fault: Fault) -> None:
                kill(fault)
                landed.set()

            def worker(number: int) -> None:
                writer, reader = writers[number], readers[number]
                serial = 0

                def one(after: bool) -> bool:
                    nonlocal serial
                    tag = f"w{number}-{serial:03d}"
                    serial += 1
                    error = _commit_pair(writer, leases, tag)
                    outcome = PairOutcome(tag, outcome_kind(error), error, after_kill=after)
                    stale = None
                    if error is None:
                        present, read_error = bounded(
                            lambda: _pair_present(reader, leases, tag), TRANSACTION_TIMEOUT
                        )
                        if read_error is None and present != (True, True):
                            stale = f"pair {tag}: acknowledged, then read by another instance as {present}"
                    with lock:
                        run.outcomes.append(outcome)
                        if stale is not None:
                            run.stale.append(stale)
                    return error is None

                calls = 0
                while not landed.is_set() and calls < CALLS_BEFORE:
                    one(False)
                    calls += 1
                if not resume.wait(4 * FAILOVER_TIMEOUT):
                    return
                acknowledged = calls = 0
                while acknowledged < AFTER_FAILOVER and calls < CALLS_AFTER:
                    acknowledged += one(True)
                    calls += 1
                with lock:
                    run.acknowledged_after += acknowledged

            trial.switch.when_fired(on_fire)
            trial.switch.arm(Fault(FaultKind.LOSE_REPLY, run.kill_at))
            threads = [
                threading.Thread(target=worker, args=(n,), name=f"runlane-cluster-worker-{n}", daemon=True)
                for n in range(WORKERS)
            ]
            for thread in threads:
                thread.start()
            try:
                while not landed.wait(0.05):
                    if not any(thread.is_alive() for thread in threads):
                        break
                run.fired = trial.switch.fired
                trial.switch.disarm()
                trial.switch.when_fired(None)
                _recover(cluster, killed, run.victim)
            finally:
                resume.set()
                for thread in threads:
                    thread.join(CALLS_AFTER * TRANSACTION_TIMEOUT)
            if any(thread.is_alive() for thread in threads):
                raise ClusterRunError("a worker was still busy long after the failover")
            run.stored = _read_pairs(trial, leases, [outcome.tag for outcome in run.outcomes])
        return run


@dataclass
class PartitionRun:
    """What the partition run saw: every pair's outcome (which side it was sent to) and the stored pairs."""

    victim: str
    outcomes: list[PairOutcome] = field(default_factory=list)
    stored: dict[str, tuple[bool, bool]] = field(default_factory=dict)

    def where(self) -> str:
        return f"member {self.victim} (serving the store) cut off from its peers, then healed"


def partition_run(harness: DriverHarness) -> PartitionRun:
    """The partition run (see the module docstring); skipped unless the cluster can partition."""
    with FaultRig(harness) as rig:
        cluster = declared_cluster(rig)
        if not isinstance(cluster, PartitionableCluster):
            pytest.skip(CLUSTER_PARTITION_NOT_OFFERED)
        if not cluster.settle(timeout=FAILOVER_TIMEOUT):
            raise ClusterRunError(f"the cluster did not serve the store within {FAILOVER_TIMEOUT:g}s")
        run = PartitionRun(cluster.primary())
        leases = Leases(environment=f"cluster-{uuid.uuid4().hex[:8]}")
        with rig.trial() as trial:
            minority = trial.connect_faulty()
            error = _commit_pair(minority, leases, "before")
            run.outcomes.append(PairOutcome("before", outcome_kind(error), error, side="before the cut"))
            cluster.isolate_from_peers(run.victim)
            try:
                settled = cluster.settle(timeout=FAILOVER_TIMEOUT)
                for number in range(PARTITION_PAIRS):
                    tag = f"minority-{number}"
                    error = _commit_pair(minority, leases, tag)
                    run.outcomes.append(
                        PairOutcome(tag, outcome_kind(error), error, side=f"sent to the cut-off {run.victim}")
                    )
                if settled:
                    majority, error = bounded(trial.fresh, TRANSACTION_TIMEOUT)
                    if error is None:
                        for number in range(PARTITION_PAIRS):
                            tag = f"majority-{number}"
                            error = _commit_pair(majority, leases, tag)
                            run.outcomes.append(
                                PairOutcome(
                                    tag,
                                    outcome_kind(error),
                                    error,
                                    side="sent after the cut by a new instance",
                                )
                            )
            finally:
                cluster.heal(run.victim)
            if not cluster.settle(timeout=FAILOVER_TIMEOUT):
                raise ClusterRunError(f"the cluster did not settle within {FAILOVER_TIMEOUT:g}s of healing")
            run.stored = _read_pairs(trial, leases, [outcome.tag for outcome in run.outcomes])
        return run


def inconclusive(error: ClusterRunError) -> CheckInconclusive:
    return CheckInconclusive(f"the cluster scenario could not finish: {error}")
