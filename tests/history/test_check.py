"""The checker on its own: hand-made histories of every anomaly class, and serializable ones that look
suspicious (the kind that a checker drawing edges it cannot prove would flag)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runlane_conformance.history import (
    Anomaly,
    EdgeKind,
    History,
    HistoryFormatError,
    Outcome,
    check_history,
    from_json,
    save,
    to_json,
)
from runlane_conformance.history.__main__ import main
from tests.history.histories import create, delete, read, replace, scan, txn

SETUP = txn("t0", create("x", "x0"), create("y", "y0"))


def anomalies(*attempts: object) -> frozenset[Anomaly]:
    return check_history(History(tuple(attempts))).anomalies  # type: ignore[arg-type]


def test_a_serial_history_has_no_anomaly() -> None:
    report = check_history(
        History(
            (
                SETUP,
                txn("t1", read("x", "1", "x0"), replace("x", "1", "x0", "x1")),
                txn("t2", read("x", "3", "x1"), read("y", "2", "y0"), replace("y", "2", "y0", "y2")),
                txn("t3", read("x", "3", "x1"), read("y", "4", "y2")),
            )
        )
    )
    assert report.ok, report.render(History(()))
    assert report.committed == 4
    assert report.edges > 0


def test_g0_write_cycle() -> None:
    found = anomalies(
        SETUP,
        txn("t1", replace("x", "1", "x0", "x1"), replace("y", "5", "y2", "y1")),
        txn("t2", replace("x", "3", "x1", "x2"), replace("y", "2", "y0", "y2")),
    )
    assert Anomaly.G0 in found


def test_g1a_aborted_read() -> None:
    found = anomalies(
        txn("t1.a1", create("x", "x1"), outcome=Outcome.ABORTED),
        txn("t2", read("x", "7", "x1")),
    )
    assert found == {Anomaly.G1A}


def test_a_value_no_attempt_wrote_is_a_garbage_read_not_an_aborted_one() -> None:
    assert anomalies(txn("t1", read("x", "7", "garbage"))) == {Anomaly.GARBAGE_READ}


def test_g1a_through_an_index_scan() -> None:
    found = anomalies(
        txn("t1.a1", create("k", "k1", sort="s1"), outcome=Outcome.ABORTED),
        txn("t2", scan(("s1", "k", "k1"))),
    )
    assert found == {Anomaly.G1A}


def test_g1b_intermediate_read() -> None:
    found = anomalies(
        txn("t1", create("x", "x1"), replace("x", "?", "x1", "x2")),
        txn("t2", read("x", "5", "x1")),
    )
    assert Anomaly.G1B in found


def test_g1c_circular_information_flow() -> None:
    found = anomalies(
        txn("t1", read("y", "2", "y2"), create("x", "x1")),
        txn("t2", read("x", "1", "x1"), create("y", "y2")),
    )
    assert found == {Anomaly.G1C}


def test_g_single_read_skew() -> None:
    history = History(
        (
            SETUP,
            txn(
                "t2",
                read("x", "1", "x0"),
                read("y", "2", "y0"),
                replace("x", "1", "x0", "x2"),
                replace("y", "2", "y0", "y2"),
            ),
            txn("t1", read("x", "1", "x0"), read("y", "4", "y2")),
        )
    )
    report = check_history(history)
    assert report.anomalies == {Anomaly.G_SINGLE}
    (finding,) = report.findings
    assert [s.edge.kind for s in finding.steps].count(EdgeKind.RW) == 1
    text = report.render(history)
    assert "t1 -rw(x)-> t2" in text and "t2 -wr(y)-> t1" in text


def test_g2_item_write_skew() -> None:
    report = check_history(
        History(
            (
                SETUP,
                txn("t1", read("x", "1", "x0"), read("y", "2", "y0"), replace("x", "1", "x0", "x1")),
                txn("t2", read("x", "1", "x0"), read("y", "2", "y0"), replace("y", "2", "y0", "y2")),
            )
        )
    )
    assert report.anomalies == {Anomaly.G2_ITEM}
    (finding,) = report.findings
    assert [s.edge.kind for s in finding.steps] == [EdgeKind.RW, EdgeKind.RW]


def test_lost_update_is_named() -> None:
    found = anomalies(
        SETUP,
        txn("t1", read("x", "1", "x0"), replace("x", "1", "x0", "x1")),
        txn("t2", read("x", "1", "x0"), replace("x", "1", "x0", "x2")),
    )
    assert Anomaly.LOST_UPDATE in found
    assert Anomaly.G2_ITEM in found  # each read what the other overwrote


def test_two_creates_of_a_never_deleted_key_are_a_lost_update() -> None:
    assert Anomaly.LOST_UPDATE in anomalies(txn("t1", create("x", "x1")), txn("t2", create("x", "x2")))


def test_g2_predicate_skew() -> None:
    report = check_history(
        History(
            (
                txn("t1", scan(lower="a", upper="m"), create("k1", "k1v", sort="c")),
                txn("t2", scan(lower="a", upper="m"), create("k2", "k2v", sort="d")),
            )
        )
    )
    assert report.anomalies == {Anomaly.G2}
    assert {s.edge.kind for s in report.findings[0].steps} == {EdgeKind.PRW}


def test_the_witness_is_the_shortest_cycle() -> None:
    three = [
        txn("a", read("p", "1", "p0"), read("q", "2", "q0"), replace("p", "1", "p0", "p1")),
        txn("b", read("q", "2", "q0"), read("r", "3", "r0"), replace("q", "2", "q0", "q1")),
        txn("c", read("r", "3", "r0"), read("p", "1", "p0"), replace("r", "3", "r0", "r1")),
    ]
    two = [
        txn("d", read("x", "5", "x0"), read("y", "6", "y0"), replace("x", "5", "x0", "x1")),
        txn("e", read("x", "5", "x0"), read("y", "6", "y0"), replace("y", "6", "y0", "y1")),
    ]
    setup = txn("s", *(create(k, f"{k}0") for k in "pqrxy"))
    report = check_history(History((setup, *three, *two)))
    (finding,) = report.of(Anomaly.G2_ITEM)
    assert set(finding.attempts) == {"d", "e"}
    three_only = check_history(History((setup, *three)))
    assert len(three_only.of(Anomaly.G2_ITEM)[0].steps) == 3


# -- serializable, but suspicious --------------------------------------------------------------------


def test_an_absent_read_after_a_delete_draws_no_edge() -> None:
    # Serial order t0, t1, t2: t2 saw x absent *after* t1 deleted it. Blaming t2 for reading x before
    # t0 created it would close a false cycle with t0 -wr(y)-> t2.
    assert not anomalies(
        txn("t0", create("x", "x0"), create("y", "y0")),
        txn("t1", read("x", "1", "x0"), delete("x", "1", "x0")),
        txn("t2", read("x"), read("y", "2", "y0")),
    )


def test_a_full_page_says_nothing_about_entries_beyond_its_last_item() -> None:
    # t1 read t2's write, then paged one item; k2 (sorted after that item) was never looked at.
    assert not anomalies(
        txn("t0", create("k1", "k1v", sort="b")),
        txn("t2", create("k2", "k2v", sort="d"), create("w", "w2")),
        txn("t1", read("w", "9", "w2"), scan(("b", "k1", "k1v"), lower="a", upper="m", limit=1)),
    )


def test_a_page_that_ended_early_with_a_cursor_looked_only_as_far_as_its_last_item() -> None:
    for page in (
        scan(("b", "k1", "k1v"), lower="a", upper="m", limit=5, more=True),
        scan(lower="a", upper="m", limit=5, more=True),
    ):
        assert not anomalies(
            txn("t0", create("k1", "k1v", sort="b")),
            txn("t2", create("k2", "k2v", sort="d"), create("w", "w2")),
            txn("t1", read("w", "9", "w2"), page),
        )


def test_an_exclusive_page_may_skip_rows_and_a_lagging_index_may_miss_them() -> None:
    for page in (scan(lower="a", upper="m", exclusive=True), scan(lower="a", upper="m", exact=False)):
        assert not anomalies(
            txn("t2", create("k2", "k2v", sort="d"), create("w", "w2")),
            txn("t1", read("w", "9", "w2"), page),
        )


def test_a_later_version_outside_the_range_explains_a_page_without_the_key() -> None:
    # k moved into the range (k1), then out of the index (k2); t1's empty page saw k2, after t3.
    assert not anomalies(
        txn("t0", create("k", "k0")),
        txn("t3", read("k", "1", "k0"), replace("k", "1", "k0", "k1", sort="c")),
        txn("t4", read("k", "2", "k1"), replace("k", "2", "k1", "k2"), create("w", "w4")),
        txn("t1", read("w", "3", "w4"), scan(lower="a", upper="m")),
    )


def test_replays_and_unknown_outcomes() -> None:
    assert not anomalies(
        txn("t1.a1", create("x", "x1"), outcome=Outcome.ABORTED),
        txn("t1.a2", create("x", "x2")),
        txn("t2", read("x", "4", "x2")),
        txn("t3.a1", create("z", "z3"), outcome=Outcome.UNKNOWN),
        txn("t4", read("z", "8", "z3")),  # the unknown commit happened: t4 saw it
        txn("t5.a1", create("u", "u5"), outcome=Outcome.UNKNOWN),
    )


def test_a_stale_read_only_snapshot_is_serializable() -> None:
    assert not anomalies(
        SETUP,
        txn(
            "t1",
            read("x", "1", "x0"),
            read("y", "2", "y0"),
            replace("x", "1", "x0", "x1"),
            replace("y", "2", "y0", "y1"),
        ),
        txn("t2", read("x", "1", "x0"), read("y", "2", "y0")),
    )


# -- files -------------------------------------------------------------------------------------------


def _skewed() -> History:
    return History(
        (
            SETUP,
            txn(
                "t1",
                read("x", "1", "x0"),
                read("y", "2", "y0"),
                replace("x", "1", "x0", "x1"),
                scan(("s", "x", "x1"), lower="a", upper="z"),
            ),
            txn("t2", read("x", "1", "x0"), read("y", "2", "y0"), replace("y", "2", "y0", "y2")),
        ),
        meta=(("driver", "hand-made"),),
    )


def test_json_round_trip_is_exact_and_stable() -> None:
    history = _skewed()
    text = to_json(history)
    assert from_json(text) == history
    assert to_json(from_json(text)) == text
    assert check_history(from_json(text)).render(history) == check_history(history).render(history)


def test_another_schema_version_is_refused() -> None:
    text = to_json(_skewed()).replace('"version":2', '"version":3', 1)
    with pytest.raises(HistoryFormatError, match="version 3"):
        from_json(text)


def test_a_version_1_file_is_read_as_attempts_without_spans() -> None:
    history = _skewed()
    text = to_json(history).replace('"version":2', '"version":1', 1).replace(',"span":null', "")
    assert from_json(text) == history


def test_the_command_line_rechecks_a_saved_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = save(_skewed(), tmp_path / "bad.json")
    good = save(History((SETUP,)), tmp_path / "good.json")
    (tmp_path / "junk.json").write_text("{}")
    assert main([str(good)]) == 0
    assert main([str(bad)]) == 1
    assert "G2-item" in capsys.readouterr().out
    assert main([str(tmp_path / "junk.json")]) == 2


def test_the_account_spells_out_a_few_findings_per_class_and_counts_the_rest() -> None:
    setup = txn("s", *(create(f"k{i}", f"k{i}v0") for i in range(5)))
    pairs = [
        txn(f"{who}{i}", read(f"k{i}", "1", f"k{i}v0"), replace(f"k{i}", "1", f"k{i}v0", f"k{i}{who}"))
        for i in range(5)
        for who in "ab"
    ]
    history = History((setup, *pairs))
    report = check_history(history)
    assert len(report.of(Anomaly.LOST_UPDATE)) == 5
    text = report.render(history, only=[Anomaly.LOST_UPDATE], per_class=2)
    assert text.count("lost-update: ") == 2
    assert "... and 3 more lost-update finding(s)" in text


def test_a_page_that_misses_a_write_whose_sibling_was_read_is_read_skew() -> None:
    # t1 saw t2's w but its exact page missed the k2 that t2 created in the same commit.
    history = History(
        (
            txn("t2", create("k2", "k2v", sort="d"), create("w", "w2")),
            txn("t1", read("w", "9", "w2"), scan(lower="a", upper="m")),
        )
    )
    report = check_history(history)
    assert report.anomalies == {Anomaly.G_SINGLE}
    assert sorted(s.edge.kind for s in report.findings[0].steps) == [EdgeKind.PRW, EdgeKind.WR]
    assert report.render(history) == check_history(history).render(history)


# -- what absences read: deletes, moves out of a range, and when the history cannot say ------------------


def test_an_absent_read_of_a_deleted_key_after_its_creator_is_the_delete_or_else_read_skew() -> None:
    # t2 saw t0's y, so t0 (which created x) precedes it: its absent x is t1's delete (t1 -wr-> t2), and t1
    # read t2's w: a cycle of reads (G1c). Had t2 seen x before t0 created it, t2 -rw-> t0 -wr-> t2 is a
    # G-single. Either way there is read skew, and no more is proven: the G-single is reported.
    history = History(
        (
            SETUP,
            txn("t1", read("x", "1", "x0"), read("w", "5", "w2"), delete("x", "1", "x0")),
            txn("t2", read("x"), read("y", "2", "y0"), create("w", "w2")),
        )
    )
    report = check_history(history)
    assert report.anomalies == {Anomaly.G_SINGLE}
    (finding,) = report.of(Anomaly.G_SINGLE)
    inferred = [s for s in finding.steps if s.edge.inferred]
    assert [s.edge.kind for s in inferred] == [EdgeKind.WR] and "G-single" in inferred[0].edge.detail
    assert (inferred[0].source, inferred[0].target, inferred[0].edge.key) == ("t1", "t2", "x")


def test_an_absent_read_whose_creator_does_not_precede_the_reader_draws_no_edge() -> None:
    # Nothing orders t0 before t2, so t2 may have read x before its create: serial t2, t0, t1.
    assert not anomalies(
        txn("t0", create("x", "x0")),
        txn("t1", read("x", "1", "x0"), read("w", "5", "w2"), delete("x", "1", "x0")),
        txn("t2", read("x"), create("w", "w2")),
    )


def test_a_page_that_omits_a_key_read_the_version_that_moved_it_out_of_the_range() -> None:
    # k was inside [a, m) (k0) and t1 moved it out (k1); t2 saw t0's w, so its page without k read k1: t1
    # -pwr-> t2, and t1 read t2's z: a cycle with no anti-dependency, or, had t2 seen k before t0 created
    # it, a G-single through t0: read skew either way.
    history = History(
        (
            txn("t0", create("k", "k0", sort="c"), create("w", "w0")),
            txn("t1", read("k", "1", "k0"), read("z", "7", "z2"), replace("k", "1", "k0", "k1", sort="x")),
            txn("t2", read("w", "2", "w0"), scan(lower="a", upper="m"), create("z", "z2")),
        )
    )
    report = check_history(history)
    assert report.anomalies == {Anomaly.G_SINGLE}
    (finding,) = report.of(Anomaly.G_SINGLE)
    assert [s.edge.kind for s in finding.steps if s.edge.inferred] == [EdgeKind.PWR]


def test_a_page_listing_a_key_that_is_deleted_later_is_a_predicate_anti_dependency_on_the_delete() -> None:
    # t2 listed k0 and t1 deleted it, yet t2 read t1's z: G-single through a prw to the delete.
    history = History(
        (
            txn("t0", create("k", "k0", sort="c")),
            txn("t1", read("k", "1", "k0"), delete("k", "1", "k0"), create("z", "z1")),
            txn("t2", read("z", "7", "z1"), scan(("c", "k", "k0"), lower="a", upper="m")),
        )
    )
    assert check_history(history).anomalies == {Anomaly.G_SINGLE}


def test_a_lagging_index_page_reads_nothing_by_omission() -> None:
    # The same history as above with an eventual index: its empty page is no evidence.
    assert not anomalies(
        txn("t0", create("k", "k0", sort="c"), create("w", "w0")),
        txn("t1", read("k", "1", "k0"), read("z", "7", "z2"), replace("k", "1", "k0", "k1", sort="x")),
        txn("t2", read("w", "2", "w0"), scan(lower="a", upper="m", exact=False), create("z", "z2")),
    )


def test_an_unobserved_delete_of_unknown_outcome_leaves_an_absence_unexplained() -> None:
    # u's delete may have committed: t2's absent x may be it, so t2 -rw-> t0 (a false G-single with t0 -wr->
    # t2) must not be drawn, nor a page's omission of k read as before its create.
    assert not anomalies(
        SETUP,
        txn("u", read("x", "1", "x0"), delete("x", "1", "x0"), outcome=Outcome.UNKNOWN),
        txn("t2", read("x"), read("y", "2", "y0")),
    )
    assert not anomalies(
        txn("t0", create("k", "k0", sort="c"), create("w", "w0")),
        txn("u", read("k", "1", "k0"), delete("k", "1", "k0"), outcome=Outcome.UNKNOWN),
        txn("t2", read("w", "2", "w0"), scan(lower="a", upper="m")),
    )


def test_an_exact_page_that_leaves_out_a_key_the_attempt_just_read_inside_its_range_is_internal() -> None:
    setup = txn("t0", create("k", "k0", sort="c"))
    for page, internal in (
        (scan(lower="a", upper="m"), True),
        (scan(("c", "k", "k0"), lower="a", upper="m"), False),
        (scan(lower="d", upper="m"), False),  # k's entry lies outside the range
        (scan(lower="a", upper="m", exact=False), False),  # a lagging index may miss it
        (scan(lower="a", upper="m", exclusive=True), False),  # another attempt may hold it
    ):
        found = check_history(History((setup, txn("t1", read("k", "1", "k0"), page)))).anomalies
        assert (Anomaly.INTERNAL in found) is internal, (page, found)


def test_a_witness_line_prints_scan_bounds_in_words_not_hex() -> None:
    from runlane_conformance.history.findings import describe_attempt

    lower, upper = b"2030-01-02".hex(), b"2030-01-03".hex()
    line = describe_attempt(txn("t1", scan(lower=lower, upper=upper)))
    assert "[<2030-01-02>..<2030-01-03>)" in line, line
    assert lower not in line and upper not in line, line
