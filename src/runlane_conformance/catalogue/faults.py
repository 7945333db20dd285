"""faults: A broken connection at any point of an attempt leaves no partial work and no false report.

The requirements of the ``faults`` area, one ``Requirement`` value each. A check in
``suites/test_faults.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "FAILURES_ARE_TYPED",
    "HOLDS_RELEASED",
    "INDEXES_MATCH_RECORDS",
    "LIMITS_NOT_INFLATED",
    "NO_PARTIAL_WRITES",
    "NO_REPLAY_AFTER_POSSIBLE_COMMIT",
    "OUTCOME_MATCHES_STORE",
    "STREAM_HEAD_FOLLOWS_RECORDS",
    "USABLE_AFTER_FAULT",
]

CHECKLIST = "Verification checklist: injected failure paths with no partial writes"
ATTEMPTS = "Treat each transaction callback as a new attempt"

NO_PARTIAL_WRITES = requirement(
    "faults.no-partial-writes",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS} (grouping never reports a partially applied batch)",
    "After a fault at any point of an attempt, a fresh instance sees all of the attempt's creates, "
    "replacements, deletes and appended records, or none of them.",
    capability="faults",
)
INDEXES_MATCH_RECORDS = requirement(
    "faults.indexes-match-records",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS} (index entries move in the same commit as their records)",
    "After a fault at any point of an attempt, an index query returns exactly the entries of the records "
    "the store holds: no entry of a create that did not commit, none missing for one that did, and a "
    "replacement's entry moved only if the replacement committed.",
    capability="faults",
)
STREAM_HEAD_FOLLOWS_RECORDS = requirement(
    "faults.stream-head-follows-records",
    RequirementLevel.MUST,
    f"{CHECKLIST}; Add optional ordered append (aborted or replayed attempts consume no stream positions)",
    "After a fault at any point of an attempt that appends (natively, or through the head and records "
    "where append is not offered), the stream's positions are contiguous, its head names the position "
    "after its last committed record, and the next append lands there.",
    capability="faults",
)
LIMITS_NOT_INFLATED = requirement(
    "faults.limits-not-inflated",
    RequirementLevel.MUST,
    f"{CHECKLIST}; Report a profile that is true (limits)",
    "After a fault, the faulted instance can still spend its whole advertised point-read and transaction "
    "record budget in one transaction: nothing of the failed attempt is left counted against its limits.",
    capability="faults",
)
OUTCOME_MATCHES_STORE = requirement(
    "faults.outcome-matches-store",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS}",
    "What transaction() reports after a fault agrees with the store: success means the work committed "
    "exactly once and the committed attempt's value is returned; StorageUnavailableError means nothing "
    "committed; StorageCommitUnknownError means at most once.",
    capability="faults",
)
NO_REPLAY_AFTER_POSSIBLE_COMMIT = requirement(
    "faults.no-replay-after-possible-commit",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS} (only the committed attempt's work may count)",
    "A callback never runs again after an attempt that may have committed: a lost commit reply is "
    "resolved or reported as StorageCommitUnknownError, never replayed on a guess, so work is never "
    "applied twice.",
    capability="faults",
)
FAILURES_ARE_TYPED = requirement(
    "faults.failures-are-typed",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS}",
    "A fault the driver could not resolve reaches the caller as StorageUnavailableError or "
    "StorageCommitUnknownError, never as a client library's own exception or another contract error.",
    capability="faults",
)
HOLDS_RELEASED = requirement(
    "faults.holds-released-after-fault",
    RequirementLevel.MUST,
    f"{CHECKLIST}; Add optional exclusive candidates (holds last until the attempt commits or rolls back)",
    "After a fault at any point of an attempt that selected rows exclusively, those rows are free again "
    "once the attempt is over: another instance's exclusive selection, and the faulted instance's next one, "
    "get them within seconds (a server may take a moment to notice the broken connection). Not judged "
    "when the store itself went down: a lease-based hold may then last until its lease expires.",
    capability="exclusive_candidates+faults",
)
USABLE_AFTER_FAULT = requirement(
    "faults.usable-after-fault",
    RequirementLevel.MUST,
    CHECKLIST,
    "Once the fault is lifted, the faulted instance commits its next transaction and a new instance "
    "sees it; a fault never leaves an instance wedged or a connection half-used.",
    capability="faults",
)
