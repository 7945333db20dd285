"""An example Runlane storage driver on PostgreSQL, certified by runlane-conformance.

``harness`` is the ``runlane.storage_drivers`` entry point (name ``postgres``);
``PostgresStorageDriver`` is the driver itself, usable directly on a schema.
"""

from __future__ import annotations

from .driver import PostgresStorageDriver, PostgresTransaction, postgres_profile
from .harness import DEFAULT_DSN, PostgresHarness, PostgresOptionError, PostgresStoreHandle, harness, probe

__all__ = [
    "DEFAULT_DSN",
    "PostgresHarness",
    "PostgresOptionError",
    "PostgresStorageDriver",
    "PostgresStoreHandle",
    "PostgresTransaction",
    "harness",
    "postgres_profile",
    "probe",
]
