"""The driver on a real Redis Cluster (three primaries with a replica each, on loopback), single-slot.

``scripts/cluster up`` starts the cluster and prints the ``runlane-certify run`` arguments; the driver
then certifies with exactly those arguments, at the level it certifies on a standalone server, with the
``cluster_faults`` area run on the declared cluster; every key
of a store is found in one hash slot on one primary; and a layout that would spread a store over slots is
refused with the reason before anything runs. ``scripts/cluster down`` leaves no process and no file.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cluster_support import RunningCluster, cluster_directory, running_cluster, worker_ports
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import CrossSlotTransactionError, ResponseError
from runlane_redis_driver import RedisOptionError, RedisStorageDriver, harness, new_prefix
from runlane_redis_driver.cluster import replica_of, role
from runlane_redis_driver.harness import MULTI_SLOT_REFUSAL

from runlane_conformance import Leases, StorageUnavailableError, StorageUsageError

#: Ports 7100-7105 and 7110-7115 (+30 per xdist worker; bus ports +10000): apart from 7000 and 7300+.
BASE_PORT = worker_ports(int(os.environ.get("RUNLANE_REDIS_CLUSTER_TEST_PORT", "7100")))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    directory = cluster_directory(tmp_path_factory.mktemp("redis-cluster") / "nodes", "certify")
    with running_cluster(directory, BASE_PORT) as running:
        yield running


def _options(running: RunningCluster) -> dict[str, str]:
    """The ``--option key=value`` pairs of the printed arguments."""
    args = running.arguments
    return dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--option")


def test_cluster_up_prints_one_line_of_certify_arguments_for_a_single_slot_topology(
    cluster: RunningCluster,
) -> None:
    assert cluster.arguments[:2] == ["--driver", "redis"]
    others = ",".join(f"127.0.0.1:{port}" for port in range(BASE_PORT + 1, BASE_PORT + 6))
    assert _options(cluster) == {
        "url": f"redis://127.0.0.1:{BASE_PORT}/0",
        "cluster": "single-slot",
        "nodes": others,
        "replicas": "1",
        "control": str(cluster.state.directory),
    }
    roles = sorted(role(port) for port in cluster.state.ports)
    assert roles == ["master"] * 3 + ["slave"] * 3, roles
    assert all(replica_of(cluster.state, port) for port in cluster.state.ports if role(port) == "master")
    client = RedisCluster(host="127.0.0.1", port=BASE_PORT)
    try:
        assert all(node.host == "127.0.0.1" for node in client.get_nodes())
        assert client.cluster_info()["cluster_state"] == "ok"
    finally:
        client.close()


def test_every_key_of_a_store_lives_in_one_slot_on_one_primary(cluster: RunningCluster) -> None:
    made = harness(_options(cluster))
    store = made.open_store()
    try:
        leases = Leases(environment=f"env-{uuid.uuid4().hex[:8]}")
        driver = store.connect()
        driver.transaction(lambda tx: [tx.create(leases.record(f"k{i}", at=i)) for i in range(5)])
        slot = key_slot(store.prefix.encode())
        admin = RedisCluster(host="127.0.0.1", port=BASE_PORT)
        try:
            owner = admin.get_node_from_key(store.prefix)
            assert (owner.host, owner.port) == store.proxy_target()
            per_primary = {
                node.name: [key for key in admin.scan_iter(match=f"{store.prefix}*", target_nodes=node)]
                for node in admin.get_primaries()
            }
            holding = {name: keys for name, keys in per_primary.items() if keys}
            assert list(holding) == [owner.name], f"the store's keys are spread over {list(holding)}"
            keys = holding[owner.name]
            assert {key_slot(key) for key in keys} == {slot}
            assert admin.cluster_countkeysinslot(slot) >= len(keys) >= 5 * 2
        finally:
            admin.close()
    finally:
        store.close()
        made.close()


@pytest.mark.parametrize("topology", ["sharded", "multi-slot", "on"])
def test_a_topology_that_spreads_a_store_over_slots_is_refused_with_the_reason(topology: str) -> None:
    with pytest.raises(RedisOptionError) as refused:
        harness({"url": f"redis://127.0.0.1:{BASE_PORT}/0", "cluster": topology})
    message = str(refused.value)
    assert f"cluster={topology!r} is refused" in message
    assert MULTI_SLOT_REFUSAL in message and "one hash slot" in message and "single-slot" in message


def test_a_store_prefix_without_a_hash_tag_is_refused_on_a_cluster() -> None:
    with pytest.raises(StorageUsageError, match=r"no \{hash tag\}.*single-slot topology"):
        RedisStorageDriver(f"redis://127.0.0.1:{BASE_PORT}/0", "runlane:untagged:", cluster=True)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://127.0.0.1:7000/1", "only database 0"),
        ("unix:///tmp/redis.sock", "needs a redis:// or rediss:// node address"),
    ],
)
def test_a_cluster_url_the_cluster_cannot_serve_is_refused(url: str, why: str) -> None:
    with pytest.raises(RedisOptionError, match=why):
        harness({"url": url, "cluster": "single-slot"})


def test_an_instance_opens_without_the_cluster_and_reports_it_unavailable_when_used() -> None:
    url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    made = harness({"url": url, "cluster": "single-slot"})
    store = made.attach((url, new_prefix()))  # closing an attached store deletes nothing
    try:
        driver = store.connect()  # no node is asked anything yet
        leases = Leases(environment="nowhere")
        with pytest.raises(StorageUnavailableError, match="no redis node could be reached"):
            driver.transaction(lambda tx: tx.get([leases.key("k")]))
    finally:
        store.close()
        made.close()


def test_redis_itself_refuses_a_transaction_across_slots_so_a_spread_store_could_not_commit(
    cluster: RunningCluster,
) -> None:
    """Why the refusal above is needed: a multi-slot MULTI/EXEC fails in the client and on the server."""
    first, second = "runlane:spread:a", "runlane:spread:b"
    client = RedisCluster(host="127.0.0.1", port=BASE_PORT)
    try:
        assert client.keyslot(first) != client.keyslot(second)
        with client.pipeline(transaction=True) as pipe:
            pipe.set(first, "1")
            pipe.set(second, "1")
            with pytest.raises(CrossSlotTransactionError):
                pipe.execute()
        node = client.get_node_from_key(first)
        raw = redis.Redis(host=node.host, port=node.port)
        try:
            with pytest.raises(ResponseError, match=r"CROSSSLOT|don't hash to the same slot|MOVED"):
                raw.execute_command("MSET", first, "1", second, "1")
        finally:
            raw.close()
        assert client.exists(first, second) == 0  # nothing half-written
    finally:
        client.close()


def test_the_driver_certifies_on_the_cluster_with_the_printed_arguments(
    cluster: RunningCluster, tmp_path: Path
) -> None:
    certify = shutil.which("runlane-certify", path=str(Path(sys.executable).parent)) or "runlane-certify"
    report = tmp_path / "report.json"
    done = subprocess.run(
        [certify, "run", *cluster.arguments, "--profile", "quick", "--seed", "1", "--workers", "2",
         "--examples", "none", "--report", str(report)],
        capture_output=True, text=True, timeout=1200, check=False, cwd=tmp_path,
    )  # fmt: skip
    tail = "\n".join(done.stdout.splitlines()[-30:])
    assert done.returncode == 0, f"runlane-certify failed on the cluster:\n{tail}\n{done.stderr[-2000:]}"
    document = json.loads(report.read_text())
    certification = document["certification"]
    assert certification["certified"] is True, certification
    assert certification["level"] == "core+append+exclusive+faults", certification
    # The printed arguments declare the cluster: its node-fault checks ran and passed, except the
    # partition one, which this cluster cannot stage (gated, never passed without evidence).
    cluster = {
        r["id"]: r["outcome"] for r in document["requirements"] if r["id"].startswith("cluster_faults.")
    }
    assert cluster.pop("cluster_faults.minority-never-acknowledges") == "gated", cluster
    assert len(cluster) >= 3 and set(cluster.values()) == {"passed"}, cluster


def test_cluster_down_stops_every_node_and_removes_its_files(tmp_path: Path) -> None:
    directory = cluster_directory(tmp_path / "nodes", "down")
    base = BASE_PORT + 10
    with running_cluster(directory, base) as running:
        pids = running.state.pids
        assert len(pids) == 6 and directory.exists()
    assert not directory.exists()
    for pid in pids:
        assert (
            not Path(f"/proc/{pid}").exists()
            or b"redis-server" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        ), f"redis-server {pid} still runs"
    for port in range(base, base + 6):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
