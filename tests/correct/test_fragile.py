"""Isolation never changes a verdict: fragile correct drivers get the same outcomes in both modes.

Each driver in ``fragile.py`` leans on the exception its own code catches (an ``except
ConnectionError`` around the callback, a replay keyed on the identity of its read's error, its
own subclasses raised ``from`` the originals, one clause per kind of exception). Certified in
process and with ``--isolation process`` on the areas where those exceptions matter (faults,
replay, sealing), every requirement must have the same outcome and reason, and the level must
be the reference driver's. The full quick profile of ``local`` and ``tiny`` in both modes is the
integrator's before/after measurement (it costs minutes), not part of this test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation
from runlane_conformance.run.certify import certify_driver
from tests.correct.fragile import FRAGILE_DRIVERS

ROOT = Path(__file__).resolve().parents[2]
AREAS = ["faults", "replay", "sealing"]
pytestmark = pytest.mark.timeout(600)


def _outcomes(driver: str, isolation: Isolation) -> dict[str, tuple[str, str | None]]:
    result = certify_driver(driver, {}, areas=AREAS, seed=1, isolation=isolation)
    return {req.id: (req.outcome.value, req.reason) for req in result.requirements}


@pytest.mark.parametrize("name", ["around_callback", "per_kind_clauses"])
def test_a_fragile_correct_driver_gets_the_same_outcome_for_every_requirement_in_both_modes(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    in_process = _outcomes(FRAGILE_DRIVERS[name], Isolation.NONE)
    isolated = _outcomes(FRAGILE_DRIVERS[name], Isolation.PROCESS)
    assert isolated == in_process
    assert all(outcome in ("passed", "gated") for outcome, _ in in_process.values()), in_process
