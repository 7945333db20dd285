"""Collects every mutant declared in ``tests/mutants/m_*.py``.

Each such module declares ``MUTANTS``: a list of ``Mutant`` entries naming
the harness factory (``module:attribute``), the one requirement it must make
fail (the catalogue's ``Requirement`` value itself, so finding the usages of a
requirement finds its mutants), and what it breaks.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

import tests.mutants as package
from runlane_conformance.catalogue import Requirement


@dataclass(frozen=True)
class Mutant:
    """One broken driver and the one requirement whose checks must fail it."""

    name: str
    target: str
    requirement: Requirement
    breaks: str

    @property
    def kills(self) -> str:
        """The ID of the requirement it must fail (what the kill table and the run speak in)."""
        return self.requirement.id


def mutants_by_module() -> dict[str, list[Mutant]]:
    """Each ``m_*`` module's name -> the mutants it declares, in module-name order."""
    found: dict[str, list[Mutant]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        if info.name.startswith("m_"):
            module = importlib.import_module(f"tests.mutants.{info.name}")
            found[info.name] = list(module.MUTANTS)
    return found


def all_mutants() -> list[Mutant]:
    return [mutant for mutants in mutants_by_module().values() for mutant in mutants]
