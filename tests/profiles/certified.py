"""One assertion the profile tests share: a correct driver's run certified, and nothing refused it."""

from __future__ import annotations

from runlane_conformance.run.model import RunResult


def assert_certified(result: RunResult, driver: str) -> None:
    """Fail naming every refused requirement and the message of each check that refused it.

    A requirement counts as refused when its outcome is not acceptable: failed, not run or
    inconclusive all deny a certificate, so a correct driver must reach none of them.
    """
    refused = {
        req.id: [f"{test.nodeid}: {test.message}" for test in req.failures]
        for req in result.requirements
        if not req.outcome.acceptable
    }
    assert not refused, f"{driver} is correct but was refused: {refused}"
    assert result.certified, f"{driver} passed every requirement but was not certified: {result.problems}"
