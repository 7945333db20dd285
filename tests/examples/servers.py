"""The example drivers the toolkit's tests certify, and whether each one's server can be reached.

The four examples the README installs are always listed; MariaDB's (``examples/mysql``) only where it
is installed (``.ci/mysql-example`` installs it). A test that needs a server skips with the reason
``server_problem`` gives, except under ``CI=true``, where it fails instead.
"""

from __future__ import annotations

import importlib.util

from tests.conftest import example_package

_MODULES = {
    "tiny": "runlane_tiny_driver",
    "sqlite": "runlane_sqlite_driver",
    "postgres": "runlane_postgres_driver",
    "redis": "runlane_redis_driver",
    "mysql": "runlane_mysql_driver",
}

#: The examples this run certifies: the four the README installs, and MariaDB's where it is installed.
DRIVERS = ["tiny", "sqlite", "postgres", "redis"] + (
    ["mysql"] if importlib.util.find_spec(_MODULES["mysql"]) is not None else []
)


def server_problem(driver: str) -> str | None:
    """Why the example's server cannot be reached (None when it can, or when it needs none)."""
    package = example_package(_MODULES[driver], driver)
    if driver == "mysql":
        problem: str | None = package.probe()
        return problem
    if driver == "postgres":
        problem = package.probe(package.DEFAULT_DSN)
        return problem
    if driver == "redis":
        problem = package.probe(package.DEFAULT_URL)
        return problem
    return None
