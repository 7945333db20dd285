"""Every class the checker names, the levels each rules out, and a search that no history order can fool.

Each test reads as a rule: the history it builds shows exactly the named
anomaly, and the report places the history on the isolation-level lattice
(the strongest levels it is consistent with, the weakest it violates).
"""

from __future__ import annotations

import pytest

from runlane_conformance.history import Anomaly, EdgeKind, History, Level, Outcome, check_history
from runlane_conformance.history import search as search_module
from tests.history.histories import create, read, replace, scan, txn

SETUP = txn("t0", create("a", "a0"), create("b", "b0"), create("c", "c0"), create("d", "d0"))


def test_a_serial_history_is_consistent_with_serializable() -> None:
    report = check_history(History((SETUP, txn("t1", read("a", "1", "a0"), replace("a", "1", "a0", "a1")))))
    assert report.consistent_with() == (Level.SERIALIZABLE,)
    assert report.violated() == ()


def test_nonadjacent_anti_dependencies_violate_snapshot_isolation_not_read_committed() -> None:
    # t1 -rw(a)-> t2 -wr(b)-> t3 -rw(c)-> t4 -wr(d)-> t1: no two anti-dependencies in a row.
    report = check_history(
        History(
            (
                SETUP,
                txn("t2", read("a", "1", "a0"), read("b", "2", "b0"), replace("a", "1", "a0", "a2"),
                    replace("b", "2", "b0", "b2")),
                txn("t3", read("b", "5", "b2"), read("c", "3", "c0")),
                txn("t4", read("c", "3", "c0"), read("d", "4", "d0"), replace("c", "3", "c0", "c4"),
                    replace("d", "4", "d0", "d4")),
                txn("t1", read("a", "1", "a0"), read("d", "6", "d4")),
            )
        )
    )  # fmt: skip
    assert report.anomalies == {Anomaly.G_NONADJACENT, Anomaly.G2_ITEM}
    (finding,) = report.of(Anomaly.G_NONADJACENT)
    kinds = [step.edge.kind for step in finding.steps]
    assert kinds.count(EdgeKind.RW) == 2 and len(kinds) == 4
    assert set(report.violated()) == {Level.REPEATABLE_READ, Level.SNAPSHOT_ISOLATION}
    assert report.consistent_with() == (Level.READ_COMMITTED,)


def test_write_skew_alone_is_consistent_with_snapshot_isolation() -> None:
    report = check_history(
        History(
            (
                SETUP,
                txn("t1", read("a", "1", "a0"), read("b", "2", "b0"), replace("a", "1", "a0", "a1")),
                txn("t2", read("a", "1", "a0"), read("b", "2", "b0"), replace("b", "2", "b0", "b2")),
            )
        )
    )
    assert report.anomalies == {Anomaly.G2_ITEM}
    assert report.consistent_with() == (Level.SNAPSHOT_ISOLATION,)
    assert report.violated() == (Level.REPEATABLE_READ,)


def test_a_write_cycle_is_g0_and_not_also_circular_information_flow() -> None:
    report = check_history(
        History(
            (
                SETUP,
                txn("t1", replace("a", "1", "a0", "a1"), replace("b", "5", "b2", "b1")),
                txn("t2", replace("a", "3", "a1", "a2"), replace("b", "2", "b0", "b2")),
            )
        )
    )
    assert Anomaly.G0 in report.anomalies and Anomaly.G1C not in report.anomalies
    (finding,) = report.of(Anomaly.G0)
    assert {step.edge.kind for step in finding.steps} == {EdgeKind.WW}
    assert report.violated() == (Level.READ_UNCOMMITTED,)


def test_a_read_of_its_own_key_that_misses_its_own_write_is_internal() -> None:
    found = check_history(History((txn("t1", create("x", "x1"), read("x")),))).anomalies
    assert found == {Anomaly.INTERNAL}


def test_an_eventual_index_page_listing_an_older_entry_than_the_attempts_read_is_not_internal() -> None:
    # A page of an eventual index offers candidates that may lag: the attempt read a2 and the page still
    # lists a0. The same page from an index promised current would contradict the read.
    setup = txn("t0", create("a", "a0", sort="s0"))
    moved = txn("t2", read("a", "1", "a0"), replace("a", "1", "a0", "a2", sort="s2"))
    for exact, internal in ((False, False), (True, True)):
        reader = txn("t1", read("a", "2", "a2"), scan(("s0", "a", "a0"), exact=exact))
        found = check_history(History((setup, moved, reader))).anomalies
        assert (Anomaly.INTERNAL in found) is internal, (exact, found)


def test_two_reads_of_one_key_that_disagree_are_internal_and_allowed_at_read_committed() -> None:
    report = check_history(
        History(
            (
                SETUP,
                txn("t2", read("a", "1", "a0"), replace("a", "1", "a0", "a2")),
                txn("t1", read("a", "1", "a0"), read("a", "2", "a2")),
            )
        )
    )
    assert Anomaly.INTERNAL in report.anomalies
    assert Level.READ_COMMITTED in report.consistent_with()


def test_a_read_of_a_value_the_attempt_writes_later_is_a_future_read() -> None:
    found = check_history(
        History((SETUP, txn("t1", read("a", "9", "a1"), replace("a", "1", "a0", "a1"))))
    ).anomalies
    assert Anomaly.FUTURE_READ in found


def test_a_committed_write_over_an_aborted_value_is_a_dirty_update() -> None:
    report = check_history(
        History(
            (
                txn("t1.a1", create("x", "x1"), outcome=Outcome.ABORTED),
                txn("t2", replace("x", "7", "x1", "x2")),
            )
        )
    )
    assert report.anomalies == {Anomaly.DIRTY_UPDATE}
    assert report.findings[0].attempts == ("t1.a1", "t2")
    assert report.violated() == (Level.READ_COMMITTED,)


def test_one_version_with_two_values_is_a_reused_version() -> None:
    report = check_history(
        History(
            (
                txn("t1", create("x", "x1")),
                txn("t2", create("y", "y2")),
                txn("t3", read("x", "5", "x1")),
                txn("t4", read("x", "5", "y2")),
            )
        )
    )
    assert Anomaly.VERSION_REUSED in report.anomalies


def _ring_with_read_skew_last(size: int) -> History:
    """``size`` attempts in one cycle of anti-dependencies, and a read skew joined to it, recorded last.

    Attempt ``r{i}`` reads ``x{i}`` and rewrites ``x{i+1}``, so each one's read is overtaken by its
    predecessor's write: one strongly connected component, no cycle with a single anti-dependency.
    The read skew (``q`` reads ``y`` before and ``z`` after ``p`` rewrote both) joins that component
    through ``x0``, after every ring attempt in history order.
    """
    names = [f"x{i}" for i in range(size)]
    setup = txn("s", *(create(n, f"{n}v0") for n in names), create("y", "y0"), create("z", "z0"))
    ring = [
        txn(
            f"r{i}",
            read(names[i], "1", f"{names[i]}v0"),
            read(names[(i + 1) % size], "1", f"{names[(i + 1) % size]}v0"),
            replace(names[(i + 1) % size], "1", f"{names[(i + 1) % size]}v0", f"{names[(i + 1) % size]}v1"),
        )
        for i in range(size)
    ]
    p = txn(
        "p",
        read("y", "1", "y0"),
        read("z", "1", "z0"),
        read("x0", "2", "x0v1"),
        replace("y", "1", "y0", "y1"),
        replace("z", "1", "z0", "z1"),
    )
    q = txn("q", read("y", "1", "y0"), read("z", "2", "z1"), read("x1", "1", "x1v0"))
    return History((setup, *ring, p, q))


def test_a_read_skew_recorded_after_a_large_cycle_is_still_found() -> None:
    history = _ring_with_read_skew_last(200)
    report = check_history(history)
    assert Anomaly.G_SINGLE in report.anomalies
    (finding,) = report.of(Anomaly.G_SINGLE)
    assert set(finding.attempts) == {"p", "q"}
    assert report.bounds == ()


def test_a_search_stopped_by_its_bound_says_so_and_never_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "SEARCH_STEPS_FLOOR", 0)
    monkeypatch.setattr(search_module, "SEARCH_STEPS_PER_EDGE", 0)
    report = check_history(_ring_with_read_skew_last(10))
    assert Anomaly.G_SINGLE in report.inconclusive
    assert Anomaly.G_SINGLE not in report.anomalies
    assert Level.SERIALIZABLE not in report.consistent_with()
    assert "bound" in report.render(_ring_with_read_skew_last(10))
