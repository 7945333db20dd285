"""Every normative sentence of the contract has a clause row, and every row is sound.

The spec copy in ``spec/storage-contract.md`` must equal the upstream file when that file is
reachable (``../shared/spec/storage-contract.md`` beside the checkout); ``docs/traceability.md``
must equal what the clause table renders; and the validator itself is shown to catch each kind of
broken table (a sentence without a row, a row without requirement or reason, an unknown
requirement, a MUST requirement no clause names).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runlane_conformance.catalogue import RequirementLevel, all_requirements
from runlane_conformance.requirements_doc import mutant_locations
from runlane_conformance.requirements_doc import render as render_requirements
from runlane_conformance.traceability import (
    Clause,
    ClauseKind,
    anchor,
    clauses_by_requirement,
    load_clauses,
    normative_sentences,
    render,
    spec_sentences,
    strip_upstream_header,
    table_problems,
)

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "storage-contract.md"
UPSTREAM = ROOT.parent / "shared" / "spec" / "storage-contract.md"
DOC = ROOT / "docs" / "traceability.md"


def spec_text() -> str:
    return SPEC.read_text(encoding="utf-8")


def catalog_ids() -> tuple[set[str], set[str]]:
    catalog = all_requirements()
    return set(catalog), {rid for rid, req in catalog.items() if req.level is RequirementLevel.MUST}


def test_the_spec_copy_is_the_upstream_text() -> None:
    if not UPSTREAM.exists():
        pytest.skip(f"no upstream spec at {UPSTREAM}: the copy cannot be compared")
    assert strip_upstream_header(spec_text()) == UPSTREAM.read_text(encoding="utf-8"), (
        "spec/storage-contract.md differs from upstream: copy it again (keeping the header comment), "
        "then add clause rows for any new normative sentence"
    )


def test_the_spec_copy_says_it_is_the_upstream_copy() -> None:
    assert spec_text().startswith("<!-- Upstream copy")


def test_the_clause_table_is_sound() -> None:
    requirement_ids, must_ids = catalog_ids()
    problems = table_problems(load_clauses(), spec_text(), requirement_ids, must_ids)
    assert not problems, "the clause table is not sound:\n" + "\n".join(problems)


def test_traceability_doc_matches_the_table() -> None:
    assert DOC.read_text(encoding="utf-8") == render(mutants=mutant_locations()), (
        "docs/traceability.md is stale: run `python -m runlane_conformance.requirements_doc` "
        "from the repository root"
    )


def test_a_new_normative_sentence_without_a_row_fails() -> None:
    requirement_ids, _ = catalog_ids()
    text = spec_text().replace(
        "Reject overlapping reads.", "Reject overlapping reads. Drivers must never drop a write.", 1
    )
    problems = table_problems(load_clauses(), text, requirement_ids)
    assert [p for p in problems if "Drivers must never drop a write." in p and "without a clause row" in p]


def test_a_row_with_no_requirement_and_no_reason_fails() -> None:
    requirement_ids, _ = catalog_ids()
    clauses = list(load_clauses())
    clauses[0] = dataclasses.replace(clauses[0], checks=(), reason=None)
    problems = table_problems(clauses, spec_text(), requirement_ids)
    assert f"{clauses[0].id}: names no requirement and gives no reason why none can check it" in problems


def test_a_row_naming_an_unknown_requirement_fails() -> None:
    requirement_ids, _ = catalog_ids()
    clauses = list(load_clauses())
    clauses[0] = dataclasses.replace(clauses[0], checks=("point_reads.no-such-rule",))
    problems = table_problems(clauses, spec_text(), requirement_ids)
    assert any("unknown requirement 'point_reads.no-such-rule'" in p for p in problems)


def test_a_must_requirement_no_clause_names_fails_and_says_what_to_add() -> None:
    requirement_ids, must_ids = catalog_ids()
    target = "point_reads.exact-positions"
    clauses = [
        dataclasses.replace(c, checks=tuple(r for r in c.checks if r != target), reason=c.reason or "x")
        for c in load_clauses()
    ]
    problems = table_problems(clauses, spec_text(), requirement_ids, must_ids)
    assert any(target in p and "add its ID to the checks" in p for p in problems)


def test_a_phrase_that_locates_no_sentence_or_several_fails() -> None:
    requirement_ids, _ = catalog_ids()
    base = load_clauses()[0]
    lost = dataclasses.replace(base, phrase="words the spec never says")
    vague = Clause(
        "attempts.vague",
        "Treat each transaction callback as a new attempt",
        "attempt",
        ClauseKind.INFORMATIVE,
        "vague",
        reason="x",
    )
    problems = table_problems([lost, vague], spec_text(), requirement_ids)
    assert any(p.startswith(f"{base.id}: phrase") and "in 0 sentences" in p for p in problems)
    assert any(p.startswith("attempts.vague: phrase") for p in problems)


def test_each_prohibition_of_a_list_has_its_own_clause() -> None:
    """The sentence that forbids four things inside the callback has four rows, one per thing."""
    rows = [
        c
        for c in load_clauses()
        if c.section == "Treat each transaction callback as a new attempt"
        and c.kind is ClauseKind.PROHIBITION
        and "callback" in c.id
    ]
    sentence = (
        "Do not run user code, network calls, random id generation, or externally meaningful logging "
        "inside the callback."
    )
    located = [c for c in rows if c.phrase in sentence]
    assert len(located) == 4


def test_the_splitter_finds_sections_bullets_and_checklist_items() -> None:
    sentences = spec_sentences(spec_text())
    sections = {s.section for s in sentences}
    assert "Use the canonical encodings" in sections and "Verification checklist" in sections
    checklist = [s for s in sentences if s.section == "Verification checklist" and s.bullet]
    assert len(checklist) == 10 and all(s.normative for s in checklist)
    assert any(s.text == "Reject overlapping reads." for s in normative_sentences(spec_text()))


def test_the_catalogue_links_back_to_clauses() -> None:
    inverted = clauses_by_requirement()
    assert "attempts.one-mutation-per-key" in inverted["mutations.one-mutation-per-key"]
    page = render_requirements()
    assert f"(traceability.md#{anchor('attempts.one-mutation-per-key')})" in page


def test_permissions_are_marked() -> None:
    kinds = {c.id: c.kind for c in load_clauses()}
    assert kinds["attempts.create-unread-or-absent"] is ClauseKind.PERMISSION
    assert kinds["attempts.bulk-grouping-allowed"] is ClauseKind.PERMISSION
    assert kinds["exclusive.full-page-cursor"] is ClauseKind.PERMISSION
