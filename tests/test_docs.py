"""The documentation explains every requirement, capability and public name it is asked about.

These are the fast checks; CI also builds the whole site with ``mkdocs build --strict``, which
fails on any broken link or anchor and, through ``scripts/mkdocs_hooks.py``, on any name of
``runlane_conformance.__all__`` missing from the built API page.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

import runlane_conformance
from runlane_conformance.catalogue import all_requirements
from runlane_conformance.fixtures.gating import CAPABILITIES
from runlane_conformance.requirements_doc import (
    CAPABILITIES_SECTION,
    CLAUSE_SECTIONS,
    contract_sections,
    slugify,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONTRACT = DOCS / "contract.md"
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def headings(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return HEADING.findall(text)


def section_text(path: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, flags=re.MULTILINE)
    assert match, f"{heading!r} is not a heading of {path.name}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


@pytest.mark.parametrize("requirement_id", sorted(all_requirements()))
def test_every_requirement_is_explained_by_a_section_of_the_contract_page(requirement_id: str) -> None:
    requirement = all_requirements()[requirement_id]
    try:
        sections = contract_sections(requirement)
    except KeyError as error:
        pytest.fail(f"{error.args[0]}: add the clause to CLAUSE_SECTIONS in requirements_doc.py")
    assert sections, f"{requirement_id} cites no clause that docs/contract.md explains"
    assert set(sections) <= set(headings(CONTRACT))


def test_every_section_the_catalogue_links_to_is_a_heading_of_the_contract_page() -> None:
    missing = sorted(set(CLAUSE_SECTIONS.values()) - set(headings(CONTRACT)))
    assert missing == []
    assert CAPABILITIES_SECTION in headings(CONTRACT)


def test_every_link_of_the_requirements_page_lands_on_a_contract_heading() -> None:
    anchors = {slugify(heading) for heading in headings(CONTRACT)}
    text = (DOCS / "requirements.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(contract\.md#([^)]+)\)", text)
    assert len(links) >= len(all_requirements())
    assert sorted(set(links) - anchors) == []


def test_the_requirements_page_does_not_pretend_the_specification_ships() -> None:
    text = (DOCS / "requirements.md").read_text(encoding="utf-8")
    assert "not part of this package" in text
    assert "spec/storage-contract.md" not in text
    assert "not yet explained" not in text


@pytest.mark.parametrize(
    "capability",
    sorted(
        set(CAPABILITIES)
        | {part for r in all_requirements().values() if r.capability for part in r.capability.split("+")}
    ),
)
def test_every_capability_of_a_skip_reason_is_explained(capability: str) -> None:
    assert capability in CAPABILITIES, f"{capability} has no one-line meaning for the report command"
    assert f"| `{capability}` |" in section_text(CONTRACT, CAPABILITIES_SECTION)


def test_slugs_match_the_anchors_mkdocs_and_github_give() -> None:
    assert (
        slugify("9. Transactions: one callback, many attempts") == "9-transactions-one-callback-many-attempts"
    )
    assert slugify("3. Encodings, and why their order works") == "3-encodings-and-why-their-order-works"
    assert slugify("Operator reads") == "operator-reads"


def test_the_runlane_requirement_option_is_documented() -> None:
    assert "--runlane-requirement" in (DOCS / "writing-a-driver.md").read_text(encoding="utf-8")


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_page_documents_only_names_the_facade_exports() -> None:
    placed = _hooks().names_placed((DOCS / "api.md").read_text(encoding="utf-8"))
    assert len(placed) == len(set(placed)), "a name is documented twice on the API page"
    assert sorted(set(placed) - set(runlane_conformance.__all__)) == []


def test_the_built_api_page_gets_every_public_name_even_one_not_yet_grouped() -> None:
    hooks = _hooks()
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    names = [*runlane_conformance.__all__, "a_name_exported_later"]
    completed = hooks.with_every_name(page, names)
    assert hooks.missing_names(completed, names) == []
    assert completed.rstrip().endswith("::: runlane_conformance.a_name_exported_later")
    assert hooks.with_every_name(completed, names) == completed
