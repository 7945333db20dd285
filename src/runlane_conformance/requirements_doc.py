"""Renders ``docs/requirements.md`` (and ``docs/traceability.md``) from the requirement catalogue.

The documents are generated, never edited by hand: ``python -m runlane_conformance.requirements_doc``
from the repository root writes both. A test fails when a committed file differs from what this
renders. Beside each requirement stand its checks (``suites/test_<area>.py::test_name``, found by
importing the suites: each check records itself when its requirement decorates it) and its mutants
(``m_<module>:name``, read from the checkout's ``tests/mutants``, importable from the root because
``python -m`` puts the current directory first on the module path).

Each requirement names the title of the specification clause it enforces.
The specification is not shipped with this package, so the page does not
pretend it can be read here: every row links to the section of
``docs/contract.md`` that explains the same rule in our words instead.
``CLAUSE_SECTIONS`` says which section that is for each clause title.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import tempfile
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import traceability
from .catalogue import AREAS, Requirement, all_requirements, check_sites
from .traceability import anchor, clauses_by_requirement

__all__ = [
    "CAPABILITIES_SECTION",
    "CLAUSE_SECTIONS",
    "check_locations",
    "contract_sections",
    "mutant_locations",
    "render",
    "slugify",
]

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

Generated from the requirement catalogue (`src/runlane_conformance/catalogue/`) by
`python -m runlane_conformance.requirements_doc` (from the repository root); do not edit by hand.
Each ID is frozen: it names the same rule in pytest ids, JUnit properties and certification reports.
MUST failures deny certification; SHOULD failures are reported only.

"Explained in" links to the section of [the contract page]({CONTRACT_PAGE}) that explains the rule.
"Spec clause" gives the title of the clause in the Runlane storage contract specification that the
rule comes from; that specification is not part of this package, so the title is there to help you
find it if you have the text, not as a reference you are expected to follow.

"Clauses" lists the contract sentences the rule checks, by clause ID, each linked to its row on
[the traceability page](traceability.md), which maps every normative sentence of the contract to
the requirements that check it.

"Checked by" names the checks that judge the rule (`test_<area>.py::function` in
`src/runlane_conformance/suites/`); "Mutants" names the broken drivers of the toolkit's own tests that
those checks must fail (`module:name`, declared in `tests/mutants/module.py`), which CI's kill table
holds them to.

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


def check_locations() -> dict[str, tuple[str, ...]]:
    """Requirement ID -> its checks as ``test_<area>.py::function``, after importing every suite."""
    for area in AREAS:
        importlib.import_module(f"{__package__}.suites.test_{area}")
    return {
        rid: tuple(f"{Path(site.path).name}::{site.name}" for site in sites)
        for rid, sites in check_sites().items()
    }


def mutant_locations() -> dict[str, tuple[str, ...]]:
    """Requirement ID -> the mutants that must fail it, as ``m_<module>:name``, from ``tests/mutants``.

    Needs a checkout's root on the module path (``python -m`` from the root, or pytest in the checkout).
    """
    try:
        catalog = importlib.import_module("tests.mutants.catalog")
    except ModuleNotFoundError as error:
        raise SystemExit(
            f"cannot import tests.mutants ({error}): run this from the repository root with python -m"
        ) from error
    found: dict[str, list[str]] = {}
    for module, mutants in catalog.mutants_by_module().items():
        for mutant in mutants:
            found.setdefault(mutant.kills, []).append(f"{module}:{mutant.name}")
    return {rid: tuple(names) for rid, names in sorted(found.items())}


def _cell(items: Sequence[str]) -> str:
    return "<br>".join(f"`{item}`" for item in items)


def render(
    checks: Mapping[str, Sequence[str]] | None = None, mutants: Mapping[str, Sequence[str]] | None = None
) -> str:
    """The Markdown of docs/requirements.md; with ``checks`` and ``mutants`` (requirement ID -> their
    locations), each row also names its checks and mutants."""
    catalog = all_requirements()
    lines = [HEADER.replace("{capabilities}", slugify(CAPABILITIES_SECTION))]
    traced = clauses_by_requirement()
    for area in AREAS:
        rows = [req for req in catalog.values() if req.area == area]
        if not rows:
            continue
        lines.append(f"\n## {area}\n")
        header = ["ID", "Level", "Rule", "Explained in", "Spec clause", "Clauses", "Needs"]
        if checks is not None:
            header.append("Checked by")
        if mutants is not None:
            header.append("Mutants")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for req in rows:
            summary = req.summary.replace("|", "\\|")
            clause = req.clause.replace("|", "\\|")
            needs = req.capability or ""
            explained = _explained_in(req)
            clauses = ", ".join(
                f"[`{clause_id}`](traceability.md#{anchor(clause_id)})"
                for clause_id in traced.get(req.id, ())
            )
            cells = [f"`{req.id}`", req.level.value, summary, explained, clause, clauses, needs]
            if checks is not None:
                cells.append(_cell(checks.get(req.id, ())))
            if mutants is not None:
                cells.append(_cell(mutants.get(req.id, ())))
            lines.append("| " + " | ".join(cells) + " |")
    total = len(catalog)
    must = sum(1 for req in catalog.values() if req.level.value == "MUST")
    lines.append(f"\n{total} requirements ({must} MUST, {total - must} SHOULD).\n")
    return "\n".join(lines)


def _write(target: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/requirements.md and docs/traceability.md.")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="the docs folder (default: docs)")
    parser.add_argument("--stdout", action="store_true", help="print requirements.md instead of writing")
    args = parser.parse_args(argv)
    mutants = mutant_locations()
    text = render(check_locations(), mutants)
    if args.stdout:
        sys.stdout.write(text)
        return 0
    _write(args.docs / "requirements.md", text)
    _write(args.docs / "traceability.md", traceability.render(mutants=mutants))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
