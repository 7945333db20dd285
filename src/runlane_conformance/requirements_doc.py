"""Renders ``docs/requirements.md`` from the requirement catalog.

The document is generated, never edited by hand: ``python -m
runlane_conformance.requirements_doc --write docs/requirements.md``. A test
fails when the committed file differs from what this renders.

Each requirement names the title of the specification clause it enforces.
The specification is not shipped with this package, so the page does not
pretend it can be read here: every row links to the section of
``docs/contract.md`` that explains the same rule in our words instead.
``CLAUSE_SECTIONS`` says which section that is for each clause title.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import unicodedata
from pathlib import Path

from .catalogue import AREAS, Requirement, all_requirements
from .traceability import anchor, clauses_by_requirement

__all__ = ["CAPABILITIES_SECTION", "CLAUSE_SECTIONS", "contract_sections", "render", "slugify"]

#: The page every link points into, relative to ``docs/requirements.md``.
CONTRACT_PAGE = "contract.md"

#: The docs/contract.md section that explains the capabilities named in the "Needs" column.
CAPABILITIES_SECTION = "11. Optional capabilities and skip reasons"

#: Which docs/contract.md heading explains each specification clause. A clause part is looked up as
#: written first ("Report a profile that is true (limits)"), then by its title alone (the text before
#: " (" or ": "), so a qualified citation can point at a narrower section than its clause.
CLAUSE_SECTIONS: dict[str, str] = {
    "Keep logical records in core": "1. The JSON boundary",
    "Use the canonical encodings": "3. Encodings, and why their order works",
    "Use the closed index catalog": "4. Cursors and their scope",
    "Treat each transaction callback as a new attempt": "9. Transactions: one callback, many attempts",
    "Report a profile that is true": "10. The profile: what a driver promises",
    "Report a profile that is true (limits)": "6. Streams and limits",
    "Add optional ordered append": "Ordered append",
    "Add optional ordered append (oversized atomic work)": "6. Streams and limits",
    "Add optional exclusive candidates": "Exclusive candidates",
    "Keep operator reads separate": "Operator reads",
    "Preserve completion-wait presence": "12. Completion-wait presence",
    "Preserve pruning invariants": "13. Run pruning",
    "Preserve pruning invariants (wait tokens)": "14. Wait tokens",
    "Verification checklist (wait tokens)": "14. Wait tokens",
    "Use Local as the executable reference": "9. Transactions: one callback, many attempts",
    "Verification checklist: conflict detection": "9. Transactions: one callback, many attempts",
    "Verification checklist: cursor-scope rejection": "4. Cursors and their scope",
    "Verification checklist: defensive copies": "1. The JSON boundary",
    "Verification checklist: injected failure paths with no partial writes": "When the connection fails",
    "Verification checklist: order, range bounds, tie-breaking": "3. Encodings, and why their order works",
}

#: Clause parts that only say "this is on the spec's checklist" and need no section of their own.
_NO_SECTION = frozenset({"Verification checklist"})

HEADER = f"""# Conformance requirements

Generated from the requirement catalog by `python -m runlane_conformance.requirements_doc --write
docs/requirements.md`; do not edit by hand. Each ID is frozen: it names the same rule in pytest ids,
JUnit properties and certification reports. MUST failures deny certification; SHOULD failures are
reported only.

"Explained in" links to the section of [the contract page]({CONTRACT_PAGE}) that explains the rule.
"Spec clause" gives the title of the clause in the Runlane storage contract specification that the
rule comes from; that specification is not part of this package, so the title is there to help you
find it if you have the text, not as a reference you are expected to follow.

"Clauses" lists the contract sentences the rule checks, by clause ID, each linked to its row on
[the traceability page](traceability.md), which maps every normative sentence of the contract to
the requirements that check it.

A capability in the "Needs" column means the check runs only when the driver offers it (names
joined by `+`: all of them), and is otherwise skipped with a `profile:` reason;
[the capabilities section]({CONTRACT_PAGE}#{{capabilities}}) explains each name. To run only one
requirement's checks under pytest, pass `--runlane-requirement ID` (repeatable).
"""


def slugify(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) and GitHub both give a plain-text heading."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def contract_sections(requirement: Requirement) -> list[str]:
    """The docs/contract.md headings that explain ``requirement``'s clause, in citation order.

    Raises ``KeyError`` naming the clause part when ``CLAUSE_SECTIONS`` does not cover it.
    """
    sections: list[str] = []
    for part in (piece.strip() for piece in requirement.clause.split(";")):
        if not part or part in _NO_SECTION:
            continue
        title = re.split(r" \(|: ", part, maxsplit=1)[0]
        section = CLAUSE_SECTIONS.get(part) or CLAUSE_SECTIONS.get(title)
        if section is None:
            raise KeyError(f"{requirement.id}: no docs/contract.md section for clause {part!r}")
        if section not in sections:
            sections.append(section)
    return sections


def _explained_in(requirement: Requirement) -> str:
    try:
        sections = contract_sections(requirement)
    except KeyError:
        return "(not yet explained)"
    return ", ".join(f"[{section}]({CONTRACT_PAGE}#{slugify(section)})" for section in sections)


def render() -> str:
    catalog = all_requirements()
    lines = [HEADER.replace("{capabilities}", slugify(CAPABILITIES_SECTION))]
    traced = clauses_by_requirement()
    for area in AREAS:
        rows = [req for req in catalog.values() if req.area == area]
        if not rows:
            continue
        lines.append(f"\n## {area}\n")
        lines.append("| ID | Level | Rule | Explained in | Spec clause | Clauses | Needs |")
        lines.append("|---|---|---|---|---|---|---|")
        for req in rows:
            summary = req.summary.replace("|", "\\|")
            clause = req.clause.replace("|", "\\|")
            needs = req.capability or ""
            explained = _explained_in(req)
            clauses = ", ".join(
                f"[`{clause_id}`](traceability.md#{anchor(clause_id)})"
                for clause_id in traced.get(req.id, ())
            )
            cells = (f"`{req.id}`", req.level.value, summary, explained, clause, clauses, needs)
            lines.append("| " + " | ".join(cells) + " |")
    total = len(catalog)
    must = sum(1 for req in catalog.values() if req.level.value == "MUST")
    lines.append(f"\n{total} requirements ({must} MUST, {total - must} SHOULD).\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
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


if __name__ == "__main__":
    raise SystemExit(main())
