"""Runs our conformance suites against the sqlite driver (``runlane_driver = "sqlite"`` in pyproject.toml)."""

from runlane_conformance.suites.conftest import *  # noqa: F403  (the record builders the suites use)
