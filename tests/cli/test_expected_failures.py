"""``--expect-fail ID=REASON``: a known failure is reported as known and never certifies; a declared
failure that passes is reported and makes the run exit 1."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.cli.app import app
from runlane_conformance.report.files import read_report
from runlane_conformance.report.schema import ReportError
from runlane_conformance.report.verify import check_claim

cli = CliRunner()
LOST = "conflicts.lost-update"
REASON = "counter updates are last-writer-wins until 2.0"


def invoke(*args: str) -> Any:
    return cli.invoke(app, list(args))


def run_lost_update_declared_known(fake_suite: str, reason: str, *extra: str) -> Any:
    """Run the fake suite with the lost-update rule broken and declared a known failure."""
    return invoke("run", "-d", fake_suite, "-o", f"break={LOST}", "--expect-fail", f"{LOST}={reason}", *extra)


def test_a_failing_expected_requirement_is_a_known_failure_that_still_denies_certification(
    fake_suite: str, tmp_path: Path
) -> None:
    path = tmp_path / "report.json"
    result = run_lost_update_declared_known(fake_suite, REASON, "--report", str(path))
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert f"\u25cb {LOST} (MUST): known failure: {REASON}; it failed with: AssertionError" in out
    assert "reproduce:" not in out  # shown as one known line, not as a failure block
    assert "NOT CERTIFIED" in out and "(1 of them a known failure)" in out
    document = read_report(path)
    entry = next(r for r in document["requirements"] if r["id"] == LOST)
    assert entry["outcome"] == "failed"
    assert entry["expected_failure"] == {"reason": REASON, "result": "failed as expected"}
    assert document["run"]["expected_failures"] == [
        {"id": LOST, "reason": REASON, "result": "failed as expected"}
    ]
    assert document["certification"]["certified"] is False
    assert LOST in document["certification"]["must_failed"]


def test_a_known_failure_is_not_printed_as_it_happens_but_other_failures_are(fake_suite: str) -> None:
    result = invoke(
        "run",
        "-d",
        fake_suite,
        "-o",
        f"break={LOST},limits.point-reads-boundary",
        "--expect-fail",
        f"{LOST}=x",
    )
    before_summary = result.stdout.partition("Failed requirements")[0]
    assert f"\u2717 {LOST}:" not in before_summary
    assert "\u2717 limits.point-reads-boundary:" in before_summary
    assert result.stdout.count("reproduce:") == 1  # only the unexpected failure gets a block


def test_an_expected_failure_that_passes_is_reported_and_exits_1(fake_suite: str, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    result = invoke("run", "-d", fake_suite, "--expect-fail", f"{LOST}={REASON}", "--report", str(path))
    assert result.exit_code == 1, result.output
    assert "Expected failures that passed (1):" in result.stdout
    assert f"! {LOST} passed although declared a known failure ({REASON}): remove --expect-fail {LOST}" in (
        result.stdout
    )
    assert "NOT CLEAN" in result.stdout
    document = read_report(path)
    assert document["run"]["expected_failures"][0]["result"] == "passed unexpectedly"
    # The certification follows from the outcomes alone: everything passed, so the badge may say so.
    assert document["certification"]["certified"] is True
    check_claim(document)


def test_a_report_with_a_known_failure_cannot_be_forged_into_a_certified_badge(
    fake_suite: str, tmp_path: Path
) -> None:
    path = tmp_path / "report.json"
    run_lost_update_declared_known(fake_suite, "x", "--report", str(path))
    document = read_report(path)
    badge = invoke("badge", str(path), "--svg", str(tmp_path / "badge.svg"))
    assert badge.exit_code == 0 and "not certified" in badge.stdout
    document["certification"].update(certified=True, level="core", must_failed=[])
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(document))
    refused = invoke("badge", str(forged), "--svg", str(tmp_path / "forged.svg"))
    assert refused.exit_code == 2
    assert "but its own outcomes give certified=False" in refused.stderr
    with pytest.raises(ReportError, match="its own outcomes give certified=False"):
        check_claim(document)


def test_tb_no_shows_a_known_failure_on_its_one_line(fake_suite: str) -> None:
    result = run_lost_update_declared_known(fake_suite, "x", "--tb", "no")
    assert f"\u25cb {LOST} (MUST): known failure: x" in result.stdout


def test_bad_declarations_are_one_line_usage_errors(fake_suite: str) -> None:
    for value, message in (
        ("conflicts.lost-updat=x", "did you mean conflicts.lost-update?"),
        (LOST, "is not of the form ID=REASON"),
        (f"{LOST}= ", "has no reason"),
        ("conflicts=x", "is an area"),
    ):
        result = invoke("run", "-d", fake_suite, "--expect-fail", value)
        assert result.exit_code == 2, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and message in lines[0], result.stderr
        assert not result.stdout.strip()


def test_junit_keeps_a_known_failure_a_failure_and_names_it_known(fake_suite: str, tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    run_lost_update_declared_known(fake_suite, REASON, "--junit", str(path))
    case = next(c for c in ET.parse(path).iter("testcase") if c.get("name") == LOST)
    failure = case.find("failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith(f"known failure ({REASON}): AssertionError")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties["expected_failure"] == f"failed as expected: {REASON}"
