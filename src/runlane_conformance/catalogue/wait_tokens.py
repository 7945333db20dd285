"""wait_tokens: One token per idempotency key, counted links, one resolution, exact index mappings.

The requirements of the ``wait_tokens`` area, one ``Requirement`` value each. A check in
``suites/test_wait_tokens.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "BROKEN",
    "CREATED",
    "LINKS",
    "MAPPINGS",
    "MODEL",
    "ONCE",
    "PRUNED",
    "RACE",
    "TIMEOUT",
    "TIMEOUT_BOUNDARY",
]

CLAUSE = "Preserve pruning invariants (wait tokens); Verification checklist (wait tokens)"

CREATED = requirement(
    "wait_tokens.created-with-reciprocal-owner",
    RequirementLevel.MUST,
    CLAUSE,
    "A token and its idempotency owner commit together and name each other; two creations racing with one "
    "idempotency key on two instances leave one token, which both are told about.",
)
LINKS = requirement(
    "wait_tokens.links-counted-on-both-sides",
    RequirementLevel.MUST,
    CLAUSE,
    "Every link raises the token's linkCount and the run's waitTokenLinks count in its commit, also when "
    "two runs link one token from two instances at once.",
)
ONCE = requirement(
    "wait_tokens.second-resolution-loses",
    RequirementLevel.MUST,
    CLAUSE,
    "Once a token is resolved, a later completion or timeout on any instance is told it lost and changes "
    "nothing.",
)
RACE = requirement(
    "wait_tokens.racing-resolutions-one-winner",
    RequirementLevel.MUST,
    CLAUSE,
    "A completion and a timeout racing on two instances end with exactly one resolution, the one reported "
    "as the winner.",
)
TIMEOUT = requirement(
    "wait_tokens.timeout-at-or-after-due",
    RequirementLevel.MUST,
    CLAUSE,
    "A token times out only at or after its timeoutAt, and a due token is found through "
    "WaitTokensByTimeout (at once on strong indexes, eventually on eventual ones).",
)
TIMEOUT_BOUNDARY = requirement(
    "wait_tokens.timeout-boundary-by-injected-clock",
    RequirementLevel.MUST,
    CLAUSE,
    "By the clock given to connect(), a token is not due one microsecond before its timeoutAt, is due "
    "exactly at it, and records resolvedAt equal to that timeoutAt.",
    capability="client_clock",
)
MAPPINGS = requirement(
    "wait_tokens.index-mappings-exact",
    RequirementLevel.MUST,
    CLAUSE,
    "After each transition (create, link, resolve, run tombstone and cleanup, token pruning) "
    "WaitTokensByTimeout, WaitTokensByRun, WaitTokensByStatus, WaitTokenLinksByRun, WaitTokenLinksByToken "
    "and TombstonesByPruneAfter hold exactly the entries the stored records carry.",
)
PRUNED = requirement(
    "wait_tokens.pruned-with-owner-when-unlinked",
    RequirementLevel.MUST,
    CLAUSE,
    "A pending token, or one a run still links, is kept; a resolved unlinked token is deleted in one "
    "commit together with its exact owner.",
)
BROKEN = requirement(
    "wait_tokens.broken-owner-reported-not-repaired",
    RequirementLevel.MUST,
    CLAUSE,
    "Pruning a token whose owner is missing or names another token fails as an invariant failure, and "
    "both records stay exactly as they were.",
)
MODEL = requirement(
    "wait_tokens.random-histories-match-model",
    RequirementLevel.MUST,
    CLAUSE,
    "Random histories of token creations (new and repeated idempotency keys), links, completions, "
    "timeouts, racing resolutions, token pruning and run pruning match a small model after every step: "
    "each token's status, resolution, link count and owner, each link, and every token index mapping.",
)
