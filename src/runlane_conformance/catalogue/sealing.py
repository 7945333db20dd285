"""sealing: One frozen time per attempt, no reads after the read set is sealed, no use after the attempt.

The requirements of the ``sealing`` area, one ``Requirement`` value each. A check in
``suites/test_sealing.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ENDED",
    "FROZEN_NOW",
    "INJECTED_CLOCK",
    "OVERLAP",
    "SEALED_BY_MUTATION",
    "SEALED_BY_NOW",
    "WRITES_AFTER_SEAL",
]

CLAUSE = "Treat each transaction callback as a new attempt"

FROZEN_NOW = requirement(
    "sealing.now-frozen-within-attempt",
    RequirementLevel.MUST,
    CLAUSE,
    "Every now() call of one attempt returns the same instant, even when the clock moves in between.",
)
INJECTED_CLOCK = requirement(
    "sealing.now-uses-injected-client-clock",
    RequirementLevel.MUST,
    "Report a profile that is true (clock authority); Use Local as the executable reference",
    "A driver with client clock authority answers now() with the time of the clock given to connect(), "
    "read anew by each attempt (a replay never reuses the time of the attempt it replaces).",
    capability="client_clock",
)
SEALED_BY_NOW = requirement(
    "sealing.reads-refused-after-now",
    RequirementLevel.MUST,
    CLAUSE,
    "get() and query_candidates() after now() in the same attempt raise StorageSealedError.",
)
SEALED_BY_MUTATION = requirement(
    "sealing.reads-refused-after-first-mutation",
    RequirementLevel.MUST,
    CLAUSE,
    "get() and query_candidates() after a create, replace or delete in the same attempt raise "
    "StorageSealedError.",
)
ENDED = requirement(
    "sealing.attempt-ended-refused",
    RequirementLevel.MUST,
    "Treat each transaction callback as a new attempt; Add optional ordered append (use after the attempt)",
    "Every call on a transaction object after its attempt committed, rolled back or was replayed raises "
    "StorageAttemptEndedError.",
)
OVERLAP = requirement(
    "sealing.overlapping-calls-refused",
    RequirementLevel.MUST,
    CLAUSE,
    "A get() or query_candidates() that starts while another call of the same attempt is still running "
    "(now() waiting on the injected clock) is refused with a StorageUsageError, never served.",
    capability="client_clock",
)
WRITES_AFTER_SEAL = requirement(
    "sealing.writes-allowed-after-now",
    RequirementLevel.MUST,
    CLAUSE,
    "now() and the first mutation close only the read phase: creates, replaces and deletes staged after "
    "them (of records read before) commit.",
)
