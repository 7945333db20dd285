"""An example Runlane storage driver on an etcd cluster, certified by runlane-conformance.

``harness`` is the ``runlane.storage_drivers`` entry point (name ``etcd``);
``EtcdStorageDriver`` is the driver itself, usable directly on a key prefix.
"""

from __future__ import annotations

from .driver import EtcdStorageDriver, EtcdTransaction, etcd_profile
from .harness import (
    DEFAULT_ENDPOINTS,
    EtcdHarness,
    EtcdOptionError,
    EtcdStoreHandle,
    harness,
    new_prefix,
    probe,
)

__all__ = [
    "DEFAULT_ENDPOINTS",
    "EtcdHarness",
    "EtcdOptionError",
    "EtcdStorageDriver",
    "EtcdStoreHandle",
    "EtcdTransaction",
    "etcd_profile",
    "harness",
    "new_prefix",
    "probe",
]
