"""Runs our conformance suites against the asyncpg driver (``runlane_driver = "asyncpg"``).

Every test here needs a PostgreSQL server. The server is probed once, at
collection: when it does not answer, every test is skipped with the reason,
so a laptop without PostgreSQL gets a clear message instead of hundreds of
connection errors. Under ``CI=true`` an absent server is a usage error that
fails the run instead: CI must never pass by skipping.
"""

from __future__ import annotations

import os

import pytest
from runlane_asyncpg_driver import DEFAULT_DSN, probe

from runlane_conformance import parse_driver_options


def configured_dsn(config: pytest.Config) -> str:
    """The DSN the driver under test will use (``--runlane-option dsn=...`` or the ini twin)."""
    pairs = config.getoption("runlane_options") or config.getini("runlane_options")
    return parse_driver_options(pairs).get("dsn", DEFAULT_DSN)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dsn = configured_dsn(config)
    problem = probe(dsn)
    if problem is None:
        return
    if os.environ.get("CI", "").strip().lower() == "true":
        raise pytest.UsageError(
            f"PostgreSQL at {dsn} is not reachable and CI=true, so the asyncpg tests fail instead of "
            f"skipping: {problem}"
        )
    skip = pytest.mark.skip(
        reason=f"PostgreSQL at {dsn} is not reachable ({problem}); start it or pass --runlane-option dsn=..."
    )
    for item in items:
        item.add_marker(skip)
