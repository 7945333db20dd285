"""The quick profile certifies the reference driver, and ``badge`` refuses every report it cannot back.

One real, complete run of ``local`` through the CLI (a subprocess, like CI)
provides a genuine report; each test then forges it the way a hand-editor or a
careless script would. ``badge`` recomputes the verdict from the report's own
requirement outcomes with this toolkit's catalogue and refuses (exit 2, one
line, nothing written) any report whose claim does not follow.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from tests.hostile.conftest import ROOT, certify_command, hostile_env

cli = CliRunner()


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("genuine")
    report = directory / "report.json"
    done = subprocess.run(
        certify_command("run", "--driver", "local", "--seed", "1", "--report", str(report)),
        cwd=ROOT,
        env=hostile_env(directory),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CERTIFIED: local at level core+append+exclusive+faults" in done.stdout
    document: dict[str, Any] = json.loads(report.read_text())
    return document


def badge(tmp_path: Path, document: dict[str, Any]) -> tuple[int, str, Path]:
    report = tmp_path / "forged.json"
    report.write_text(json.dumps(document))
    endpoint = tmp_path / "badge.json"
    result = cli.invoke(app, ["badge", str(report), "--endpoint", str(endpoint)])
    return result.exit_code, result.stderr.strip(), endpoint


def test_the_quick_profile_certifies_the_reference_driver_with_every_check_run(
    genuine: dict[str, Any],
) -> None:
    checks = genuine["run"]["checks"]
    assert genuine["run"]["status"] == "complete" and genuine["certification"]["certified"]
    assert checks["required"] == checks["run"] > 300 and checks["failed"] == checks["not_run"] == 0
    assert genuine["environment"]["supervised"] is True


def test_a_genuine_report_gets_its_badge(tmp_path: Path, genuine: dict[str, Any]) -> None:
    code, _, endpoint = badge(tmp_path, genuine)
    assert code == 0
    assert json.loads(endpoint.read_text())["message"] == "core+append+exclusive+faults"


def _fail_musts(document: dict[str, Any]) -> None:
    for entry in document["requirements"][:80]:
        if entry["level"] == "MUST":
            entry["outcome"], entry["reason"] = "failed", "forged failure"


def _drop_all(document: dict[str, Any]) -> None:
    document["requirements"] = []


def _drop_one(document: dict[str, Any]) -> None:
    del document["requirements"][3]


def _duplicate_one(document: dict[str, Any]) -> None:
    document["requirements"].append(copy.deepcopy(document["requirements"][0]))


def _gate_a_core_rule(document: dict[str, Any]) -> None:
    entry = next(e for e in document["requirements"] if e["capability"] is None)
    entry["outcome"], entry["reason"] = "gated", "profile: append not offered"


def _not_run(document: dict[str, Any]) -> None:
    entry = document["requirements"][0]
    entry["outcome"], entry["reason"] = "not_run", "did not run"


def _partial(document: dict[str, Any]) -> None:
    document["run"]["status"] = "partial"


def _interrupted(document: dict[str, Any]) -> None:
    document["run"]["status"] = "interrupted"


def _other_toolkit(document: dict[str, Any]) -> None:
    document["toolkit"]["version"] = "99.0.0"


def _raised_level(document: dict[str, Any]) -> None:
    document["profile"]["exclusive_candidates"] = False
    document["profile"]["offered"].remove("exclusive_candidates")


def _problem_hidden(document: dict[str, Any]) -> None:
    document["run"]["problems"] = ["the driver's session cleanup failed: SystemExit: 0"]


def _unknown_requirement(document: dict[str, Any]) -> None:
    extra = copy.deepcopy(document["requirements"][0])
    extra["id"] = "point_reads.made-up-rule"
    document["requirements"].append(extra)


@pytest.mark.parametrize(
    ("forge", "refusal"),
    [
        (_fail_musts, "but its own outcomes give certified=False"),
        (_drop_all, "lacks"),
        (_drop_one, "lacks 1 catalogued requirement"),
        (_duplicate_one, "twice"),
        (_gate_a_core_rule, "which its own profile does not gate"),
        (_not_run, "but its own outcomes give certified=False"),
        (_partial, "partial run, which is never a certification"),
        (_interrupted, "interrupted run, which is never a certification"),
        (_other_toolkit, "runlane-conformance 99.0.0"),
        (_raised_level, "at level core+append"),
        (_problem_hidden, "but its own outcomes give certified=False"),
        (_unknown_requirement, "not in the catalogue"),
    ],
    ids=lambda value: value.__name__.strip("_") if callable(value) else None,
)
def test_badge_refuses_a_report_whose_claim_does_not_follow_from_its_content(
    tmp_path: Path, genuine: dict[str, Any], forge: Callable[[dict[str, Any]], None], refusal: str
) -> None:
    document = copy.deepcopy(genuine)
    forge(document)
    code, stderr, endpoint = badge(tmp_path, document)
    assert code == 2, stderr
    assert len(stderr.splitlines()) == 1 and refusal in stderr, stderr
    assert not endpoint.exists()
