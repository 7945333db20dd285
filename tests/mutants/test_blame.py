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
    secondary = {rid: text for rid, text in messages.items() if rid != "cursors.pages-join-to-one-scan"}
    assert secondary, "the mutant was expected to fail order and range checks too (they read in small pages)"
    unblamed = {
        rid: text.splitlines()[0][:300]
        for rid, text in secondary.items()
        if "cursors.pages-join-to-one-scan" not in text
    }
    assert not unblamed, f"failures that do not point at the paging fault: {unblamed}"
