"""The certification run works on a base install, where the optional pytest-xdist is absent."""

from __future__ import annotations

from runlane_conformance.runner import run_suites


def test_a_run_without_pytest_xdist_loaded_still_certifies() -> None:
    # `-p no:xdist` leaves xdist's hook specifications unregistered, exactly as on a base install.
    result = run_suites("local", areas=["point_reads"], seed=1, extra_pytest_args=["-p", "no:xdist"])
    assert result.certified, [test.message for test in result.tests if test.failed]
    assert len(result.tests) == 16
