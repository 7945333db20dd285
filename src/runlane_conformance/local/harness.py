"""The harness the ``local`` entry point returns: fresh in-process stores, independent instances.

Options (all ``key=value`` strings): the five limits (``max_point_reads``,
``max_query_results``, ``max_transaction_records``, ``max_record_bytes``,
``max_transaction_bytes``), ``max_transaction_attempts``, and ``index_lag``
(default 0). A limit given alone replaces that one default; the resulting
limits must be coherent. ``index_lag=N`` with N > 0 makes index scans trail
the committed records by up to N commits and the driver advertise eventual
indexes; the store handle's ``settle`` lets the indexes catch up. Unknown
keys and bad values raise ``DriverOptionError`` with one line.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..contract.protocols import Clock
from ..contract.values import StorageLimits
from ..faults.plan import FaultHook
from ..harness import (
    STORAGE_LIMIT_OPTIONS,
    DriverLoadError,
    DriverOptionError,
    positive_int_option,
    storage_limits_from_options,
)
from .driver import LocalStorageDriver
from .store import LocalStore

__all__ = ["LocalHarness", "LocalStoreHandle", "local_harness"]

_OPTIONS = (*STORAGE_LIMIT_OPTIONS, "max_transaction_attempts", "index_lag")


class LocalStoreHandle:
    """One fresh shared store; ``connect()`` gives independent driver instances over it."""

    def __init__(
        self, limits: StorageLimits | None, max_transaction_attempts: int, index_lag: int = 0
    ) -> None:
        self._store = LocalStore(index_lag=index_lag)
        self._limits = limits
        self._attempts = max_transaction_attempts
        self._drivers: list[LocalStorageDriver] = []

    @property
    def store(self) -> LocalStore:
        return self._store

    def connect(self, *, clock: Clock | None = None) -> LocalStorageDriver:
        driver = LocalStorageDriver(
            self._store, clock=clock, limits=self._limits, max_transaction_attempts=self._attempts
        )
        self._drivers.append(driver)
        return driver

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> LocalStorageDriver:
        """An instance whose reads and commits go through ``hook``: the faults suite's in-process hook."""
        driver = LocalStorageDriver(
            self._store,
            clock=clock,
            limits=self._limits,
            max_transaction_attempts=self._attempts,
            faults=hook,
        )
        self._drivers.append(driver)
        return driver

    def address(self) -> None:
        """Always ``None``: the store lives in this process only."""
        return None

    def settle(self, *, timeout: float) -> bool:
        """Bring the indexes up to date (at once: the local indexer is the store itself); always ``True``."""
        self._store.settle()
        return True

    def close(self) -> None:
        for driver in self._drivers:
            driver.close()
        self._store.close()


class LocalHarness:
    """Opens isolated in-process stores with the configured limits and attempt budget."""

    def __init__(
        self, limits: StorageLimits | None = None, max_transaction_attempts: int = 16, index_lag: int = 0
    ) -> None:
        self.limits = limits
        self.max_transaction_attempts = max_transaction_attempts
        self.index_lag = index_lag
        self._stores: list[LocalStoreHandle] = []

    def open_store(self) -> LocalStoreHandle:
        handle = LocalStoreHandle(self.limits, self.max_transaction_attempts, self.index_lag)
        self._stores.append(handle)
        return handle

    def attach(self, address: object) -> LocalStoreHandle:
        raise DriverLoadError(
            "driver 'local': stores are process-local and have no address, so they cannot be attached"
        )

    def close(self) -> None:
        for handle in self._stores:
            handle.close()
        self._stores.clear()


def local_harness(options: Mapping[str, str]) -> LocalHarness:
    """The ``runlane.storage_drivers`` entry point target for the bundled ``local`` driver."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        noun = "option" if len(unknown) == 1 else "options"
        raise DriverOptionError(
            f"local driver does not know {noun} {', '.join(unknown)}; valid options: {', '.join(_OPTIONS)}"
        )
    attempts = 16
    text = options.get("max_transaction_attempts")
    if text is not None:
        attempts = positive_int_option("local", "max_transaction_attempts", text)
    lag = 0
    text = options.get("index_lag")
    if text is not None:
        if not text.strip().isdigit():
            raise DriverOptionError(f"local driver option index_lag={text!r} is not a non-negative integer")
        lag = int(text.strip())
    return LocalHarness(storage_limits_from_options("local", options), attempts, lag)
