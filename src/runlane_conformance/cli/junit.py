"""JUnit XML derived from a certification report (never from a second test run).

One ``<testsuite>`` per contract area and one ``<testcase>`` per requirement,
named by its requirement id, with the id, level and clause also given as
``<property>`` elements. This is the shape Jenkins, GitLab, GitHub test
reporters and most JUnit parsers accept: failures carry a ``message``
attribute and the failure text, skips carry their reason.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from ..safe_text import MESSAGE_LIMIT, xml_safe

__all__ = ["junit_xml"]


#: Requirement outcomes reported as JUnit failures: a requirement that did not run is not a pass.
_FAILING = ("failed", "not_run")


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


def junit_xml(report: Mapping[str, Any]) -> str:
    """The JUnit XML text for a (validated) report document."""
    requirements = report["requirements"]
    counts = {
        "tests": len(requirements),
        "failures": sum(r["outcome"] in _FAILING for r in requirements),
        "skipped": sum(r["outcome"] == "gated" for r in requirements),
    }
    root = ET.Element(
        "testsuites",
        name=_clean(f"runlane-certify {report['driver']['spec']}"),
        tests=str(counts["tests"]),
        failures=str(counts["failures"]),
        errors="0",
        skipped=str(counts["skipped"]),
        time=_seconds(report["run"]["duration_seconds"]),
        timestamp=_clean(report["run"]["started_at"]),
    )
    by_area: dict[str, list[Mapping[str, Any]]] = {}
    for requirement in requirements:
        by_area.setdefault(requirement["area"], []).append(requirement)
    for area, members in by_area.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_clean(area),
            tests=str(len(members)),
            failures=str(sum(r["outcome"] in _FAILING for r in members)),
            errors="0",
            skipped=str(sum(r["outcome"] == "gated" for r in members)),
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
            if requirement["outcome"] in _FAILING:
                failures = requirement.get("failures", [])
                body = "\n\n".join(_failure_text(failure) for failure in failures)
                message = requirement["reason"] or "failed"
                if expected is not None:
                    message = f"known failure ({expected['reason']}): {message}"
                element = ET.SubElement(
                    case,
                    "failure",
                    message=_clean(message),
                    type=_clean(requirement["level"]),
                )
                element.text = xml_safe(body)
            elif requirement["outcome"] == "gated":
                ET.SubElement(case, "skipped", message=_clean(requirement["reason"] or "gated"))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
