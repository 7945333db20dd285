"""The kill table holds across the process boundary: a sample of mutants, one per contract area,
served from a backend process of their own (as ``--isolation process`` serves a driver), fail
exactly the requirements they fail when loaded next to the checks.

The mutants live in ``tests/``; the backend loads them by ``module:factory`` from the working
directory, as it loads any driver that is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation, served_driver
from tests.mutants.catalog import Mutant, all_mutants
from tests.mutants.runner import requirement_outcomes

#: The areas sampled: the in-process fault hook crosses the protocol too, so ``faults`` is one.
AREAS = (
    "faults",
    "sealing",
    "point_reads",
    "append",
    "exclusive_selection",
    "replay",
    "limits",
)


def _first_of(area: str) -> Mutant:
    return next(mutant for mutant in all_mutants() if mutant.kills.partition(".")[0] == area)


SAMPLE = [_first_of(area) for area in AREAS]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mutant", SAMPLE, ids=[mutant.name for mutant in SAMPLE])
def test_an_isolated_mutant_fails_the_same_requirements_as_in_process(
    mutant: Mutant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the backend imports the mutant from this checkout's tests package
    driver, options = served_driver(mutant.target, {}, Isolation.PROCESS)
    assert driver == "process"
    isolated, messages = requirement_outcomes(driver, options, requirements=[mutant.kills])
    assert isolated.get(mutant.kills) == "failed", (
        f"isolated, mutant {mutant.name} ({mutant.breaks}) survived {mutant.kills}: {isolated} {messages}"
    )
    in_process, _ = requirement_outcomes(mutant.target, requirements=[mutant.kills])
    assert isolated == in_process
