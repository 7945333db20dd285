"""Sentence-level traceability: every normative sentence of the contract, and what checks it.

The clause table (``clauses.toml`` beside this module) gives each normative
sentence of the specification a stable clause ID, a fingerprint that finds
the sentence in the repository's upstream copy (``spec/storage-contract.md``:
the section title plus a phrase that occurs in exactly one sentence of that
section), our own paraphrase, and either the requirement IDs whose checks
enforce it or a one-line reason why no black-box check can.

What this module guarantees, and ``tests/test_traceability.py`` enforces:

* every sentence :func:`normative_sentences` flags in the spec copy is located
  by at least one clause (a sentence that forbids several things has one
  clause per thing, each with its own phrase);
* every clause is located by exactly one sentence, names only catalogued
  requirements, and names at least one of them or gives its reason;
* every MUST requirement is named by at least one clause, so the catalogue
  links back to the contract (:func:`clauses_by_requirement`).

``docs/traceability.md`` is generated from the table together with docs/requirements.md, by
``python -m runlane_conformance.requirements_doc`` from the repository root, so that the mutants each
row's requirements must kill (``tests/mutants``) are listed too (``render(mutants=...)``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path

__all__ = [
    "Clause",
    "ClauseKind",
    "SpecSentence",
    "clauses_by_requirement",
    "load_clauses",
    "normative_sentences",
    "render",
    "spec_sentences",
    "strip_upstream_header",
    "table_problems",
]

_ID = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9]+(?:-[a-z0-9]+)*")

#: Words that make a sentence normative (an obligation, a prohibition or a permission).
_NORMATIVE = re.compile(
    r"\b(must|never|only|rejects?|rejected|cannot|do not|may not|may|required?|requires|no|not|"
    r"atomic|atomically|exact|seals|contiguous|prove|count toward)\b",
    re.IGNORECASE,
)
#: Sentences that open with one of these verbs are instructions to the driver author.
_IMPERATIVE = re.compile(
    r"^(Use|Keep|Return|Bind|Treat|Map|Order|Lock|Copy|Coordinate|Enforce|Prepare|Preserve|Report|"
    r"Describe|Document|Roll back|Reuse|Start|Enable|Reject|Do not|Never)\b"
)
#: The section whose every bullet is an obligation, normative words or not.
CHECKLIST_SECTION = "Verification checklist"


class ClauseKind(StrEnum):
    """What a clause does to a driver: demands, forbids, allows, or lists a proof to publish.

    A ``permission`` bounds the checks: no check may fail a driver for doing
    what it allows, so its row names the requirements that must accept it.
    ``informative`` marks a flagged sentence that states a fact or describes
    core rather than binding the driver.
    """

    OBLIGATION = "obligation"
    PROHIBITION = "prohibition"
    PERMISSION = "permission"
    CHECKLIST = "checklist"
    INFORMATIVE = "informative"


@dataclass(frozen=True)
class Clause:
    """One normative statement of the contract and what enforces it.

    ``section`` and ``phrase`` are the fingerprint: ``phrase`` occurs in
    exactly one sentence of ``section`` in the spec copy. ``says`` is our
    paraphrase. ``checks`` are the requirement IDs that enforce the clause;
    ``reason`` says why no black-box check can (or what else covers it).
    """

    id: str
    section: str
    phrase: str
    kind: ClauseKind
    says: str
    checks: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class SpecSentence:
    """One sentence (or bullet) of the spec copy with the section title it sits under."""

    section: str
    text: str
    bullet: bool

    @property
    def normative(self) -> bool:
        """Whether the table must have a row for this sentence."""
        if self.bullet and self.section == CHECKLIST_SECTION:
            return True
        return bool(_NORMATIVE.search(self.text) or _IMPERATIVE.search(self.text))


def strip_upstream_header(text: str) -> str:
    """The upstream text of the spec copy: everything after the leading ``<!-- ... -->`` comment."""
    if text.startswith("<!--"):
        end = text.index("-->") + len("-->")
        return text[end:].removeprefix("\n")
    return text


def _is_heading(line: str) -> bool:
    return (
        not line.endswith((".", ":", ";")) and not line.startswith(("•", "{")) and not _NUMBERED.match(line)
    )


_NUMBERED = re.compile(r"^\d+\.\s+")
_SENTENCE_END = re.compile(r"(?<=[.;])\s+")


def spec_sentences(text: str) -> list[SpecSentence]:
    """Every sentence of the spec text, in order; the first line is the page title, not a section.

    A line that does not end like a sentence is a section title. A bullet is
    one sentence; a paragraph is split after each ``.`` or ``;`` followed by
    whitespace, so a sentence with two clauses joined by ``;`` yields both.
    """
    lines = [line.strip() for line in strip_upstream_header(text).split("\n")]
    section = ""
    found: list[SpecSentence] = []
    for number, line in enumerate(lines):
        if not line or number == 0:
            continue
        if _is_heading(line):
            section = line
            continue
        bullet = line.startswith("•")
        body = _NUMBERED.sub("", line.lstrip("• "))
        parts = [body] if bullet else [part for part in _SENTENCE_END.split(body) if part]
        found.extend(SpecSentence(section, part, bullet) for part in parts)
    return found


def normative_sentences(text: str) -> list[SpecSentence]:
    """The sentences of the spec text that need a row in the clause table."""
    return [sentence for sentence in spec_sentences(text) if sentence.normative]


@cache
def load_clauses() -> tuple[Clause, ...]:
    """The clause table, in the order of ``clauses.toml`` (which follows the spec)."""
    data = tomllib.loads(resources.files(__package__).joinpath("clauses.toml").read_text(encoding="utf-8"))
    sections: Mapping[str, str] = data["sections"]
    clauses: list[Clause] = []
    for row in data["clause"]:
        prefix = row["id"].partition(".")[0]
        clauses.append(
            Clause(
                id=row["id"],
                section=sections[prefix],
                phrase=row["phrase"],
                kind=ClauseKind(row["kind"]),
                says=row["says"],
                checks=tuple(row.get("checks", ())),
                reason=row.get("reason"),
            )
        )
    return tuple(clauses)


def clauses_by_requirement(clauses: Iterable[Clause] | None = None) -> dict[str, tuple[str, ...]]:
    """The table inverted: requirement ID -> the clause IDs it checks, in table order."""
    inverted: dict[str, list[str]] = {}
    for clause in load_clauses() if clauses is None else clauses:
        for requirement_id in clause.checks:
            inverted.setdefault(requirement_id, []).append(clause.id)
    return {requirement_id: tuple(ids) for requirement_id, ids in sorted(inverted.items())}


def table_problems(
    clauses: Sequence[Clause], spec_text: str, requirement_ids: Iterable[str], must_ids: Iterable[str] = ()
) -> list[str]:
    """Everything wrong with ``clauses`` against the spec text and the catalogue; empty when sound.

    Each problem is one line that says what to add or fix.
    """
    problems: list[str] = []
    sentences = spec_sentences(spec_text)
    known = set(requirement_ids)
    seen: set[str] = set()
    located: set[int] = set()
    for clause in clauses:
        if not _ID.fullmatch(clause.id):
            problems.append(f"{clause.id}: not of the form section.clause-name")
        if clause.id in seen:
            problems.append(f"{clause.id}: declared twice")
        seen.add(clause.id)
        hits = [
            index
            for index, sentence in enumerate(sentences)
            if sentence.section == clause.section and clause.phrase in sentence.text
        ]
        if len(hits) != 1:
            problems.append(
                f"{clause.id}: phrase {clause.phrase!r} is in {len(hits)} sentences of section "
                f"{clause.section!r}; it must locate exactly one"
            )
        located.update(hits)
        if not clause.checks and not (clause.reason and clause.reason.strip()):
            problems.append(f"{clause.id}: names no requirement and gives no reason why none can check it")
        for requirement_id in clause.checks:
            if requirement_id not in known:
                problems.append(f"{clause.id}: names unknown requirement {requirement_id!r}")
        if not clause.says.strip():
            problems.append(f"{clause.id}: has no paraphrase")
    for index, sentence in enumerate(sentences):
        if sentence.normative and index not in located:
            problems.append(
                f"normative sentence without a clause row (section {sentence.section!r}): {sentence.text!r}; "
                "add a [[clause]] to src/runlane_conformance/traceability/clauses.toml"
            )
    named = {requirement_id for clause in clauses for requirement_id in clause.checks}
    for requirement_id in sorted(set(must_ids) - named):
        problems.append(
            f"MUST requirement {requirement_id} is named by no clause: add its ID to the checks of the "
            "clause(s) it enforces in src/runlane_conformance/traceability/clauses.toml"
        )
    return problems


def anchor(clause_id: str) -> str:
    """The HTML anchor of a clause's row in docs/traceability.md."""
    return clause_id.replace(".", "-")


HEADER = """# Traceability: contract sentences to checks

Generated from `src/runlane_conformance/traceability/clauses.toml` by
`python -m runlane_conformance.requirements_doc` (from the repository root); do not edit by hand.

Every normative sentence of the storage contract (the repository keeps its upstream copy in
`spec/storage-contract.md`) has a clause ID here: every obligation, every prohibition (a sentence that
forbids several things has one clause per thing), every permission that limits what a check may demand,
and every item of the verification checklist. Each row says the rule in our words and names the
requirements ([catalogue](requirements.md)) whose checks enforce it, or why no black-box check can.
A test fails when a normative sentence has no row, when a row names no requirement and no reason, or
when a row names a requirement the catalogue does not have.

Kinds: **obligation** (the driver must), **prohibition** (the driver must not), **permission** (the
driver may; the named checks must accept it), **checklist** (a proof to publish), **informative** (a
flagged sentence that binds core or states a fact).
"""


MUTANTS_NOTE = """
"Misreads caught" lists the broken drivers of the toolkit's own test suite (`tests/mutants/`) that a
check of the row's requirements must fail, as `module:name` (`m_point_reads:drops-duplicate-positions`
is declared in `tests/mutants/m_point_reads.py`): each is one cheap wrong reading of the rule, and CI's
kill table proves each is caught by the requirement it names.
"""


def render(
    clauses: Sequence[Clause] | None = None, mutants: Mapping[str, Sequence[str]] | None = None
) -> str:
    """The Markdown of docs/traceability.md.

    ``mutants`` maps a requirement ID to the mutants it must kill (``module:name``); with it, each row
    also lists the misreads its requirements catch (``requirements_doc.mutant_locations`` reads them
    from ``tests/mutants``).
    """
    rows = load_clauses() if clauses is None else clauses
    lines = [HEADER if mutants is None else HEADER + MUTANTS_NOTE]
    section = None
    for clause in rows:
        if clause.section != section:
            section = clause.section
            lines.append(f"\n## {section or 'Introduction'}\n")
            if mutants is None:
                lines.append("| Clause | Kind | In our words | Checked by |")
                lines.append("|---|---|---|---|")
            else:
                lines.append("| Clause | Kind | In our words | Checked by | Misreads caught |")
                lines.append("|---|---|---|---|---|")
        checked = ", ".join(f"[`{req}`](requirements.md#{req.partition('.')[0]})" for req in clause.checks)
        if clause.reason:
            checked = f"{checked}; {clause.reason}" if checked else f"not checked: {clause.reason}"
        says = clause.says.replace("|", "\\|")
        cells = [
            f'<a id="{anchor(clause.id)}"></a>`{clause.id}`',
            clause.kind.value,
            says,
            checked.replace("|", "\\|"),
        ]
        if mutants is not None:
            names = dict.fromkeys(name for req in clause.checks for name in mutants.get(req, ()))
            cells.append(", ".join(f"`{name}`" for name in names))
        lines.append("| " + " | ".join(cells) + " |")
    checked_count = sum(1 for clause in rows if clause.checks)
    lines.append(
        f"\n{len(rows)} clauses: {checked_count} checked by at least one requirement, "
        f"{len(rows) - checked_count} with a reason instead.\n"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/traceability.md from the clause table.")
    parser.add_argument("--write", type=Path, help="write the document to this path (atomically)")
    args = parser.parse_args(argv)
    text = render()
    if args.write is None:
        sys.stdout.write(text)
        return 0
    target: Path = args.write
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, target)
    return 0
