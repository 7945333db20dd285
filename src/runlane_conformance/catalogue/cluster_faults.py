"""cluster_faults: A member of a replicated store dying, failing over or cut off loses no acknowledged work.

The requirements of the ``cluster_faults`` area, one ``Requirement`` value each. They apply only to a
harness whose store declares its cluster (``StoreHandle.cluster()``, capability ``cluster``) and offers
a fault mechanism (capability ``faults``): the suite lands each kill on a counted write of that traffic.
A driver without a declared cluster sees every one of them as not applicable, never as passed. Checks
are in ``suites/test_cluster_faults.py``; mutants in ``tests/mutants/m_cluster_faults.py``.
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ACKNOWLEDGED_SURVIVE_FAILOVER",
    "MINORITY_NEVER_ACKNOWLEDGES",
    "NO_REPLAY_AFTER_FAILOVER",
    "OUTCOME_MATCHES_STORE_AFTER_KILL",
    "READS_SEE_ACKNOWLEDGED_COMMITS",
]

CHECKLIST = "Verification checklist: injected failure paths with no partial writes"
ATTEMPTS = "Treat each transaction callback as a new attempt"
DURABILITY = "Report a profile that is true (durability)"

OUTCOME_MATCHES_STORE_AFTER_KILL = requirement(
    "cluster_faults.outcome-matches-store-after-primary-kill",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS} (grouping never reports a partially applied batch)",
    "When the member serving the store is killed mid-attempt (before its commit is sent, or after), "
    "what transaction() reports agrees with what the store holds once a new primary serves it: success "
    "means all of the attempt committed exactly once, StorageUnavailableError means none of it, "
    "StorageCommitUnknownError means all or none; no other error type escapes.",
    capability="cluster+faults",
)
NO_REPLAY_AFTER_FAILOVER = requirement(
    "cluster_faults.no-replay-after-failover",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {ATTEMPTS} (only the committed attempt's work may count)",
    "After the serving member dies with a commit possibly applied, the driver never runs the callback "
    "again on the member that takes over without first learning that the commit did not happen: work is "
    "never applied twice across a failover.",
    capability="cluster+faults",
)
ACKNOWLEDGED_SURVIVE_FAILOVER = requirement(
    "cluster_faults.acknowledged-survive-failover",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {DURABILITY}",
    "Commits acknowledged while the serving member is killed and another takes over are all there when "
    "read back from the new primary, each whole; an attempt reported as StorageUnavailableError left "
    "nothing. A store that acknowledges before its replicas hold the commit cannot keep this.",
    capability="cluster+faults",
)
READS_SEE_ACKNOWLEDGED_COMMITS = requirement(
    "cluster_faults.reads-see-acknowledged-commits",
    RequirementLevel.MUST,
    f"{ATTEMPTS}; {CHECKLIST}",
    "Once a commit is acknowledged, every later transaction of every instance reads it, whichever member "
    "the instance reaches, before and after a failover: a read served by a member that has not caught "
    "up is a stale read.",
    capability="cluster+faults",
)
MINORITY_NEVER_ACKNOWLEDGES = requirement(
    "cluster_faults.minority-never-acknowledges",
    RequirementLevel.MUST,
    f"{CHECKLIST}; {DURABILITY}",
    "While the serving member is cut off from its peers, a commit sent to it is never acknowledged unless "
    "it survives: once the partition heals, every commit acknowledged on either side is in the store.",
    capability="cluster_partition+cluster+faults",
)
