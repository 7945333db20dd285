"""The etcd leader killed mid-workload: no acknowledged commit may be lost, and nothing half-applied.

etcd acknowledges a transaction only after a majority of members has it in its fsynced log, so with
three members the loss of any one, the leader included, loses nothing acknowledged; the driver
advertises ``durable`` on that basis, and this test holds it to it:

* a thread commits pairs of records, one pair per transaction, through an instance that knows every
  member and talks to the leader first; once it has acknowledged ``BEFORE_KILL`` pairs, the leader gets
  ``SIGKILL``;
* the two survivors elect a new leader; the same instance moves to a member that answers and carries on
  until ``AFTER_FAILOVER`` more pairs are acknowledged;
* then every acknowledged pair is present, every pair is whole or absent, no attempt reported
  ``StorageUnavailableError`` ("nothing was committed") left anything, and an attempt reported
  ``StorageCommitUnknownError`` is counted and printed with what it turned out to be;
* the killed member is restarted on its data directory, and read alone, it has every acknowledged pair.

Every wait is for an observed condition, bounded, never a sleep standing in for one.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from cluster_support import RunningCluster, cluster_directory, running_cluster
from runlane_etcd_driver import EtcdStorageDriver, harness
from runlane_etcd_driver.cluster import ClusterError, leader, restart_member

from runlane_conformance import (
    Leases,
    StorageCommitUnknownError,
    StorageConflictError,
    StorageDurability,
    StorageRecordKey,
    StorageTransaction,
    StorageUnavailableError,
    StoredRecord,
)

#: Commits the workload has acknowledged when the leader is killed.
BEFORE_KILL = 30
#: Commits acknowledged after a new leader was observed, before the workload stops.
AFTER_FAILOVER = 10
#: Upper bound on how long the survivors may take to elect a leader, and the workload to recover.
BOUND_S = 90.0


@dataclass
class Outcome:
    index: int
    result: str  # "acknowledged", "unavailable", "unknown", "conflict"
    started_after_election: bool


@dataclass
class Workload:
    """One thread committing pairs of records, one pair per transaction, until told to stop."""

    driver: EtcdStorageDriver
    leases: Leases
    elected: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    outcomes: list[Outcome] = field(default_factory=list)
    progress: threading.Condition = field(default_factory=threading.Condition)
    error: BaseException | None = None

    def acknowledged(self, *, after_election: bool = False) -> int:
        return sum(
            1
            for o in self.outcomes
            if o.result == "acknowledged" and (o.started_after_election or not after_election)
        )

    def wait_for(self, count: int, *, after_election: bool = False) -> None:
        deadline = time.monotonic() + BOUND_S
        with self.progress:
            while self.acknowledged(after_election=after_election) < count:
                if self.error is not None:
                    raise AssertionError(f"the workload raised {self.error!r}") from self.error
                left = deadline - time.monotonic()
                assert left > 0, (
                    f"only {self.acknowledged(after_election=after_election)} of {count} commits "
                    f"acknowledged within {BOUND_S:.0f} s (after the election: {after_election})"
                )
                self.progress.wait(left)

    def run(self) -> None:
        index = 0
        try:
            while not self.stop.is_set():
                after = self.elected.is_set()
                result = commit_pair(self.driver, self.leases, index)
                with self.progress:
                    self.outcomes.append(Outcome(index, result, after))
                    self.progress.notify_all()
                index += 1
        except BaseException as error:  # reported by wait_for and after join
            self.error = error
            with self.progress:
                self.progress.notify_all()


def commit_pair(driver: EtcdStorageDriver, leases: Leases, index: int) -> str:
    def create(tx: StorageTransaction) -> None:
        tx.create(leases.record(f"p{index}a", at=index))
        tx.create(leases.record(f"p{index}b", at=index))

    try:
        driver.transaction(create)
    except StorageUnavailableError:
        return "unavailable"
    except StorageCommitUnknownError:
        return "unknown"
    except StorageConflictError:
        return "conflict"
    return "acknowledged"


def present(driver: EtcdStorageDriver, leases: Leases, indexes: list[int]) -> dict[int, tuple[bool, bool]]:
    found: dict[int, tuple[bool, bool]] = {}
    for start in range(0, len(indexes), 40):
        chunk = indexes[start : start + 40]
        keys = [leases.key(f"p{index}{half}") for index in chunk for half in "ab"]

        def read(tx: StorageTransaction, keys: list[StorageRecordKey] = keys) -> list[StoredRecord | None]:
            return tx.get(keys)

        records = driver.transaction(read)
        for at, index in enumerate(chunk):
            found[index] = (records[2 * at] is not None, records[2 * at + 1] is not None)
    return found


def wait_until(condition: object, what: str) -> float:
    assert callable(condition)
    start = time.monotonic()
    while time.monotonic() - start < BOUND_S:
        try:
            if condition():
                return time.monotonic() - start
        except ClusterError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {BOUND_S:.0f} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    directory = cluster_directory(tmp_path_factory.mktemp("etcd-failover") / "members", "failover")
    with running_cluster(directory) as running:
        yield running


def test_the_leader_killed_mid_workload_loses_no_acknowledged_commit(
    cluster: RunningCluster, record_property: Callable[[str, object], None]
) -> None:
    killed = leader(cluster.state)
    survivors = [m for m in cluster.state.members if m != killed]
    # The leader first: the writer talks to the member that dies, and must move to a survivor.
    endpoints = ",".join(m.client_url for m in [killed, *survivors])
    made = harness({**cluster.options, "endpoints": endpoints})
    store = made.open_store()
    try:
        leases = Leases(environment=f"env-{uuid.uuid4().hex[:8]}")
        writer = store.connect()
        assert writer.profile.durability is StorageDurability.DURABLE

        workload = Workload(writer, leases)
        thread = threading.Thread(target=workload.run, name="failover-workload")
        thread.start()
        try:
            workload.wait_for(BEFORE_KILL)
            os.kill(killed.pid, signal.SIGKILL)
            election_s = wait_until(
                lambda: leader(cluster.state, among=survivors) in survivors,
                f"the survivors electing a leader after {killed.name} was killed",
            )
            workload.elected.set()
            workload.wait_for(AFTER_FAILOVER, after_election=True)
        finally:
            workload.stop.set()
            thread.join(BOUND_S)
        assert not thread.is_alive(), "the workload did not stop"
        assert workload.error is None, f"the workload raised {workload.error!r}"

        outcomes = workload.outcomes
        state = present(store.connect(), leases, [o.index for o in outcomes])
        torn = sorted(index for index, (a, b) in state.items() if a != b)
        assert not torn, f"pairs committed in one transaction are half present after the kill: {torn}"
        acknowledged = [o.index for o in outcomes if o.result == "acknowledged"]
        lost = [index for index in acknowledged if not state[index][0]]
        assert not lost, f"acknowledged commits were lost when the leader died: {lost}"
        ghost = [o.index for o in outcomes if o.result == "unavailable" and state[o.index][0]]
        assert not ghost, f"attempts reported 'nothing was committed' are in the store: {ghost}"

        restarted = restart_member(cluster.state, killed.name)
        alone = store.connect_through(("127.0.0.1", restarted.member(killed.name).client_port))
        wait_until(
            lambda: all(state_a for state_a, _ in present(alone, leases, acknowledged).values()),
            f"the restarted member {killed.name} having every acknowledged commit",
        )
        summary = {
            "killed": killed.name,
            "acknowledged": len(acknowledged),
            "acknowledged_lost": lost,
            "unavailable": sum(1 for o in outcomes if o.result == "unavailable"),
            "unknown": [o.index for o in outcomes if o.result == "unknown"],
            "unknown_committed": [o.index for o in outcomes if o.result == "unknown" and state[o.index][0]],
            "conflict": sum(1 for o in outcomes if o.result == "conflict"),
            "election_seconds": round(election_s, 2),
        }
        record_property("failover", json.dumps(summary))
        print(f"\netcd leader killed mid-workload: {json.dumps(summary)}")
    finally:
        store.close()
        made.close()
