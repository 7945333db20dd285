"""Why ``scripts/cluster up`` prints ``--option replicas=1``: the evidence, on a real Redis Cluster.

A Redis primary answers ``EXEC`` before its replica has the writes. On loopback the replica trails by
microseconds, so the ``cluster_faults`` kills alone would rarely catch the window. This test opens it
on purpose: the replica of the store's slot is frozen (``SIGSTOP``) and its replication link closed
(``CLIENT KILL TYPE replica`` on the primary), so it cannot receive anything; one commit is made; the
primary is killed; the replica wakes and takes over.

* Without ``replicas`` the commit is **acknowledged and then lost**: the new primary never had it.
  That is why the driver without ``WAIT`` claims nothing across a failover.
* With ``replicas=1`` the same commit is **not acknowledged**: ``WAIT`` finds no replica holding it,
  and ``transaction()`` raises ``StorageCommitUnknownError`` (it was applied on the primary, which then
  died), which is the truth.

Ports 7200-7205 (+30 per xdist worker).
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cluster_support import RunningCluster, cluster_directory, running_cluster, worker_ports
from runlane_redis_driver import harness
from runlane_redis_driver.cluster import RedisClusterState, replica_of
from runlane_redis_driver.control import RedisDeclaredCluster

from runlane_conformance import Leases, StorageCommitUnknownError, StorageTransaction

BASE_PORT = worker_ports(int(os.environ.get("RUNLANE_REDIS_REPLICATION_TEST_PORT", "7200")))
SETTLE = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    directory = cluster_directory(tmp_path_factory.mktemp("redis-cluster") / "nodes", "replication")
    with running_cluster(directory, BASE_PORT) as running:
        yield running


def _options(running: RunningCluster, replicas: str) -> dict[str, str]:
    args = running.arguments
    options = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--option")
    options["replicas"] = replicas
    return options


def _commit_with_the_replica_cut_off(
    running: RunningCluster, replicas: str
) -> tuple[BaseException | None, bool]:
    """One commit while the slot's replica can receive nothing; then the primary dies and the replica
    takes over. Returns what ``transaction()`` said and whether the new primary holds the commit."""
    made = harness(_options(running, replicas))
    store = made.open_store()
    try:
        declared = store.cluster()  # type: ignore[attr-defined]
        assert isinstance(declared, RedisDeclaredCluster)
        assert declared.settle(timeout=SETTLE)
        primary = int(declared.primary().rpartition(":")[2])
        state = RedisClusterState.load(declared.directory)
        replica = replica_of(state, primary)
        replica_pid = state.pid_of(replica)
        leases = Leases(environment=f"replication-{uuid.uuid4().hex[:8]}")
        driver = store.connect()
        os.kill(replica_pid, signal.SIGSTOP)
        try:
            admin = redis.Redis(host="127.0.0.1", port=primary)
            admin.execute_command("CLIENT", "KILL", "TYPE", "replica")
            admin.close()

            def create(tx: StorageTransaction) -> None:
                tx.create(leases.record("cut-off", holder="x"))

            error: BaseException | None = None
            try:
                driver.transaction(create)
            except StorageCommitUnknownError as caught:
                error = caught
            declared.kill(f"127.0.0.1:{primary}")
        finally:
            os.kill(replica_pid, signal.SIGCONT)
        assert declared.settle(timeout=SETTLE), "the replica did not take over"
        declared.restart(f"127.0.0.1:{primary}")
        assert declared.settle(timeout=SETTLE), "the old primary did not rejoin"
        (found,) = store.connect().transaction(lambda tx: tx.get([leases.key("cut-off")]))
        return error, found is not None
    finally:
        store.close()
        made.close()


def test_without_wait_an_acknowledged_commit_is_lost_at_failover(cluster: RunningCluster) -> None:
    error, kept = _commit_with_the_replica_cut_off(cluster, "0")
    assert error is None, f"without WAIT the commit is acknowledged at once, not {error!r}"
    assert not kept, "the replica could not receive the commit, yet the new primary holds it"


def test_with_wait_the_same_commit_is_reported_unknown_not_acknowledged(cluster: RunningCluster) -> None:
    error, kept = _commit_with_the_replica_cut_off(cluster, "1")
    assert isinstance(error, StorageCommitUnknownError), f"expected commit-unknown, got {error!r}"
    assert "replicas" in str(error)
    assert not kept


def test_cluster_down_also_stops_the_control_process(tmp_path: Path) -> None:
    directory = cluster_directory(tmp_path / "nodes", "control")
    with running_cluster(directory, BASE_PORT + 10):
        pid = int((directory / "control.pid").read_text().strip())
        assert b"runlane_redis_driver.control" in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert (
        not Path(f"/proc/{pid}").exists()
        or b"runlane_redis_driver.control" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    ), f"control process {pid} still runs"
