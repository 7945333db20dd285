"""A driver that reports what its own code met: the exception its callback raised, as its ``except`` sees it.

Every read raises the driver's own ``ConnectionError`` (or, through the fault hook, lets the
hook's ``InjectedFault`` out), so a callback can let it through, wrap it or chain it. The
transaction catches whatever leaves the callback and answers with ``StorageUsageError`` whose
message is ``observe(error)`` as JSON: its class, which built-in families it belongs to, whether
it is the very object one of the driver's reads raised, its arguments and its chain. The same
callback then yields the same message in process and through the backend only if the boundary
hands the driver's code the same exception.

``hooks_harness`` is a store that offers every optional hook a store handle can have (settle, the
in-process fault hook, a proxy target), for the hook-parity test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runlane_conformance.contract.errors import StorageError, StorageUsageError
from runlane_conformance.contract.protocols import Clock, StorageDriver
from runlane_conformance.contract.values import StorageProfile
from runlane_conformance.faults.plan import FaultHook
from runlane_conformance.local.harness import LocalHarness, LocalStoreHandle

_CHAIN = 4


def observe(error: BaseException, own: Sequence[BaseException], depth: int = _CHAIN) -> dict[str, Any]:
    """What an ``except`` clause can learn about ``error``, down its chain."""
    klass = type(error)
    seen: dict[str, Any] = {
        "type": f"{klass.__module__}.{klass.__qualname__}",
        "exception": isinstance(error, Exception),
        "connection": isinstance(error, ConnectionError),
        "storage": isinstance(error, StorageError),
        "own": any(error is mine for mine in own),
        "args": [repr(arg) for arg in error.args],
        "suppress_context": error.__suppress_context__,
    }
    if depth > 1:
        seen["cause"] = None if error.__cause__ is None else observe(error.__cause__, own, depth - 1)
        seen["context"] = None if error.__context__ is None else observe(error.__context__, own, depth - 1)
    return seen


class _Attempt:
    def __init__(self, own: list[BaseException], hook: FaultHook | None) -> None:
        self._own = own
        self._hook = hook

    def get(self, keys: Sequence[object]) -> list[None]:
        try:
            if self._hook is not None:
                return self._hook.round_trip(lambda: [None for _ in keys])
            raise ConnectionError("the driver's own connection broke")
        except BaseException as error:
            self._own.append(error)
            raise


class ObservingDriver:
    """Runs one attempt; reports what left the callback (``StorageUsageError``, JSON message)."""

    def __init__(self, profile: StorageProfile, hook: FaultHook | None) -> None:
        self.profile = profile
        self._hook = hook

    def transaction(self, callback: Callable[[Any], object]) -> object:
        own: list[BaseException] = []
        try:
            callback(_Attempt(own, self._hook))
        except BaseException as error:
            raise StorageUsageError(json.dumps(observe(error, own), sort_keys=True)) from None
        raise StorageUsageError("the callback returned")

    def close(self) -> None:
        pass


class _ObservingStore:
    def __init__(self) -> None:
        self._local = LocalStoreHandle(None, 16)

    def _profile(self) -> StorageProfile:
        driver = self._local.connect()
        try:
            return driver.profile
        finally:
            driver.close()

    def connect(self, *, clock: Clock | None = None) -> StorageDriver:
        return ObservingDriver(self._profile(), None)  # type: ignore[return-value]

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> StorageDriver:
        return ObservingDriver(self._profile(), hook)  # type: ignore[return-value]

    def address(self) -> None:
        return None

    def close(self) -> None:
        self._local.close()


class _ObservingHarness:
    def open_store(self) -> _ObservingStore:
        return _ObservingStore()

    def attach(self, address: object) -> _ObservingStore:
        raise ValueError("process-local")

    def close(self) -> None:
        pass


def harness(options: Mapping[str, str]) -> _ObservingHarness:
    """The observing driver's harness factory (no options)."""
    return _ObservingHarness()


class EveryHookStore(LocalStoreHandle):
    """The reference store with every optional hook: its own settle answer, and a proxy target too.

    ``settle`` answers ``timeout >= 1`` so a test can tell that the call reached this hook.
    """

    def settle(self, *, timeout: float) -> bool:
        super().settle(timeout=timeout)
        return timeout >= 1

    def proxy_target(self) -> tuple[str, int]:
        return ("127.0.0.1", 9)

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> StorageDriver:
        return self.connect(clock=clock)


class _EveryHookHarness(LocalHarness):
    def open_store(self) -> EveryHookStore:
        handle = EveryHookStore(self.limits, self.max_transaction_attempts, self.index_lag)
        self._stores.append(handle)
        return handle


def hooks_harness(options: Mapping[str, str]) -> LocalHarness:
    """A harness whose stores offer every optional store-handle hook (no options)."""
    return _EveryHookHarness()
