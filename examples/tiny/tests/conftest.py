"""Runs our conformance suites against the tiny driver (``runlane_driver = "tiny"`` in pyproject.toml)."""

from runlane_conformance.suites.conftest import *  # noqa: F403  (the record builders the suites use)
