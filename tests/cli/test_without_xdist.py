"""A run loads exactly the pytest plugins it names, whatever else is installed (xdist, timeout...)."""

from __future__ import annotations

import pytest

from runlane_conformance.runner import run_suites

EXPECTED = {
    "_hypothesis_pytestplugin",
    "runlane_conformance.fixtures.plugin",
    "runlane_conformance.suites.conftest",
}


def test_a_run_loads_only_the_plugins_it_needs_and_records_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k not_a_single_check")
    monkeypatch.setenv("PYTEST_PLUGINS", "xdist.plugin")
    result = run_suites("local", areas=["point_reads"], seed=1)
    assert not result.failed_requirements, [test.message for test in result.tests if test.failed]
    assert len(result.tests) == 22  # the checks of the point_reads area
    assert {name for name, _ in result.environment.plugins} == EXPECTED
