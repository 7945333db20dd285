"""The cluster a store lives on, declared to the conformance suite (its ``cluster_faults`` area).

Given ``--option control=DIR``, where DIR is the directory ``scripts/cluster up`` wrote (its
``cluster.json`` names each node's port and process id), every store of the harness offers
``cluster()``: the suite may then kill a node (``SIGKILL``), restart it from its own configuration file,
and wait until the cluster serves the store again with every running node in sync. Without the option
the harness declares nothing, and the area is reported as not applicable: a harness only kills
processes it was told it owns.

Who starts a restarted node. ``runlane-certify`` ends every process the driver started when the run
ends (``run/reaper.py``), so a node the harness restarted itself would die with the run and leave the
cluster one node short. So ``scripts/cluster up`` also starts a small control process (``serve``),
outside any run, listening on the Unix socket ``DIR/control.sock``; the harness asks it to kill or
restart a node (one line: ``kill PORT`` or ``restart PORT``; answer ``ok`` or ``error: why``), and the
nodes it restarts are its own, so they outlive the run like the others. ``scripts/cluster down``
stops it with the nodes.

Members are named ``host:port``. Cutting a node off from its peers is not offered: the nodes talk to each
other directly on their bus ports, so nothing here can sit between them. (Redis Cluster would not pass
that check anyway: a primary cut off from its peers keeps acknowledging writes until its node timeout
runs out, and those writes are lost when it rejoins.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .cluster import (
    HOST,
    ClusterError,
    RedisClusterState,
    _cli,
    _is_redis_server,
    cluster_info,
)

__all__ = ["RedisDeclaredCluster", "request", "serve", "start_control", "stop_control"]

_POLL = 0.1
SOCKET_NAME = "control.sock"
PID_NAME = "control.pid"


def _alive(state: RedisClusterState, port: int) -> bool:
    pid = state.pid_of(port)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _is_redis_server(pid)


def _kill_node(directory: Path, port: int) -> None:
    state = RedisClusterState.load(directory)
    pid = state.pid_of(port)
    if not _is_redis_server(pid):
        raise ClusterError(f"process {pid} recorded for port {port} is not a redis-server; not killing it")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(state, port):
        if time.monotonic() > deadline:
            raise ClusterError(f"port {port} (pid {pid}) did not die within 10 s of SIGKILL")
        time.sleep(_POLL / 10)


def _restart_node(directory: Path, port: int) -> None:
    state = RedisClusterState.load(directory)
    if _alive(state, port):
        return
    node_dir = directory / str(port)
    pid_file = node_dir / "redis.pid"
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()  # SIGKILL left the old one behind
    subprocess.run(
        ["redis-server", str(node_dir / "redis.conf")], check=True, capture_output=True, timeout=30
    )
    deadline = time.monotonic() + 15
    while not (pid_file.exists() and pid_file.read_text().strip().isdigit()):
        if time.monotonic() > deadline:
            raise ClusterError(f"port {port} wrote no pid file within 15 s of starting")
        time.sleep(_POLL)
    pid = int(pid_file.read_text().strip())
    pids = tuple(pid if p == port else old for p, old in zip(state.ports, state.pids, strict=True))
    RedisClusterState(directory, state.ports, pids).save()  # so `cluster down` stops the new process


def serve(directory: Path) -> None:
    """Answer ``kill PORT`` / ``restart PORT`` requests on ``DIR/control.sock`` until killed."""
    path = directory / SOCKET_NAME
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    (directory / PID_NAME).write_text(f"{os.getpid()}\n", encoding="utf-8")
    while True:
        connection, _ = server.accept()
        with connection:
            try:
                line = connection.makefile("r", encoding="utf-8").readline().split()
                state = RedisClusterState.load(directory)
                if len(line) != 2 or line[0] not in ("kill", "restart") or not line[1].isdigit():
                    raise ClusterError(f"not a request: {' '.join(line)!r}")
                port = int(line[1])
                if port not in state.ports:
                    raise ClusterError(f"port {port} is not a node of this cluster")
                (_kill_node if line[0] == "kill" else _restart_node)(directory, port)
                answer = "ok"
            except Exception as error:  # answered, never fatal: the next request may work
                answer = "error: " + (" ".join(str(error).split()) or type(error).__name__)
            with contextlib.suppress(OSError):
                connection.sendall((answer + "\n").encode("utf-8"))


def request(directory: Path, verb: str, port: int, *, timeout: float = 60.0) -> None:
    """Ask the control process of the cluster in ``directory`` to ``kill`` or ``restart`` a node."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        try:
            client.connect(str(directory / SOCKET_NAME))
            client.sendall(f"{verb} {port}\n".encode())
            answer = client.makefile("r", encoding="utf-8").readline().strip()
        except OSError as error:
            raise ClusterError(
                f"the cluster's control process did not answer {verb} {port}: {error}"
            ) from error
    if answer != "ok":
        raise ClusterError(f"{verb} {port}: {answer or 'no answer'}")


def start_control(directory: Path) -> None:
    """Start ``serve`` as a process of its own session (so it outlives whoever started it)."""
    subprocess.Popen(
        [sys.executable, "-m", "runlane_redis_driver.control", str(directory)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(directory / "control.log", "ab"),  # noqa: SIM115 - the child keeps it
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    deadline = time.monotonic() + 15
    while not (directory / PID_NAME).exists():
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the control process did not start within 15 s (see {directory / 'control.log'})"
            )
        time.sleep(_POLL)


def stop_control(directory: Path) -> None:
    """Stop the control process recorded in ``directory`` (only if it still is one)."""
    try:
        pid = int((directory / PID_NAME).read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"runlane_redis_driver.control" in command:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(_POLL / 2)


class RedisDeclaredCluster:
    """The nodes of one Redis Cluster started by ``scripts/cluster up``; implements ``DeclaredCluster``."""

    def __init__(self, directory: Path, slot_primary: Callable[[], tuple[str, int]]) -> None:
        self.directory = directory
        self._slot_primary = slot_primary
        self.state = RedisClusterState.load(directory)

    def members(self) -> Sequence[str]:
        return tuple(f"{HOST}:{port}" for port in self.state.ports)

    def _port(self, member: str) -> int:
        host, _sep, port = member.rpartition(":")
        if host != HOST or not port.isdigit() or int(port) not in self.state.ports:
            raise ClusterError(f"{member!r} is not a node of the cluster recorded in {self.directory}")
        return int(port)

    def primary(self) -> str:
        host, port = self._slot_primary()
        return f"{host}:{port}"

    def kill(self, member: str) -> None:
        request(self.directory, "kill", self._port(member))

    def restart(self, member: str) -> None:
        request(self.directory, "restart", self._port(member))

    def _ready(self) -> bool:
        state = RedisClusterState.load(self.directory)
        running = [port for port in state.ports if _alive(state, port)]
        for port in running:
            info = cluster_info(port)
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            fields = dict(
                line.strip().partition(":")[::2]
                for line in _cli(port, "INFO", "replication", timeout=3).splitlines()
                if ":" in line
            )
            if fields.get("role") == "slave" and fields.get("master_link_status") != "up":
                return False
        _host, port = self._slot_primary()
        return port in running and "role:master" in _cli(port, "INFO", "replication", timeout=3)

    def settle(self, *, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self._ready():
                    return True
            except Exception:  # a node still starting or failing over: ask again
                pass
            time.sleep(_POLL)
        return False


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
