"""The example drivers use only what a third-party driver may rely on.

The examples are what driver authors copy. If one of them imports from an implementation
module (``runlane_conformance.contract.cursors``, ``runlane_conformance.harness``...), the
copy breaks the day that module moves, so everything an example needs is exported from the
facade instead. The only other module an example may name is ``runlane_conformance.suites.conftest``,
which docs/writing-a-driver.md tells authors to star-import into their conftest.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import runlane_conformance

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: The public import surface of the toolkit, as the documentation describes it.
PUBLIC_MODULES = frozenset({"runlane_conformance", "runlane_conformance.suites.conftest"})


def example_files() -> list[Path]:
    return sorted(path for path in EXAMPLES.rglob("*.py") if ".venv" not in path.parts)


def toolkit_imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, imported names) for every import of the toolkit in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "runlane_conformance":
                yield node.lineno, node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "runlane_conformance":
                    yield node.lineno, alias.name, []


def private_module_imports(path: Path) -> Iterator[tuple[int, str]]:
    """Imports of any module with an underscore-prefixed part, the example's own included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        for module in modules:
            if module == "__future__":
                continue
            if any(part.startswith("_") for part in module.split(".")):
                yield node.lineno, module


def test_there_are_examples_to_scan() -> None:
    files = example_files()
    assert len(files) >= 8, files
    assert any(list(toolkit_imports(path)) for path in files)


@pytest.mark.parametrize("path", example_files(), ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_examples_import_the_toolkit_only_through_its_public_modules(path: Path) -> None:
    offending = [
        f"line {line}: {module}" for line, module, _ in toolkit_imports(path) if module not in PUBLIC_MODULES
    ]
    assert offending == [], f"{path.name} imports implementation modules; export what it needs instead"


@pytest.mark.parametrize("path", example_files(), ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_examples_import_only_public_names_of_the_facade(path: Path) -> None:
    for line, module, names in toolkit_imports(path):
        if module != "runlane_conformance":
            continue
        unknown = [name for name in names if name not in runlane_conformance.__all__]
        assert unknown == [], f"line {line} of {path.name} imports names the facade does not export"


@pytest.mark.parametrize("path", example_files(), ids=lambda path: str(path.relative_to(EXAMPLES)))
def test_examples_import_no_underscore_module(path: Path) -> None:
    assert list(private_module_imports(path)) == []
