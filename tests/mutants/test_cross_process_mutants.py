"""The cross-process mutants are cross-process bugs: each passes the same rule checked inside one process.

A mutant that also failed its single-process twin would prove only that the
in-process checks work; these prove the new checks catch what they alone can.
"""

from __future__ import annotations

import pytest

from tests.conftest import example_package
from tests.mutants.catalog import Mutant
from tests.mutants.m_cross_process import IN_PROCESS_TWINS, MUTANTS
from tests.mutants.runner import requirement_outcomes


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.name for mutant in MUTANTS])
def test_a_cross_process_mutant_keeps_the_rule_inside_one_process(mutant: Mutant) -> None:
    example_package("runlane_sqlite_driver", "sqlite")
    twin = IN_PROCESS_TWINS[mutant.name]
    outcomes, messages = requirement_outcomes(mutant.target, requirements=[twin])
    assert outcomes.get(twin) == "passed", (
        f"{mutant.name} fails {twin} inside one process too ({outcomes.get(twin)}): {messages.get(twin, '')}"
    )


def test_every_cross_process_mutant_names_its_twin() -> None:
    assert sorted(IN_PROCESS_TWINS) == sorted(mutant.name for mutant in MUTANTS)
