"""conflicts: Two instances racing on the same data end as if their transactions ran one after another.

The requirements of the ``conflicts`` area, one ``Requirement`` value each. A check in
``suites/test_conflicts.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ABSENT_READ",
    "ACROSS_PROCESSES",
    "ATTEMPT_WIDE",
    "BLIND_CREATE",
    "INDEX_MOVE",
    "INDEX_PHANTOM",
    "LOST_UPDATE",
    "PRESENT_READ",
    "READ_ONLY_ANOMALY",
    "READ_ONLY_DEPENDENCY",
    "READ_SKEW",
    "READ_THEN_SCAN",
    "REPEATABLE_READS",
    "SCAN_ATTEMPT_WIDE",
    "SERIALIZABLE",
    "VERSIONS_NEVER_REUSED",
]

CLAUSE = "Treat each transaction callback as a new attempt; Verification checklist: conflict detection"

ABSENT_READ = requirement(
    "conflicts.absent-read-then-create-elsewhere",
    RequirementLevel.MUST,
    CLAUSE,
    "A key read as absent is a dependency: if another instance creates it before commit, the attempt "
    "conflicts (and replays) instead of committing a decision based on the absence.",
)
PRESENT_READ = requirement(
    "conflicts.present-read-then-replace-elsewhere",
    RequirementLevel.MUST,
    CLAUSE,
    "A record read at a version is a dependency: a replace or delete staged from that read never commits "
    "after another instance changed the record.",
)
READ_ONLY_DEPENDENCY = requirement(
    "conflicts.read-only-dependency",
    RequirementLevel.MUST,
    CLAUSE,
    "Records an attempt only read (and did not write) are dependencies too, so write skew is impossible.",
)
LOST_UPDATE = requirement(
    "conflicts.lost-update",
    RequirementLevel.MUST,
    CLAUSE,
    "Concurrent read-modify-write transactions on one record never lose an update: every committed "
    "increment survives.",
)
VERSIONS_NEVER_REUSED = requirement(
    "conflicts.versions-never-reused",
    RequirementLevel.MUST,
    "Keep logical records in core; Use Local as the executable reference (non-repeating versions)",
    "A version is never assigned twice to a key, even after delete and re-create with identical content, "
    "so a replace from a version read before the delete always conflicts.",
)
BLIND_CREATE = requirement(
    "conflicts.blind-create-single-winner",
    RequirementLevel.MUST,
    CLAUSE,
    "Two creates of one key that neither transaction read have exactly one winner; the loser conflicts "
    "and never overwrites the winner's record.",
)
READ_SKEW = requirement(
    "conflicts.read-skew-in-read-only-attempt",
    RequirementLevel.MUST,
    CLAUSE,
    "A read-only attempt never returns a mix of states from before and after another instance's commit, "
    "nor lets an error its callback raised on such a mix reach the caller.",
)
INDEX_PHANTOM = requirement(
    "conflicts.index-phantom",
    RequirementLevel.MUST,
    "Treat each transaction callback as a new attempt (queryCandidates); Use the closed index catalog",
    "A scanned index range, including an empty page, is a dependency: a record that appears in it before "
    "commit makes the attempt conflict.",
    capability="strong_index",
)
INDEX_MOVE = requirement(
    "conflicts.row-leaves-index-between-query-and-read",
    RequirementLevel.MUST,
    "Treat each transaction callback as a new attempt (queryCandidates, get); Report a profile that is true",
    "Within one attempt, index candidates and point reads agree on one committed state (for a strongly "
    "consistent index), and a decision about a candidate that left the index never commits.",
)
READ_THEN_SCAN = requirement(
    "conflicts.point-read-then-scan-agree",
    RequirementLevel.MUST,
    "Treat each transaction callback as a new attempt (queryCandidates, get); Report a profile that is true",
    "On a strongly consistent index, an attempt that point-reads a record and then scans its index sees "
    "it listed exactly when the point read found it, even when another instance moved it in between.",
    capability="strong_index",
)
SERIALIZABLE = requirement(
    "conflicts.serializable-interleavings",
    RequirementLevel.MUST,
    CLAUSE,
    "Any two small read/write transactions on two instances, interleaved at any point, end in a state "
    "and return values that some serial order of them produces.",
)
ATTEMPT_WIDE = requirement(
    "conflicts.dependencies-span-the-attempt",
    RequirementLevel.MUST,
    CLAUSE,
    "Every read of an attempt stays a dependency until commit, whichever call made it: a key read by an "
    "earlier get() is protected at commit as well as the last read, whatever call came after it.",
)
SCAN_ATTEMPT_WIDE = requirement(
    "conflicts.scan-dependencies-span-the-attempt",
    RequirementLevel.MUST,
    CLAUSE,
    "On a strongly consistent index, a range scanned by an earlier query_candidates() stays a dependency "
    "until commit, whatever get() or scan came after it.",
    capability="strong_index",
)
REPEATABLE_READS = requirement(
    "conflicts.repeatable-reads",
    RequirementLevel.MUST,
    CLAUSE,
    "A key read twice in one committed attempt returns the same version and content both times, even "
    "when another instance commits a change to it in between.",
)
READ_ONLY_ANOMALY = requirement(
    "conflicts.read-only-transaction-anomaly",
    RequirementLevel.MUST,
    CLAUSE,
    "Three transactions (an update, a read-only observer and a second update that read before the first "
    "committed) end as some serial order of all three, not only of each pair.",
)
ACROSS_PROCESSES = requirement(
    "conflicts.across-processes",
    RequirementLevel.MUST,
    CLAUSE,
    "Conflict detection holds between processes: a read-then-replace (lost update) and an absent read "
    "then create, raced by another process, end as some serial order of the two.",
    capability="cross_process",
)
