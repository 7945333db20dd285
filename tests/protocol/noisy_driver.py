"""A reference-driver harness that prints to stdout on every transaction, as careless driver code does."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from runlane_conformance.local.harness import LocalHarness, LocalStoreHandle, local_harness


class NoisyStoreHandle(LocalStoreHandle):
    def connect(self, *, clock: Any = None) -> Any:
        driver = super().connect(clock=clock)
        transaction = driver.transaction

        def noisy(callback: Callable[..., Any]) -> Any:
            print("driver: starting a transaction")  # stdout, on purpose
            sys.stdout.flush()
            return transaction(callback)

        driver.transaction = noisy  # type: ignore[method-assign]
        return driver


class NoisyHarness(LocalHarness):
    def open_store(self) -> LocalStoreHandle:
        handle = NoisyStoreHandle(self.limits, self.max_transaction_attempts)
        self._stores.append(handle)
        return handle


def harness(options: Mapping[str, str]) -> NoisyHarness:
    base = local_harness(options)
    return NoisyHarness(base.limits, base.max_transaction_attempts)
