"""An example asyncio Runlane storage driver on PostgreSQL through asyncpg, certified by runlane-conformance.

``harness`` is the ``runlane.storage_drivers`` entry point (name ``asyncpg``):
the async harness behind ``runlane_conformance.async_harness``.
``AsyncpgStorageDriver`` is the async driver itself.
"""

from __future__ import annotations

from .driver import AsyncpgStorageDriver, AsyncpgTransaction, asyncpg_profile
from .harness import (
    DEFAULT_DSN,
    SCHEMA_PREFIX,
    AsyncpgHarness,
    AsyncpgOptionError,
    AsyncpgStoreHandle,
    build_harness,
    harness,
    probe,
)

__all__ = [
    "DEFAULT_DSN",
    "SCHEMA_PREFIX",
    "AsyncpgHarness",
    "AsyncpgOptionError",
    "AsyncpgStorageDriver",
    "AsyncpgStoreHandle",
    "AsyncpgTransaction",
    "asyncpg_profile",
    "build_harness",
    "harness",
    "probe",
]
