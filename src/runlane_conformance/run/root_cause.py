"""Which failed requirement to read first: the most basic one, with what probably follows from it.

One bug in a driver rarely fails one requirement. A replace that leaves a stale index entry fails the
mutation rule that says so, and then every check that scans that index to set up or observe something
else: pruning, wait tokens, profile claims. Listing those in catalogue order makes a driver author read
symptoms before the cause. This module orders a run's failed requirements so that each *root* (a failure
with no failed requirement in the areas its area is built on, ``AREA_FOUNDATIONS``) comes first, in the
order of how basic its area is, each followed by the failures it probably explains.

"Probably" is the honest word: a failure in a dependent area may also be a bug of its own, which shows
once the root is fixed. Nothing here changes an outcome or a verdict; it only orders and annotates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from ..catalogue import AREA_FOUNDATIONS, AREAS
from .model import RequirementResult

__all__ = ["FailureInContext", "area_depth", "foundations_of", "in_root_cause_order"]


@dataclass(frozen=True)
class FailureInContext:
    """A failed requirement and, when it is probably a consequence, the root failure it follows from."""

    requirement: RequirementResult
    consequence_of: RequirementResult | None = None


@cache
def foundations_of(area: str) -> frozenset[str]:
    """Every area ``area`` is built on, directly or through another (never ``area`` itself)."""
    found: set[str] = set()
    for direct in AREA_FOUNDATIONS.get(area, ()):
        found.add(direct)
        found |= foundations_of(direct)
    return frozenset(found)


@cache
def area_depth(area: str) -> int:
    """How many layers of foundations lie under ``area``: 0 for an area built on nothing."""
    return max((area_depth(direct) + 1 for direct in AREA_FOUNDATIONS.get(area, ())), default=0)


def _sort_key(requirement: RequirementResult) -> tuple[int, int]:
    area = requirement.area
    return area_depth(area), AREAS.index(area) if area in AREAS else len(AREAS)


def in_root_cause_order(failed: Sequence[RequirementResult]) -> list[FailureInContext]:
    """``failed`` reordered: each root failure, most basic area first, followed by its consequences.

    A failure is a consequence of the first root (in that order) whose area lies under its own; a
    failure in an area with no failed foundation is a root. Order within each group is kept stable
    (catalogue order), so the same run always reads the same.
    """
    ordered = sorted(failed, key=_sort_key)
    roots: list[RequirementResult] = []
    followers: dict[str, list[RequirementResult]] = {}
    for requirement in ordered:
        under = foundations_of(requirement.area)
        root = next((candidate for candidate in roots if candidate.area in under), None)
        if root is None:
            roots.append(requirement)
            followers[requirement.id] = []
        else:
            followers[root.id].append(requirement)
    out: list[FailureInContext] = []
    for root in roots:
        out.append(FailureInContext(root))
        out += [FailureInContext(follower, root) for follower in followers[root.id]]
    return out
