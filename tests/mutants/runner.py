"""Runs suites against a (mutant) driver in-process and reports each requirement's outcome.

A thin view over ``runlane_conformance.runner.run_suites`` (the same engine
the CLI uses), so the kill table proves what a driver author would see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runlane_conformance.runner import run_suites
from tests.shared_runs import suites_run


def requirement_outcomes(
    driver: str,
    options: Mapping[str, str] | None = None,
    *,
    requirements: Sequence[str] = (),
    areas: Sequence[str] = (),
    shared: bool = False,
) -> tuple[dict[str, str], dict[str, str]]:
    """Run the suites for ``driver``; return ({requirement: outcome}, {requirement: failure text}).

    ``shared`` takes the run from ``tests.shared_runs`` (once per session for these arguments), for a
    run another test judges too; a mutant's run is its own and is not kept.
    """
    run = suites_run if shared else run_suites
    result = run(driver, options, areas=areas, requirements=requirements, seed=0)
    outcomes = {req.id: req.outcome.value for req in result.requirements}
    messages = {
        req.id: "\n".join(f"{test.nodeid}: {test.message}" for test in req.failures)
        for req in result.requirements
        if req.failures
    }
    return outcomes, messages
