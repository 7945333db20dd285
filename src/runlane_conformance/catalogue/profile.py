"""profile: What a driver advertises about itself is coherent, and every checkable claim is true.

The requirements of the ``profile`` area, one ``Requirement`` value each. A check in
``suites/test_profile.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "AUTHORITATIVE",
    "CLIENT_CLOCK",
    "COHERENT",
    "CORE_FLOOR",
    "CORE_FLOOR_REQUIREMENT",
    "CORE_ROOM",
    "DURABLE",
    "DURABLE_KILLED",
    "SERVER_SAMPLED",
    "STABLE",
    "STRONG_INDEX",
]

#: The fewest point reads and transaction records one attempt must allow for core to work at all.
#: Core's smallest indivisible steps read and touch three records: a run-pruning pass reads the
#: tombstone (to lower its counters), a run link and the wait token it points to (to delete the link
#: and lower the token's link count together); a run that starts waiting on another is read together
#: with its source run and the completion-wait marker, and the marker is created in the same commit.
#: None of these may be split across commits, so a driver allowing fewer can never let core prune a
#: linked run or put a run to wait. See docs/writing-a-driver.md ("Small limits").
CORE_FLOOR = 3
#: The requirement that judges the floor; at limits below it every other check is gated.
CORE_FLOOR_REQUIREMENT = "profile.limits-leave-core-room"

CLAUSE = "Report a profile that is true"

COHERENT = requirement(
    "profile.advertised-profile-coherent",
    RequirementLevel.MUST,
    CLAUSE,
    "The profile names a valid durability, clock authority and index consistency, and its limits are "
    "positive integers that work together (a maximal record fits a transaction; the transaction byte "
    "limit is reachable within the record limits).",
)
CORE_ROOM = requirement(
    CORE_FLOOR_REQUIREMENT,
    RequirementLevel.MUST,
    f"{CLAUSE} (the limit values must work together); Preserve pruning invariants; "
    "Preserve completion-wait presence",
    f"The limits allow at least {CORE_FLOOR} point reads and {CORE_FLOOR} records in one transaction: "
    "core's smallest steps that cannot be split (a pruning pass over a tombstone, a link and its token; a "
    "run put to wait with its source run and marker) need that much. Below it every other check is "
    "gated and the profile is refused.",
)
STABLE = requirement(
    "profile.same-profile-on-every-instance",
    RequirementLevel.MUST,
    CLAUSE,
    "Every instance on one store advertises the same profile, before and after its first transactions, so "
    "core can size work on any of them.",
)
STRONG_INDEX = requirement(
    "profile.strong-index-visible-across-instances",
    RequirementLevel.MUST,
    CLAUSE,
    "With strong index consistency, a committed create, move or delete is reflected at once by query() "
    "and query_candidates() on another instance.",
    capability="strong_index",
)
CLIENT_CLOCK = requirement(
    "profile.client-clock-follows-injected-clock",
    RequirementLevel.MUST,
    CLAUSE,
    "With client clock authority, each attempt's now() is a fresh reading of that instance's injected "
    "clock: later attempts see later readings, and each instance keeps to its own clock.",
    capability="client_clock",
)
SERVER_SAMPLED = requirement(
    "profile.server-sampled-time-is-the-stores",
    RequirementLevel.MUST,
    CLAUSE,
    "With server_sampled clock authority, each attempt's now() is one frozen reading of the store's own "
    "clock: a clock given to connect() is not what it answers, and every instance on a store reads the "
    "same clock.",
    capability="server_sampled_clock",
)
AUTHORITATIVE = requirement(
    "profile.authoritative-time-follows-what-was-read",
    RequirementLevel.MUST,
    CLAUSE,
    "With transaction_authoritative clock authority, an attempt's now() is never earlier than the now() "
    "of an attempt whose committed write it read, on any instance, even when that write committed after "
    "the reading attempt began and whatever clock connect() was given.",
    capability="transaction_authoritative_clock",
)
DURABLE = requirement(
    "profile.durable-survives-reconnect",
    RequirementLevel.MUST,
    CLAUSE,
    "With durable durability, committed records and index entries survive closing every instance and "
    "connecting again to the same store.",
    capability="durable",
)
DURABLE_KILLED = requirement(
    "profile.durable-survives-killed-process",
    RequirementLevel.MUST,
    CLAUSE,
    "With durable durability, what a process committed (records and index entries) is read back by a fresh "
    "process after the writer was killed with SIGKILL right after its commits were acknowledged.",
    capability="cross_process+durable",
)
