"""An isolated session's worker processes serve the driver the way the session does.

Under ``--runlane-isolation process`` the session loads the ``process`` driver, whose options
are a backend command plus the driver's own options. The cross-process checks start workers
that must load that same harness: given the session's spec (``process``) with the options typed
on the command line instead, every worker refused to start, and each cross-process requirement
failed for a correct driver (only in the mode the CI workflow uses).
"""

from __future__ import annotations

from runlane_conformance.runner import run_suites

#: One requirement per area whose checks start workers on the store's address.
CROSS_PROCESS = (
    "conflicts.across-processes",
    "profile.durable-survives-killed-process",
    "histories.no-lost-updates",
    "completion_waits.marker-across-processes",
)


def test_a_correct_durable_driver_passes_the_cross_process_checks_when_isolated() -> None:
    result = run_suites(
        "sqlite",
        requirements=CROSS_PROCESS,
        seed=0,
        extra_pytest_args=["--runlane-isolation", "process"],
    )
    outcomes = {req.id: req.outcome.value for req in result.requirements}
    messages = [test.message for req in result.requirements for test in req.failures]
    assert outcomes == dict.fromkeys(CROSS_PROCESS, "passed"), messages
