"""Certification and the run's verdict, each decided in exactly one place.

``certify`` decides certification from requirement outcomes and the catalogue; the run uses it
(``RunResult.certification``) and ``badge`` uses it again on a report's own content
(``report.verify``), so a report whose claim does not follow from its outcomes is caught.

``decide_verdict`` turns a run's status, certification and findings into one ``Verdict``. Every
consumer reads that value (``RunResult.verdict``, decided once per result): the CLI's exit code is a
table lookup on it (``cli.common.EXIT_CODES``), the console's headline is chosen by it
(``cli.verdict_view``), and the report's claim is the ``Certification`` it was decided from, which
``badge`` and JUnit render. Nothing else re-derives a verdict from the raw results or the status.

This module imports only ``run.outcomes`` and the requirement catalogue's types, so the model can
use it without a cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ..catalogue import Requirement, RequirementLevel
from .outcomes import RequirementOutcome, RunStatus

__all__ = [
    "LEVEL_CAPABILITIES",
    "Certification",
    "Verdict",
    "certify",
    "decide_verdict",
    "level_for",
]


#: Optional capabilities that raise the certification level, with their label. ``faults`` is the
#: harness offering a fault mechanism: a driver certified without one never had a broken connection
#: tested, so its level must not read like one whose faults checks passed (docs/faults.md).
LEVEL_CAPABILITIES: tuple[tuple[str, str], ...] = (
    ("append", "append"),
    ("exclusive_candidates", "exclusive"),
    ("faults", "faults"),
)


@dataclass(frozen=True)
class Certification:
    """Whether the outcomes certify, at which level, and the requirements that stand in the way."""

    certified: bool
    level: str
    must_failed: tuple[str, ...]
    should_failed: tuple[str, ...]
    #: Requirements (MUST or SHOULD) a check of which could not finish in time: no verdict on them.
    inconclusive: tuple[str, ...] = ()


def level_for(offered: Collection[str]) -> str:
    """``core`` plus each level-raising capability in ``offered``."""
    return "+".join(["core", *(label for name, label in LEVEL_CAPABILITIES if name in offered)])


def certify(
    outcomes: Mapping[str, RequirementOutcome],
    catalog: Mapping[str, Requirement],
    offered: Collection[str],
    *,
    status: RunStatus,
    problems: Collection[str] = (),
) -> Certification:
    """Certify when the run is complete, had no run-level problem, and every catalogued MUST
    requirement passed or was gated off by the profile. A catalogued requirement missing from
    ``outcomes`` counts as not run. The level is ``core`` plus each optional capability offered
    (an offered capability's requirements are MUSTs, so they all passed)."""
    must_failed: list[str] = []
    should_failed: list[str] = []
    inconclusive: list[str] = []
    for rid, requirement in sorted(catalog.items()):
        outcome = outcomes.get(rid, RequirementOutcome.NOT_RUN)
        if outcome.acceptable:
            continue
        if outcome is RequirementOutcome.INCONCLUSIVE:
            inconclusive.append(rid)
            continue
        (must_failed if requirement.level is RequirementLevel.MUST else should_failed).append(rid)
    # Outcomes for ids outside the catalogue cannot vouch for anything; failing ones still deny.
    for rid, outcome in sorted(outcomes.items()):
        if rid not in catalog and not outcome.acceptable:
            must_failed.append(rid)
    certified = (
        status is RunStatus.COMPLETE
        and not problems
        and not must_failed
        and not inconclusive
        and any(outcome is RequirementOutcome.PASSED for outcome in outcomes.values())
    )
    return Certification(
        certified=certified,
        level=level_for(offered) if certified else "none",
        must_failed=tuple(must_failed),
        should_failed=tuple(should_failed),
        inconclusive=tuple(inconclusive),
    )


class Verdict(StrEnum):
    """What a run that reached a plan came to, in the terms its exit code and headline need.

    A partial run (restricted by ``--area`` or ``--requirement``) is never a certification, so it has
    its own three verdicts. ``not_clean``: a declared known failure passed, so the declaration is
    stale (like pytest's strict xfail) whatever else the run showed.
    """

    CERTIFIED = "certified"
    #: Certified (every MUST passed or was gated), but a SHOULD requirement failed: the report and the
    #: badge say certified, the exit code says a requirement failed.
    CERTIFIED_SHOULD_FAILED = "certified_should_failed"
    NOT_CERTIFIED = "not_certified"
    INCONCLUSIVE = "inconclusive"
    PARTIAL_PASSED = "partial_passed"
    PARTIAL_FAILED = "partial_failed"
    PARTIAL_INCONCLUSIVE = "partial_inconclusive"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    NOT_CLEAN = "not_clean"


def decide_verdict(
    status: RunStatus,
    certification: Certification,
    *,
    failed: bool,
    inconclusive: bool,
    problems: bool,
    stale_expectations: bool,
) -> Verdict:
    """The one place a run's verdict is decided, from (in this order of precedence) how it ended,
    stale ``--expect-fail`` declarations, failed or unrun requirements and run problems,
    requirements that could not finish in time, and finally the certification itself.

    ``failed``: some requirement (MUST or SHOULD) failed or did not run; ``inconclusive``: some
    requirement could not finish in time; ``problems``: the run recorded a run-level problem. Nothing
    failed but something was inconclusive is never a failure: it has no verdict, partial run or not.
    A failure the certification still allows (a SHOULD) is ``CERTIFIED_SHOULD_FAILED``, so the verdict
    never contradicts the certification the report claims.

    ``stale_expectations=False`` gives what the checks alone came to, which is what a ``NOT_CLEAN``
    run's headline says before it names the stale declarations (``RunResult.checks_verdict``).
    """
    partial = status is RunStatus.PARTIAL
    if status is RunStatus.INTERRUPTED:
        return Verdict.INTERRUPTED
    if status is RunStatus.STOPPED:
        return Verdict.STOPPED
    if stale_expectations:
        return Verdict.NOT_CLEAN
    if failed or problems:
        if partial:
            return Verdict.PARTIAL_FAILED
        return Verdict.CERTIFIED_SHOULD_FAILED if certification.certified else Verdict.NOT_CERTIFIED
    if inconclusive:
        return Verdict.PARTIAL_INCONCLUSIVE if partial else Verdict.INCONCLUSIVE
    if partial:
        return Verdict.PARTIAL_PASSED
    return Verdict.CERTIFIED if certification.certified else Verdict.NOT_CERTIFIED
