"""The headline, the exit code, the report's claim and the badge all follow the run's one verdict.

A failed SHOULD requirement is the case where they were once worked out apart: the certification
allows it, a failed requirement exits 1. The run's verdict (``CERTIFIED_SHOULD_FAILED``) says both.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runlane_conformance.catalogue import RequirementLevel
from runlane_conformance.cli.app import app
from runlane_conformance.report.files import read_report
from runlane_conformance.report.verify import check_claim
from runlane_conformance.run import certify as runner
from tests.cli.fake_catalog import FAKE_CATALOG

cli = CliRunner()
ADVICE = "conflicts.write-skew-advice"


@pytest.fixture
def advice_is_a_should(fake_suite: str, monkeypatch: pytest.MonkeyPatch) -> str:
    catalog = {**FAKE_CATALOG, ADVICE: replace(FAKE_CATALOG[ADVICE], level=RequirementLevel.SHOULD)}
    monkeypatch.setattr(runner, "SUITE_CATALOG", lambda: dict(catalog))
    return fake_suite


def test_a_failed_should_is_certified_in_the_headline_report_and_badge_and_exits_1(
    advice_is_a_should: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    result: Any = cli.invoke(
        app, ["run", "-d", advice_is_a_should, "-o", f"break={ADVICE}", "--report", str(report)]
    )
    assert result.exit_code == 1, result.output
    assert "CERTIFIED: " in result.stdout and "NOT CERTIFIED" not in result.stdout
    assert f"SHOULD requirements failed (not blocking): {ADVICE}" in result.stdout
    document = read_report(report)
    assert document["certification"]["certified"] is True
    assert document["certification"]["should_failed"] == [ADVICE]
    assert check_claim(document).certified
    badge = cli.invoke(app, ["badge", str(report), "--svg", str(tmp_path / "badge.svg")])
    assert badge.exit_code == 0, badge.output
    assert "not certified" not in badge.stdout
