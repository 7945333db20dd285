"""A throw-away three-member etcd cluster on loopback, made of Debian's ``etcd``: start it, find it, stop it.

``scripts/cluster up`` and ``scripts/cluster down`` call this module; the
tests import it. It uses only the standard library and the ``etcd``
executable (Debian's ``etcd-server`` package), never the network beyond
``127.0.0.1``, and downloads nothing.

Topology: three members, each with a client port and a peer port (six ports:
free ones the system hands out, or ``base_port``..``base_port + 5``), each
with its own data directory under one directory (default
``$TMPDIR/runlane-etcd-cluster``). Members keep etcd's defaults for what
matters to durability: the write-ahead log is fsynced before a proposal is
acknowledged, and a write is acknowledged only once a majority has it.
``up`` returns once every member answers and the cluster has a leader;
``down`` stops exactly the processes it started (recorded by pid in
``cluster.json``) and deletes the directory.
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
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MEMBERS",
    "ClusterError",
    "EtcdClusterState",
    "Member",
    "certify_arguments",
    "default_directory",
    "down",
    "leader",
    "missing_executables",
    "restart_member",
    "up",
]

HOST = "127.0.0.1"
MEMBERS = 3
_STATE_FILE = "cluster.json"
#: Transactions may carry one compare and one write per record of a full attempt, plus index entries;
#: etcd's default of 128 operations per transaction is too few for the contract's default limits.
MAX_TXN_OPS = 4096
#: The contract's default transaction budget is 4 MiB of records; leave room for index keys and JSON.
MAX_REQUEST_BYTES = 16 * 1024 * 1024


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped; the message says why in one line."""


@dataclass(frozen=True)
class Member:
    """One etcd member: its name, its client and peer ports, and the pid of its process."""

    name: str
    client_port: int
    peer_port: int
    pid: int

    @property
    def client_url(self) -> str:
        return f"http://{HOST}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{HOST}:{self.peer_port}"


@dataclass(frozen=True)
class EtcdClusterState:
    """A running cluster: where its files are, its token, and its members."""

    directory: Path
    token: str
    members: tuple[Member, ...]

    @property
    def endpoints(self) -> str:
        """The driver's ``endpoints`` option: every member's client URL, comma-separated."""
        return ",".join(member.client_url for member in self.members)

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise ClusterError(f"no member named {name!r} in {self.directory}")

    def save(self) -> None:
        data = {
            "host": HOST,
            "token": self.token,
            "members": [
                {"name": m.name, "client_port": m.client_port, "peer_port": m.peer_port, "pid": m.pid}
                for m in self.members
            ],
        }
        (self.directory / _STATE_FILE).write_text(json.dumps(data) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> EtcdClusterState:
        path = directory / _STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            members = tuple(
                Member(str(m["name"]), int(m["client_port"]), int(m["peer_port"]), int(m["pid"]))
                for m in data["members"]
            )
            return cls(directory, str(data["token"]), members)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ClusterError(f"no running cluster is recorded in {path}: {error}") from error


def default_directory() -> Path:
    """Where ``up`` keeps the cluster's files unless told otherwise."""
    override = os.environ.get("RUNLANE_ETCD_CLUSTER_DIR", "").strip()
    return Path(override) if override else Path(tempfile.gettempdir()) / "runlane-etcd-cluster"


def missing_executables() -> list[str]:
    """The Debian ``etcd-server`` package's executable when it is not on ``PATH`` (empty: it is there)."""
    return [name for name in ("etcd",) if shutil.which(name) is None]


def certify_arguments(state: EtcdClusterState) -> str:
    """The ``runlane-certify run`` arguments that certify the driver on this cluster, as one line."""
    return f"--driver etcd --option endpoints={state.endpoints}"


def _port_in_use(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports the system reports free on loopback right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _get_json(url: str, timeout: float = 2.0, body: bytes | None = None) -> dict[str, object]:
    try:
        request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read().decode("utf-8"))
    except (OSError, urllib.error.URLError, ValueError) as error:
        raise ClusterError(f"{url} did not answer: {error}") from error
    if not isinstance(data, dict):
        raise ClusterError(f"{url} answered {data!r}")
    return data


def _healthy(member: Member) -> bool:
    return _get_json(f"{member.client_url}/health").get("health") in ("true", True)


def member_status(member: Member) -> dict[str, object]:
    """The member's ``/v3/maintenance/status`` (its id, its leader's id, its raft term and index)."""
    return _get_json(f"{member.client_url}/v3/maintenance/status", body=b"{}")


def leader(state: EtcdClusterState, *, among: Sequence[Member] | None = None) -> Member:
    """The member the others (those in ``among``, default all) agree is the leader; ClusterError if none."""
    candidates = list(state.members if among is None else among)
    ids: dict[str, Member] = {}
    leaders = set()
    for member in candidates:
        status = member_status(member)
        header = status.get("header")
        if isinstance(header, dict):
            ids[str(header.get("member_id"))] = member
        leaders.add(str(status.get("leader")))
    if len(leaders) != 1:
        raise ClusterError(f"members disagree about the leader: {sorted(leaders)}")
    (chosen,) = leaders
    if chosen not in ids:
        raise ClusterError(f"the leader {chosen} is not among {[m.name for m in candidates]}")
    return ids[chosen]


def _wait(predicate: Callable[[], bool], what: str, timeout: float) -> None:
    """Poll ``predicate`` until true; ClusterError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except ClusterError as error:
            last = f" (last: {error})"
        time.sleep(0.1)
    raise ClusterError(f"{what} did not happen within {timeout:.0f} s{last}")


def _command(state_dir: Path, token: str, ports: Sequence[tuple[str, int, int]], name: str) -> list[str]:
    client, peer = next((c, p) for n, c, p in ports if n == name)
    initial = ",".join(f"{n}=http://{HOST}:{p}" for n, _c, p in ports)
    return [
        "etcd",
        "--name", name,
        "--data-dir", str(state_dir / name),
        "--listen-client-urls", f"http://{HOST}:{client}",
        "--advertise-client-urls", f"http://{HOST}:{client}",
        "--listen-peer-urls", f"http://{HOST}:{peer}",
        "--initial-advertise-peer-urls", f"http://{HOST}:{peer}",
        "--initial-cluster", initial,
        "--initial-cluster-token", token,
        "--initial-cluster-state", "new",
        "--max-txn-ops", str(MAX_TXN_OPS),
        "--max-request-bytes", str(MAX_REQUEST_BYTES),
        "--enable-v2=false",
    ]  # fmt: skip


def _spawn(directory: Path, command: list[str], name: str) -> int:
    """Start one member in a session of its own, detached from the caller; its pid.

    A short-lived ``sh`` starts the member in the background and exits, so the
    member is never a child of the caller (a test that restarts a member would
    otherwise keep its exited process as a zombie until the test run ends).
    """
    launched = subprocess.run(
        ["sh", "-c", 'exec "$@" </dev/null >>"$RUNLANE_ETCD_LOG" 2>&1 &\necho $!', "sh", *command],
        env={**os.environ, "RUNLANE_ETCD_LOG": str(directory / f"{name}.log")},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        start_new_session=True,
    )
    pid = launched.stdout.strip()
    if launched.returncode != 0 or not pid.isdigit():
        raise ClusterError(f"could not start etcd member {name}: {launched.stderr.strip() or pid!r}")
    return int(pid)


def up(
    directory: Path | None = None, base_port: int | None = None, *, timeout: float = 60.0
) -> EtcdClusterState:
    """Start three members on loopback and wait until each answers and they agree on a leader.

    Refuses (ClusterError) when ``etcd`` is missing, when a cluster is already
    recorded in ``directory``, or when a port is taken; on any failure after
    the first process started, everything started is stopped again and the
    directory removed.
    """
    missing = missing_executables()
    if missing:
        raise ClusterError(f"{', '.join(missing)} not found: install Debian's etcd-server package")
    directory = default_directory() if directory is None else directory
    if (directory / _STATE_FILE).exists():
        raise ClusterError(f"a cluster is already recorded in {directory}; run `cluster down` first")
    numbers = (
        _free_ports(2 * MEMBERS) if base_port is None else list(range(base_port, base_port + 2 * MEMBERS))
    )
    busy = [port for port in numbers if _port_in_use(port)]
    if busy:
        raise ClusterError(f"ports {busy} are in use on {HOST}")
    ports = [(f"m{i}", numbers[2 * i], numbers[2 * i + 1]) for i in range(MEMBERS)]
    token = f"runlane-{uuid.uuid4().hex[:12]}"
    directory.mkdir(parents=True, exist_ok=True)
    members: list[Member] = []
    try:
        for name, client, peer in ports:
            pid = _spawn(directory, _command(directory, token, ports, name), name)
            members.append(Member(name, client, peer, pid))
        state = EtcdClusterState(directory, token, tuple(members))
        state.save()
        for member in members:
            _wait(lambda m=member: _healthy(m), f"etcd member {member.name} reporting healthy", timeout)  # type: ignore[misc]
        _wait(lambda: leader(state) is not None, "the members agreeing on a leader", timeout)
        return state
    except BaseException:
        _stop(directory, [m.pid for m in members])
        raise


def restart_member(state: EtcdClusterState, name: str, *, timeout: float = 60.0) -> EtcdClusterState:
    """Start member ``name`` again on its data directory (after it was killed); the updated state."""
    old = state.member(name)
    if _alive(old.pid):
        raise ClusterError(f"member {name} (pid {old.pid}) is still running")
    ports = [(m.name, m.client_port, m.peer_port) for m in state.members]
    command = _command(state.directory, state.token, ports, name)
    command[command.index("new")] = "existing"
    pid = _spawn(state.directory, command, name)
    new = Member(name, old.client_port, old.peer_port, pid)
    state = EtcdClusterState(
        state.directory, state.token, tuple(new if m.name == name else m for m in state.members)
    )
    state.save()
    _wait(lambda: _healthy(new), f"etcd member {name} reporting healthy again", timeout)
    return state


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours still answers kill(0): reap it
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return _is_etcd(pid)
    return done == 0


def _stop(directory: Path, pids: Sequence[int]) -> None:
    """SIGTERM each process (SIGKILL after 10 s), wait until gone, delete ``directory``."""
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
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(directory, ignore_errors=True)


def down(directory: Path | None = None) -> EtcdClusterState:
    """Stop every member recorded in ``directory`` (those pids only, if still etcd) and delete its files."""
    directory = default_directory() if directory is None else directory
    state = EtcdClusterState.load(directory)
    _stop(directory, [m.pid for m in state.members if _is_etcd(m.pid)])
    return state


def _is_etcd(pid: int) -> bool:
    """True while ``pid`` is an ``etcd`` process (a recycled pid of another program is left alone)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if status.rpartition(")")[2].split()[:1] == ["Z"]:
        return False
    return command.split(b"\x00", 1)[0].endswith(b"etcd")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cluster", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("action", choices=("up", "down"))
    parser.add_argument("--dir", type=Path, default=None, help="where the members keep their files")
    parser.add_argument("--base-port", type=int, default=None, help="use ports N..N+5 (default: free ports)")
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            state = up(args.dir, args.base_port)
            ports = ", ".join(f"{m.name} {m.client_port}/{m.peer_port}" for m in state.members)
            print(
                f"etcd cluster up: {len(state.members)} members on {HOST} (client/peer ports: {ports}), "
                f"files in {state.directory}",
                file=sys.stderr,
            )
            print(certify_arguments(state))
        else:
            state = down(args.dir)
            print(
                f"etcd cluster down: stopped {len(state.members)} members, removed {state.directory}",
                file=sys.stderr,
            )
    except ClusterError as error:
        print(f"cluster {args.action}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
