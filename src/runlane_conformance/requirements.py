"""The requirement catalog: every check the suites make, with a frozen ID.

Each conformance test is tagged with exactly one ``Requirement``. Its ID
(``area.rule-name``) never changes once published: it appears in pytest ids,
JUnit properties and certification reports, and driver authors search for
it. ``docs/requirements.md`` is generated from this catalog.

A requirement may need an optional capability (``append``,
``exclusive_candidates``) or a profile property; when the driver's
advertised profile does not offer it, the check skips with the reason
``profile: <capability> not offered`` instead of failing or vanishing.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

__all__ = [
    "AREAS",
    "AREA_FOUNDATIONS",
    "Requirement",
    "RequirementLevel",
    "all_requirements",
    "requirement",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Contract areas, in the order reports list them; each is ``runlane_conformance.suites.<area>``.
#: An area comes after the areas whose rules its checks rely on (``replay`` after ``conflicts``: a
#: stale read committed without a replay fails both, and the conflict rule is the cause), so a report
#: read from the top meets the cause first.
AREAS: tuple[str, ...] = (
    "point_reads",
    "json_boundary",
    "conflicts",
    "replay",
    "mutations",
    "sealing",
    "cursors",
    "limits",
    "profile",
    "model",
    "histories",
    "operator_reads",
    "completion_waits",
    "pruning",
    "wait_tokens",
    "append",
    "exclusive_selection",
    "faults",
)

#: For each area, the areas whose rules its checks lean on to set up and observe what they judge: a
#: profile check writes, reads back and scans; a history is made of point reads, scans and commits. When
#: a rule of a foundation fails, a failure in an area built on it is probably a consequence, and a
#: report leads with the foundation (see ``run/root_cause.py``). Transitive dependencies need not be
#: listed. Every area is a key; ``tests/test_root_cause.py`` checks the graph has no cycle.
AREA_FOUNDATIONS: dict[str, tuple[str, ...]] = {
    "point_reads": (),
    "json_boundary": (),
    "sealing": ("point_reads",),
    "mutations": ("point_reads", "json_boundary"),
    "replay": ("mutations",),
    "conflicts": ("mutations", "sealing"),
    "cursors": ("mutations",),
    "limits": ("mutations", "cursors"),
    "profile": ("conflicts", "cursors"),
    "model": ("conflicts", "replay", "cursors"),
    "histories": ("conflicts", "replay", "cursors"),
    "operator_reads": ("mutations", "cursors"),
    "completion_waits": ("conflicts", "cursors"),
    "pruning": ("conflicts", "cursors"),
    "wait_tokens": ("conflicts", "cursors"),
    "append": ("conflicts", "cursors"),
    "exclusive_selection": ("conflicts", "cursors"),
    "faults": ("conflicts", "replay"),
}

_ID = re.compile(r"[a-z_]+\.[a-z0-9]+(?:-[a-z0-9]+)*")


class RequirementLevel(StrEnum):
    """MUST failures deny certification; SHOULD failures are reported but do not."""

    MUST = "MUST"
    SHOULD = "SHOULD"


@dataclass(frozen=True)
class Requirement:
    """One rule of the contract as the suites check it.

    ``clause`` names the spec section it enforces; ``summary`` says the rule
    in our words; ``capability`` names the profile capability the check
    needs (``None`` for core rules every driver must keep), or several joined
    with ``+`` when it needs all of them (``cross_process+durable``).
    """

    id: str
    level: RequirementLevel
    clause: str
    summary: str
    capability: str | None = None

    @property
    def area(self) -> str:
        return self.id.partition(".")[0]

    def __call__(self, test: F) -> F:
        """Tag a test function: its pytest id gets ``[<id>]`` and the plugin gates and reports it."""
        import pytest

        marked = pytest.mark.usefixtures("runlane_requirement")(
            pytest.mark.runlane_requirement(self.id)(test)
        )
        return pytest.mark.parametrize(  # type: ignore[no-any-return]
            "runlane_requirement", [self], ids=[self.id], indirect=True
        )(marked)


_CATALOG: dict[str, Requirement] = {}


def requirement(
    id: str, level: RequirementLevel | str, clause: str, summary: str, *, capability: str | None = None
) -> Requirement:
    """Declare a requirement (once per ID) and return it for use as a test decorator."""
    if not _ID.fullmatch(id):
        raise ValueError(f"requirement id {id!r} is not of the form area.rule-name")
    area = id.partition(".")[0]
    if area not in AREAS:
        raise ValueError(f"requirement {id!r} names unknown area {area!r}")
    declared = Requirement(id, RequirementLevel(level), clause, summary, capability)
    existing = _CATALOG.get(id)
    if existing is not None and existing != declared:
        raise ValueError(f"requirement {id!r} declared twice with different content")
    _CATALOG[id] = declared
    return declared


def all_requirements() -> dict[str, Requirement]:
    """The whole catalog, importing every suite module so each declares its requirements."""
    for area in AREAS:
        try:
            importlib.import_module(f"runlane_conformance.suites.test_{area}")
        except ModuleNotFoundError as error:
            if error.name != f"runlane_conformance.suites.test_{area}":
                raise
    return dict(sorted(_CATALOG.items()))
