"""histories: Concurrent histories judged by their dependency graph: no anomaly of Adya's classes may appear.

The requirements of the ``histories`` area, one ``Requirement`` value each. A check in
``suites/test_histories.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = ["COMMITTED_READS", "LOST_UPDATES", "PREDICATE_SKEW", "READ_SKEW", "WORKLOAD_ENDS", "WRITE_SKEW"]

ATTEMPT_CLAUSE = "Treat each transaction callback as a new attempt"

COMMITTED_READS = requirement(
    "histories.reads-only-committed-writes",
    RequirementLevel.MUST,
    f"{ATTEMPT_CLAUSE} (only the committed attempt's effects escape, a raising callback rolls back)",
    "In a concurrent history no committed transaction observes a value that only an aborted or replayed "
    "attempt wrote (G1a), nor builds a write on one (dirty update), nor sees an intermediate value (G1b), "
    "a value nobody wrote (garbage read) or one it writes only later (future read); every read agrees "
    "with what its own attempt read and wrote before it (internal); no version of a key carries two "
    "values; and no transactions read or overwrite each other's writes in a cycle (G0, G1c).",
)
WORKLOAD_ENDS = requirement(
    "histories.transactions-end-as-the-contract-allows",
    RequirementLevel.MUST,
    f"{ATTEMPT_CLAUSE} (an attempt commits, conflicts and replays, or ends unknown)",
    "Under the concurrent workload every transaction commits, reports a conflict, or reports a commit "
    "whose outcome is unknown; any other failure (an untyped error, a record the driver cannot read "
    "back) stops the workload. The history recorded until then is still judged by the other "
    "histories checks and saved.",
)
LOST_UPDATES = requirement(
    "histories.no-lost-updates",
    RequirementLevel.MUST,
    f"{ATTEMPT_CLAUSE} (replace() and delete() require the unchanged record and version)",
    "In a concurrent history no two committed transactions supersede the same version of a key, and no "
    "two create a key that was never deleted.",
)
READ_SKEW = requirement(
    "histories.no-read-skew",
    RequirementLevel.MUST,
    f"{ATTEMPT_CLAUSE} (get() results join the validated read set)",
    "In a concurrent history there is no cycle with exactly one anti-dependency (G-single): no committed "
    "transaction saw part of another's writes and missed the rest.",
)
WRITE_SKEW = requirement(
    "histories.no-write-skew",
    RequirementLevel.MUST,
    f"{ATTEMPT_CLAUSE} (the provider validates the read set, including keys only read)",
    "In a concurrent history there is no cycle through two or more item anti-dependencies (G2-item): "
    "transactions that each read what the other then overwrote cannot both commit.",
)
PREDICATE_SKEW = requirement(
    "histories.no-predicate-skew",
    RequirementLevel.MUST,
    f"{ATTEMPT_CLAUSE} (queryCandidates); Use the closed index catalog",
    "In a concurrent history there is no cycle through a predicate anti-dependency (G2): transactions "
    "that each scanned an index range the other then changed cannot both commit. Judged only on a "
    "strongly consistent index: a lagging index page is no evidence of what a range held.",
    capability="strong_index",
)
