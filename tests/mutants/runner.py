"""Runs suites against a (mutant) driver in-process and reports each requirement's outcome.

A thin view over ``runlane_conformance.runner.run_suites`` (the same engine
the CLI uses), so the kill table proves what a driver author would see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runlane_conformance.runner import run_suites


def requirement_outcomes(
    driver: str,
    options: Mapping[str, str] | None = None,
    *,
    requirements: Sequence[str] = (),
    areas: Sequence[str] = (),
) -> tuple[dict[str, str], dict[str, str]]:
    """Run the suites for ``driver``; return ({requirement: outcome}, {requirement: failure text})."""
    result = run_suites(driver, options, areas=areas, requirements=requirements, seed=0)
    outcomes = {req.id: req.outcome.value for req in result.requirements}
    messages = {
        req.id: "\n".join(f"{test.nodeid}: {test.message}" for test in req.failures)
        for req in result.requirements
        if req.failures
    }
    return outcomes, messages
