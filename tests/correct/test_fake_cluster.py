"""The correct fake cluster passes every cluster_faults requirement, and the faults area beside it."""

from __future__ import annotations

from tests.mutants.runner import requirement_outcomes

DRIVER = "tests.correct.fake_cluster:harness"


def test_the_correct_fake_cluster_passes_the_cluster_faults_area() -> None:
    outcomes, messages = requirement_outcomes(DRIVER, areas=["cluster_faults"])
    cluster = {req: outcome for req, outcome in outcomes.items() if req.startswith("cluster_faults.")}
    assert cluster, "no cluster_faults requirement was judged"
    assert set(cluster.values()) == {"passed"}, (cluster, messages)


def test_the_reference_driver_sees_cluster_faults_as_not_applicable() -> None:
    outcomes, _ = requirement_outcomes("local", areas=["cluster_faults"])
    cluster = {req: outcome for req, outcome in outcomes.items() if req.startswith("cluster_faults.")}
    assert cluster and "passed" not in cluster.values(), cluster
