"""The certification report: one JSON document, its schema, and safe writing and reading.

Every artefact the CLI produces after a run (the JSON report, JUnit XML, the
badge) is derived from the document built here, so they can never disagree.
The document is checked against ``REPORT_SCHEMA`` (JSON Schema draft 2020-12)
before it is written and every time it is read back: a report that exists on
disk is, by construction, a valid one.

Files are written atomically (see ``output_files``): a process killed at any
point leaves either the previous file or the new one, never a truncated mix.

A report comes in one of two shapes, both described by the one schema:

* a *results* report (``build_report``): a run that reached a plan, with every
  requirement's outcome (``run.status`` complete, partial, stopped or interrupted);
* an *unfinished* report (``unfinished_report``): no results at all, only who was
  being certified and why there is nothing to show (``run.status`` running --
  written the moment a run starts, so an earlier report at the path can never
  stand in for this run, and left behind if the CLI is killed -- or broken, or
  interrupted before a plan existed). It can never certify: its certification
  is fixed to "not certified" by the schema, and ``check_claim`` refuses it.
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
from ..contract.values import StorageLimits, StorageProfile
from ..fixtures.evidence import LIMIT_PROPERTY, WITNESS_PROPERTY
from ..fixtures.gating import ProfileFacts, gating_reason
from ..report_witness import WITNESS_SCHEMA, recorded_witness
from ..run.isolation import Isolation
from ..run.model import ExpectationResult, RequirementOutcome, RequirementResult, RunResult, RunStatus
from ..run.verdict import Certification, certify
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
    "check_claim",
    "is_unfinished",
    "read_report",
    "redact_options",
    "safe_document",
    "unfinished_report",
    "validate_report",
    "write_report",
    "write_text_atomically",
]

#: 4: ``run.status`` may be ``running`` or ``broken``, in an unfinished report (no results).
#: 5: ``inconclusive`` outcomes, counts and run status; ``certification.inconclusive``; per-search
#: ``requirements[].evidence``.
#: 6: ``environment.isolation``, where the driver's code ran (``process`` or ``none``).
#: 7: ``requirements[].failures[].witness``, a failed history check's findings as data.
REPORT_VERSION = 7
#: The statuses an unfinished report (one without results) may carry.
UNFINISHED_STATUSES: tuple[RunStatus, ...] = (RunStatus.RUNNING, RunStatus.BROKEN, RunStatus.INTERRUPTED)
#: The statuses a results report may carry.
RESULT_STATUSES: tuple[RunStatus, ...] = tuple(status for status in RunStatus if status.has_results)

#: Certification levels, weakest first; ``none`` means a MUST requirement failed.
LEVELS: tuple[str, ...] = (
    "none",
    "core",
    "core+append",
    "core+exclusive",
    "core+append+exclusive",
    "core+faults",
    "core+append+faults",
    "core+exclusive+faults",
    "core+append+exclusive+faults",
)

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

_STATUS = {"enum": ["passed", "failed", "gated", "not_run", "inconclusive"]}
_OUTCOMES = ("passed", "failed", "gated", "not_run", "inconclusive")
_COUNTS = {
    "type": "object",
    "additionalProperties": False,
    "required": list(_OUTCOMES),
    "properties": {name: {"type": "integer", "minimum": 0} for name in _OUTCOMES},
}
_CHECK_COUNTS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["required", "run", "passed", "failed", "gated", "not_run", "inconclusive"],
    "properties": {
        name: {"type": "integer", "minimum": 0}
        for name in ("required", "run", "passed", "failed", "gated", "not_run", "inconclusive")
    },
}
_NULLABLE_STRING = {"type": ["string", "null"]}
_EXPECTATION_FIELDS: dict[str, Any] = {
    "reason": {"type": "string"},
    "result": {"enum": [result.value for result in ExpectationResult]},
}
_EXPECTATION = {
    "type": "object",
    "additionalProperties": False,
    "required": ["reason", "result"],
    "properties": _EXPECTATION_FIELDS,
}
_EVIDENCE = {"type": "array", "items": {"type": "string"}}

_TOOLKIT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "version"],
    "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
}
_PYTHON = {
    "type": "object",
    "additionalProperties": False,
    "required": ["version", "implementation"],
    "properties": {"version": {"type": "string"}, "implementation": {"type": "string"}},
}
_NOTHING = {"type": "array", "maxItems": 0}

#: A report without results: the run is still going (or its CLI was killed), broke, or was
#: interrupted before it had a plan. Certification is fixed to "not certified".
_UNFINISHED_SCHEMA: dict[str, Any] = {
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
        "certification",
    ],
    "properties": {
        "report_version": {"const": REPORT_VERSION},
        "kind": {"const": "certification"},
        "generated_at": {"type": "string", "format": "date-time"},
        "toolkit": _TOOLKIT,
        "python": _PYTHON,
        "platform": {"type": "string"},
        "driver": {
            "type": "object",
            "additionalProperties": False,
            "required": ["spec", "options"],
            "properties": {
                "spec": {"type": "string", "minLength": 1},
                "options": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "run": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "status",
                "seed",
                "hypothesis_profile",
                "areas",
                "requirements",
                "workers",
                "started_at",
                "problems",
            ],
            "properties": {
                "status": {
                    "enum": [status.value for status in UNFINISHED_STATUSES],
                    "description": "running: written when the run started, so it is what a killed "
                    "run leaves; broken: ended without a verdict (exit 2 or 3); interrupted: "
                    "Ctrl-C or SIGTERM before the run had a plan (exit 130)",
                },
                "seed": {"type": "integer", "minimum": 0},
                "hypothesis_profile": {"type": "string"},
                "areas": {"type": "array", "items": {"type": "string"}},
                "requirements": {"type": "array", "items": {"type": "string"}},
                "workers": {"type": "integer", "minimum": 1},
                "started_at": {"type": "string", "format": "date-time"},
                "exit_code": {
                    "type": ["integer", "null"],
                    "description": "the CLI's exit status; null while running",
                },
                "problems": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "why there are no results (the CLI's error line)",
                },
            },
        },
        "certification": {
            "type": "object",
            "additionalProperties": False,
            "required": ["certified", "level", "complete", "must_failed", "should_failed"],
            "properties": {
                "certified": {"const": False},
                "level": {"const": "none"},
                "complete": {"const": False},
                "must_failed": _NOTHING,
                "should_failed": _NOTHING,
            },
        },
    },
}

_RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "report_version",
        "kind",
        "generated_at",
        "toolkit",
        "environment",
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
            "required": ["name", "version", "suite_digest"],
            "properties": {
                "name": {"type": "string"},
                "version": {"type": "string"},
                "suite_digest": {
                    "type": "string",
                    "description": "sha256 over the suite and fixture files the run loaded",
                },
            },
        },
        "environment": {
            "type": "object",
            "additionalProperties": False,
            "required": ["python", "pytest", "hypothesis", "plugins", "supervised", "isolation"],
            "properties": {
                "python": {"type": "string"},
                "pytest": {"type": "string"},
                "hypothesis": {"type": "string"},
                "plugins": {
                    "type": "array",
                    "description": "every non-builtin pytest plugin the run loaded (autoload is off)",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "version"],
                        "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
                    },
                },
                "supervised": {
                    "type": "boolean",
                    "description": "true when the checks ran in supervised child processes (the CLI)",
                },
                "isolation": {
                    "enum": [mode.value for mode in Isolation],
                    "description": "where the driver's code ran: process (a backend process of its own, "
                    "never loaded by the checks' processes) or none (next to the checks)",
                },
                "sandbox": {
                    "type": ["string", "null"],
                    "description": "with isolation process: the sandbox the backend ran in "
                    "('bubblewrap: ...') or why it had none ('unavailable: ...'); null otherwise. "
                    "Only a sandboxed run's badge says (isolated)",
                },
            },
        },
        "python": _PYTHON,
        "platform": {"type": "string"},
        "driver": {
            "type": "object",
            "additionalProperties": False,
            "required": ["spec", "target", "options", "distribution", "version"],
            "properties": {
                "spec": {"type": "string", "minLength": 1, "description": "name or module:factory"},
                "target": {"type": "string", "description": "the module:factory the name resolved to"},
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
                "status",
                "seed",
                "hypothesis_profile",
                "areas",
                "requirements",
                "workers",
                "check_timeout_seconds",
                "started_at",
                "duration_seconds",
                "checks",
                "problems",
            ],
            "properties": {
                "status": {
                    "enum": [status.value for status in RESULT_STATUSES],
                    "description": "complete: the whole catalogue; partial: restricted by area or "
                    "requirement; stopped: ended after --maxfail failed checks; interrupted: stopped "
                    "early (Ctrl-C); inconclusive: the whole catalogue ran and nothing failed, but a "
                    "check could not finish inside its deadline (no verdict). Only complete runs "
                    "certify.",
                },
                "requirements": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "requirement ids the run was restricted to; empty means all",
                },
                "check_timeout_seconds": {"type": "number", "exclusiveMinimum": 0},
                "examples": {
                    **_NULLABLE_STRING,
                    "description": "the Hypothesis example database directory failing examples were "
                    "saved to (replayed first by the reproduce lines); null when none was kept",
                },
                "problems": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "run-level failures not tied to one check (e.g. a session cleanup "
                    "that ended the process); any problem denies certification",
                },
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
                "checks": _CHECK_COUNTS,
                "expected_failures": {
                    "type": "array",
                    "description": "requirements declared as expected failures (--expect-fail) and how "
                    "each came out; a known failure still counts as failed for certification",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["id", "reason", "result"],
                        "properties": {"id": {"type": "string"}, **_EXPECTATION_FIELDS},
                    },
                },
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
                "offered",
            ],
            "properties": {
                "offered": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "every capability the preflight probe found offered (gating is "
                    "planned from these)",
                },
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
                "required": ["area", "requirements", "checks", "duration_seconds", "gate_reasons"],
                "properties": {
                    "area": {"type": "string"},
                    "requirements": _COUNTS,
                    "checks": _COUNTS,
                    "duration_seconds": {"type": "number", "minimum": 0},
                    "gate_reasons": {
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
                    "outcome": {"enum": list(_OUTCOMES)},
                    "reason": _NULLABLE_STRING,
                    "checks": {"type": "integer", "minimum": 0},
                    "duration_seconds": {"type": "number", "minimum": 0},
                    "expected_failure": _EXPECTATION,
                    "evidence": {
                        "type": "array",
                        "description": "what each search check of the requirement ran: Hypothesis "
                        "examples and steps, fixed by the profile and seed (not by the machine's speed)",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["nodeid", "examples", "steps"],
                            "properties": {
                                "nodeid": {"type": "string"},
                                "examples": {"type": "integer", "minimum": 0},
                                "steps": {"type": "integer", "minimum": 0},
                            },
                        },
                    },
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
                                "hypothesis_blob": {
                                    **_NULLABLE_STRING,
                                    "description": "kept for older readers: the suites no longer print "
                                    "a @reproduce_failure blob (the example database replays instead), "
                                    "so it is null",
                                },
                                "stack": _NULLABLE_STRING,
                                "driver_frame": _NULLABLE_STRING,
                                "witness": WITNESS_SCHEMA,
                            },
                        },
                    },
                },
            },
        },
        "certification": {
            "type": "object",
            "additionalProperties": False,
            "required": ["certified", "level", "complete", "must_failed", "should_failed", "inconclusive"],
            "properties": {
                "certified": {"type": "boolean"},
                "level": {"enum": list(LEVELS)},
                "complete": {
                    "type": "boolean",
                    "description": "false when the run was partial or interrupted",
                },
                "must_failed": _EVIDENCE,
                "should_failed": _EVIDENCE,
                "inconclusive": {
                    **_EVIDENCE,
                    "description": "requirements a check of which could not finish inside its deadline "
                    "(and none failed): no verdict on them, so no certification",
                },
            },
        },
    },
}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": f"https://runlane.dev/schemas/runlane-certify-report-v{REPORT_VERSION}.json",
    "title": "runlane-certify report",
    "description": "The outcome of certifying one Runlane storage driver against the storage contract: "
    "a report with results, or an unfinished one (running, broken, or interrupted before a plan) "
    "that holds none and never certifies.",
    "oneOf": [{"$ref": "#/$defs/results"}, {"$ref": "#/$defs/unfinished"}],
    "$defs": {"results": _RESULTS_SCHEMA, "unfinished": _UNFINISHED_SCHEMA},
}

_FORMATS = Draft202012Validator.FORMAT_CHECKER
_VALIDATOR = Draft202012Validator(REPORT_SCHEMA, format_checker=_FORMATS)
# Each shape on its own, so an invalid document is told what is wrong with the shape it tried to be.
_RESULTS_VALIDATOR = Draft202012Validator(_RESULTS_SCHEMA, format_checker=_FORMATS)
_UNFINISHED_VALIDATOR = Draft202012Validator(_UNFINISHED_SCHEMA, format_checker=_FORMATS)


def is_unfinished(document: Mapping[str, Any]) -> bool:
    """Whether a report is the unfinished shape (no results: running, broken, or interrupted early)."""
    run = document.get("run")
    status = run.get("status") if isinstance(run, Mapping) else None
    return "requirements" not in document and status in {s.value for s in UNFINISHED_STATUSES}


class ReportError(RunlaneError, ValueError):
    """A report could not be read, or is not a valid report. The message is one line."""


def validate_report(document: object) -> None:
    """Raise ``ReportError`` naming the first schema violation (by JSON path) if ``document`` is invalid."""
    shaped = _UNFINISHED_VALIDATOR if isinstance(document, Mapping) and is_unfinished(document) else None
    error = best_match((shaped or _RESULTS_VALIDATOR).iter_errors(document))
    if error is None:
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


def build_report(result: RunResult, *, kind: str = "certification") -> dict[str, Any]:
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
    return document


def certification_claim(result: RunResult) -> Certification:
    """The run's certification, with the limits evidence folded in: a limit whose measured
    boundary contradicts the profile the probe saw is a run-level problem (it denies)."""
    from ..run.verdict import certification_of

    return certification_of(result)


def _facts_from_report(document: Mapping[str, Any]) -> ProfileFacts:
    profile = document["profile"]
    offered = set(profile["offered"])
    return ProfileFacts(
        profile=StorageProfile(
            durability=profile["durability"],
            clock_authority=profile["clock_authority"],
            index_consistency=profile["index_consistency"],
            limits=StorageLimits(**profile["limits"]),
            exclusive_candidates=profile["exclusive_candidates"],
            append=profile["append"],
        ),
        operator_reads="operator_reads" in offered,
        cross_process="cross_process" in offered,
        faults="faults" in offered,
    )


def check_claim(document: Mapping[str, Any]) -> Certification:
    """Recompute a validated report's verdict from its own requirement outcomes; refuse a mismatch.

    The catalogue is this toolkit's, so a report naming another toolkit version
    is refused. A report must list every catalogued requirement once, each at
    its catalogued level; a gated requirement must be gated for exactly the
    reason its capability gets from the report's own profile; and the recomputed
    certification (by ``run.verdict.certify``, the function the run itself uses)
    must equal the one the report claims. Raises ``ReportError`` (one line) otherwise.
    """
    version = document["toolkit"]["version"]
    if version != __version__:
        raise ReportError(
            f"the report was made by runlane-conformance {version}; this is {__version__}, "
            "whose catalogue cannot vouch for it"
        )
    if document["kind"] != "certification":
        raise ReportError("the report is a capabilities report, not a certification run")
    status = document["run"]["status"]
    if status == RunStatus.RUNNING.value:
        raise ReportError(
            "the report is from a run that has not finished (still running, or its process was killed)"
        )
    if status == RunStatus.BROKEN.value:
        raise ReportError("the report is from a run that broke before reaching a verdict")
    if status != RunStatus.COMPLETE.value or is_unfinished(document):
        raise ReportError(f"the report is from a {status} run, which is never a certification")
    from ..run import certify as certify_run

    catalog = certify_run.SUITE_CATALOG()
    outcomes: dict[str, RequirementOutcome] = {}
    try:
        facts = _facts_from_report(document)
    except Exception as error:
        raise ReportError(f"the report's profile is not a valid profile: {error}") from None
    for entry in document["requirements"]:
        rid = entry["id"]
        if rid in outcomes:
            raise ReportError(f"the report lists requirement {rid} twice")
        requirement = catalog.get(rid)
        if requirement is None:
            raise ReportError(f"the report lists {rid}, which is not in the catalogue")
        if entry["level"] != requirement.level.value:
            raise ReportError(
                f"the report gives {rid} level {entry['level']}, the catalogue {requirement.level}"
            )
        outcome = RequirementOutcome(entry["outcome"])
        if outcome is RequirementOutcome.GATED:
            expected = (
                None if requirement.capability is None else gating_reason(requirement.capability, facts)
            )
            if expected is None or entry["reason"] != expected:
                raise ReportError(f"the report gates {rid}, which its own profile does not gate")
        outcomes[rid] = outcome
    missing = sorted(set(catalog) - set(outcomes))
    if missing:
        raise ReportError(f"the report lacks {len(missing)} catalogued requirement(s), e.g. {missing[0]}")
    recomputed = certify(
        outcomes,
        catalog,
        facts.offered(),
        status=RunStatus(status),
        problems=document["run"]["problems"],
    )
    claim = document["certification"]
    if (claim["certified"], claim["level"]) != (recomputed.certified, recomputed.level):
        raise ReportError(
            f"the report claims certified={claim['certified']} at level {claim['level']}, but its own "
            f"outcomes give certified={recomputed.certified} at level {recomputed.level}"
        )
    return recomputed


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
) -> dict[str, Any]:
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
    return document


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
    except RecursionError:
        raise ReportError(f"report {str(path)!r} is not a report: its JSON nests too deeply") from None
    try:
        validate_report(document)
    except ReportError as error:
        raise ReportError(f"report {str(path)!r}: {error}") from None
    assert isinstance(document, dict)
    return document
