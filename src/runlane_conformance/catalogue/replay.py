"""replay: Every run of a transaction callback is a new attempt, and only the one that commits counts.

The requirements of the ``replay`` area, one ``Requirement`` value each. A check in
``suites/test_replay.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = ["BOUNDED", "CALLBACK_ERROR", "COMMITTED_VALUE", "FRESH_ATTEMPT", "NO_TRACE"]

CLAUSE = "Treat each transaction callback as a new attempt"

FRESH_ATTEMPT = requirement(
    "replay.each-attempt-starts-fresh",
    RequirementLevel.MUST,
    CLAUSE,
    "Each replay gets a new transaction object that reads current data; nothing an abandoned attempt "
    "read or staged (its read set, its mutated keys) carries over into the next attempt.",
)
COMMITTED_VALUE = requirement(
    "replay.only-committed-value-escapes",
    RequirementLevel.MUST,
    CLAUSE,
    "transaction() returns the value of the attempt that committed, never one from an abandoned attempt.",
)
NO_TRACE = requirement(
    "replay.abandoned-attempts-leave-no-trace",
    RequirementLevel.MUST,
    CLAUSE,
    "Writes staged by an attempt that did not commit are never stored and never visible to any instance.",
)
BOUNDED = requirement(
    "replay.attempts-are-bounded",
    RequirementLevel.MUST,
    "Treat each transaction callback as a new attempt; Use Local as the executable reference",
    "A callback that keeps losing races ends with StorageConflictError after a bounded number of "
    "attempts, having committed nothing.",
)
CALLBACK_ERROR = requirement(
    "replay.callback-error-rolls-back-and-propagates",
    RequirementLevel.MUST,
    CLAUSE,
    "An exception raised by the callback rolls its attempt back, commits nothing, is not replayed, and "
    "reaches the caller as the very same exception object; the store stays usable.",
)
