"""The plan: which requirements and checks a run must account for, decided before any check runs.

The catalogue says which requirements exist; ``--area`` / ``--requirement``
narrow it (and make the run partial); the preflight probe's ``ProfileFacts``
decide which requirements are gated off by the profile, with the reason. The
suites' collection then names the checks of each requirement. From here on
every planned check must end with a judged outcome: one that never reports
back is a failure ("did not run"), never a gap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..catalogue import AREAS, Requirement
from ..fixtures.gating import ProfileFacts, check_gate, gating_reason
from ..suggest import REQUIREMENTS_HINT, did_you_mean
from .outcomes import RunUsageError

__all__ = [
    "EXCLUSIVE_AREAS",
    "Plan",
    "PlannedCheck",
    "area_of",
    "build_plan",
    "deadline_for",
    "longest_first",
    "planned_from_event",
    "scope_catalog",
]

_MODULE_AREA = re.compile(r"(?:^|/)test_([a-z_]+)\.py")


@dataclass(frozen=True)
class PlannedCheck:
    """One collected check and the requirement it enforces (``None`` for an untagged test).

    ``declared_timeout`` is the time the check itself says it may need (its
    ``timeout`` marker); ``searches`` whether it is a Hypothesis search. Both only
    shape scheduling and deadlines, never the verdict. ``limit_gates`` names the
    advertised limits at which the check's work cannot be built (``fixtures.limit_gates``).
    """

    nodeid: str
    requirement_id: str | None
    declared_timeout: float | None = None
    searches: bool = False
    limit_gates: tuple[str, ...] = ()

    @property
    def area(self) -> str:
        return area_of(self.nodeid, self.requirement_id)


@dataclass(frozen=True)
class Plan:
    """The requirements in scope, which of them the profile gates off (and why), and their checks.

    ``gated`` holds whole requirements gated by a capability; ``gated_checks`` single checks (by node
    id) whose work the advertised limits make impossible to build. Either way the reason is the plan's.
    """

    requirements: Mapping[str, Requirement]
    gated: Mapping[str, str]
    checks: tuple[PlannedCheck, ...]
    restricted: bool
    gated_checks: Mapping[str, str] = field(default_factory=dict)

    def predicted_skip(self, nodeid: str, requirement_id: str | None) -> str | None:
        """The one skip reason the plan allows for this check, or ``None`` when it must run."""
        if requirement_id and requirement_id in self.gated:
            return self.gated[requirement_id]
        return self.gated_checks.get(nodeid)

    def checks_of(self, requirement_id: str) -> tuple[PlannedCheck, ...]:
        return tuple(check for check in self.checks if check.requirement_id == requirement_id)

    def totals(self) -> dict[str, int]:
        """Checks per area, in catalogue order."""
        totals: dict[str, int] = {}
        for check in self.checks:
            totals[check.area] = totals.get(check.area, 0) + 1
        return totals


def planned_from_event(data: Mapping[str, object]) -> PlannedCheck:
    """A ``PlannedCheck`` from one entry of a child's ``collected`` event."""
    timeout = data.get("declared_timeout")
    gates = data.get("limit_gates")
    return PlannedCheck(
        nodeid=str(data["nodeid"]),
        requirement_id=None if data.get("requirement") is None else str(data["requirement"]),
        declared_timeout=float(timeout) if isinstance(timeout, int | float) else None,
        searches=bool(data.get("property", False)),
        limit_gates=tuple(str(name) for name in gates) if isinstance(gates, list) else (),
    )


def area_of(nodeid: str, requirement_id: str | None) -> str:
    """A check's contract area: from its requirement id, else from its module name."""
    if requirement_id:
        return requirement_id.partition(".")[0]
    match = _MODULE_AREA.search(nodeid.partition("::")[0])
    return match.group(1) if match else "unlabelled"


def scope_catalog(
    catalog: Mapping[str, Requirement], areas: Sequence[str], requirements: Sequence[str]
) -> dict[str, Requirement]:
    """The part of ``catalog`` a run covers; unknown areas or requirement ids are usage errors."""
    unknown_areas = [area for area in areas if area not in AREAS]
    if unknown_areas:
        hint = did_you_mean(unknown_areas[0], AREAS, otherwise=f"areas: {', '.join(AREAS)}")
        raise RunUsageError(f"unknown area {unknown_areas[0]!r}{hint}")
    unknown = [rid for rid in requirements if rid not in catalog]
    if unknown:
        hint = did_you_mean(unknown[0], catalog, otherwise=REQUIREMENTS_HINT)
        raise RunUsageError(f"unknown requirement {unknown[0]!r}{hint}")
    scope = {
        rid: requirement
        for rid, requirement in catalog.items()
        if (not areas or requirement.area in areas) and (not requirements or rid in requirements)
    }
    if not scope and areas and requirements:
        raise RunUsageError(
            "no requirement given with --requirement is in the areas given with --area "
            "(a run covers the requirements that match both)"
        )
    return scope


def build_plan(
    requirements: Mapping[str, Requirement],
    facts: ProfileFacts,
    collected: Iterable[PlannedCheck],
    *,
    restricted: bool,
) -> Plan:
    """The plan for ``facts``: every in-scope requirement, its gating reason if any, and its checks.

    A collected check outside the scope (a restricted run collects only its part)
    is kept: it ran, so it is judged like any other.
    """
    gated = {}
    for rid, requirement in requirements.items():
        if requirement.capability is not None:
            reason = gating_reason(requirement.capability, facts)
            if reason is not None:
                gated[rid] = reason
    checks = tuple(collected)
    gated_checks = {}
    from ..fixtures.limit_gates import core_floor_reason

    floor = core_floor_reason(facts.profile.limits)
    for check in checks:
        if check.requirement_id in gated:
            continue
        # The capability was decided per requirement above; the rest is the plugin's own rule.
        reason = check_gate(
            check.requirement_id,
            None,
            check.limit_gates,
            facts=lambda: facts,
            floor=lambda: floor,
            limits=lambda: facts.profile.limits,
        )
        if reason is not None:
            gated_checks[check.nodeid] = reason
    return Plan(dict(requirements), gated, checks, restricted, gated_checks)


#: Areas whose checks disturb the whole store (``cluster_faults`` kills members of the cluster every
#: store lives on): a parallel run hands them out last, and only while no other check is running
#: anywhere (``run.supervise``), so a kill never lands on another area's check.
EXCLUSIVE_AREAS: frozenset[str] = frozenset({"cluster_faults"})


def longest_first(checks: Sequence[PlannedCheck]) -> list[PlannedCheck]:
    """The order to hand checks out in: those that say they run long, then Hypothesis searches, then
    the rest, each group in collection order, and the checks of ``EXCLUSIVE_AREAS`` after all of
    them. Starting the long ones first is what lets parallel workers finish together instead of
    waiting on one long check handed out last."""
    return sorted(
        checks,
        key=lambda check: (check.area in EXCLUSIVE_AREAS, check.declared_timeout is None, not check.searches),
    )


def deadline_for(check: PlannedCheck, budget: float, *, explicit: bool) -> float:
    """A check's deadline: an explicit ``--check-timeout`` as given; otherwise the profile's budget,
    or the check's own declared need when that is longer."""
    if explicit or check.declared_timeout is None:
        return budget
    return max(budget, check.declared_timeout)
