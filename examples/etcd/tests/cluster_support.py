"""An etcd cluster for one test module, started and stopped through ``scripts/cluster`` as a user would.

Without Debian's ``etcd-server`` (``etcd`` on ``PATH``) the tests that need a cluster are skipped with
that reason, except under ``CI=true``, where the absence fails them: CI must never pass by skipping.
Members take free ports the system hands out, so modules and xdist workers may run at once and a
cluster a developer started is left alone.
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
from runlane_etcd_driver.cluster import EtcdClusterState, missing_executables

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "cluster"


@dataclass(frozen=True)
class RunningCluster:
    """What ``scripts/cluster up`` started: the one-line ``runlane-certify run`` arguments and the members."""

    arguments: list[str]
    state: EtcdClusterState

    @property
    def options(self) -> dict[str, str]:
        """The ``--option key=value`` pairs of the printed arguments."""
        args = self.arguments
        return dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--option")


def require_etcd() -> None:
    """Skip (or, under CI=true, fail) when Debian's etcd-server package is not installed."""
    missing = missing_executables()
    if not missing:
        return
    reason = f"{' and '.join(missing)} not on PATH (apt-get install etcd-server): no etcd cluster to run"
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=180, check=False
    )


def cluster_directory(fallback: Path, name: str) -> Path:
    """Where a test's cluster keeps its files: under ``$RUNLANE_ETCD_CLUSTER_TEST_DIR`` when set.

    CI sets it, so that whatever happens to pytest, its cleanup finds every cluster a test started
    (each directory holds ``cluster.json``) and stops it with ``scripts/cluster down --dir``.
    """
    root = os.environ.get("RUNLANE_ETCD_CLUSTER_TEST_DIR", "").strip()
    if not root:
        return fallback
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return Path(root) / f"{name}-{worker}"


@contextmanager
def running_cluster(directory: Path) -> Iterator[RunningCluster]:
    """``scripts/cluster up --dir directory``; ``scripts/cluster down`` afterwards."""
    require_etcd()
    started = script("up", "--dir", str(directory))
    assert started.returncode == 0, f"scripts/cluster up failed: {started.stderr.strip()}"
    lines = started.stdout.splitlines()
    assert len(lines) == 1, f"scripts/cluster up must print one line of arguments, printed {lines!r}"
    state = EtcdClusterState.load(directory)
    try:
        yield RunningCluster(shlex.split(lines[0]), state)
    finally:
        stopped = script("down", "--dir", str(directory))
        assert stopped.returncode == 0, f"scripts/cluster down failed: {stopped.stderr.strip()}"
