"""The report's JSON Schema (draft 2020-12), shipped as ``report/schema.json``, and validation.

The schema is data, not code: ``schema.json`` is the one description of a valid report, read once
when this module loads. ``runlane-certify schema`` prints it; every report is checked against it
before it is written and every time it is read back, so a report on disk is, by construction, a
valid one. ``tests/report/test_model_matches_schema.py`` keeps it and the typed model
(``report.model``) describing the same document, and its enums equal to the toolkit's own
(``RunStatus``, ``ExpectationResult``, ``LEVELS``, ``REPORT_VERSION``).

A report comes in one of two shapes, both described by the one schema:

* a *results* report (``report.builder.build_report``): a run that reached a plan, with every
  requirement's outcome (``run.status`` complete, partial, stopped, interrupted or inconclusive);
* an *unfinished* report (``report.builder.unfinished_report``): no results at all, only who was
  being certified and why there is nothing to show (``run.status`` running -- written the moment a
  run starts, so an earlier report at the path can never stand in for this run, and left behind if
  the CLI is killed -- or broken, or interrupted before a plan existed). It can never certify: its
  certification is fixed to "not certified" by the schema, and ``report.verify.check_claim``
  refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from ..contract.errors import RunlaneError
from ..run.outcomes import RunStatus

__all__ = [
    "LEVELS",
    "REPORT_SCHEMA",
    "REPORT_VERSION",
    "RESULT_STATUSES",
    "UNFINISHED_STATUSES",
    "ReportError",
    "is_unfinished",
    "validate_report",
]

#: 4: ``run.status`` may be ``running`` or ``broken``, in an unfinished report (no results).
#: 5: ``inconclusive`` outcomes, counts and run status; ``certification.inconclusive``; per-search
#: ``requirements[].evidence``.
#: 6: ``environment.isolation``, where the driver's code ran (``process`` or ``none``).
#: 7: ``requirements[].failures[].witness``, a failed history check's findings as data.
#: 8: the witness's real-time context: ``realtime`` edges per finding, ``realtime_cycle``, and ``pwr``
#: and ``rt`` edge kinds (``report_witness.WITNESS_SCHEMA``, copied here).
REPORT_VERSION = 8
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

#: The schema every report is validated against (``report/schema.json``).
REPORT_SCHEMA: dict[str, Any] = json.loads(files(__package__).joinpath("schema.json").read_text("utf-8"))

_FORMATS = Draft202012Validator.FORMAT_CHECKER
_VALIDATOR = Draft202012Validator(REPORT_SCHEMA, format_checker=_FORMATS)
# Each shape on its own, so an invalid document is told what is wrong with the shape it tried to be.
_RESULTS_VALIDATOR = Draft202012Validator(REPORT_SCHEMA["$defs"]["results"], format_checker=_FORMATS)
_UNFINISHED_VALIDATOR = Draft202012Validator(REPORT_SCHEMA["$defs"]["unfinished"], format_checker=_FORMATS)


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
