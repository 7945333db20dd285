"""The programmatic way to run a certification: a thin facade over ``runlane_conformance.run``.

A run's data flows one way: the CLI parses, ``run/`` plans, supervises and
judges (``run.certify``, ``run.probe``, ``run.plan``, ``run.supervise``,
``run.verdict``), and ``cli/`` presents the result. Nothing in ``run/`` imports
this module; it exists so that callers outside the toolkit (and its own tests)
have one stable place to import ``certify_driver``, ``run_suites`` and the
values they return, while the implementation stays free to move inside
``run/``.
"""

from __future__ import annotations

from .run.certify import (
    CHECK_BUDGET_SECONDS,
    HYPOTHESIS_PROFILES,
    SUITE_ARGS,
    AreaSummary,
    CheckResult,
    CheckShrinking,
    CheckStarted,
    CollectionFinished,
    Outcome,
    RequirementOutcome,
    RequirementResult,
    RunBrokenError,
    RunEvent,
    RunListener,
    RunResult,
    RunStatus,
    RunUsageError,
    TestFinished,
    TestResult,
    certify_driver,
    check_budget,
    redact_options,
    run_suites,
)
from .run.probe import probe_driver, probe_facts

__all__ = [
    "CHECK_BUDGET_SECONDS",
    "HYPOTHESIS_PROFILES",
    "SUITE_ARGS",
    "AreaSummary",
    "CheckResult",
    "CheckShrinking",
    "CheckStarted",
    "CollectionFinished",
    "Outcome",
    "RequirementOutcome",
    "RequirementResult",
    "RunBrokenError",
    "RunEvent",
    "RunListener",
    "RunResult",
    "RunStatus",
    "RunUsageError",
    "TestFinished",
    "TestResult",
    "certify_driver",
    "check_budget",
    "probe_driver",
    "probe_facts",
    "redact_options",
    "run_suites",
]
