"""An example Runlane storage driver on MariaDB (InnoDB), certified by runlane-conformance.

``harness`` is the ``runlane.storage_drivers`` entry point (name ``mysql``);
``MysqlStorageDriver`` is the driver itself, usable directly on a database.
"""

from __future__ import annotations

from .driver import MysqlServer, MysqlStorageDriver, MysqlTransaction, mysql_profile
from .harness import (
    DEFAULT_SERVER,
    MysqlHarness,
    MysqlOptionError,
    MysqlStoreHandle,
    harness,
    probe,
    server_from_options,
)

__all__ = [
    "DEFAULT_SERVER",
    "MysqlHarness",
    "MysqlOptionError",
    "MysqlServer",
    "MysqlStorageDriver",
    "MysqlStoreHandle",
    "MysqlTransaction",
    "harness",
    "mysql_profile",
    "probe",
    "server_from_options",
]
