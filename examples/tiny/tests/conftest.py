"""Runs our conformance suites against the tiny driver (``runlane_driver = "tiny"`` in pyproject.toml).

The fixtures come from the runlane_conformance pytest plugin; nothing else is needed here.
"""
