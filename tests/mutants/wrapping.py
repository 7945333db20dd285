"""Building blocks for broken drivers: wrappers around a correct driver that break one rule.

A mutant subclasses ``WrappedTransaction`` (or ``WrappedDriver``) and
overrides exactly the behaviour it breaks; everything else is delegated to the
wrapped driver, so the mutant violates one requirement and keeps the rest.
``mutant_harness(...)`` turns the classes into a harness factory that
``--runlane-driver tests.mutants.<module>:<factory>`` can load.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from runlane_conformance.harness import DriverHarness, StoreHandle, load_harness

T = TypeVar("T")


class WrappedTransaction:
    """Delegates every call to the wrapped attempt; subclasses override what they break."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        self.inner = inner
        self.driver = driver

    def get(self, keys: Sequence[Any]) -> list[Any]:
        return self.inner.get(keys)  # type: ignore[no-any-return]

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return self.inner.query_candidates(command, **kwargs)

    def now(self) -> datetime:
        return self.inner.now()  # type: ignore[no-any-return]

    def create(self, record: Any) -> None:
        self.inner.create(record)

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(current, record)

    def delete(self, current: Any) -> None:
        self.inner.delete(current)

    def append(self, command: Any) -> None:
        self.inner.append(command)


class HookSpy:
    """Passes a fault hook's round trips through and remembers every fault it injected."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.faults: list[BaseException] = []

    def round_trip(self, action: Callable[[], T]) -> T:
        try:
            return self.hook.round_trip(action)  # type: ignore[no-any-return]
        except ConnectionError as fault:
            self.faults.append(fault)
            raise


class WrappedDriver:
    """Delegates to a correct driver instance, wrapping each attempt in ``transaction_class``."""

    transaction_class: type[WrappedTransaction] = WrappedTransaction

    def __init__(self, inner: Any, store: WrappedStore) -> None:
        self.inner = inner
        self.store = store
        self.hook: HookSpy | None = None  # set on instances opened behind the faults suite's hook

    @property
    def profile(self) -> Any:
        return self.inner.profile

    def transaction(self, callback: Callable[[Any], T]) -> T:
        return self.inner.transaction(  # type: ignore[no-any-return]
            lambda tx: callback(self.transaction_class(tx, self))
        )

    def query(self, command: Any) -> Any:
        return self.inner.query(command)

    def close(self) -> None:
        self.inner.close()


class WrappedStore:
    def __init__(self, inner: StoreHandle, driver_class: type[WrappedDriver]) -> None:
        self.inner = inner
        self.driver_class = driver_class
        self.shared: dict[str, Any] = {}  # state a mutant keeps across its instances

    def connect(self, *, clock: Any = None) -> WrappedDriver:
        return self.driver_class(self.inner.connect(clock=clock), self)

    def connect_with_faults(self, hook: Any, *, clock: Any = None) -> WrappedDriver:
        """An instance behind the faults suite's in-process hook; the driver can see what the hook broke."""
        spy = HookSpy(hook)
        driver = self.driver_class(self.inner.connect_with_faults(spy, clock=clock), self)
        driver.hook = spy
        return driver

    def address(self) -> object | None:
        return self.inner.address()

    def close(self) -> None:
        self.inner.close()


class WrappedHarness:
    def __init__(self, inner: DriverHarness, driver_class: type[WrappedDriver]) -> None:
        self.inner = inner
        self.driver_class = driver_class

    def open_store(self) -> WrappedStore:
        return WrappedStore(self.inner.open_store(), self.driver_class)

    def attach(self, address: object) -> WrappedStore:
        return WrappedStore(self.inner.attach(address), self.driver_class)

    def close(self) -> None:
        self.inner.close()


def mutant_harness(
    driver_class: type[WrappedDriver] | None = None,
    *,
    transaction_class: type[WrappedTransaction] | None = None,
    base: str = "local",
    base_options: Mapping[str, str] | None = None,
) -> Callable[[Mapping[str, str]], WrappedHarness]:
    """A harness factory for a mutant built on the ``base`` driver (the reference driver by default)."""
    if driver_class is None:
        driver_class = type("MutantDriver", (WrappedDriver,), {"transaction_class": transaction_class})
    elif transaction_class is not None:
        driver_class = type(driver_class.__name__, (driver_class,), {"transaction_class": transaction_class})
    chosen = driver_class

    def factory(options: Mapping[str, str]) -> WrappedHarness:
        merged = {**(base_options or {}), **options}
        return WrappedHarness(load_harness(base, merged), chosen)

    return factory
