"""Runs our conformance suites against the redis driver (``runlane_driver = "redis"``).

Every test here needs a Redis server. The server is probed once, at
collection: when it does not answer, every test is skipped with the reason,
so a laptop without Redis gets a clear message instead of hundreds of
connection errors. Under ``CI=true`` an absent server is a usage error that
fails the run instead: CI must never pass by skipping.
"""

from __future__ import annotations

import os

import pytest
from runlane_redis_driver import DEFAULT_URL, probe

from runlane_conformance import parse_driver_options


def configured_url(config: pytest.Config) -> str:
    """The URL the driver under test will use (``--runlane-option url=...`` or the ini twin)."""
    pairs = config.getoption("runlane_options") or config.getini("runlane_options")
    return parse_driver_options(pairs).get("url", DEFAULT_URL).strip()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    url = configured_url(config)
    problem = probe(url)
    if problem is None:
        return
    if os.environ.get("CI", "").strip().lower() == "true":
        raise pytest.UsageError(
            f"Redis at {url} is not reachable and CI=true, so the redis tests fail instead of "
            f"skipping: {problem}"
        )
    skip = pytest.mark.skip(
        reason=f"Redis at {url} is not reachable ({problem}); start it or pass --runlane-option url=..."
    )
    for item in items:
        item.add_marker(skip)
