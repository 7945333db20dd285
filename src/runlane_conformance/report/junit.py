"""JUnit XML derived from a certification report (never from a second test run).

One ``<testsuite>`` per contract area and one ``<testcase>`` per requirement,
named by its requirement id, with the id, level and clause also given as
``<property>`` elements. This is the shape Jenkins, GitLab, GitHub test
reporters and most JUnit parsers accept: failures carry a ``message``
attribute and the failure text, skips carry their reason.

A report without results (a run that is still going, broke, or was interrupted
before it had a plan) becomes one ``<testcase>`` with an ``<error>`` saying so:
a JUnit file at the target path can then never keep an earlier run's passes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any, cast

from ..safe_text import MESSAGE_LIMIT, xml_safe
from .model import Report, RequirementEntry, ResultsReport, UnfinishedReport

__all__ = ["junit_xml", "unfinished_junit_xml"]


#: Requirement outcomes reported as JUnit failures: a requirement that did not run is not a pass, and
#: neither is one that could not finish in time (inconclusive: its failure message says so).
_FAILING = ("failed", "not_run", "inconclusive")


def _clean(text: object) -> str:
    """An attribute value: one line, capped, with only characters XML 1.0 can carry.

    The report was cleaned when it was built, but JUnit can be made from any
    document, so the XML layer does not rely on that.
    """
    return xml_safe(text, limit=MESSAGE_LIMIT, multiline=False)


def _seconds(value: float) -> str:
    return f"{value:.6f}"


def _failure_text(failure: Mapping[str, Any]) -> str:
    lines = [failure["nodeid"], failure.get("details", ""), f"reproduce: {failure['reproduce']}"]
    lines.append(f"pytest: {failure['pytest']}")
    if failure.get("hypothesis_blob"):
        lines.append(f"hypothesis: {failure['hypothesis_blob']}")
    return "\n".join(lines)


#: What the one error testcase of an unfinished run says, by the run's status.
_UNFINISHED_MESSAGES = {
    "running": "the run is in progress (if it is not, its process was killed): no results yet",
    "broken": "the run broke before reaching a verdict",
    "interrupted": "the run was interrupted before it had a verdict",
}


def _document(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _attach(case: ET.Element, html: str | None) -> None:
    """Link the HTML page from a testcase: the ``[[ATTACHMENT|path]]`` line JUnit readers know."""
    if html is not None:
        ET.SubElement(case, "system-out").text = xml_safe(f"[[ATTACHMENT|{html}]]")


def unfinished_junit_xml(report: UnfinishedReport, *, html: str | None = None) -> str:
    """JUnit XML for a report without results: one testcase in error, naming the run's status."""
    run = report["run"]
    status = str(run["status"])
    message = _UNFINISHED_MESSAGES.get(status, f"the run is {status}")
    problems = [str(problem) for problem in run.get("problems", [])]
    if problems:
        message = f"{message}: {problems[0]}"
    attributes = {"tests": "1", "failures": "0", "errors": "1", "skipped": "0", "time": _seconds(0)}
    root = ET.Element(
        "testsuites",
        {
            "name": _clean(f"runlane-certify {report['driver']['spec']}"),
            **attributes,
            "timestamp": _clean(run["started_at"]),
        },
    )
    suite = ET.SubElement(root, "testsuite", {"name": "runlane", **attributes})
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("driver", report["driver"]["spec"]),
        ("seed", run["seed"]),
        ("run_status", status),
        ("toolkit_version", report["toolkit"]["version"]),
    ):
        ET.SubElement(properties, "property", name=name, value=_clean(value))
    case = ET.SubElement(suite, "testcase", classname="runlane.run", name="certification", time=_seconds(0))
    error = ET.SubElement(case, "error", message=_clean(message), type=_clean(status))
    error.text = xml_safe("\n".join([message, *problems[1:]]))
    _attach(case, html)
    return _document(root)


#: Run statuses that end before every planned check had its turn: there a requirement that did not run
#: was cut off, not judged, and JUnit shows it skipped as "not run" under one error for the whole run.
_CUT_SHORT = {
    "interrupted": "the run was interrupted before every requirement ran: no verdict",
    "stopped": "the run stopped early (--maxfail) before every requirement ran: no verdict",
}


def junit_xml(document: Report, *, html: str | None = None) -> str:
    """The JUnit XML text for a (validated) report document.

    With ``html`` (the path of the page ``run --html`` wrote) the first suite carries an
    ``html_report`` property and every failing testcase an ``[[ATTACHMENT|path]]`` line in its
    ``<system-out>`` (the convention Jenkins' and GitLab's JUnit readers turn into a link).

    A requirement that failed, did not finish in time or did not run in a complete run is a
    ``<failure>``; one gated off by the profile is ``<skipped>``. In a run cut short (interrupted, or
    stopped by ``--maxfail``) a requirement that never got its turn is ``<skipped>`` with a
    ``not run:`` message, and one ``<error>`` testcase for the run keeps the file red: nothing there
    passed, and nothing there failed either.
    """
    if "requirements" not in document:
        return unfinished_junit_xml(document, html=html)
    report = cast(ResultsReport, document)
    requirements = report["requirements"]
    cut_short = _CUT_SHORT.get(str(report["run"]["status"]))

    def failing(requirement: Mapping[str, Any]) -> bool:
        return requirement["outcome"] in _FAILING and not (cut_short and requirement["outcome"] == "not_run")

    def skipped(requirement: Mapping[str, Any]) -> bool:
        return requirement["outcome"] == "gated" or (
            cut_short is not None and requirement["outcome"] == "not_run"
        )

    counts = {
        "tests": len(requirements) + (1 if cut_short else 0),
        "failures": sum(failing(r) for r in requirements),
        "skipped": sum(skipped(r) for r in requirements),
    }
    root = ET.Element(
        "testsuites",
        name=_clean(f"runlane-certify {report['driver']['spec']}"),
        tests=str(counts["tests"]),
        failures=str(counts["failures"]),
        errors="1" if cut_short else "0",
        skipped=str(counts["skipped"]),
        time=_seconds(report["run"]["duration_seconds"]),
        timestamp=_clean(report["run"]["started_at"]),
    )
    by_area: dict[str, list[RequirementEntry]] = {}
    for requirement in requirements:
        by_area.setdefault(requirement["area"], []).append(requirement)
    for area, members in by_area.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_clean(area),
            tests=str(len(members)),
            failures=str(sum(failing(r) for r in members)),
            errors="0",
            skipped=str(sum(skipped(r) for r in members)),
            time=_seconds(sum(r["duration_seconds"] for r in members)),
        )
        if area == next(iter(by_area)):
            properties = ET.SubElement(suite, "properties")
            for name, value in (
                ("driver", report["driver"]["spec"]),
                ("seed", report["run"]["seed"]),
                ("hypothesis_profile", report["run"]["hypothesis_profile"]),
                ("certification_level", report["certification"]["level"]),
                ("toolkit_version", report["toolkit"]["version"]),
                *((("html_report", html),) if html is not None else ()),
            ):
                ET.SubElement(properties, "property", name=name, value=_clean(value))
        for requirement in members:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_clean(f"runlane.{area}"),
                name=_clean(requirement["id"]),
                time=_seconds(requirement["duration_seconds"]),
            )
            properties = ET.SubElement(case, "properties")
            for name, value in (
                ("requirement", requirement["id"]),
                ("level", requirement["level"]),
                ("clause", requirement.get("clause", "")),
            ):
                ET.SubElement(properties, "property", name=name, value=_clean(value))
            expected = requirement.get("expected_failure")
            if expected is not None:
                # A declared known failure stays a JUnit failure (never a pass); the property says so.
                value = f"{expected['result']}: {expected['reason']}"
                ET.SubElement(properties, "property", name="expected_failure", value=_clean(value))
            if skipped(requirement) and requirement["outcome"] == "not_run":
                reason = str(requirement["reason"] or "cut short").removeprefix("did not run: ")
                ET.SubElement(case, "skipped", message=_clean(f"not run: {reason}"))
            elif failing(requirement):
                failures = requirement.get("failures", [])
                body = "\n\n".join(_failure_text(failure) for failure in failures)
                message = requirement["reason"] or "failed"
                if requirement["outcome"] == "inconclusive" and not message.startswith(
                    ("inconclusive", "timed out")
                ):
                    message = f"inconclusive: {message}"
                if expected is not None:
                    message = f"known failure ({expected['reason']}): {message}"
                element = ET.SubElement(
                    case,
                    "failure",
                    message=_clean(message),
                    type=_clean(
                        "INCONCLUSIVE" if requirement["outcome"] == "inconclusive" else requirement["level"]
                    ),
                )
                element.text = xml_safe(body)
                _attach(case, html)
            elif requirement["outcome"] == "gated":
                ET.SubElement(case, "skipped", message=_clean(requirement["reason"] or "gated"))
    if cut_short:
        suite = ET.SubElement(
            root,
            "testsuite",
            name="runlane",
            tests="1",
            failures="0",
            errors="1",
            skipped="0",
            time=_seconds(0),
        )
        case = ET.SubElement(
            suite, "testcase", classname="runlane.run", name="certification", time=_seconds(0)
        )
        ET.SubElement(case, "error", message=_clean(cut_short), type=_clean(report["run"]["status"]))
    return _document(root)
