"""Isolation never changes a verdict: every example driver gets the same outcome for every requirement
next to the checks and served from its own backend (``--isolation process``).

The CI workflow the docs give certifies with ``--isolation process``; a driver author develops next to
the checks. If the two modes disagreed, a driver would be green on the laptop and red in CI (or the
reverse). Each example is certified in full at the quick profile, seed 0, in both modes, and the level
and every requirement's outcome must match. Drivers that talk to a server get the machine's network
inside the sandbox (``--sandbox-network host``), as their CI would give them.

PostgreSQL and Redis skip with the reason when their server is not reachable, except under
``CI=true``, where an absent server fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runlane_conformance.protocol.isolation import Isolation
from runlane_conformance.run.certify import certify_driver
from runlane_conformance.run.model import RunResult
from runlane_conformance.run.sandbox import SandboxNetwork
from tests.examples.servers import DRIVERS, server_problem
from tests.profiles.certified import assert_certified

ROOT = Path(__file__).resolve().parents[2]
_NEEDS_NETWORK = {"postgres", "redis", "mysql"}


def _outcomes(result: RunResult) -> dict[str, str]:
    return {req.id: req.outcome.value for req in result.requirements}


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("driver", DRIVERS)
def test_an_example_driver_gets_the_same_outcome_for_every_requirement_in_both_modes(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = server_problem(driver)
    if problem is not None:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"the {driver} server is not reachable and CI=true: {problem}")
        pytest.skip(f"the {driver} server is not reachable: {problem}")
    monkeypatch.chdir(ROOT)
    network = SandboxNetwork.HOST if driver in _NEEDS_NETWORK else SandboxNetwork.NONE

    in_process = certify_driver(driver, {}, seed=0, isolation=Isolation.NONE)
    assert_certified(in_process, driver)
    isolated = certify_driver(driver, {}, seed=0, isolation=Isolation.PROCESS, sandbox_network=network)
    assert_certified(isolated, driver)

    assert str(isolated.level) == str(in_process.level)
    here, there = _outcomes(in_process), _outcomes(isolated)
    differing = {rid: (outcome, there.get(rid)) for rid, outcome in here.items() if there.get(rid) != outcome}
    assert here == there, f"outcomes differ between the modes (in process, isolated): {differing}"
