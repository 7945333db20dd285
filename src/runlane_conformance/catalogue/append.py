"""append: Ordered append: positions allocated at commit, contiguous, never wasted, shared with point writers.

The requirements of the ``append`` area, one ``Requirement`` value each. A check in
``suites/test_append.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ACROSS_PROCESSES",
    "BOUNDS",
    "CONCURRENT",
    "CONTIGUOUS",
    "COPIES",
    "ENDED",
    "LAYOUT_REQ",
    "LIMITS",
    "MIXED",
    "NOTHING_ON_ROLLBACK",
    "OCCUPIED",
    "ONE_BATCH",
    "OWN_STREAM",
    "SEALS",
]

CLAUSE = "Add optional ordered append"
CAPABILITY = "append"

CONTIGUOUS = requirement(
    "append.positions-contiguous",
    RequirementLevel.MUST,
    CLAUSE,
    "Each partition's positions start at 1, every batch is contiguous and follows the batches before it.",
    capability=CAPABILITY,
)
LAYOUT_REQ = requirement(
    "append.canonical-layout",
    RequirementLevel.MUST,
    CLAUSE,
    "Appended records and the head are stored exactly as materialize_storage_append describes, readable "
    "by point reads and the position index.",
    capability=CAPABILITY,
)
NOTHING_ON_ROLLBACK = requirement(
    "append.rollback-consumes-nothing",
    RequirementLevel.MUST,
    CLAUSE,
    "An aborted or replayed attempt consumes no positions and leaves no records.",
    capability=CAPABILITY,
)
ONE_BATCH = requirement(
    "append.one-batch-per-attempt",
    RequirementLevel.MUST,
    CLAUSE,
    "An attempt may stage only one append batch; a second one is refused and nothing commits.",
    capability=CAPABILITY,
)
SEALS = requirement(
    "append.seals-reads",
    RequirementLevel.MUST,
    CLAUSE,
    "Appending ends the read phase: later point reads and queries in the attempt are refused.",
    capability=CAPABILITY,
)
OWN_STREAM = requirement(
    "append.stream-off-limits",
    RequirementLevel.MUST,
    CLAUSE,
    "An appending attempt may not also point-read or mutate that partition's head or records.",
    capability=CAPABILITY,
)
MIXED = requirement(
    "append.mixed-writers",
    RequirementLevel.MUST,
    CLAUSE,
    "Native appends and point writers (head read plus conditional writes) share one head and layout, "
    "in sequence and when they race.",
    capability=CAPABILITY,
)
BOUNDS = requirement(
    "append.position-bounds",
    RequirementLevel.MUST,
    CLAUSE,
    "A batch whose head would pass 2**64-1 fails with StorageStreamExhaustedError and changes nothing.",
    capability=CAPABILITY,
)
OCCUPIED = requirement(
    "append.occupied-position-refused",
    RequirementLevel.MUST,
    CLAUSE,
    "A native append whose next position already holds a record (the head trails its records) fails "
    "with a StorageError and changes nothing: it never overwrites that record.",
    capability=CAPABILITY,
)
CONCURRENT = requirement(
    "append.concurrent-disjoint",
    RequirementLevel.MUST,
    CLAUSE,
    "Concurrent appends from independent instances get disjoint, contiguous position ranges.",
    capability=CAPABILITY,
)
LIMITS = requirement(
    "append.counts-toward-limits",
    RequirementLevel.MUST,
    CLAUSE,
    "Appended records and the head count toward the transaction record and byte limits, with point work.",
    capability=CAPABILITY,
)
COPIES = requirement(
    "append.copies-values",
    RequirementLevel.MUST,
    CLAUSE,
    "Values are copied when append() is called: changing the caller's objects afterwards changes nothing.",
    capability=CAPABILITY,
)
ENDED = requirement(
    "append.refused-after-attempt",
    RequirementLevel.MUST,
    CLAUSE,
    "append() on an attempt that already ended (committed, rolled back or replayed) is refused with "
    "StorageAttemptEndedError.",
    capability=CAPABILITY,
)
ACROSS_PROCESSES = requirement(
    "append.across-processes",
    RequirementLevel.MUST,
    CLAUSE,
    "Appends from several processes on one stream partition, native ones where offered mixed with core's "
    "point writers, get unique contiguous positions in commit order and lose no committed batch.",
    capability="cross_process",
)
