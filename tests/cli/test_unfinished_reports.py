"""Reports without results (running, broken, interrupted before a plan): their shape, and who refuses them.

The subprocess paths (exit 2, Ctrl-C, SIGKILL) are in ``tests/hostile/test_trust.py``; here the
schema, ``check_claim``, JUnit, and the in-process exits 2 and 3 of ``run``.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.report.builder import unfinished_report
from runlane_conformance.report.files import read_report
from runlane_conformance.report.junit import junit_xml
from runlane_conformance.report.schema import REPORT_SCHEMA, ReportError, is_unfinished, validate_report
from runlane_conformance.report.verify import check_claim
from runlane_conformance.run.model import RunStatus

STALE = '{"certification": {"certified": true}}'


def _unfinished(status: RunStatus, **extra: Any) -> dict[str, Any]:
    return unfinished_report(
        status,
        driver="local",
        options={"password": "hunter2", "size": "3"},
        seed=7,
        hypothesis_profile="quick",
        areas=(),
        requirements=(),
        workers=1,
        started_at=datetime.now(UTC),
        **extra,
    )


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.BROKEN, RunStatus.INTERRUPTED])
def test_an_unfinished_report_is_valid_never_certifies_and_hides_secrets(status: RunStatus) -> None:
    document = _unfinished(status, problems=["driver 'x' is not installed"], exit_code=2)
    Draft202012Validator(REPORT_SCHEMA).validate(document)  # the published schema, as a reader has it
    assert is_unfinished(document)
    assert document["certification"]["certified"] is False and document["certification"]["level"] == "none"
    assert document["driver"]["options"] == {"password": "***", "size": "3"}


def test_only_the_three_unfinished_statuses_make_an_unfinished_report() -> None:
    for status in (RunStatus.COMPLETE, RunStatus.PARTIAL, RunStatus.STOPPED):
        with pytest.raises(ValueError, match="cannot be"):
            _unfinished(status)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["certification"].update(certified=True), "certification.certified"),
        (lambda d: d["certification"].update(level="core"), "certification.level"),
        (lambda d: d["run"].update(status="complete"), "$"),
        (lambda d: d["certification"]["must_failed"].append("x.y"), "must_failed"),
    ],
    ids=["claims-certified", "claims-a-level", "claims-complete", "lists-failures"],
)
def test_an_unfinished_report_cannot_claim_anything(change: Any, where: str) -> None:
    document = copy.deepcopy(_unfinished(RunStatus.RUNNING))
    change(document)
    with pytest.raises(ReportError, match="invalid report"):
        validate_report(document)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (RunStatus.RUNNING, "has not finished (still running, or its process was killed)"),
        (RunStatus.BROKEN, "broke before reaching a verdict"),
        (RunStatus.INTERRUPTED, "interrupted run, which is never a certification"),
    ],
)
def test_check_claim_refuses_every_unfinished_report_with_one_line(status: RunStatus, message: str) -> None:
    with pytest.raises(ReportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_claim(_unfinished(status))


def test_the_junit_of_an_unfinished_run_is_one_testcase_in_error_naming_why() -> None:
    document = _unfinished(RunStatus.BROKEN, problems=["driver 'x' is not installed"], exit_code=2)
    root = ET.fromstring(junit_xml(document))
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("1", "1", "0")
    (case,) = root.iter("testcase")
    (error,) = case.iter("error")
    assert error.get("type") == "broken"
    assert error.get("message") == "the run broke before reaching a verdict: driver 'x' is not installed"
    assert "hunter2" not in junit_xml(document)


# --- in-process exits of `run` ------------------------------------------------------------------


def _stale(tmp_path: Path) -> tuple[Path, Path]:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    report.write_text(STALE)
    junit.write_text("<testsuites/>")
    return report, junit


def test_a_run_that_breaks_leaves_broken_outputs_with_exit_3(
    fake_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runlane_conformance.run import certify as runner

    monkeypatch.setattr(runner, "SUITE_ARGS", (str(tmp_path / "empty"),))
    (tmp_path / "empty").mkdir()
    report, junit = _stale(tmp_path)
    result = CliRunner().invoke(
        app, ["run", "--driver", fake_suite, "--report", str(report), "--junit", str(junit)]
    )
    assert result.exit_code == 3, result.output
    document = read_report(report)
    assert (document["run"]["status"], document["run"]["exit_code"]) == ("broken", 3)
    assert "no checks were collected" in document["run"]["problems"][0]
    assert "broke before reaching a verdict: the run broke" in junit.read_text()


def test_a_driver_that_cannot_connect_leaves_broken_outputs_with_exit_2(
    fake_suite: str, tmp_path: Path
) -> None:
    report, junit = _stale(tmp_path)
    args = [
        "run",
        "--driver",
        fake_suite,
        "-o",
        "explode=true",
        "--report",
        str(report),
        "--junit",
        str(junit),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    document = read_report(report)
    assert (document["run"]["status"], document["run"]["exit_code"]) == ("broken", 2)
    assert "cannot reach the fake database" in document["run"]["problems"][0]
    assert document["driver"]["options"] == {"explode": "true"}
    assert ET.parse(junit).getroot().get("errors") == "1"


def test_report_from_refuses_an_unfinished_report_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_unfinished(RunStatus.RUNNING)))
    result = CliRunner().invoke(app, ["report", "--from", str(path)])
    assert result.exit_code == 2
    assert "holds no results: the run is marked running" in result.stderr
