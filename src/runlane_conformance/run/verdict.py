"""The verdict: raw check results -> judged checks -> requirement outcomes -> certification.

One function, ``certify``, decides certification from requirement outcomes
and the catalogue; the run uses it, and ``badge`` uses it again on a report's
own content, so a report whose claim does not follow from its outcomes is
caught. Judging is conservative everywhere: a check that did not run, ran
out of time, took its process down, or skipped for any reason but our own
profile gating (as the plan predicted it) fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..catalogue import AREAS, Requirement, RequirementLevel
from ..contract.values import StorageIndexConsistency
from ..fixtures.gating import NO_SETTLE_REASON, ProfileFacts
from ..in_words import in_words
from .certification import LEVEL_CAPABILITIES, Certification, Verdict, certify, decide_verdict, level_for
from .model import (
    INCONCLUSIVE_HINT,
    INCONCLUSIVE_PROPERTY,
    CheckResult,
    Outcome,
    RequirementOutcome,
    RequirementResult,
    RunResult,
)
from .plan import Plan, PlannedCheck, area_of
from .raw import RawCheck

__all__ = [
    "INCONCLUSIVE_HINT",
    "LEVEL_CAPABILITIES",
    "Certification",
    "Verdict",
    "certification_of",
    "certify",
    "decide_verdict",
    "fold_requirements",
    "judge_check",
    "level_for",
    "unfinished_check",
]

_BLOB = re.compile(r"@reproduce_failure\([^()]*\)")


def certification_of(result: RunResult) -> Certification:
    """``certify`` applied to a run's own requirement results (``RunResult.certification``)."""
    return result.certification


def _blob(longrepr: str | None) -> str | None:
    if not longrepr:
        return None
    match = _BLOB.search(longrepr)
    return match.group() if match else None


#: Why a check that needed caught-up indexes ended without a verdict, and how to get one.
UNSETTLED_MESSAGE = (
    "inconclusive: the driver's indexes are eventual and its store handle offers no settle(timeout=...) "
    "hook, so this check could not tell a slow index from a wrong one; add the hook to the harness's "
    "store handle (docs/writing-a-driver.md) to get a verdict"
)


def judge_check(raw: RawCheck, plan: Plan, facts: ProfileFacts) -> CheckResult:
    """The outcome of one finished check, measured against the plan.

    A skip is accepted (as ``gated``) only when it carries exactly the reason the
    plan predicted for its requirement: every gate is the plan's, none a check body's.
    A gated requirement's check that *ran* means the
    driver showed the checks a different profile than the probe: a failure.
    """
    rid = raw.requirement_id
    predicted = plan.predicted_skip(raw.nodeid, rid)
    outcome, message, full_message = Outcome.PASSED, raw.message, None
    inconclusive = next((value for key, value in raw.properties if key == INCONCLUSIVE_PROPERTY), None)
    if raw.status == "failed" and inconclusive is not None:
        # The check's own guard stopped it before it could finish, with nothing found: no verdict.
        outcome, message, full_message = Outcome.INCONCLUSIVE, str(inconclusive), str(inconclusive)
    elif raw.status == "failed":
        outcome, full_message = Outcome.FAILED, raw.full_message
    elif raw.status == "error":
        outcome, full_message = Outcome.ERROR, raw.full_message
    elif raw.status == "skipped":
        reason = raw.skip_reason or "skipped"
        if predicted is not None and reason == predicted:
            outcome, message = Outcome.GATED, reason
        elif reason == NO_SETTLE_REASON and (
            facts.profile.index_consistency is StorageIndexConsistency.EVENTUAL
        ):
            # The check had to compare index pages with what it wrote, and nothing could tell it when
            # the driver's eventual indexes had caught up: neither met nor broken.
            outcome = Outcome.INCONCLUSIVE
            message = full_message = UNSETTLED_MESSAGE
        elif reason.startswith("profile:"):
            outcome = Outcome.FAILED
            message = f"skipped ({reason!r}) although the preflight probe found the driver's profile " + (
                f"gates it differently ({predicted!r})" if predicted else "offers what it needs"
            )
        else:
            outcome = Outcome.FAILED
            message = f"skipped ({reason!r}): only the driver's profile may skip a check"
    elif raw.status == "xfailed":
        outcome, message = Outcome.FAILED, f"the check raised pytest.xfail({raw.skip_reason!r})"
    elif raw.status == "xpassed":
        outcome, message = Outcome.FAILED, f"the check was marked xfail ({raw.skip_reason!r})"
    elif predicted is not None:
        outcome = Outcome.FAILED
        message = (
            f"the check ran although the preflight probe's profile gates it off ({predicted!r}): "
            "the driver advertised a different profile to the checks than to the probe"
        )
    # What a person reads of a failure names keys and sort values in words, not in their hex encoding.
    return CheckResult(
        nodeid=raw.nodeid,
        requirement_id=rid,
        area=area_of(raw.nodeid, rid),
        outcome=outcome,
        duration=raw.duration,
        message=None if message is None else in_words(message),
        longrepr=None if raw.longrepr is None else in_words(raw.longrepr),
        hypothesis_blob=_blob(raw.longrepr),
        properties=tuple(raw.properties),
        full_message=None if full_message is None else in_words(full_message),
    )


def unfinished_check(
    check: PlannedCheck,
    message: str,
    *,
    duration: float = 0.0,
    stack: str | None = None,
    outcome: Outcome = Outcome.FAILED,
) -> CheckResult:
    """A planned check that never reported its end: it crashed, hung, or never started.

    ``outcome`` is ``failed`` for a crash, ``not_run`` for a check that never started and
    ``inconclusive`` for one the supervisor stopped at its deadline."""
    longrepr = message if stack is None else f"{message}\n\n{stack}"
    return CheckResult(
        nodeid=check.nodeid,
        requirement_id=check.requirement_id,
        area=check.area,
        outcome=outcome,
        duration=duration,
        message=message,
        longrepr=longrepr,
        stack=stack,
    )


def fold_requirements(
    plan: Plan, checks: Iterable[CheckResult], expected: Mapping[str, str] | None = None
) -> tuple[RequirementResult, ...]:
    """One result per planned requirement (plus any check whose requirement is not catalogued).

    A requirement fails if any check failed, errored or did not run; is inconclusive
    if none did but one could not finish in time; is gated if every check was gated;
    passes otherwise. A requirement with no collected check
    did not run, which is a failure for certification. ``expected`` (requirement id
    -> reason, from ``--expect-fail``) is attached to the results it names and
    changes no outcome: a known failure denies certification like any other.
    """
    expected = expected or {}
    grouped: dict[str, list[CheckResult]] = {rid: [] for rid in plan.requirements}
    for check in checks:
        key = check.requirement_id or f"{check.area}.{_slug(check.name)}"
        grouped.setdefault(key, []).append(check)
    results = []
    for rid, members in grouped.items():
        requirement = plan.requirements.get(rid) or Requirement(
            rid, RequirementLevel.MUST, clause="", summary="(not in the requirement catalogue)"
        )
        failures = [t for t in members if t.failed]
        unfinished = [t for t in members if t.inconclusive]
        reason: str | None
        if not members:
            outcome, reason = RequirementOutcome.NOT_RUN, "did not run: no check of it was collected"
        elif unfinished and not failures:
            # Nothing failed, but a check could not finish in time: neither met nor broken.
            outcome, reason = RequirementOutcome.INCONCLUSIVE, unfinished[0].message
        elif failures:
            first = failures[0]
            not_run = all(t.outcome is Outcome.NOT_RUN for t in failures)
            outcome = RequirementOutcome.NOT_RUN if not_run else RequirementOutcome.FAILED
            reason = first.message
        elif all(t.outcome is Outcome.GATED for t in members):
            outcome, reason = RequirementOutcome.GATED, members[0].message
        else:
            outcome, reason = RequirementOutcome.PASSED, None
        results.append(
            RequirementResult(requirement, outcome, reason, tuple(members), expected=expected.get(rid))
        )
    order = {area: index for index, area in enumerate(AREAS)}
    results.sort(key=lambda r: (order.get(r.area, len(order)), r.area, r.id))
    return tuple(results)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unnamed"


def limit_problems(checks: Iterable[CheckResult], facts: ProfileFacts) -> list[str]:
    """Limits the checks measured at another boundary than the probe's profile advertised.

    The limits checks build their work from the profile *they* see and record the
    boundary they exercised. If that is not the advertised value, the driver showed
    the checks and the probe different profiles, and the run's limits evidence would
    describe a driver nobody certified: a run-level problem, which denies certification.
    """
    import json

    from ..fixtures.evidence import LIMIT_PROPERTY

    seen: dict[str, set[int]] = {}
    for check in checks:
        for key, value in check.properties:
            if key != LIMIT_PROPERTY:
                continue
            try:
                data = json.loads(value)
                name = str(data["limit"])
                accepted, rejected = data.get("accepted"), data.get("rejected")
            except (ValueError, TypeError, KeyError):
                continue
            if isinstance(accepted, int):
                seen.setdefault(name, set()).add(accepted)
            if isinstance(rejected, int):
                seen.setdefault(name, set()).add(rejected - 1)
    problems = []
    for name, boundaries in sorted(seen.items()):
        advertised = getattr(facts.profile.limits, name, None)
        if boundaries != {advertised}:
            problems.append(
                f"the limits checks exercised {name} at {sorted(boundaries)}, but the driver advertised "
                f"{advertised} to the preflight probe: it shows different profiles to different callers"
            )
    return problems
