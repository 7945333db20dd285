"""The certification report: one JSON document, its schema, and safe writing and reading.

Every artefact the CLI produces after a run (the JSON report, JUnit XML, the
badge) is derived from the document built here, so they can never disagree.
The document is checked against ``REPORT_SCHEMA`` (JSON Schema draft 2020-12)
before it is written and every time it is read back: a report that exists on
disk is, by construction, a valid one.

Files are written atomically (see ``output_files``): a process killed at any
point leaves either the previous file or the new one, never a truncated mix.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from .. import __version__
from ..contract.errors import RunlaneError
from ..contract.values import StorageLimits
from ..runner import RequirementOutcome, RequirementResult, RunResult
from ..safe_text import (
    DETAILS_LIMIT,
    MESSAGE_LIMIT,
    details_text,
    json_text,
    one_line,
    redact_options,
    redact_text,
    secret_values,
    xml_safe,
)
from .output_files import write_text_atomically

__all__ = [
    "LEVELS",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "ReportError",
    "build_report",
    "read_report",
    "redact_options",
    "safe_document",
    "validate_report",
    "write_report",
    "write_text_atomically",
]

REPORT_VERSION = 1

#: Certification levels, weakest first; ``none`` means a MUST requirement failed.
LEVELS: tuple[str, ...] = ("none", "core", "core+append", "core+exclusive", "core+append+exclusive")

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
_CAPABILITY_AREAS: dict[str, str] = {"append": "append", "exclusive_candidates": "exclusive_selection"}

_STATUS = {"enum": ["passed", "failed", "skipped", "not_run"]}
_COUNTS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["passed", "failed", "skipped"],
    "properties": {name: {"type": "integer", "minimum": 0} for name in ("passed", "failed", "skipped")},
}
_NULLABLE_STRING = {"type": ["string", "null"]}
_EVIDENCE = {"type": "array", "items": {"type": "string"}}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://runlane.dev/schemas/runlane-certify-report-v1.json",
    "title": "runlane-certify report",
    "description": "The outcome of certifying one Runlane storage driver against the storage contract.",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "report_version",
        "kind",
        "generated_at",
        "toolkit",
        "python",
        "platform",
        "driver",
        "run",
        "profile",
        "limits",
        "checks",
        "capabilities",
        "areas",
        "requirements",
        "certification",
    ],
    "properties": {
        "report_version": {"const": REPORT_VERSION},
        "kind": {
            "enum": ["certification", "capabilities"],
            "description": "certification: a `run`; capabilities: `report` (limits and profile areas only).",
        },
        "generated_at": {"type": "string", "format": "date-time"},
        "toolkit": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "version"],
            "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
        },
        "python": {
            "type": "object",
            "additionalProperties": False,
            "required": ["version", "implementation"],
            "properties": {"version": {"type": "string"}, "implementation": {"type": "string"}},
        },
        "platform": {"type": "string"},
        "driver": {
            "type": "object",
            "additionalProperties": False,
            "required": ["spec", "options", "distribution", "version"],
            "properties": {
                "spec": {"type": "string", "minLength": 1, "description": "name or module:factory"},
                "options": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "driver options; values of secret-looking keys are redacted",
                },
                "distribution": _NULLABLE_STRING,
                "version": _NULLABLE_STRING,
            },
        },
        "run": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "seed",
                "hypothesis_profile",
                "areas",
                "workers",
                "started_at",
                "duration_seconds",
                "checks",
            ],
            "properties": {
                "seed": {"type": "integer", "minimum": 0},
                "hypothesis_profile": {"enum": ["quick", "default", "thorough"]},
                "areas": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "areas the run was restricted to; empty means every area",
                },
                "workers": {"type": "integer", "minimum": 1},
                "started_at": {"type": "string", "format": "date-time"},
                "duration_seconds": {"type": "number", "minimum": 0},
                "checks": {"type": "integer", "minimum": 0},
            },
        },
        "profile": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "durability",
                "clock_authority",
                "index_consistency",
                "append",
                "exclusive_candidates",
                "limits",
            ],
            "properties": {
                "durability": {"enum": ["process", "durable"]},
                "clock_authority": {"enum": ["client", "server_sampled", "transaction_authoritative"]},
                "index_consistency": {"enum": ["strong", "eventual"]},
                "append": {"type": "boolean"},
                "exclusive_candidates": {"type": "boolean"},
                "limits": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": list(_LIMIT_FIELDS),
                    "properties": {name: {"type": "integer", "minimum": 1} for name in _LIMIT_FIELDS},
                },
            },
        },
        "limits": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "advertised", "status", "accepted_at", "rejected_at", "requirements"],
                "properties": {
                    "name": {"enum": list(_LIMIT_FIELDS)},
                    "advertised": {"type": "integer", "minimum": 1},
                    "status": _STATUS,
                    "accepted_at": {"type": ["integer", "null"]},
                    "rejected_at": {"type": ["integer", "null"]},
                    "reason": _NULLABLE_STRING,
                    "requirements": _EVIDENCE,
                },
            },
        },
        "checks": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "status", "requirements"],
                "properties": {
                    "name": {"enum": list(CHECK_EVIDENCE)},
                    "status": _STATUS,
                    "reason": _NULLABLE_STRING,
                    "requirements": _EVIDENCE,
                },
            },
        },
        "capabilities": {
            "type": "object",
            "additionalProperties": False,
            "required": list(_CAPABILITY_AREAS),
            "properties": {
                name: {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["offered", "status"],
                    "properties": {"offered": {"type": "boolean"}, "status": _STATUS},
                }
                for name in _CAPABILITY_AREAS
            },
        },
        "areas": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["area", "requirements", "checks", "duration_seconds", "skip_reasons"],
                "properties": {
                    "area": {"type": "string"},
                    "requirements": _COUNTS,
                    "checks": _COUNTS,
                    "duration_seconds": {"type": "number", "minimum": 0},
                    "skip_reasons": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["reason", "count"],
                            "properties": {
                                "reason": {"type": "string"},
                                "count": {"type": "integer", "minimum": 1},
                            },
                        },
                    },
                },
            },
        },
        "requirements": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "area", "level", "outcome", "reason", "checks", "duration_seconds"],
                "properties": {
                    "id": {"type": "string", "pattern": r"^[a-z_]+\.[a-z0-9]+(-[a-z0-9]+)*$"},
                    "area": {"type": "string"},
                    "level": {"enum": ["MUST", "SHOULD"]},
                    "clause": {"type": "string"},
                    "summary": {"type": "string"},
                    "capability": _NULLABLE_STRING,
                    "outcome": {"enum": ["passed", "failed", "skipped"]},
                    "reason": _NULLABLE_STRING,
                    "checks": {"type": "integer", "minimum": 1},
                    "duration_seconds": {"type": "number", "minimum": 0},
                    "failures": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["nodeid", "message", "reproduce", "pytest"],
                            "properties": {
                                "nodeid": {"type": "string"},
                                "message": {"type": "string"},
                                "details": {"type": "string"},
                                "reproduce": {"type": "string"},
                                "pytest": {"type": "string"},
                                "hypothesis_blob": _NULLABLE_STRING,
                            },
                        },
                    },
                },
            },
        },
        "certification": {
            "type": "object",
            "additionalProperties": False,
            "required": ["certified", "level", "complete", "must_failed", "should_failed"],
            "properties": {
                "certified": {"type": "boolean"},
                "level": {"enum": list(LEVELS)},
                "complete": {
                    "type": "boolean",
                    "description": "false when the run covered only some areas",
                },
                "must_failed": _EVIDENCE,
                "should_failed": _EVIDENCE,
            },
        },
    },
}

_VALIDATOR = Draft202012Validator(REPORT_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


class ReportError(RunlaneError, ValueError):
    """A report could not be read, or is not a valid report. The message is one line."""


def validate_report(document: object) -> None:
    """Raise ``ReportError`` naming the first schema violation (by JSON path) if ``document`` is invalid."""
    error = best_match(_VALIDATOR.iter_errors(document))
    if error is not None:
        where = error.json_path
        message = " ".join(error.message.split())
        if len(message) > 200:
            message = message[:197] + "..."
        raise ReportError(f"invalid report at {where}: {message}")
    assert isinstance(document, dict)
    certification = document["certification"]
    if certification["certified"] != (certification["level"] != "none"):
        raise ReportError("invalid report at $.certification: certified and level disagree")


def _driver_distribution(result: RunResult) -> tuple[str | None, str | None]:
    if result.driver_info is not None:
        return result.driver_info.distribution, result.driver_info.version
    module = result.driver.partition(":")[0].partition(".")[0]
    with contextlib.suppress(Exception):
        for name in importlib.metadata.packages_distributions().get(module, []):
            return name, importlib.metadata.version(name)
    return None, None


def _aggregate(results: Iterable[RequirementResult]) -> tuple[str, str | None]:
    """passed/failed/skipped/not_run for a group of requirements, with the first failure or skip reason."""
    results = list(results)
    if not results:
        return "not_run", None
    failed = [r for r in results if r.outcome is RequirementOutcome.FAILED]
    if failed:
        return "failed", f"{failed[0].id}: {failed[0].reason}"
    if all(r.outcome is RequirementOutcome.SKIPPED for r in results):
        return "skipped", results[0].reason
    return "passed", None


def _limits_section(result: RunResult) -> list[dict[str, Any]]:
    limits: StorageLimits = result.profile.limits
    in_area = [r for r in result.requirements if r.area == "limits"]
    section = []
    for name in _LIMIT_FIELDS:
        advertised = int(getattr(limits, name))
        wanted = LIMIT_EVIDENCE[name] + ALL_LIMITS_EVIDENCE
        evidence = [r for r in in_area if r.id in wanted]
        status, reason = _aggregate(evidence)
        verified = status == "passed"
        section.append(
            {
                "name": name,
                "advertised": advertised,
                "status": status,
                "accepted_at": advertised if verified else None,
                "rejected_at": advertised + 1 if verified else None,
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
    if requirement.failures:
        entry["failures"] = [
            {
                "nodeid": test.nodeid,
                "message": test.message or "failed",
                "details": test.longrepr or "",
                "reproduce": result.reproduce_command(test, redact=True),
                "pytest": result.reproduce_pytest(test, redact=True),
                "hypothesis_blob": test.hypothesis_blob,
            }
            for test in requirement.failures
        ]
    return entry


def build_report(result: RunResult, *, kind: str = "certification") -> dict[str, Any]:
    """The report document for ``result`` (validated; raises ``ReportError`` if it would not be)."""
    profile = result.profile
    distribution, version = _driver_distribution(result)
    document: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "kind": kind,
        "generated_at": datetime.now(UTC).isoformat(),
        "toolkit": {"name": "runlane-conformance", "version": __version__},
        "python": {"version": platform.python_version(), "implementation": sys.implementation.name},
        "platform": platform.platform(),
        "driver": {
            "spec": result.driver,
            "options": redact_options(result.options),
            "distribution": distribution,
            "version": version,
        },
        "run": {
            "seed": result.seed,
            "hypothesis_profile": result.hypothesis_profile,
            "areas": list(result.areas),
            "workers": result.workers,
            "started_at": result.started_at.isoformat(),
            "duration_seconds": round(result.duration, 6),
            "checks": len(result.tests),
        },
        "profile": {
            "durability": profile.durability.value,
            "clock_authority": profile.clock_authority.value,
            "index_consistency": profile.index_consistency.value,
            "append": profile.append,
            "exclusive_candidates": profile.exclusive_candidates,
            "limits": {name: int(getattr(profile.limits, name)) for name in _LIMIT_FIELDS},
        },
        "limits": _limits_section(result),
        "checks": _checks_section(result),
        "capabilities": {
            capability: {
                "offered": capability in profile.capabilities(),
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
                    "skipped": summary.skipped,
                },
                "checks": {
                    "passed": summary.tests_passed,
                    "failed": summary.tests_failed,
                    "skipped": summary.tests_skipped,
                },
                "duration_seconds": round(summary.duration, 6),
                "skip_reasons": [
                    {"reason": reason, "count": count} for reason, count in summary.skip_reasons
                ],
            }
            for summary in result.area_summaries()
        ],
        "requirements": [_requirement_entry(result, r) for r in result.requirements],
        "certification": {
            "certified": result.certified,
            "level": result.level,
            "complete": result.complete,
            "must_failed": [r.id for r in result.must_failures],
            "should_failed": [r.id for r in result.failed_requirements if r not in result.must_failures],
        },
    }
    document = safe_document(document, secret_values(result.options))
    validate_report(document)
    return document


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


def write_report(path: Path, document: Mapping[str, Any]) -> None:
    """Validate ``document`` and write it atomically as indented JSON."""
    validate_report(document)
    write_text_atomically(Path(path), json_text(document, indent=2) + "\n", "report")


def read_report(path: Path) -> dict[str, Any]:
    """Load and validate a report; every problem is a one-line ``ReportError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ReportError(f"cannot read report {str(path)!r}: {reason}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReportError(f"report {str(path)!r} is not JSON: {error}") from None
    try:
        validate_report(document)
    except ReportError as error:
        raise ReportError(f"report {str(path)!r}: {error}") from None
    assert isinstance(document, dict)
    return document
