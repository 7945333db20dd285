"""Collects every mutant declared in ``tests/mutants/m_*.py``.

Each such module declares ``MUTANTS``: a list of ``Mutant`` entries naming
the harness factory (``module:attribute``), the one requirement it must make
fail, and what it breaks.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

import tests.mutants as package


@dataclass(frozen=True)
class Mutant:
    name: str
    target: str
    kills: str
    breaks: str


def all_mutants() -> list[Mutant]:
    found: list[Mutant] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        if info.name.startswith("m_"):
            module = importlib.import_module(f"tests.mutants.{info.name}")
            found.extend(module.MUTANTS)
    return found
