"""Runs ``runlane-certify`` in a subprocess, as CI would, against the hostile drivers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.run.sandbox import WRITABLE_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
DRIVERS = "tests.hostile.drivers"
ENTRY = "import sys; from runlane_conformance.cli.app import main; main(sys.argv[1:])"


@dataclass(frozen=True)
class Certified:
    """One finished ``runlane-certify`` process: its exit status, output and report (if written)."""

    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None

    def requirement(self, requirement_id: str) -> dict[str, Any]:
        assert self.report is not None, self.stderr
        return next(r for r in self.report["requirements"] if r["id"] == requirement_id)

    def messages(self, requirement_id: str) -> list[str]:
        return [f["message"] for f in self.requirement(requirement_id).get("failures", [])]


def certify_command(*args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, *args]


def hostile_env(directory: Path, **extra: str) -> dict[str, str]:
    # The markers directory is the one place a sandboxed backend may write (besides its own /tmp).
    env = {
        **os.environ,
        "RUNLANE_HOSTILE_DIR": str(directory),
        WRITABLE_VARIABLE: str(directory),
        "COLUMNS": "200",
        **extra,
    }
    env.pop("PYTEST_CURRENT_TEST", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


@pytest.fixture
def certify(tmp_path: Path) -> Any:
    """``certify(driver, *args, env=..., timeout=...)``: run the CLI with a report and return what it did."""

    def run(driver: str, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> Certified:
        report = tmp_path / "report.json"
        own = ["--examples", str(tmp_path / "examples")]
        target = driver if ":" in driver or driver == "local" else f"{DRIVERS}:{driver}"
        done = subprocess.run(
            # A database of its own: failures saved by one test are not replayed first by the next.
            certify_command("run", "--driver", target, "--seed", "1", "--report", str(report), *own, *args),
            cwd=ROOT,
            env=env or hostile_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        document = json.loads(report.read_text()) if report.exists() else None
        return Certified(done.returncode, done.stdout, done.stderr, document)

    return run
