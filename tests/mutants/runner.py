"""Runs suites against a (mutant) driver in-process and reports each requirement's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


class _Outcomes:
    def __init__(self) -> None:
        self.by_requirement: dict[str, str] = {}
        self.messages: dict[str, str] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: Any) -> None:
        requirement = None
        for name, value in getattr(report, "user_properties", []):
            if name == "runlane_requirement":
                requirement = value
        if requirement is None:
            return
        if report.when != "call" and report.outcome == "passed":
            return
        outcome = report.outcome if report.when == "call" or report.outcome != "failed" else "error"
        previous = self.by_requirement.get(requirement)
        rank = {"failed": 3, "error": 3, "passed": 1, "skipped": 0}
        if previous is None or rank[outcome] > rank[previous]:
            self.by_requirement[requirement] = outcome
            if outcome in ("failed", "error"):
                self.messages[requirement] = str(report.longrepr)[-2000:]


def requirement_outcomes(
    driver: str, *, requirements: Sequence[str] = (), areas: Sequence[str] = (), extra: Sequence[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """Run the suites for ``driver``; return ({requirement: outcome}, {requirement: failure text})."""
    args = [
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "-p",
        "no:randomly",
        "--pyargs",
        "runlane_conformance.suites",
        "--runlane-driver",
        driver,
    ]
    for requirement in requirements:
        args += ["--runlane-requirement", requirement]
    for area in areas:
        args += ["--runlane-area", area]
    args += list(extra)
    collector = _Outcomes()
    code = pytest.main(args, plugins=[collector])
    if code not in (0, 1):
        raise RuntimeError(f"suite run for {driver} broke with exit code {code}")
    return collector.by_requirement, collector.messages
