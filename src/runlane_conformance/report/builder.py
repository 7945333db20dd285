"""The builder: a ``RunResult`` (or a run that never got one) becomes the report document.

Every artefact the CLI produces after a run (the JSON report, JUnit XML, the badge, any other
renderer) is derived from the document built here, so they can never disagree. Each document is
made safe to show and store (``safe_document``: secrets redacted, control characters neutralised,
runaway text capped) and validated against the schema (``report.schema``) before it is returned.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from .. import __version__
from ..contract.values import StorageLimits
from ..fixtures.evidence import LIMIT_PROPERTY, WITNESS_PROPERTY
from ..report_witness import recorded_witness
from ..run.certification import Certification
from ..run.model import RequirementOutcome, RequirementResult, RunResult, RunStatus
from ..safe_text import (
    DETAILS_LIMIT,
    MESSAGE_LIMIT,
    details_text,
    one_line,
    redact_options,
    redact_text,
    secret_values,
    xml_safe,
)
from .model import ResultsReport, UnfinishedReport
from .schema import REPORT_VERSION, UNFINISHED_STATUSES, validate_report

__all__ = [
    "ALL_LIMITS_EVIDENCE",
    "CHECK_EVIDENCE",
    "LIMIT_EVIDENCE",
    "build_report",
    "certification_claim",
    "safe_document",
    "unfinished_report",
]

#: Longest failure text kept per failing check, so one runaway traceback cannot bloat the report.
MAX_DETAILS_CHARS = DETAILS_LIMIT

#: Free-text fields kept on one line and capped (a driver's exception message or skip reason can be
#: megabytes long). ``details`` keeps its lines and both of its ends. Every other string is cleaned
#: the same way but kept whole, with its line breaks (a stack, a reproduce line, a blob).
_ONE_LINE_LIMITS: dict[str, int] = {"message": MESSAGE_LIMIT, "reason": MESSAGE_LIMIT}
_DETAILS_FIELDS = frozenset({"details"})
#: Cap on any other string (far above anything a real run produces; keeps both ends).
_FIELD_LIMIT = 100_000

_LIMIT_FIELDS: tuple[str, ...] = (
    "max_point_reads",
    "max_query_results",
    "max_transaction_records",
    "max_record_bytes",
    "max_transaction_bytes",
)
# The requirements whose outcome is the evidence for each advertised limit (exact, frozen ids).
LIMIT_EVIDENCE: dict[str, tuple[str, ...]] = {
    "max_point_reads": ("limits.point-reads-boundary",),
    "max_query_results": ("limits.query-results-boundary",),
    "max_transaction_records": ("limits.transaction-records-boundary",),
    "max_record_bytes": ("limits.record-bytes-boundary",),
    "max_transaction_bytes": ("limits.transaction-bytes-boundary",),
}
# Proves, for every limit at once, that refused work committed nothing and was never split.
ALL_LIMITS_EVIDENCE: tuple[str, ...] = ("limits.oversized-work-never-split",)
# The requirements behind each profile claim the report verifies.
CHECK_EVIDENCE: dict[str, tuple[str, ...]] = {
    "limit_coherence": ("profile.advertised-profile-coherent", "profile.same-profile-on-every-instance"),
    "durability": ("profile.durable-survives-reconnect",),
    "clock": ("profile.client-clock-follows-injected-clock",),
    "index_consistency": ("profile.strong-index-visible-across-instances",),
}
_CAPABILITY_AREAS: dict[str, str] = {
    "append": "append",
    "exclusive_candidates": "exclusive_selection",
    "faults": "faults",
}


def _driver_distribution(result: RunResult) -> tuple[str | None, str | None]:
    if result.driver_info is not None:
        return result.driver_info.distribution, result.driver_info.version
    module = result.driver.partition(":")[0].partition(".")[0]
    with contextlib.suppress(Exception):
        for name in importlib.metadata.packages_distributions().get(module, []):
            return name, importlib.metadata.version(name)
    return None, None


def _aggregate(results: Iterable[RequirementResult]) -> tuple[str, str | None]:
    """passed/failed/gated/not_run for a group of requirements, with the first failure or gate reason."""
    results = list(results)
    if not results:
        return "not_run", None
    failed = [
        r for r in results if not r.outcome.acceptable and r.outcome is not RequirementOutcome.INCONCLUSIVE
    ]
    if failed:
        return "failed", f"{failed[0].id}: {failed[0].reason}"
    unfinished = [r for r in results if r.outcome is RequirementOutcome.INCONCLUSIVE]
    if unfinished:
        return "inconclusive", f"{unfinished[0].id}: {unfinished[0].reason}"
    if all(r.outcome is RequirementOutcome.GATED for r in results):
        return "gated", results[0].reason
    return "passed", None


def _measured_limits(result: RunResult) -> dict[str, dict[str, set[int]]]:
    """The boundary values the limits checks recorded, per limit: {"accepted": {...}, "rejected": {...}}."""
    measured: dict[str, dict[str, set[int]]] = {}
    for test in result.tests:
        if test.outcome.value != "passed":
            continue
        for key, value in test.properties:
            if key != LIMIT_PROPERTY:
                continue
            with contextlib.suppress(ValueError, TypeError, KeyError):
                data = json.loads(value)
                entry = measured.setdefault(str(data["limit"]), {"accepted": set(), "rejected": set()})
                for side in ("accepted", "rejected"):
                    if isinstance(data.get(side), int):
                        entry[side].add(int(data[side]))
    return measured


def _limits_section(result: RunResult) -> list[dict[str, Any]]:
    """Each limit with what the checks measured: accepted at N, refused at N + 1.

    The values come from the checks themselves, never from the advertised profile:
    a limit counts as verified only when its checks passed, recorded exactly one
    accepted and one refused value, those are N and N + 1, and N is what the driver
    advertised to the preflight probe.
    """
    limits: StorageLimits = result.profile.limits
    in_area = [r for r in result.requirements if r.area == "limits"]
    measured = _measured_limits(result)
    section = []
    for name in _LIMIT_FIELDS:
        advertised = int(getattr(limits, name))
        wanted = LIMIT_EVIDENCE[name] + ALL_LIMITS_EVIDENCE
        evidence = [r for r in in_area if r.id in wanted]
        status, reason = _aggregate(evidence)
        seen = measured.get(name, {"accepted": set(), "rejected": set()})
        accepted = max(seen["accepted"]) if len(seen["accepted"]) == 1 else None
        rejected = min(seen["rejected"]) if len(seen["rejected"]) == 1 else None
        if status == "passed":
            if accepted is None or rejected is None:
                status, reason = "not_run", "the checks recorded no single boundary for this limit"
            elif rejected != accepted + 1 or accepted != advertised:
                status = "failed"
                reason = (
                    f"the checks measured accepted at {sorted(seen['accepted'])} and refused at "
                    f"{sorted(seen['rejected'])}, but the driver advertised {advertised} to the probe"
                )
        section.append(
            {
                "name": name,
                "advertised": advertised,
                "status": status,
                "accepted_at": accepted,
                "rejected_at": rejected,
                "reason": reason,
                "requirements": [r.id for r in evidence],
            }
        )
    return section


def _checks_section(result: RunResult) -> list[dict[str, Any]]:
    in_area = [r for r in result.requirements if r.area == "profile"]
    section = []
    for name, wanted in CHECK_EVIDENCE.items():
        evidence = [r for r in in_area if r.id in wanted]
        status, reason = _aggregate(evidence)
        section.append(
            {"name": name, "status": status, "reason": reason, "requirements": [r.id for r in evidence]}
        )
    return section


def _requirement_entry(result: RunResult, requirement: RequirementResult) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": requirement.id,
        "area": requirement.area,
        "level": requirement.level.value,
        "clause": requirement.requirement.clause,
        "summary": requirement.requirement.summary,
        "capability": requirement.requirement.capability,
        "outcome": requirement.outcome.value,
        "reason": requirement.reason,
        "checks": len(requirement.tests),
        "duration_seconds": round(requirement.duration, 6),
    }
    expectation = requirement.expectation
    if requirement.expected is not None and expectation is not None:
        entry["expected_failure"] = {"reason": requirement.expected, "result": expectation.value}
    evidence = [(test.nodeid, test.evidence) for test in requirement.tests if test.evidence]
    if evidence:
        entry["evidence"] = [
            {"nodeid": nodeid, "examples": counts.get("examples", 0), "steps": counts.get("steps", 0)}
            for nodeid, counts in evidence
            if counts is not None
        ]
    if requirement.failures:
        entry["failures"] = [
            {
                "nodeid": test.nodeid,
                "message": test.message or "failed",
                "details": test.longrepr or "",
                "reproduce": result.reproduce_command(test, redact=True),
                "pytest": result.reproduce_pytest(test, redact=True),
                "hypothesis_blob": test.hypothesis_blob,
                "stack": None if test.stack is None else test.stack[-MAX_DETAILS_CHARS:],
                "driver_frame": test.driver_frame,
            }
            | _witness_field(test.recorded(WITNESS_PROPERTY))
            for test in requirement.failures
        ]
    return entry


def _witness_field(text: str | None) -> dict[str, Any]:
    """``{"witness": ...}`` when the check recorded a valid structured witness, else nothing."""
    found = recorded_witness(text)
    return {} if found is None else {"witness": found}


def build_report(result: RunResult, *, kind: str = "certification") -> ResultsReport:
    """The report document for ``result`` (validated; raises ``ReportError`` if it would not be)."""
    profile = result.profile
    distribution, version = _driver_distribution(result)
    environment = result.environment
    tests = result.tests
    certification = certification_claim(result)
    document: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "kind": kind,
        "generated_at": datetime.now(UTC).isoformat(),
        "toolkit": {
            "name": "runlane-conformance",
            "version": environment.toolkit_version,
            "suite_digest": environment.suite_digest,
        },
        "environment": {
            "python": environment.python_version,
            "pytest": environment.pytest_version,
            "hypothesis": environment.hypothesis_version,
            "plugins": [{"name": name, "version": ver} for name, ver in environment.plugins],
            "supervised": environment.supervised,
            "isolation": environment.isolation,
            "sandbox": environment.sandbox,
        },
        "python": {"version": platform.python_version(), "implementation": sys.implementation.name},
        "platform": platform.platform(),
        "driver": {
            "spec": result.driver,
            "target": result.target,
            "options": redact_options(result.options),
            "distribution": distribution,
            "version": version,
        },
        "run": {
            "status": result.status.value,
            "seed": result.seed,
            "hypothesis_profile": result.hypothesis_profile,
            "areas": list(result.areas),
            "requirements": list(result.requirement_filter),
            "workers": result.workers,
            "check_timeout_seconds": result.check_timeout,
            "started_at": result.started_at.isoformat(),
            "duration_seconds": round(result.duration, 6),
            "checks": {
                "required": len(tests),
                "run": sum(t.outcome.value != "not_run" for t in tests),
                "passed": sum(t.outcome.value == "passed" for t in tests),
                "failed": sum(t.outcome.value in ("failed", "error") for t in tests),
                "gated": sum(t.outcome.value == "gated" for t in tests),
                "not_run": sum(t.outcome.value == "not_run" for t in tests),
                "inconclusive": sum(t.inconclusive for t in tests),
            },
            "problems": list(result.problems),
            "examples": result.examples,
            "expected_failures": [
                {"id": r.id, "reason": r.expected, "result": r.expectation.value}
                for r in result.requirements
                if r.expected is not None and r.expectation is not None
            ],
        },
        "profile": {
            "durability": profile.durability.value,
            "clock_authority": profile.clock_authority.value,
            "index_consistency": profile.index_consistency.value,
            "append": profile.append,
            "exclusive_candidates": profile.exclusive_candidates,
            "limits": {name: int(getattr(profile.limits, name)) for name in _LIMIT_FIELDS},
            "offered": list(result.facts.offered()),
        },
        "limits": _limits_section(result),
        "checks": _checks_section(result),
        "capabilities": {
            capability: {
                "offered": capability in result.facts.offered(),
                "status": _aggregate(r for r in result.requirements if r.area == area)[0],
            }
            for capability, area in _CAPABILITY_AREAS.items()
        },
        "areas": [
            {
                "area": summary.area,
                "requirements": {
                    "passed": summary.passed,
                    "failed": summary.failed,
                    "gated": summary.gated,
                    "not_run": summary.not_run,
                    "inconclusive": summary.inconclusive,
                },
                "checks": {
                    "passed": summary.tests_passed,
                    "failed": summary.tests_failed,
                    "gated": summary.tests_gated,
                    "not_run": sum(t.outcome.value == "not_run" for t in tests if t.area == summary.area),
                    "inconclusive": summary.tests_inconclusive,
                },
                "duration_seconds": round(summary.duration, 6),
                "gate_reasons": [
                    {"reason": reason, "count": count} for reason, count in summary.gate_reasons
                ],
            }
            for summary in result.area_summaries()
        ],
        "requirements": [_requirement_entry(result, r) for r in result.requirements],
        "certification": {
            "certified": certification.certified,
            "level": certification.level,
            "complete": result.complete,
            "must_failed": list(certification.must_failed),
            "should_failed": list(certification.should_failed),
            "inconclusive": list(certification.inconclusive),
        },
    }
    document = safe_document(document, secret_values(result.options))
    validate_report(document)
    return cast(ResultsReport, document)


def certification_claim(result: RunResult) -> Certification:
    """The run's certification, with the limits evidence folded in: a limit whose measured
    boundary contradicts the profile the probe saw is a run-level problem (it denies)."""
    return result.certification


def safe_document(value: Any, secrets: Sequence[str] = (), field: str | None = None) -> Any:
    """A copy of a report document (or any JSON value) in which every string is safe to show and store.

    Driver-supplied text reaches the report through messages, reasons,
    tracebacks, node ids, the driver spec and its options. Each string has the
    given secret values and URL credentials redacted, escape sequences removed,
    other control characters escaped and lone surrogates replaced (see
    ``safe_text``), so the document encodes as UTF-8, can go into XML, and
    prints inertly. ``message`` and ``reason`` fields become one capped line;
    ``details`` keeps its lines but is capped at both ends; any other string
    keeps its lines and is capped far higher.
    """
    if isinstance(value, str):
        text = redact_text(value, secrets)
        if field in _DETAILS_FIELDS:
            return details_text(text)
        if field in _ONE_LINE_LIMITS:
            return one_line(text, _ONE_LINE_LIMITS[field])
        return xml_safe(text, limit=_FIELD_LIMIT)
    if isinstance(value, Mapping):
        return {
            xml_safe(str(key), multiline=False): safe_document(item, secrets, str(key))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [safe_document(item, secrets, field) for item in value]
    return value


def unfinished_report(
    status: RunStatus,
    *,
    driver: str,
    options: Mapping[str, str],
    seed: int,
    hypothesis_profile: str,
    areas: Sequence[str],
    requirements: Sequence[str],
    workers: int,
    started_at: datetime,
    problems: Sequence[str] = (),
    exit_code: int | None = None,
) -> UnfinishedReport:
    """A report with no results (see the module docstring): validated, secrets redacted."""
    if status not in UNFINISHED_STATUSES:
        raise ValueError(f"an unfinished report cannot be {status.value}")
    document: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "kind": "certification",
        "generated_at": datetime.now(UTC).isoformat(),
        "toolkit": {"name": "runlane-conformance", "version": __version__},
        "python": {"version": platform.python_version(), "implementation": sys.implementation.name},
        "platform": platform.platform(),
        "driver": {"spec": driver or "?", "options": redact_options(options)},
        "run": {
            "status": status.value,
            "seed": seed,
            "hypothesis_profile": hypothesis_profile,
            "areas": list(areas),
            "requirements": list(requirements),
            "workers": workers,
            "started_at": started_at.isoformat(),
            "exit_code": exit_code,
            "problems": [str(problem) for problem in problems],
        },
        "certification": {
            "certified": False,
            "level": "none",
            "complete": False,
            "must_failed": [],
            "should_failed": [],
        },
    }
    document = safe_document(document, secret_values(options), None)
    validate_report(document)
    return cast(UnfinishedReport, document)
