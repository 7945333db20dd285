"""docs/requirements.md is generated from the catalog and must never go stale."""

from __future__ import annotations

from pathlib import Path

from runlane_conformance.catalogue import AREAS, RequirementLevel, all_requirements
from runlane_conformance.requirements_doc import check_locations, mutant_locations, render

DOC = Path(__file__).resolve().parent.parent / "docs" / "requirements.md"


def test_requirements_doc_matches_the_catalog() -> None:
    assert DOC.read_text(encoding="utf-8") == render(check_locations(), mutant_locations()), (
        "docs/requirements.md is stale: run `python -m runlane_conformance.requirements_doc` "
        "from the repository root"
    )


def test_every_requirement_is_well_formed() -> None:
    catalog = all_requirements()
    assert catalog, "the catalog is empty"
    for requirement_id, requirement in catalog.items():
        assert requirement.id == requirement_id
        assert requirement.area in AREAS
        assert requirement.level in (RequirementLevel.MUST, RequirementLevel.SHOULD)
        assert requirement.clause.strip() and requirement.summary.strip()
