"""completion_waits: Completion-wait presence: the marker is an ordinary stored record that only ever appears.

The requirements of the ``completion_waits`` area, one ``Requirement`` value each. A check in
``suites/test_completion_waits.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = ["ABSENT", "ACROSS_PROCESSES", "MONOTONIC", "RACE", "STORED"]

CLAUSE = "Preserve completion-wait presence"

STORED = requirement(
    "completion_waits.marker-stored-for-every-instance",
    RequirementLevel.MUST,
    CLAUSE,
    "A marker created by one instance is seen by point reads on every other instance of the store, so "
    "their waits and waiter scans agree, and a waiter scan lists only its own environment's waiting runs.",
)
RACE = requirement(
    "completion_waits.racing-first-waiters-create-one-marker",
    RequirementLevel.MUST,
    CLAUSE,
    "Two first waiters racing on two instances end serializably: exactly one created the marker, the "
    "other saw it, and both waiting runs are kept.",
)
MONOTONIC = requirement(
    "completion_waits.marker-outlives-waiters",
    RequirementLevel.MUST,
    CLAUSE,
    "Once registered, the marker stays: deleting the waiting runs or moving them out of their wait, "
    "finishing or pruning the source run, time passing and reconnecting instances never remove it.",
)
ABSENT = requirement(
    "completion_waits.absent-marker-means-no-wait",
    RequirementLevel.MUST,
    CLAUSE,
    "No marker exists for a source nobody registered a wait on (ordinary runs and waits refused because the "
    "source already finished create none), so skipping the waiter scan is safe.",
)
ACROSS_PROCESSES = requirement(
    "completion_waits.marker-across-processes",
    RequirementLevel.MUST,
    CLAUSE,
    "The marker works between processes: a wait registered in one process is seen by waits and terminal "
    "transitions in others, and a wait racing the source's terminal transition in another process never "
    "leaves a waiting run that the transition skipped.",
    capability="cross_process",
)
