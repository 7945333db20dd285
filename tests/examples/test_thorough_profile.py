"""Every example driver passes the profile-dependent checks under the thorough profile's settings.

A correct driver once failed only at ``--profile thorough`` (a per-check time
limit it could not meet there). The examples' own test runs use the quick
profile, so this test certifies each example driver with the thorough
settings (its step counts, caps and budgets) on a few examples per property,
restricted to the requirements whose checks the profile changes: the
Hypothesis properties and the model check. The rest of the suites does not
depend on the profile and runs in each example's own tests.

PostgreSQL and Redis tests skip with the reason when their server is not
reachable, except under ``CI=true``, where an absent server fails the test.

The MariaDB example (``examples/mysql``) joins the list only where it is
installed: the README's test command does not install it, and CI's
``.ci/mysql-example`` installs it, starts a server if none answers and runs
this file for it (``-k mysql``, which fails CI if nothing is selected).
"""

from __future__ import annotations

import importlib
import inspect
import os

import pytest

from runlane_conformance.catalogue import AREAS
from runlane_conformance.runner import run_suites
from tests.examples.servers import DRIVERS, server_problem


def _profile_dependent_requirements() -> list[str]:
    """Requirement ids of every check that draws examples from the active Hypothesis profile."""
    found: set[str] = set()
    for area in AREAS:
        try:
            module = importlib.import_module(f"runlane_conformance.suites.test_{area}")
        except ModuleNotFoundError:
            continue
        for name, test in vars(module).items():
            if not name.startswith("test_") or not callable(test):
                continue
            uses_profile = getattr(test, "is_hypothesis_test", False) or "settings(" in inspect.getsource(
                test
            )
            if not uses_profile:
                continue
            for mark in getattr(test, "pytestmark", []):
                if mark.name == "runlane_requirement":
                    found.add(str(mark.args[0]))
    return sorted(found)


@pytest.mark.parametrize("driver", DRIVERS)
def test_example_driver_passes_profile_dependent_checks_at_thorough_settings(driver: str) -> None:
    problem = server_problem(driver)
    if problem is not None:
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"the {driver} server is not reachable and CI=true: {problem}")
        pytest.skip(f"the {driver} server is not reachable: {problem}")
    requirements = _profile_dependent_requirements()
    assert "conflicts.serializable-interleavings" in requirements and "model.serial-equivalent-histories" in (
        requirements
    ), f"the profile-dependent checks were not found: {requirements}"
    result = run_suites(
        driver,
        requirements=requirements,
        hypothesis_profile="thorough",
        seed=0,
        extra_pytest_args=["-p", "tests.examples.fewer_examples"],
    )
    outcomes = {req.id: req for req in result.requirements}
    failed = {
        rid: "; ".join(f"{test.nodeid}: {test.message}" for test in req.failures)
        for rid, req in outcomes.items()
        if req.outcome.value == "failed"
    }
    assert not failed, f"{driver} fails at the thorough settings: {failed}"
    for rid, req in outcomes.items():
        if req.outcome.value == "skipped":
            assert (req.reason or "").startswith("profile:"), (
                f"{rid} was skipped, not by profile gating: {req.reason}"
            )
    ran = [rid for rid, req in outcomes.items() if req.outcome.value == "passed"]
    assert ran, f"no profile-dependent check ran against {driver}"
