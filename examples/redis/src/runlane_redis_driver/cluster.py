"""A throw-away Redis Cluster on loopback, made of Debian's ``redis-server``: start it, find it, stop it.

``scripts/cluster up`` and ``scripts/cluster down`` call this module; the
cluster tests import it. It uses only the standard library and the
``redis-server`` and ``redis-cli`` executables, never the network beyond
``127.0.0.1``, and downloads nothing.

Topology: three primaries, each with one replica (six processes), on six
consecutive ports from ``base_port`` (default 7000), data under one
directory (default ``$TMPDIR/runlane-redis-cluster``). Every node runs with
no persistence (no RDB, no AOF), like the standalone server the example was
first certified on, and with a short ``cluster-node-timeout`` so a replica
takes over within seconds of its primary dying. ``up`` returns once every
node reports ``cluster_state:ok`` and all 16384 slots are served; ``down``
stops exactly the processes whose pid files it wrote and deletes the
directory.

The state of a running cluster (ports and pids) is kept in ``cluster.json``
in the directory, so ``down`` and the fault tests find the processes without
guessing by name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_BASE_PORT",
    "ClusterError",
    "RedisClusterState",
    "certify_arguments",
    "cluster_info",
    "default_directory",
    "down",
    "missing_executables",
    "replica_of",
    "role",
    "up",
]

DEFAULT_BASE_PORT = 7000
HOST = "127.0.0.1"
PRIMARIES = 3
REPLICAS_PER_PRIMARY = 1
#: Milliseconds without an answer before the cluster counts a node as failed (a replica then takes over).
NODE_TIMEOUT_MS = 2000
_STATE_FILE = "cluster.json"


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped; the message says why in one line."""


@dataclass(frozen=True)
class RedisClusterState:
    """A running cluster: where its files are, and each node's port and process id."""

    directory: Path
    ports: tuple[int, ...]
    pids: tuple[int, ...]

    @property
    def url(self) -> str:
        """The URL the driver is given: any one node; the cluster client discovers the others."""
        return f"redis://{HOST}:{self.ports[0]}/0"

    def pid_of(self, port: int) -> int:
        """The process id of the node listening on ``port``."""
        return self.pids[self.ports.index(port)]

    def save(self) -> None:
        data = {"host": HOST, "ports": list(self.ports), "pids": list(self.pids)}
        (self.directory / _STATE_FILE).write_text(json.dumps(data) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> RedisClusterState:
        path = directory / _STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(directory, tuple(int(p) for p in data["ports"]), tuple(int(p) for p in data["pids"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ClusterError(f"no running cluster is recorded in {path}: {error}") from error


def default_directory() -> Path:
    """Where ``up`` keeps the cluster's files unless told otherwise."""
    override = os.environ.get("RUNLANE_REDIS_CLUSTER_DIR", "").strip()
    return Path(override) if override else Path(tempfile.gettempdir()) / "runlane-redis-cluster"


def missing_executables() -> list[str]:
    """The Debian ``redis-server`` package's executables that are not on ``PATH`` (empty: all there)."""
    return [name for name in ("redis-server", "redis-cli") if shutil.which(name) is None]


def certify_arguments(state: RedisClusterState) -> str:
    """The ``runlane-certify run`` arguments that certify the driver on this cluster, as one line."""
    others = ",".join(f"{HOST}:{port}" for port in state.ports[1:])
    return (
        f"--driver redis --option url={state.url} --option cluster=single-slot --option nodes={others} "
        f"--option replicas=1 --option control={state.directory}"
    )


def _port_in_use(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _cli(port: int, *args: str, timeout: float = 10.0) -> str:
    """One ``redis-cli`` command against the node on ``port``; its output, or ClusterError."""
    try:
        done = subprocess.run(
            ["redis-cli", "-h", HOST, "-p", str(port), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ClusterError(f"redis-cli -p {port} {' '.join(args)} did not answer in {timeout} s") from error
    if done.returncode != 0:
        raise ClusterError(
            f"redis-cli -p {port} {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def cluster_info(port: int) -> dict[str, str]:
    """``CLUSTER INFO`` of one node as a dict."""
    fields = {}
    for line in _cli(port, "CLUSTER", "INFO", timeout=3.0).splitlines():
        name, sep, value = line.strip().partition(":")
        if sep:
            fields[name] = value
    return fields


def role(port: int) -> str:
    """``master`` or ``slave``: what the node on ``port`` says it is now (``INFO replication``)."""
    for line in _cli(port, "INFO", "replication", timeout=3).splitlines():
        name, _sep, value = line.strip().partition(":")
        if name == "role":
            return value
    raise ClusterError(f"node {port} did not report its replication role")


def replica_of(state: RedisClusterState, primary_port: int) -> int:
    """The port of the node that replicates the primary on ``primary_port``."""
    primary_id = _cli(primary_port, "CLUSTER", "MYID", timeout=3).strip()
    for port in state.ports:
        if port != primary_port and _cli(port, "CLUSTER", "MYID", timeout=3).strip() != primary_id:
            fields = dict(
                line.strip().partition(":")[::2]
                for line in _cli(port, "INFO", "replication", timeout=3).splitlines()
                if ":" in line
            )
            if fields.get("role") == "slave" and int(fields.get("master_port", "0")) == primary_port:
                return port
    raise ClusterError(f"no node replicates the primary on port {primary_port}")


def _node_config(port: int, directory: Path) -> str:
    return "\n".join(
        [
            f"port {port}",
            f"bind {HOST}",
            "protected-mode yes",
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            f"cluster-node-timeout {NODE_TIMEOUT_MS}",
            # No persistence: the data lives as long as each server process (the profile says so).
            'save ""',
            "appendonly no",
            "daemonize yes",
            f"dir {directory}",
            f"pidfile {directory / 'redis.pid'}",
            f"logfile {directory / 'redis.log'}",
            "",
        ]
    )


def _wait(predicate: object, what: str, timeout: float) -> None:
    """Poll ``predicate`` (a no-argument callable) until true; ClusterError naming ``what`` on timeout."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    last: str = ""
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except ClusterError as error:
            last = f" (last: {error})"
        time.sleep(0.1)
    raise ClusterError(f"{what} did not happen within {timeout:.0f} s{last}")


def _cluster_ok(port: int) -> bool:
    info = cluster_info(port)
    return info.get("cluster_state") == "ok" and info.get("cluster_slots_ok") == "16384"


def up(
    directory: Path | None = None, base_port: int = DEFAULT_BASE_PORT, *, timeout: float = 60.0
) -> RedisClusterState:
    """Start six nodes, join them into three primaries with one replica each, and wait until it serves.

    Refuses (ClusterError) when the executables are missing, when a cluster is
    already recorded in ``directory``, or when one of the ports is taken; on
    any failure after the first process started, everything started is stopped
    again and the directory removed.
    """
    missing = missing_executables()
    if missing:
        raise ClusterError(f"{', '.join(missing)} not found: install Debian's redis-server package")
    directory = default_directory() if directory is None else directory
    if (directory / _STATE_FILE).exists():
        raise ClusterError(f"a cluster is already recorded in {directory}; run `cluster down` first")
    ports = tuple(range(base_port, base_port + PRIMARIES * (1 + REPLICAS_PER_PRIMARY)))
    busy = [port for port in ports if _port_in_use(port) or _port_in_use(port + 10000)]
    if busy:
        raise ClusterError(f"ports {busy} (or their cluster bus ports, +10000) are in use on {HOST}")
    directory.mkdir(parents=True, exist_ok=True)
    pids: list[int] = []
    try:
        for port in ports:
            node_dir = directory / str(port)
            node_dir.mkdir(exist_ok=True)
            config = node_dir / "redis.conf"
            config.write_text(_node_config(port, node_dir), encoding="utf-8")
            subprocess.run(["redis-server", str(config)], check=True, capture_output=True, timeout=30)
            pid_file = node_dir / "redis.pid"
            _wait(pid_file.exists, f"redis-server on port {port} writing its pid file", 15)
            _wait(lambda p=pid_file: p.read_text().strip().isdigit(), f"pid file of port {port}", 5)
            pids.append(int(pid_file.read_text().strip()))
            _wait(
                lambda p=port: _cli(p, "PING", timeout=2).strip() == "PONG", f"port {port} answering PING", 15
            )
        state = RedisClusterState(directory, ports, tuple(pids))
        state.save()
        _cli(
            ports[0],
            "--cluster",
            "create",
            *(f"{HOST}:{port}" for port in ports),
            "--cluster-replicas",
            str(REPLICAS_PER_PRIMARY),
            "--cluster-yes",
            timeout=60,
        )
        for port in ports:
            _wait(lambda p=port: _cluster_ok(p), f"node {port} reporting cluster_state:ok", timeout)
        # Each replica must have finished its first sync, or a failover could promote an empty node.
        for port in ports:
            _wait(lambda p=port: _synced(p), f"node {port} finishing its replication handshake", timeout)
        from .control import start_control  # the process that kills and restarts nodes on request

        start_control(directory)
        return state
    except BaseException:
        from .control import stop_control

        stop_control(directory)
        _stop(directory, pids)
        raise


def _synced(port: int) -> bool:
    fields = dict(
        line.strip().partition(":")[::2]
        for line in _cli(port, "INFO", "replication", timeout=3).splitlines()
        if ":" in line
    )
    if fields.get("role") == "slave":
        return fields.get("master_link_status") == "up"
    return fields.get("role") == "master" and fields.get("connected_slaves", "0") != "0"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours still answers kill(0); reap it if it is our child.
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _stop(directory: Path, pids: Sequence[int]) -> None:
    """SIGTERM each process (then SIGKILL after 10 s), wait until gone, delete ``directory``."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)


def down(directory: Path | None = None) -> RedisClusterState:
    """Stop every node recorded in ``directory`` (those pids only) and delete its files."""
    directory = default_directory() if directory is None else directory
    state = RedisClusterState.load(directory)
    from .control import stop_control

    stop_control(directory)
    # Only stop processes that are still the redis-server we started (a recycled pid is left alone).
    ours = [pid for pid in state.pids if _is_redis_server(pid)]
    _stop(directory, ours)
    return state


def _is_redis_server(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"redis-server" in command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cluster", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("--dir", type=Path, default=None, help="where the nodes keep their files")
    parser.add_argument(
        "--base-port", type=int, default=int(os.environ.get("RUNLANE_REDIS_CLUSTER_PORT", DEFAULT_BASE_PORT))
    )
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            state = up(args.dir, args.base_port)
            print(
                f"redis cluster up: {len(state.ports)} nodes on {HOST}:{state.ports[0]}-{state.ports[-1]}, "
                f"files in {state.directory}",
                file=sys.stderr,
            )
            print(certify_arguments(state))
        else:
            state = down(args.dir)
            print(
                f"redis cluster down: stopped {len(state.pids)} nodes, removed {state.directory}",
                file=sys.stderr,
            )
    except ClusterError as error:
        print(f"cluster {args.action}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
