"""The values a run produces: check results, requirement results, and the run as a whole.

These are plain frozen data. Judging (which outcome a check or requirement
gets) lives in ``verdict``; running lives in ``supervise``; these types only
carry the result and derive read-only views (summaries, reproduce lines).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from ..catalogue import AREAS, Requirement, RequirementLevel
from ..contract.values import StorageProfile
from ..fixtures.defaults import DEFAULT_EXAMPLES
from ..fixtures.driver_frame import path_from_here, pytest_launcher
from ..fixtures.evidence import EVIDENCE_PROPERTY, INCONCLUSIVE_HINT, INCONCLUSIVE_PROPERTY
from ..fixtures.gating import ProfileFacts
from ..harness import DriverInfo
from ..protocol.isolation import DEFAULT_ISOLATION
from ..safe_text import redact_options, redact_text, secret_values
from .certification import Certification, Verdict, certify, decide_verdict
from .outcomes import (
    ExpectationResult,
    Outcome,
    RequirementOutcome,
    RunBrokenError,
    RunStatus,
    RunUsageError,
)

__all__ = [
    "DRIVER_FRAME_PROPERTY",
    "EVIDENCE_PROPERTY",
    "INCONCLUSIVE_HINT",
    "INCONCLUSIVE_PROPERTY",
    "REPRODUCE_PROPERTY",
    "SHRINK_NOTE_PROPERTY",
    "AreaSummary",
    "Certification",
    "CheckResult",
    "ExpectationResult",
    "Outcome",
    "RequirementOutcome",
    "RequirementResult",
    "RunBrokenError",
    "RunEnvironment",
    "RunResult",
    "RunStatus",
    "RunUsageError",
    "Verdict",
    "redact_options",
]


#: The user property a failing check's report carries naming the innermost frame of the driver's own
#: code the failure escaped from (``file:line in function``), set by the pytest plugin.
DRIVER_FRAME_PROPERTY = "runlane_driver_frame"
#: The user property a failing check's report carries with the pytest command that replays it.
REPRODUCE_PROPERTY = "runlane_reproduce"
#: The user property saying a failure was reported before shrinking finished (its budget ran out).
SHRINK_NOTE_PROPERTY = "runlane_shrink_note"


@dataclass(frozen=True)
class CheckResult:
    """One check as it ran: where it lives, which rule it enforces, and how it ended.

    ``message`` is one line (the gating reason, the exception, or what ended the
    process); ``full_message`` every line of it (the state, return values and
    history a suite put in its message); ``longrepr`` the full failure text
    (the traceback); ``stack`` the stuck threads' stacks when the check ran out
    of time or its process died; ``properties`` what the check recorded (e.g. the
    limit boundary values it exercised, the driver frame a failure came from).
    """

    __test__ = False  # not a pytest test class, despite the module using "check"

    nodeid: str
    requirement_id: str | None
    area: str
    outcome: Outcome
    duration: float
    message: str | None = None
    longrepr: str | None = None
    hypothesis_blob: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    stack: str | None = None
    full_message: str | None = None

    @property
    def name(self) -> str:
        """The test's own name with its parameter ids, e.g. ``test_x[limits.max-point-reads]``."""
        return self.nodeid.rpartition("::")[2]

    @property
    def failed(self) -> bool:
        """True for every end that breaks the check's requirement (failure, error, did not run)."""
        return self.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.NOT_RUN)

    @property
    def inconclusive(self) -> bool:
        """True when the check could not finish in time and found nothing: no evidence either way."""
        return self.outcome is Outcome.INCONCLUSIVE

    @property
    def evidence(self) -> Mapping[str, int] | None:
        """What a search recorded it ran (``examples``, ``steps``), when it recorded it."""
        import json

        text = self.recorded(EVIDENCE_PROPERTY)
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        return {str(k): int(v) for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}

    def recorded(self, key: str) -> str | None:
        """The first value recorded under ``key`` for the check, if any (a check's own record comes
        before what a plugin adds when the report is made)."""
        return next((value for name, value in self.properties if name == key), None)

    @property
    def driver_frame(self) -> str | None:
        """Where in the driver's own code the failure escaped (``file:line in function``), when known."""
        return self.recorded(DRIVER_FRAME_PROPERTY) or None

    @property
    def shrink_note(self) -> str | None:
        """Why the example shown may not be the smallest (shrinking ran out of time), when it is so."""
        return self.recorded(SHRINK_NOTE_PROPERTY)

    @property
    def text(self) -> str:
        """The failure's whole message (every line), or its one-line message, or ``failed``."""
        return self.full_message or self.message or "failed"


#: The former name of ``CheckResult``.
TestResult = CheckResult


@dataclass(frozen=True)
class RequirementResult:
    """The verdict on one requirement, folded from all of its checks.

    ``expected`` is the reason given when the run declared the requirement an expected
    failure. It never changes ``outcome``: a known failure is still a failure for
    certification; it only changes how the failure is presented.
    """

    requirement: Requirement
    outcome: RequirementOutcome
    reason: str | None
    tests: tuple[CheckResult, ...]
    expected: str | None = None

    @property
    def id(self) -> str:
        return self.requirement.id

    @property
    def area(self) -> str:
        return self.requirement.area

    @property
    def level(self) -> RequirementLevel:
        return self.requirement.level

    @property
    def duration(self) -> float:
        return sum(test.duration for test in self.tests)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The checks that deny this requirement: failed ones, and those that could not finish in time."""
        return tuple(test for test in self.tests if test.failed or test.inconclusive)

    @property
    def expectation(self) -> ExpectationResult | None:
        """How a declared expected failure came out (``None`` when none was declared)."""
        if self.expected is None:
            return None
        if self.outcome is RequirementOutcome.PASSED:
            return ExpectationResult.PASSED_UNEXPECTEDLY
        if self.outcome is RequirementOutcome.GATED:
            return ExpectationResult.GATED
        return ExpectationResult.FAILED_AS_EXPECTED

    @property
    def known_failure(self) -> bool:
        """Failed (or did not run) as the run declared it would."""
        return self.expectation is ExpectationResult.FAILED_AS_EXPECTED


@dataclass(frozen=True)
class AreaSummary:
    """Counts for one contract area, by requirement and by check."""

    area: str
    passed: int
    failed: int
    gated: int
    not_run: int
    tests_passed: int
    tests_failed: int
    tests_gated: int
    duration: float
    gate_reasons: tuple[tuple[str, int], ...]
    inconclusive: int = 0
    tests_inconclusive: int = 0

    @property
    def skipped(self) -> int:
        """Requirements gated off by the profile (the only legitimate skip)."""
        return self.gated

    @property
    def tests_skipped(self) -> int:
        return self.tests_gated

    @property
    def skip_reasons(self) -> tuple[tuple[str, int], ...]:
        return self.gate_reasons


@dataclass(frozen=True)
class RunEnvironment:
    """What judged the driver: versions, the digest of the suite files, the pytest plugins loaded."""

    toolkit_version: str
    python_version: str
    pytest_version: str
    hypothesis_version: str
    suite_digest: str
    plugins: tuple[tuple[str, str], ...]
    supervised: bool
    #: Where the driver's code ran: ``process`` (a backend process of its own, never loaded by the
    #: judge) or ``none`` (next to the checks); see ``protocol.isolation``.
    isolation: str = "none"
    #: With ``isolation`` ``process``: the sandbox the backend ran in (``bubblewrap: ...``), or why
    #: it ran without one (``unavailable: REASON``); ``None`` when the driver was not isolated.
    sandbox: str | None = None
    #: The network the sandbox gave the backend (``none`` or ``host``), for the reproduce line.
    sandbox_network: str = "none"


@dataclass(frozen=True)
class RunResult:
    """Everything one run established, in a form the report, JUnit and badge are built from."""

    driver: str
    options: Mapping[str, str]
    driver_info: DriverInfo | None
    facts: ProfileFacts
    seed: int
    hypothesis_profile: str
    areas: tuple[str, ...]
    requirement_filter: tuple[str, ...]
    workers: int
    started_at: datetime
    duration: float
    tests: tuple[CheckResult, ...]
    requirements: tuple[RequirementResult, ...]
    status: RunStatus
    check_timeout: float
    environment: RunEnvironment
    target: str
    problems: tuple[str, ...] = ()
    max_failures: int | None = None
    output: str = field(repr=False, default="")
    #: The example database directory the checks saved failures to (absolute), ``None`` when none.
    examples: str | None = None

    @property
    def profile(self) -> StorageProfile:
        """The profile the driver advertised to the preflight probe (gating was planned from it)."""
        return self.facts.profile

    @property
    def complete(self) -> bool:
        """True when the run covered the whole catalogue and was not interrupted."""
        return self.status is RunStatus.COMPLETE

    @property
    def failed_requirements(self) -> tuple[RequirementResult, ...]:
        """Requirements that failed or did not run (an inconclusive one is neither)."""
        return tuple(
            r
            for r in self.requirements
            if not r.outcome.acceptable and r.outcome is not RequirementOutcome.INCONCLUSIVE
        )

    @property
    def inconclusive_requirements(self) -> tuple[RequirementResult, ...]:
        """Requirements with a check that could not finish in time and no failing check."""
        return tuple(r for r in self.requirements if r.outcome is RequirementOutcome.INCONCLUSIVE)

    @property
    def unexpected_passes(self) -> tuple[RequirementResult, ...]:
        """Requirements declared as expected failures that passed (their declaration is stale)."""
        return tuple(r for r in self.requirements if r.expectation is ExpectationResult.PASSED_UNEXPECTEDLY)

    @property
    def must_failures(self) -> tuple[RequirementResult, ...]:
        return tuple(r for r in self.failed_requirements if r.level is RequirementLevel.MUST)

    @cached_property
    def certification(self) -> Certification:
        """``certification.certify`` applied to this run's own requirement results (once: the report's
        claim and the verdict are the same value)."""
        catalog = {r.id: r.requirement for r in self.requirements}
        outcomes = {r.id: r.outcome for r in self.requirements}
        return certify(outcomes, catalog, self.facts.offered(), status=self.status, problems=self.problems)

    @property
    def certified(self) -> bool:
        """The certification (see ``certification.certify``): complete, no problems, every MUST
        passed or gated."""
        return self.certification.certified

    @property
    def level(self) -> str:
        """``none`` unless certified; otherwise ``core`` plus each optional capability offered."""
        return self.certification.level

    @cached_property
    def verdict(self) -> Verdict:
        """What the run came to, decided once (``certification.decide_verdict``) for every view: the
        exit code, the headline and (through ``certification``) the report, JUnit and badge."""
        return self._decide(stale_expectations=bool(self.unexpected_passes))

    @cached_property
    def checks_verdict(self) -> Verdict:
        """What the checks alone came to: ``verdict`` with stale ``--expect-fail`` declarations set
        aside. It differs from ``verdict`` only when that is ``NOT_CLEAN``, whose headline says it first."""
        return self._decide(stale_expectations=False)

    def _decide(self, *, stale_expectations: bool) -> Verdict:
        return decide_verdict(
            self.status,
            self.certification,
            failed=bool(self.failed_requirements),
            inconclusive=bool(self.inconclusive_requirements),
            problems=bool(self.problems),
            stale_expectations=stale_expectations,
        )

    @property
    def checks_required(self) -> int:
        """Checks the plan asked for (gated ones included: they must skip exactly as predicted)."""
        return len(self.tests)

    def area_summaries(self) -> tuple[AreaSummary, ...]:
        """One summary per area that had requirements, in catalogue order."""
        order = {area: index for index, area in enumerate(AREAS)}
        areas = sorted(
            {r.area for r in self.requirements} | {t.area for t in self.tests},
            key=lambda a: (order.get(a, len(order)), a),
        )
        summaries = []
        for area in areas:
            reqs = [r for r in self.requirements if r.area == area]
            tests = [t for t in self.tests if t.area == area]
            reasons = Counter(r.reason or "" for r in reqs if r.outcome is RequirementOutcome.GATED)
            summaries.append(
                AreaSummary(
                    area=area,
                    passed=sum(r.outcome is RequirementOutcome.PASSED for r in reqs),
                    failed=sum(r.outcome is RequirementOutcome.FAILED for r in reqs),
                    gated=sum(r.outcome is RequirementOutcome.GATED for r in reqs),
                    not_run=sum(r.outcome is RequirementOutcome.NOT_RUN for r in reqs),
                    tests_passed=sum(t.outcome is Outcome.PASSED for t in tests),
                    tests_failed=sum(t.failed for t in tests),
                    tests_gated=sum(t.outcome is Outcome.GATED for t in tests),
                    duration=sum(t.duration for t in tests),
                    gate_reasons=tuple(sorted(reasons.items())),
                    inconclusive=sum(r.outcome is RequirementOutcome.INCONCLUSIVE for r in reqs),
                    tests_inconclusive=sum(t.inconclusive for t in tests),
                )
            )
        return tuple(summaries)

    def requirement(self, requirement_id: str) -> RequirementResult:
        """The verdict on one requirement; ``KeyError`` if it was not part of the run."""
        for result in self.requirements:
            if result.id == requirement_id:
                return result
        raise KeyError(requirement_id)

    def _options(self, redact: bool) -> Mapping[str, str]:
        return redact_options(self.options) if redact else self.options

    def reproduce_command(self, test: CheckResult, *, redact: bool = False) -> str:
        """The ``runlane-certify`` line that replays ``test``'s requirement (every check of it) with
        this run's seed; a check with no requirement id is replayed by its area.

        ``redact`` hides the values of secret-looking driver options (for files that get shared).
        """
        words = ["runlane-certify", "run", "--driver", self.driver]
        for key, value in self._options(redact).items():
            words += ["--option", f"{key}={value}"]
        scope = ["--requirement", test.requirement_id] if test.requirement_id else ["--area", test.area]
        words += [*scope, "--profile", self.hypothesis_profile, "--seed", str(self.seed)]
        if self.environment.isolation != DEFAULT_ISOLATION.value:
            words += ["--isolation", self.environment.isolation]
        if self.environment.sandbox_network != "none":
            words += ["--sandbox-network", self.environment.sandbox_network]
        # Run from the same directory, the default database is this run's: the line replays its saved
        # failure. Another database is named, so the replay reads the one this run filled.
        if self.examples is not None and Path(self.examples) != Path.cwd() / DEFAULT_EXAMPLES:
            words += ["--examples", path_from_here(self.examples)]
        return shlex.join(words)

    def reproduce_pytest(self, test: CheckResult, *, redact: bool = False) -> str:
        """The plain pytest line that replays ``test``'s requirement with this run's seed and example
        database: the one the plugin recorded on the check (``runlane_reproduce``) when it did, else
        one of the same shape built here (``-k`` only for a check without a requirement id)."""
        recorded = test.recorded(REPRODUCE_PROPERTY)
        if recorded:
            return redact_text(recorded, secret_values(self.options)) if redact else recorded
        # The plugin's own shape: a requirement's checks rerun by ``--runlane-requirement`` (over the
        # suites package, or the test file a driver pulled them into); only a check without one by name.
        target = _suite_target_for(test.nodeid)
        if test.requirement_id is not None and target[:1] == ["--pyargs"]:
            target = ["--pyargs", "runlane_conformance.suites"]
        words = [*pytest_launcher(self.driver), *target, "--runlane-driver", self.driver]
        for key, value in self._options(redact).items():
            words += ["--runlane-option", f"{key}={value}"]
        words += ["--runlane-hypothesis-profile", self.hypothesis_profile]
        if self.environment.isolation == "process" and self.driver != "process":
            words += ["--runlane-isolation", "process"]
        if test.requirement_id is not None:
            words += ["--runlane-requirement", test.requirement_id]
        words.append(f"--hypothesis-seed={self.seed}")
        if test.requirement_id is None:
            words += ["-k", test.name]
        if self.examples is not None:
            words += ["--runlane-examples", path_from_here(self.examples)]
        return shlex.join(words)


def _suite_target_for(nodeid: str) -> list[str]:
    path = nodeid.partition("::")[0]
    marker = "runlane_conformance/suites/"
    if marker in path:
        module = path[path.index(marker) :].removesuffix(".py").replace("/", ".")
        return ["--pyargs", module]
    return [path]
