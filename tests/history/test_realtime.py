"""Real-time order in a history: logical spans, the rt edges they give, and what a cycle through them says.

Real-time order is context here, never a finding: the contract asks that committed transactions equal
*some* serial order, not one that follows when they ran, so a cycle through rt edges names the history
not strict serializable and fails nothing (``Report.ok`` stays true).
"""

from __future__ import annotations

import dataclasses
import json

from runlane_conformance.history import Attempt, EdgeKind, History, Span, check_history, from_json, to_json
from runlane_conformance.history.realtime import realtime_edge, realtime_edges
from runlane_conformance.history.witness import witness
from runlane_conformance.report_witness import recorded_witness

from .histories import create, read, replace, txn


def at(attempt: Attempt, round_number: int, clock: str = "p0") -> Attempt:
    """``attempt`` in round ``round_number`` of ``clock``, as the workload records it."""
    return dataclasses.replace(attempt, span=Span(clock, 2 * round_number, 2 * round_number + 1))


def _pairs(attempts: tuple[Attempt, ...]) -> set[tuple[str, str]]:
    graph = realtime_edges(attempts, range(len(attempts)))
    for source, targets in graph.items():
        for target in targets:
            assert realtime_edge(attempts, source, target).kind is EdgeKind.RT
    return {(attempts[s].id, attempts[t].id) for s, targets in graph.items() for t in targets}


def test_rt_edges_join_each_round_to_the_next_only_on_one_clock() -> None:
    attempts = (
        at(txn("a", create("a", "a0")), 0),
        at(txn("b", create("b", "b0")), 0),
        at(txn("c", create("c", "c0")), 1),
        at(txn("d", create("d", "d0")), 2),
        at(txn("e", create("e", "e0")), 1, clock="p1"),  # another process: unordered against p0
        txn("f", create("f", "f0")),  # no span: unordered
    )
    # a and b share a round (they may overlap); a -> d follows from a -> c -> d, so it is not drawn.
    assert _pairs(attempts) == {("a", "c"), ("b", "c"), ("c", "d")}


def test_overlapping_spans_of_any_length_are_reduced_as_an_interval_order() -> None:
    attempts = (
        dataclasses.replace(txn("long", create("a", "a0")), span=Span("p0", 0, 9)),
        dataclasses.replace(txn("x", create("b", "b0")), span=Span("p0", 0, 1)),
        dataclasses.replace(txn("y", create("c", "c0")), span=Span("p0", 2, 3)),
        dataclasses.replace(txn("z", create("d", "d0")), span=Span("p0", 10, 11)),
    )
    # long overlaps x and y; x -> y; long -> z and y -> z; x -> z follows from x -> y -> z.
    assert _pairs(attempts) == {("x", "y"), ("y", "z"), ("long", "z")}


def test_a_stale_read_after_a_commit_is_named_not_strict_serializable_and_fails_nothing() -> None:
    # t1 created x and ended; t2 began afterwards and still read x absent: some serial order (t2, t1)
    # explains what they read, but not one that follows when they ran.
    history = (at(txn("t1", create("x", "x1")), 0), at(txn("t2", read("x")), 1))
    report = check_history(History(history))
    assert report.ok
    assert report.consistent_with()[-1].value == "serializable"
    assert report.realtime is not None
    assert report.realtime.name == "G-single-realtime"
    assert [(s.source, s.edge.kind.value, s.target) for s in report.realtime.steps] == [
        ("t1", "rt", "t2"),
        ("t2", "rw", "t1"),
    ]
    line = report.realtime_line()
    assert "G-single-realtime: not strict serializable (context only, no requirement fails)" in line
    text = report.render(History(history))
    assert "t1 -rt(p0)-> t2: t1 ended before t2 began (on clock p0: tick 1 < tick 2)" in text
    assert "no anomaly found" in text


def test_a_serializable_history_in_real_time_order_is_consistent_with_strict_serializable() -> None:
    history = History(
        (at(txn("t1", create("x", "x1")), 0), at(txn("t2", read("x", "1", "x1")), 1)),
    )
    report = check_history(history)
    assert report.ok and report.realtime is None and report.realtime_edges == 1
    assert report.realtime_line().endswith(
        "no cycle runs through them, so consistent with strict serializable as far as the recorded order goes"
    )
    assert (
        "not recorded"
        in check_history(
            History(tuple(dataclasses.replace(a, span=None) for a in history.attempts))
        ).realtime_line()
    )


def test_a_witness_shows_the_rt_edges_between_its_attempts_in_text_and_data() -> None:
    # Write skew across two rounds of one process is impossible on a real store, so here: t1 and t2
    # in one round (overlapping) skew; t3 in the next round reads both results.
    history = History(
        (
            txn("s", create("x", "x0"), create("y", "y0")),
            at(txn("t1", read("x", "1", "x0"), read("y", "1", "y0"), replace("x", "1", "x0", "x1")), 0),
            at(txn("t2", read("x", "1", "x0"), read("y", "1", "y0"), replace("y", "1", "y0", "y2")), 1),
        )
    )
    report = check_history(history)
    assert {f.anomaly.value for f in report.findings} >= {"G2-item"}
    text = report.render(history)
    assert "real-time (context): t1 -rt-> t2: t1 ended before t2 began (on clock p0: tick 1 < tick 2)" in text
    # t1 -rt-> t2 and t2 -rw-> t1 (t2 read x0, t1 superseded it): also a real-time cycle.
    assert report.realtime is not None and report.realtime.name == "G-single-realtime"
    data = witness(report, history)
    (g2,) = [f for f in data["findings"] if f["anomaly"] == "G2-item"]
    assert g2["realtime"] == [
        {
            "source": "t1",
            "target": "t2",
            "kind": "rt",
            "key": "p0",
            "detail": "t1 ended before t2 began (on clock p0: tick 1 < tick 2)",
        }
    ]
    assert data["realtime_cycle"]["anomaly"] == "G-single-realtime"
    assert data["realtime"] == report.realtime_line()
    assert recorded_witness(json.dumps(data)) == data


def test_spans_survive_the_json_round_trip() -> None:
    history = History((at(txn("t1", create("x", "x1")), 3, clock="p2"), txn("t2", read("x"))))
    assert from_json(to_json(history)) == history
