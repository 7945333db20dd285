"""A verdict that does not depend on the machine: evidence fixed by the profile, deadlines only guard.

* The same driver, seed and profile reach the same verdict and the same evidence (Hypothesis
  examples and steps the model search ran, as the report records them) on an idle machine and on
  one where busy processes compete for the very CPU the run is pinned to.
* A driver that is merely slow is given time and passes; with a deadline too short for it, its
  check is *inconclusive*: not failed, not certified, exit code 4, a message saying how to get a
  verdict. Under plain pytest such a check fails, saying "inconclusive".
* ``badge`` refuses a report with an inconclusive requirement.

Every run here is a real ``runlane-certify`` (or pytest) process, as CI runs it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runlane_conformance.report.schema import ReportError, validate_report
from runlane_conformance.report.verify import check_claim
from runlane_conformance.run.model import INCONCLUSIVE_HINT

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "import sys; from runlane_conformance.cli.app import main; main(sys.argv[1:])"
MODEL = "model.serial-equivalent-histories"
SLOW = "tests.profiles.drivers:slow"
#: How long a competing busy process may spin at most, whatever happens to the test.
BUSY_SECONDS = 240.0


def _env() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "200"}
    for name in ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return env


def _certify(
    tmp_path: Path, *args: str, cpus: set[int] | None = None, timeout: float = 600
) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    command = [sys.executable, "-c", ENTRY, "run", *args, "--examples", "none", "--report", str(report)]

    def pin() -> None:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)

    done = subprocess.run(
        command,
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=pin,
    )
    assert report.exists(), done.stdout + done.stderr
    return done.returncode, json.loads(report.read_text()), done.stdout


def _requirement(document: dict[str, Any], requirement_id: str) -> dict[str, Any]:
    return next(r for r in document["requirements"] if r["id"] == requirement_id)


@contextmanager
def _busy(cpu: int, processes: int) -> Iterator[None]:
    """``processes`` busy loops pinned to ``cpu``, each ending by itself after BUSY_SECONDS at most."""
    spin = (
        "import os, sys, time\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "sys.stdout.write('spinning\\n'); sys.stdout.flush()\n"
        f"end = time.monotonic() + {BUSY_SECONDS}\n"
        "while time.monotonic() < end:\n"
        "    pass\n"
    )
    loaders = [
        subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for loader in loaders:
            assert loader.stdout is not None and loader.stdout.readline() == "spinning\n"
        yield
    finally:
        for loader in loaders:
            loader.kill()
            loader.wait()


def _cpu() -> int:
    return min(os.sched_getaffinity(0))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity (Linux)")
def test_the_same_seed_gives_the_same_verdict_and_evidence_idle_and_under_contention(tmp_path: Path) -> None:
    cpu = _cpu()
    searches = (MODEL, "pruning.random-histories-keep-invariants", "wait_tokens.random-histories-match-model")
    args = ("--driver", "local", "--seed", "20261202", "--profile", "quick")
    for requirement_id in searches:
        args += ("--requirement", requirement_id)
    started = time.monotonic()
    idle_code, idle, _ = _certify(tmp_path, *args, cpus={cpu})
    idle_seconds = time.monotonic() - started
    with _busy(cpu, processes=3):
        started = time.monotonic()
        loaded_code, loaded, _ = _certify(tmp_path, *args, cpus={cpu})
        loaded_seconds = time.monotonic() - started
    assert idle_code == loaded_code == 0
    for requirement_id in searches:
        at_rest, busy = _requirement(idle, requirement_id), _requirement(loaded, requirement_id)
        assert at_rest["outcome"] == busy["outcome"] == "passed"
        assert at_rest["evidence"] and at_rest["evidence"] == busy["evidence"], (
            f"the same seed ran different evidence for {requirement_id} idle ({at_rest['evidence']}, "
            f"{idle_seconds:.1f} s) and loaded ({busy['evidence']}, {loaded_seconds:.1f} s)"
        )
    (evidence,) = _requirement(idle, MODEL)["evidence"]
    # quick: 25 histories, each of at most 20 steps (Hypothesis may end a history early, by the seed).
    assert evidence["examples"] == 25 and 25 <= evidence["steps"] <= 25 * 20, evidence


def test_a_slow_correct_driver_given_time_certifies(tmp_path: Path) -> None:
    code, document, stdout = _certify(tmp_path, "--driver", SLOW, "--option", "delay=0.0005", "--seed", "5")
    assert code == 0 and document["certification"]["certified"], stdout
    model = _requirement(document, MODEL)
    assert model["outcome"] == "passed" and model["evidence"][0]["examples"] == 25


def test_a_slow_driver_with_a_tiny_deadline_is_inconclusive_not_failed(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    code, document, stdout = _certify(
        tmp_path,
        *("--driver", SLOW, "--option", "delay=0.02", "--requirement", MODEL, "--check-timeout", "2"),
        *("--junit", str(junit)),
    )
    assert code == 4, stdout
    model = _requirement(document, MODEL)
    assert model["outcome"] == "inconclusive", model
    assert document["certification"]["inconclusive"] == [MODEL]
    assert document["certification"]["must_failed"] == [] and not document["certification"]["certified"]
    assert document["run"]["checks"]["inconclusive"] == 1 and document["run"]["checks"]["failed"] == 0
    (check,) = model["failures"]
    assert "inconclusive" in check["message"] and "--check-timeout" in check["message"]
    assert "--workers" in check["message"]
    assert "inconclusive" in stdout and "could not finish in time" in stdout
    # JUnit never shows it as a pass: a failure of type INCONCLUSIVE that says how to get a verdict.
    (failure,) = ET.parse(junit).getroot().iter("failure")
    assert failure.get("type") == "INCONCLUSIVE" and "--check-timeout" in (failure.get("message") or "")


def test_under_plain_pytest_an_unfinished_check_fails_saying_inconclusive(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--pyargs",
            "runlane_conformance.suites.test_model",
            "--runlane-driver",
            SLOW,
            "--runlane-option",
            "delay=0.02",
            "--runlane-requirement",
            "model.serial-equivalent-histories",
            "--runlane-timeout",
            "3",
            "-q",
        ],
        cwd=tmp_path,
        env={**_env(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "inconclusive" in done.stdout and INCONCLUSIVE_HINT.split(":")[0] in done.stdout


def test_badge_refuses_a_report_with_an_inconclusive_requirement(tmp_path: Path) -> None:
    code, document, _ = _certify(tmp_path, "--driver", "local", "--profile", "quick", "--seed", "3")
    assert code == 0 and document["certification"]["certified"], "the reference driver must certify"
    check_claim(document)  # the untouched report is a certification
    unfinished = copy.deepcopy(document)
    unfinished["run"]["status"] = "inconclusive"
    entry = _requirement(unfinished, MODEL)
    entry["outcome"], entry["reason"] = "inconclusive", f"timed out: inconclusive, {INCONCLUSIVE_HINT}"
    unfinished["certification"].update(certified=False, level="none", inconclusive=[MODEL])
    validate_report(unfinished)
    with pytest.raises(ReportError, match="inconclusive run, which is never a certification"):
        check_claim(unfinished)
    # Claiming a certificate over an inconclusive requirement is refused by recomputing the verdict.
    claimed = copy.deepcopy(unfinished)
    claimed["run"]["status"] = "complete"
    claimed["certification"].update(certified=True, level=document["certification"]["level"], inconclusive=[])
    validate_report(claimed)
    with pytest.raises(ReportError, match="outcomes give certified=False"):
        check_claim(claimed)
