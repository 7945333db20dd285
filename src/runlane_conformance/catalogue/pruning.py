"""pruning: Run pruning: exact counters, tombstones that hide at once, and bounded cleanup that never orphans.

The requirements of the ``pruning`` area, one ``Requirement`` value each. A check in
``suites/test_pruning.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = ["BOUNDED", "COUNTERS", "HIDDEN", "INTERRUPTED", "LIMITS", "MODEL", "RACE", "STALE"]

CLAUSE = "Preserve pruning invariants"

COUNTERS = requirement(
    "pruning.counters-exact",
    RequirementLevel.MUST,
    CLAUSE,
    "A run's four child counts, the tombstone's copy of them and every count a cleanup pass leaves equal "
    "the children that really exist; linked tokens lose exactly the links deleted; nothing of another run "
    "is touched.",
)
HIDDEN = requirement(
    "pruning.tombstone-hides-in-one-commit",
    RequirementLevel.MUST,
    "Preserve pruning invariants; Keep operator reads separate",
    "The commit that tombstones a run removes it from every operational index (at once on strong indexes, "
    "eventually on eventual ones) and, where operator reads are offered, from them at once, while the run "
    "stays point-readable and its tombstone is listed by TombstonesByPruneAfter.",
)
STALE = requirement(
    "pruning.stale-page-never-ends-cleanup",
    RequirementLevel.MUST,
    CLAUSE,
    "While a counter is above zero the run and its tombstone stay, whatever the index pages show; once the "
    "index has caught up, cleanup finishes with no child left behind.",
)
RACE = requirement(
    "pruning.racing-passes-exact",
    RequirementLevel.MUST,
    CLAUSE,
    "Two cleanup passes racing on two instances end serializably: no child deleted twice into the counts, "
    "no counter lowered for a child that still exists, no orphan.",
)
INTERRUPTED = requirement(
    "pruning.interrupted-pass-resumes",
    RequirementLevel.MUST,
    CLAUSE,
    "A pass whose callback raises after staging some of its deletes leaves nothing behind, and cleanup "
    "resumes to the same end state.",
)
LIMITS = requirement(
    "pruning.passes-fit-advertised-limits",
    RequirementLevel.MUST,
    "Preserve pruning invariants; Report a profile that is true",
    "Cleanup passes sized to the driver's advertised limits (point reads, query page, records, bytes) are "
    "accepted, and a run with more children than one pass can hold is pruned over several passes.",
)
MODEL = requirement(
    "pruning.random-histories-keep-invariants",
    RequirementLevel.MUST,
    CLAUSE,
    "Random histories of runs, children, token links, finishes, tombstones and cleanup passes (alone or "
    "racing on two instances) keep every invariant of a small model after every step: visible runs keep "
    "all their children and exact counts, tombstone counters equal the children left, tokens count the "
    "links that exist, and a pruned run leaves nothing behind.",
)
BOUNDED = requirement(
    "pruning.passes-stay-within-budget",
    RequirementLevel.MUST,
    "Preserve pruning invariants; Report a profile that is true",
    "Every cleanup attempt point-reads and writes no more keys than the budget it was sized to, for "
    "budgets tighter than the driver's limits in one dimension at a time; this bound rests on the driver "
    "never returning a candidate page longer than the page size asked for.",
)
