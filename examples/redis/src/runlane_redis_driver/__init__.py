"""An example Runlane storage driver on Redis, certified by runlane-conformance.

``harness`` is the ``runlane.storage_drivers`` entry point (name ``redis``);
``RedisStorageDriver`` is the driver itself, usable directly on a key prefix.
"""

from __future__ import annotations

from .driver import RedisStorageDriver, RedisTransaction, redis_profile, release_holds
from .harness import (
    DEFAULT_URL,
    RedisHarness,
    RedisOptionError,
    RedisStoreHandle,
    delete_prefix,
    harness,
    new_prefix,
    probe,
)
from .layout import KeyLayout

__all__ = [
    "DEFAULT_URL",
    "KeyLayout",
    "RedisHarness",
    "RedisOptionError",
    "RedisStorageDriver",
    "RedisStoreHandle",
    "RedisTransaction",
    "delete_prefix",
    "harness",
    "new_prefix",
    "probe",
    "redis_profile",
    "release_holds",
]
