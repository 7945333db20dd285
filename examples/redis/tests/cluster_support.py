"""A Redis Cluster for one test module, started and stopped through ``scripts/cluster`` as a user would.

Without Debian's ``redis-server`` (``redis-server`` and ``redis-cli`` on ``PATH``) the tests that need a
cluster are skipped with that reason, except under ``CI=true``, where the absence fails them: CI must
never pass by skipping. Each module gets its own ports (``base_port``, moved per xdist worker) and its
own directory, so modules and workers may run at once (``pytest -n 4``) and a cluster a developer
started on 7000 is left alone.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from runlane_redis_driver.cluster import RedisClusterState, missing_executables

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "cluster"


@dataclass(frozen=True)
class RunningCluster:
    """What ``scripts/cluster up`` started: the one-line ``runlane-certify run`` arguments and the nodes."""

    arguments: list[str]
    state: RedisClusterState


def require_redis_server() -> None:
    """Skip (or, under CI=true, fail) when Debian's redis-server package is not installed."""
    missing = missing_executables()
    if not missing:
        return
    reason = f"{' and '.join(missing)} not on PATH (apt-get install redis-server): no Redis Cluster to run"
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=180, check=False
    )


def worker_ports(base_port: int) -> int:
    """``base_port`` moved by 30 per pytest-xdist worker, so workers running one module never share ports."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return base_port + 30 * (int(worker) if worker.isdigit() else 0)


def cluster_directory(fallback: Path, name: str) -> Path:
    """Where a test's cluster keeps its files: under ``$RUNLANE_REDIS_CLUSTER_TEST_DIR`` when set.

    CI sets it, so that whatever happens to pytest, its cleanup finds every cluster a test started
    (each directory holds ``cluster.json``) and stops it with ``scripts/cluster down --dir``.
    """
    root = os.environ.get("RUNLANE_REDIS_CLUSTER_TEST_DIR", "").strip()
    if not root:
        return fallback
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return Path(root) / f"{name}-{worker}"


@contextmanager
def running_cluster(directory: Path, base_port: int) -> Iterator[RunningCluster]:
    """``scripts/cluster up`` on ``base_port``..``base_port + 5``; ``scripts/cluster down`` afterwards."""
    require_redis_server()
    where = ("--dir", str(directory), "--base-port", str(base_port))
    started = _script("up", *where)
    assert started.returncode == 0, f"scripts/cluster up failed: {started.stderr.strip()}"
    lines = started.stdout.splitlines()
    assert len(lines) == 1, f"scripts/cluster up must print one line of arguments, printed {lines!r}"
    state = RedisClusterState.load(directory)
    try:
        yield RunningCluster(shlex.split(lines[0]), state)
    finally:
        stopped = _script("down", *where)
        assert stopped.returncode == 0, f"scripts/cluster down failed: {stopped.stderr.strip()}"
