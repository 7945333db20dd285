"""Runs our conformance suites against the sqlite driver (``runlane_driver = "sqlite"`` in pyproject.toml).

The fixtures come from the runlane_conformance pytest plugin; nothing else is needed here.
"""
