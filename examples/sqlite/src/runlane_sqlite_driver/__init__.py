"""An example Runlane storage driver on SQLite, certified by runlane-conformance.

``harness`` is the ``runlane.storage_drivers`` entry point (name ``sqlite``);
``SqliteStorageDriver`` is the driver itself, usable directly on a file.
"""

from __future__ import annotations

from .driver import SqliteStorageDriver, SqliteTransaction, sqlite_profile
from .harness import SqliteHarness, SqliteOptionError, SqliteStoreHandle, harness

__all__ = [
    "SqliteHarness",
    "SqliteOptionError",
    "SqliteStorageDriver",
    "SqliteStoreHandle",
    "SqliteTransaction",
    "harness",
    "sqlite_profile",
]
