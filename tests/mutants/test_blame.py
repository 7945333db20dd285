"""A bug fails its own requirement first; where it fails others too, their messages name the cause.

A driver author reads a report from the top. When one bug also fails checks of
other rules (a cursor that skips an entry breaks every check that reads in
small pages), those failures must not suggest a different cause: each says
what it saw and names the requirement that the bug breaks.
"""

from __future__ import annotations

from tests.mutants.runner import requirement_outcomes


def test_a_cursor_that_skips_an_entry_is_blamed_on_paging_by_every_check_it_fails() -> None:
    outcomes, messages = requirement_outcomes("tests.mutants.m_cursors:cursor_skips_one", areas=["cursors"])
    assert outcomes.get("cursors.pages-join-to-one-scan") == "failed", (
        f"the cursor-skips-one mutant must fail cursors.pages-join-to-one-scan, got {outcomes}"
    )
    # Only failures carry a blame; a check a loaded machine ran out of time on is inconclusive, and its
    # message says so instead of naming a rule.
    secondary = {
        rid: text
        for rid, text in messages.items()
        if rid != "cursors.pages-join-to-one-scan" and outcomes.get(rid) == "failed"
    }
    assert secondary, "the mutant was expected to fail order and range checks too (they read in small pages)"
    unblamed = {
        rid: text.splitlines()[0][:300]
        for rid, text in secondary.items()
        if "cursors.pages-join-to-one-scan" not in text
    }
    assert not unblamed, f"failures that do not point at the paging fault: {unblamed}"


def test_a_boundary_accepted_one_unit_past_is_blamed_on_that_boundary_by_the_all_or_nothing_checks() -> None:
    outcomes, messages = requirement_outcomes(
        "tests.mutants.m_limits:accepts_one_past_record_bytes", areas=["limits"]
    )
    assert outcomes.get("limits.record-bytes-boundary") == "failed", (
        f"the mutant must fail limits.record-bytes-boundary first, got {outcomes}"
    )
    text = messages.get("limits.oversized-work-never-split", "")
    assert not text or "limits.record-bytes-boundary" in text, (
        f"limits.oversized-work-never-split failed without naming the boundary that caused it: {text[:400]}"
    )
