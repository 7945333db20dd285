"""Tampering: importing the broken driver patches pytest's report-making machinery, so every phase of
every check that pytest runs in this process reports "passed"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from _pytest.reports import TestReport

from .broken import BrokenHarness

_make = TestReport.from_item_and_call.__func__  # type: ignore[attr-defined]


def _forged(cls: type[TestReport], item: Any, call: Any) -> TestReport:
    report: TestReport = _make(cls, item, call)
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
    return report


TestReport.from_item_and_call = classmethod(_forged)  # type: ignore[method-assign,assignment]


def harness(options: Mapping[str, str]) -> Any:
    return BrokenHarness(options)
