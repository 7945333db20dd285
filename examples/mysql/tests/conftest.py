"""Runs our conformance suites against the mysql driver (``runlane_driver = "mysql"``).

Every test here needs a MariaDB (or MySQL) server. The server is probed once,
at collection: when it does not answer, every test is skipped with the
reason, so a laptop without the server gets a clear message instead of
hundreds of connection errors. Under ``CI=true`` an absent server is a usage
error that fails the run instead: CI must never pass by skipping.
"""

from __future__ import annotations

import os

import pytest
from runlane_mysql_driver import MysqlServer, probe, server_from_options

from runlane_conformance import parse_driver_options


def configured_server(config: pytest.Config) -> MysqlServer:
    """The server the driver under test will use (``--runlane-option host=...`` or the ini twin)."""
    pairs = config.getoption("runlane_options") or config.getini("runlane_options")
    return server_from_options(parse_driver_options(pairs))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    server = configured_server(config)
    problem = probe(server)
    if problem is None:
        return
    if os.environ.get("CI", "").strip().lower() == "true":
        raise pytest.UsageError(
            f"MariaDB at {server} is not reachable and CI=true, so the mysql tests fail instead of "
            f"skipping: {problem}"
        )
    skip = pytest.mark.skip(
        reason=f"MariaDB at {server} is not reachable ({problem}); start it or pass --runlane-option host=..."
    )
    for item in items:
        item.add_marker(skip)
