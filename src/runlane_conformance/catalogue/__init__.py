"""The requirement catalogue: every rule the suites check, as typed values, with no test machinery.

One module per contract area (``catalogue.point_reads``, ``catalogue.conflicts``, ...) holds that area's
``Requirement`` values. A requirement's ID (``area.rule-name``) never changes once published: it
appears in pytest ids, JUnit properties and certification reports, and driver authors search for it.

The links run through the values, not through strings: a check in ``suites/test_<area>.py`` is
decorated with the value it checks (``@POSITIONS``), a mutant in ``tests/mutants`` names the value it
must fail, so an editor's "find usages" of a value lists both. The clause table
(``traceability/clauses.toml``) names requirements by ID, and ``Requirement.clause_ids`` reads it back.

Importing this package imports neither pytest nor Hypothesis, so ``runlane-certify requirements`` and
the parent of a run read the catalogue without the suites; the catalogue is built here, in this
process, every time, never read from a file (``docs/trust.md``).

A requirement may need an optional capability (``append``, ``exclusive_candidates``) or a profile
property; when the driver's advertised profile does not offer it, the check is gated with the reason
``profile: <capability> not offered`` instead of failing or vanishing (``fixtures.gating``).
"""

from __future__ import annotations

from types import ModuleType

from . import (
    append,
    cluster_faults,
    completion_waits,
    conflicts,
    cursors,
    exclusive_selection,
    faults,
    histories,
    json_boundary,
    limits,
    model,
    mutations,
    operator_reads,
    point_reads,
    profile,
    pruning,
    replay,
    sealing,
    wait_tokens,
)
from ._model import (
    AREA_FOUNDATIONS,
    AREAS,
    CheckSite,
    Requirement,
    RequirementLevel,
    check_sites,
    requirement,
)

__all__ = [
    "AREAS",
    "AREA_FOUNDATIONS",
    "AREA_MODULES",
    "CheckSite",
    "Requirement",
    "RequirementLevel",
    "all_requirements",
    "check_sites",
    "requirement",
]

#: Each area's catalogue module, in report order.
AREA_MODULES: dict[str, ModuleType] = {
    module.__name__.rpartition(".")[2]: module
    for module in (
        point_reads,
        json_boundary,
        conflicts,
        replay,
        mutations,
        sealing,
        cursors,
        limits,
        profile,
        model,
        histories,
        operator_reads,
        completion_waits,
        pruning,
        wait_tokens,
        append,
        exclusive_selection,
        faults,
        cluster_faults,
    )
}


def all_requirements() -> dict[str, Requirement]:
    """The whole catalogue, by ID (sorted): every ``Requirement`` value of every area module."""
    found: dict[str, Requirement] = {}
    for module in AREA_MODULES.values():
        for value in vars(module).values():
            if isinstance(value, Requirement):
                found[value.id] = value
    return dict(sorted(found.items()))
