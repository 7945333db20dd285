"""Broken replicated stores for the cluster_faults area, built on the in-process fake cluster.

Each is ``tests/correct/fake_cluster.py`` with one option set to the way real replicated drivers go
wrong; the correct fake passes every ``cluster_faults`` requirement (``tests/correct/test_fake_cluster.py``).
"""

from __future__ import annotations

from runlane_conformance.catalogue import cluster_faults
from tests.correct.fake_cluster import configured
from tests.mutants.catalog import Mutant

reports_unavailable_after_failover = configured(lost_reply="unavailable")
replays_after_failover = configured(lost_reply="replay")
acknowledges_before_replication = configured(replication="lagging")
reads_from_a_stale_replica = configured(replication="lagging", reads="replica")
minority_acknowledges = configured(minority="acknowledge")

MUTANTS = [
    Mutant(
        "reports-unavailable-after-failover",
        "tests.mutants.m_cluster_faults:reports_unavailable_after_failover",
        cluster_faults.OUTCOME_MATCHES_STORE_AFTER_KILL,
        "a commit whose answer was lost when the primary died is reported as not committed, though the "
        "replica that took over has it",
    ),
    Mutant(
        "replays-after-failover",
        "tests.mutants.m_cluster_faults:replays_after_failover",
        cluster_faults.NO_REPLAY_AFTER_FAILOVER,
        "a commit whose answer was lost when the primary died is retried on the new primary, which "
        "already holds it: the work is applied twice",
    ),
    Mutant(
        "acknowledges-before-replication",
        "tests.mutants.m_cluster_faults:acknowledges_before_replication",
        cluster_faults.ACKNOWLEDGED_SURVIVE_FAILOVER,
        "a commit is acknowledged before the replica has it (asynchronous replication): the last "
        "acknowledged commit before a failover is lost",
    ),
    Mutant(
        "reads-from-a-stale-replica",
        "tests.mutants.m_cluster_faults:reads_from_a_stale_replica",
        cluster_faults.READS_SEE_ACKNOWLEDGED_COMMITS,
        "read-only transactions are served by a replica that trails the primary by one commit",
    ),
    Mutant(
        "minority-acknowledges",
        "tests.mutants.m_cluster_faults:minority_acknowledges",
        cluster_faults.MINORITY_NEVER_ACKNOWLEDGES,
        "a primary cut off from its peers keeps acknowledging commits, which healing throws away",
    ),
]
