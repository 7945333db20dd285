"""The redis example broken as issue 21 described (exclusive holds in process memory) fails only the
cross-process exclusive check, and fails it by name, through ``runlane-certify``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


def _certify(words: list[str], report: Path) -> dict[str, Any]:
    command = shutil.which(
        "runlane-certify",
        path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    if command is None:
        pytest.fail("runlane-certify is not installed next to this Python or on PATH")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    finished = subprocess.run(
        [command, *words, "--report", str(report)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    document: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return document


def test_holds_in_process_memory_fail_only_the_cross_process_exclusive_check(tmp_path: Path) -> None:
    document = _certify(
        ["run", "--driver", "process_local_holds_redis:harness", "--area", "exclusive_selection"],
        tmp_path / "report.json",
    )
    failed = {
        entry["id"]: entry["reason"] for entry in document["requirements"] if entry["outcome"] == "failed"
    }
    assert sorted(failed) == ["exclusive_selection.disjoint-across-processes"], failed
    assert (
        "handed to the open attempts of worker processes"
        in failed["exclusive_selection.disjoint-across-processes"]
    )
