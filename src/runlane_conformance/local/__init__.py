"""The bundled reference driver: an in-process, strongly indexed store with optimistic transactions.

It is the executable meaning of the storage contract, not production
storage: nothing survives the process. ``create_local_storage_driver()``
gives a driver on a private store; the ``local`` harness (entry point group
``runlane.storage_drivers``) gives stores that several instances can share.
See ``docs/reference-driver.md`` for how it works.
"""

from __future__ import annotations

from .driver import LocalStorageDriver, LocalTransaction, create_local_storage_driver, local_profile
from .harness import LocalHarness, LocalStoreHandle, local_harness
from .operator import OperatorPage
from .store import LocalStore

__all__ = [
    "LocalHarness",
    "LocalStorageDriver",
    "LocalStore",
    "LocalStoreHandle",
    "LocalTransaction",
    "OperatorPage",
    "create_local_storage_driver",
    "local_harness",
    "local_profile",
]
