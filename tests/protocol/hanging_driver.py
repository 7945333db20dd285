"""A reference-driver harness whose point reads never return: a driver that hangs in a read."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from runlane_conformance.local.harness import LocalHarness, LocalStoreHandle, local_harness


class HangingStoreHandle(LocalStoreHandle):
    def connect(self, *, clock: Any = None) -> Any:
        driver = super().connect(clock=clock)
        transaction = driver.transaction

        def hanging(callback: Any) -> Any:
            def wrapped(tx: Any) -> Any:
                tx.get = lambda keys: threading.Event().wait()  # never set: the read never returns
                return callback(tx)

            return transaction(wrapped)

        driver.transaction = hanging  # type: ignore[method-assign]
        return driver


class HangingHarness(LocalHarness):
    def open_store(self) -> LocalStoreHandle:
        handle = HangingStoreHandle(self.limits, self.max_transaction_attempts)
        self._stores.append(handle)
        return handle


def harness(options: Mapping[str, str]) -> HangingHarness:
    base = local_harness(options)
    return HangingHarness(base.limits, base.max_transaction_attempts)
