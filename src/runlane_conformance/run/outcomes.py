"""The words a run's results are told in: how a check, a requirement and a run ended, and the two
errors that stop a run before it has results.

These are the bottom of ``run/``: plain enums and exceptions that import nothing from it, so the
model (``run.model``), the plan (``run.plan``) and the certification (``run.certification``) can all
use them without importing one another in a circle.
"""

from __future__ import annotations

from enum import StrEnum

from ..contract.errors import RunlaneError

__all__ = [
    "ExpectationResult",
    "Outcome",
    "RequirementOutcome",
    "RunBrokenError",
    "RunStatus",
    "RunUsageError",
]


class RunUsageError(RunlaneError, ValueError):
    """The run was asked for something impossible (unknown area or requirement, bad worker count).

    The message is one line for the user; the CLI exits 2 on it.
    """


class RunBrokenError(RunlaneError, RuntimeError):
    """The run could not be carried out at all (the suites did not collect, nothing was collected).

    This says nothing about the driver; ``output`` holds pytest's text for diagnosis.
    """

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class Outcome(StrEnum):
    """How one check (one pytest test) ended, after judging.

    ``gated`` is the only kind of skip there is: our own profile gating, matching
    what the preflight probe predicted. Every other skip, xfail or exit is ``failed``.
    ``inconclusive``: the check could not finish inside its deadline (the
    supervisor's, or its own guard's) and found nothing wrong before it stopped:
    no evidence either way, so neither a pass nor a failure.
    """

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    GATED = "gated"
    NOT_RUN = "not_run"
    INCONCLUSIVE = "inconclusive"


class RequirementOutcome(StrEnum):
    """What one requirement came to across all of its checks.

    ``inconclusive``: no check failed, but at least one could not finish in time; the requirement is
    neither met nor broken, so it denies certification without counting as a failure.
    """

    PASSED = "passed"
    FAILED = "failed"
    GATED = "gated"
    NOT_RUN = "not_run"
    INCONCLUSIVE = "inconclusive"

    @property
    def acceptable(self) -> bool:
        """Whether this outcome lets a MUST requirement certify (passed, or not applicable)."""
        return self in (RequirementOutcome.PASSED, RequirementOutcome.GATED)


class RunStatus(StrEnum):
    """``complete``: every required check was planned; ``partial``: restricted by area or
    requirement; ``stopped``: ended early on purpose after ``--maxfail`` failed checks (``-x``);
    ``interrupted``: stopped before the end (Ctrl-C); ``inconclusive``: every required check ran and
    none failed, but at least one could not finish inside its deadline, so there is no verdict.
    Only complete runs certify.

    Two more describe a report that holds no results: ``running`` is what the CLI writes at the
    report and JUnit paths the moment a run starts (so an earlier file there can never pass for
    this run's, and a CLI killed outright leaves that marker behind), and ``broken`` is what it
    leaves when the run ended without a verdict (the driver could not be loaded, the run itself
    broke). An interrupted run that had no plan yet leaves ``interrupted`` in the same form."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    INCONCLUSIVE = "inconclusive"
    RUNNING = "running"
    BROKEN = "broken"

    @property
    def has_results(self) -> bool:
        """Whether a run that ends with this status can have judged checks (a plan existed)."""
        return self not in (RunStatus.RUNNING, RunStatus.BROKEN)


class ExpectationResult(StrEnum):
    """How a requirement declared as an expected failure (``--expect-fail``) came out."""

    #: It failed (or did not run), as declared: a known failure. It still denies certification.
    FAILED_AS_EXPECTED = "failed as expected"
    #: It passed: the declaration is stale and should be removed; the run is not clean.
    PASSED_UNEXPECTEDLY = "passed unexpectedly"
    #: The driver's profile gated it off, so there was nothing to fail.
    GATED = "gated"
