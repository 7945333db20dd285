"""The driver on a real three-member etcd cluster on loopback, certified with the printed arguments.

``scripts/cluster up`` starts the cluster and prints the ``runlane-certify run`` arguments; the driver
certifies with exactly those arguments at ``core+append+exclusive+faults`` (the ``faults`` suite puts the
toolkit's loopback proxy in front of one member), once next to the checks and once served by the Python
backend (``--isolation process``). ``scripts/cluster down`` leaves no process, port or file.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_support import RunningCluster, cluster_directory, running_cluster
from runlane_etcd_driver import EtcdOptionError, harness
from runlane_etcd_driver.cluster import leader

from runlane_conformance import Leases, StorageDurability, StorageUnavailableError

LEVEL = "core+append+exclusive+faults"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    directory = cluster_directory(tmp_path_factory.mktemp("etcd-cluster") / "members", "certify")
    with running_cluster(directory) as running:
        yield running


def test_cluster_up_prints_one_line_naming_every_member(cluster: RunningCluster) -> None:
    assert cluster.arguments[:2] == ["--driver", "etcd"]
    members = cluster.state.members
    assert len(members) == 3
    assert cluster.options == {"endpoints": ",".join(f"http://127.0.0.1:{m.client_port}" for m in members)}
    assert leader(cluster.state) in members


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_the_driver_certifies_on_the_cluster_with_the_printed_arguments(
    cluster: RunningCluster, tmp_path: Path, isolation: str, record_property: Callable[[str, object], None]
) -> None:
    certify = shutil.which("runlane-certify", path=str(Path(sys.executable).parent)) or "runlane-certify"
    report = tmp_path / "report.json"
    # The isolated driver's sandbox has a private loopback unless told to share the machine's network,
    # which a driver on a server needs (docs/trust.md).
    sandbox = ["--sandbox-network", "host"] if isolation == "process" else []
    started = time.monotonic()
    done = subprocess.run(
        [certify, "run", *cluster.arguments, "--isolation", isolation, *sandbox, "--profile", "quick",
         "--seed", "1", "--workers", "2", "--examples", "none", "--report", str(report)],
        capture_output=True, text=True, timeout=1500, check=False, cwd=tmp_path,
    )  # fmt: skip
    record_property("certify_seconds", round(time.monotonic() - started, 1))
    tail = "\n".join(done.stdout.splitlines()[-30:])
    assert done.returncode == 0, f"runlane-certify failed on the cluster:\n{tail}\n{done.stderr[-2000:]}"
    certification = json.loads(report.read_text())["certification"]
    assert certification["certified"] is True, certification
    assert certification["level"] == LEVEL, certification


def test_the_profile_claims_durability_and_no_store_clock(cluster: RunningCluster) -> None:
    made = harness(cluster.options)
    store = made.open_store()
    try:
        profile = store.connect().profile
        assert profile.durability is StorageDurability.DURABLE
        assert profile.clock_authority.value == "client"
        assert profile.append and profile.exclusive_candidates
    finally:
        store.close()
        made.close()


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"endpoints": "https://127.0.0.1:2379"}, "is not http://host:port"),
        ({"endpoints": "127.0.0.1"}, "is not http://host:port"),
        ({"endpoints": " , "}, "no endpoint given"),
        ({"url": "http://127.0.0.1:2379"}, "does not know option"),
    ],
)
def test_bad_options_are_refused_with_the_reason(options: dict[str, str], why: str) -> None:
    with pytest.raises(EtcdOptionError, match=why):
        harness(options)


def test_an_instance_without_a_cluster_reports_it_unavailable() -> None:
    made = harness({"endpoints": "http://127.0.0.1:1,http://127.0.0.1:2"})  # nothing listens there
    store = made.open_store()
    try:
        leases = Leases(environment="nowhere")
        with pytest.raises(StorageUnavailableError, match="etcd did not serve a read"):
            store.connect().transaction(lambda tx: tx.get([leases.key("k")]))
    finally:
        store.close()
        made.close()


def test_cluster_down_stops_every_member_and_removes_its_files(tmp_path: Path) -> None:
    directory = cluster_directory(tmp_path / "members", "down")
    with running_cluster(directory) as running:
        members = running.state.members
        assert directory.exists()
    assert not directory.exists()
    for member in members:
        proc = Path(f"/proc/{member.pid}")
        assert not proc.exists() or b"etcd" not in (proc / "cmdline").read_bytes(), f"etcd {member.pid} runs"
        for port in (member.client_port, member.peer_port):
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
