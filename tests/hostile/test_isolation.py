"""``--isolation process``: the driver's code runs in a backend process of its own, never in the judge's.

Every test runs the real ``runlane-certify`` in a subprocess. What a driver does to the interpreter it
is loaded in (raising our gating's skip from a suite file's name, patching the child's check-event
emitter, patching pytest's report machinery) must certify nothing when that interpreter is the
backend; a backend that exits or hangs fails (or leaves inconclusive) the check in flight; and no
judge process (the CLI, the probe child, the suite children) ever imports a module of the driver.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.drivers import TARGET

ISOLATED = "tests.hostile.isolated"
PROCESS = ("--isolation", "process")
BACKEND_FILE = str(Path("runlane_conformance", "backend.py"))


def _importers(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(directory.glob("imported.*"))]


def test_an_isolated_run_imports_the_driver_only_in_backend_processes(certify: Any, tmp_path: Path) -> None:
    run = certify(f"{ISOLATED}.marker:harness", "-r", TARGET, "-a", "sealing", *PROCESS)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "passed"
    importers = _importers(tmp_path)
    assert importers, "the driver was never imported: nothing served it"
    assert all(entry["argv"][0].endswith(BACKEND_FILE) for entry in importers), importers
    assert run.report is not None and run.report["environment"]["isolation"] == "process"


def test_a_run_without_isolation_imports_the_driver_in_the_judges_children_and_says_so(
    certify: Any, tmp_path: Path
) -> None:
    run = certify(f"{ISOLATED}.marker:harness", "-r", TARGET, "--isolation", "none")
    assert run.returncode == 0, run.stdout + run.stderr
    importers = _importers(tmp_path)
    assert importers and not any(entry["argv"][0].endswith(BACKEND_FILE) for entry in importers)
    assert run.report is not None and run.report["environment"]["isolation"] == "none"
    assert "isolation: none" in run.stdout


TAMPERING = pytest.mark.parametrize(
    ("driver", "evidence"),
    [
        ("skip_as_gating", "failed during 'transaction': Skipped: profile: append not offered"),
        ("forged_events", "this driver is broken"),
        ("forged_reports", "this driver is broken"),
    ],
    ids=["a-gating-skip-from-a-suite-file", "a-rewired-event-emitter", "patched-pytest-reports"],
)


@TAMPERING
def test_tampering_with_the_judges_interpreter_certifies_nothing_when_isolated(
    certify: Any, driver: str, evidence: str
) -> None:
    run = certify(f"{ISOLATED}.{driver}:harness", "-r", TARGET, *PROCESS)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "failed"
    assert run.report is not None and run.report["certification"]["certified"] is False
    counts = run.report["run"]["checks"]
    assert counts["passed"] == 0 and counts["gated"] == 0 and counts["failed"] == counts["required"] > 0
    messages = run.messages(TARGET)
    assert messages and all(evidence in message for message in messages), messages


@pytest.mark.parametrize("driver", ["forged_events", "forged_reports"])
def test_without_isolation_the_same_tampering_forges_a_pass_which_is_what_isolation_closes(
    certify: Any, driver: str
) -> None:
    # The trust boundary docs/trust.md draws: loaded next to the checks, a driver can rewrite them.
    run = certify(f"{ISOLATED}.{driver}:harness", "-r", TARGET, "--isolation", "none")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "passed"


def test_a_backend_that_exits_mid_check_fails_the_check_in_flight(certify: Any) -> None:
    run = certify(f"{ISOLATED}.dies:exits", "-r", TARGET, *PROCESS)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "failed"
    messages = run.messages(TARGET)
    assert messages and all("backend" in message and "exit" in message for message in messages), messages


def test_a_backend_that_hangs_mid_check_leaves_the_check_inconclusive_never_passed(certify: Any) -> None:
    run = certify(f"{ISOLATED}.dies:hangs", "-r", TARGET, "--check-timeout", "3", *PROCESS)
    assert run.returncode == 4, run.stdout + run.stderr
    assert run.requirement(TARGET)["outcome"] == "inconclusive"
    assert run.report is not None and run.report["run"]["checks"]["passed"] == 0
