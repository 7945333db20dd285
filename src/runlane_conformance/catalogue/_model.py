"""What a requirement is, and the registries that link it to its checks.

Nothing here imports pytest or Hypothesis: the catalogue is data, read by the CLI's ``requirements``
command, by the parent of a run and by the docs generators, none of which should pay for (or need) the
test machinery. Only tagging a check (``Requirement.__call__``) imports pytest, and only the suites do it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

__all__ = [
    "AREAS",
    "AREA_FOUNDATIONS",
    "CheckSite",
    "Requirement",
    "RequirementLevel",
    "check_sites",
    "requirement",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Contract areas, in the order reports list them; each is ``catalogue.<area>`` (its requirements) and
#: ``suites.test_<area>`` (its checks). An area comes after the areas whose rules its checks rely on
#: (``replay`` after ``conflicts``: a stale read committed without a replay fails both, and the
#: conflict rule is the cause), so a report read from the top meets the cause first.
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
    "cluster_faults",
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
    "cluster_faults": ("faults",),
}

_ID = re.compile(r"[a-z_]+\.[a-z0-9]+(?:-[a-z0-9]+)*")


class RequirementLevel(StrEnum):
    """MUST failures deny certification; SHOULD failures are reported but do not."""

    MUST = "MUST"
    SHOULD = "SHOULD"


@dataclass(frozen=True)
class CheckSite:
    """Where a check is defined: its module, its function's name and the line of its ``def``."""

    module: str
    name: str
    path: str
    line: int


#: Requirement ID -> the checks that declared it, in the order their modules were imported.
_CHECK_SITES: dict[str, list[CheckSite]] = {}


@dataclass(frozen=True)
class Requirement:
    """One rule of the contract as the suites check it.

    ``clause`` names the spec section(s) it enforces, as titles; ``summary`` says the rule in our words;
    ``capability`` names the profile capability the check needs (``None`` for core rules every driver
    must keep), or several joined with ``+`` when it needs all of them (``cross_process+durable``).
    The sentence-level clause IDs that name it live in the clause table (``clause_ids``).
    """

    id: str
    level: RequirementLevel
    clause: str
    summary: str
    capability: str | None = None

    @property
    def area(self) -> str:
        return self.id.partition(".")[0]

    @property
    def clause_ids(self) -> tuple[str, ...]:
        """The IDs of the contract clauses (``traceability/clauses.toml``) whose checks include this one."""
        from ..traceability import clauses_by_requirement

        return clauses_by_requirement().get(self.id, ())

    def __call__(self, test: F) -> F:
        """Tag a check: its pytest id gets ``[<id>]``, the plugin gates and reports it, and the catalogue
        records where it is (``check_sites``)."""
        import inspect

        import pytest

        # The function as written: past functools.wraps and Hypothesis's @given wrappers.
        inner = inspect.unwrap(test)
        inner = inspect.unwrap(getattr(getattr(inner, "hypothesis", None), "inner_test", inner))
        code = getattr(inner, "__code__", None)
        module = getattr(test, "__module__", "?")
        path = code.co_filename if code is not None else getattr(sys.modules.get(module), "__file__", "?")
        line = code.co_firstlineno if code is not None else 0
        site = CheckSite(module, getattr(inner, "__name__", repr(test)), str(path), line)
        sites = _CHECK_SITES.setdefault(self.id, [])
        if site not in sites:
            sites.append(site)
        marked = pytest.mark.usefixtures("runlane_requirement")(
            pytest.mark.runlane_requirement(self.id)(test)
        )
        return pytest.mark.parametrize(  # type: ignore[no-any-return]
            "runlane_requirement", [self], ids=[self.id], indirect=True
        )(marked)


_DECLARED: dict[str, Requirement] = {}


def requirement(
    id: str, level: RequirementLevel | str, clause: str, summary: str, *, capability: str | None = None
) -> Requirement:
    """Declare a requirement (once per ID) and return it; the suites use it as a check decorator."""
    if not _ID.fullmatch(id):
        raise ValueError(f"requirement id {id!r} is not of the form area.rule-name")
    area = id.partition(".")[0]
    if area not in AREAS:
        raise ValueError(f"requirement {id!r} names unknown area {area!r}")
    declared = Requirement(id, RequirementLevel(level), clause, summary, capability)
    existing = _DECLARED.get(id)
    if existing is not None and existing != declared:
        raise ValueError(f"requirement {id!r} declared twice with different content")
    _DECLARED[id] = declared
    return declared


def check_sites() -> dict[str, tuple[CheckSite, ...]]:
    """Requirement ID -> where its checks are, for the suite modules imported so far in this process.

    The catalogue never imports the suites itself; the docs generators and the tests that hold every
    requirement to at least one check import them first (``suites.import_all``).
    """
    return {rid: tuple(sites) for rid, sites in sorted(_CHECK_SITES.items())}
