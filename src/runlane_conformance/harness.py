"""How a driver plugs into the suites: harness factories found by entry point.

A driver package registers, in the entry point group ``runlane.storage_drivers``,
a factory that takes the user's ``--option k=v`` pairs and returns a
``DriverHarness``. The harness opens fresh, isolated stores; each store hands
out independent driver instances. Nothing else is asked of a driver author.

Loading failures are turned into ``HarnessError`` subclasses with one clear
line naming the driver, so the CLI and the pytest plugin never show a
traceback for a user mistake.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from .contract.errors import RunlaneError, StorageProfileError
from .contract.protocols import Clock, StorageDriver
from .contract.values import StorageLimits
from .faults.plan import FaultHook
from .safe_text import describe_exception, safe_repr
from .suggest import close_matches

__all__ = [
    "ENTRY_POINT_GROUP",
    "STORAGE_LIMIT_OPTIONS",
    "DriverHarness",
    "DriverInfo",
    "DriverLoadError",
    "DriverNotFoundError",
    "DriverOptionError",
    "FaultHookStore",
    "HarnessError",
    "HarnessFactory",
    "ProxiedStore",
    "SettlingStore",
    "StoreHandle",
    "available_drivers",
    "load_harness",
    "load_harness_factory",
    "parse_driver_options",
    "positive_int_option",
    "settle_store",
    "storage_limits_from_options",
]

ENTRY_POINT_GROUP = "runlane.storage_drivers"

STORAGE_LIMIT_OPTIONS = tuple(item.name for item in fields(StorageLimits))
"""The harness options every bundled driver accepts for its limits, one per ``StorageLimits`` field."""


@runtime_checkable
class StoreHandle(Protocol):
    """One fresh, empty, isolated store (a schema, a key prefix, a temp file...)."""

    def connect(self, *, clock: Clock | None = None) -> StorageDriver:
        """A new driver instance on this store, independent of every other instance.

        ``clock`` is honoured by drivers whose clock authority is ``client``.
        """
        ...

    def address(self) -> object | None:
        """A picklable address a child process can pass to ``DriverHarness.attach``.

        ``None`` means the store lives in this process only; cross-process
        checks then skip with that reason.
        """
        ...

    def close(self) -> None:
        """Drop the store and everything in it."""
        ...


@runtime_checkable
class ProxiedStore(Protocol):
    """Optional: a store whose instances talk to a server over TCP, so faults can be injected on the wire.

    A store offering these two methods lets the ``faults`` suite put a
    ``FaultProxy`` between its instances and the server, with no knowledge of
    the driver's internals. ``connect_through`` must open an instance exactly
    like ``connect`` does (same store, options and clock), except that every
    connection it makes, including reconnections after a failure, goes to
    ``address`` instead of ``proxy_target()``.
    """

    def proxy_target(self) -> tuple[str, int]:
        """The ``(host, port)`` of the server this store's instances connect to."""
        ...

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> StorageDriver:
        """A new instance on this store whose connections all go to ``address``."""
        ...


@runtime_checkable
class FaultHookStore(Protocol):
    """Optional: a store whose driver is not networked but can route its store exchanges through a hook.

    ``connect_with_faults(hook)`` opens an instance that calls
    ``hook.round_trip(action)`` around every exchange with its store (each
    read, each write statement, the commit) and treats the hook's
    ``InjectedFault`` exactly like a broken connection of its own.
    """

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> StorageDriver:
        """A new instance on this store whose store exchanges go through ``hook``."""
        ...


@runtime_checkable
class SettlingStore(Protocol):
    """Optional: a store whose eventually consistent indexes can be waited on.

    A driver that advertises ``index_consistency="eventual"`` may give its
    store handle ``settle``, so the suites can check what its indexes show
    once they have caught up without sleeping and hoping. Without it the
    suites poll the condition they check, under a deadline.
    """

    def settle(self, *, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds until every index reflects every commit finished before the call.

        Returns ``True`` once it does, ``False`` when the deadline passed
        first. The suites stop writing before they call it, so a correct
        eventual index always gets there.
        """
        ...


@runtime_checkable
class DriverHarness(Protocol):
    """What a driver author supplies: a way to open fresh stores.

    The suites never share state between checks: each check opens its own
    store, so a harness must make every store empty and isolated from every
    other (its own schema, key prefix or file).
    """

    def open_store(self) -> StoreHandle:
        """A new, empty store that no other store can see or change."""
        ...

    def attach(self, address: object) -> StoreHandle:
        """A handle on an existing store by address (used in child processes; does not own it)."""
        ...

    def close(self) -> None:
        """Release what the harness itself holds (connection pools, servers it started)."""
        ...


HarnessFactory = Callable[[Mapping[str, str]], DriverHarness]
"""The entry point's target: called with the ``--option key=value`` pairs, returns the harness.

A bad option should raise an exception whose message is one line; the CLI prints it as it is.
"""


class HarnessError(RunlaneError):
    """A driver could not be found, configured or loaded. The message is one line for the user."""


class DriverNotFoundError(HarnessError, LookupError):
    """No installed driver has that name, and it is not a ``module:factory`` reference."""


class DriverLoadError(HarnessError, ImportError):
    """The driver's module failed to import, or its factory raised or returned the wrong thing."""


class DriverOptionError(HarnessError, ValueError):
    """A ``--option`` was not ``key=value``."""


@dataclass(frozen=True)
class DriverInfo:
    """An installed driver: its entry point name, target and the distribution that ships it."""

    name: str
    target: str
    distribution: str | None
    version: str | None


def available_drivers() -> list[DriverInfo]:
    """Every driver registered under the entry point group, sorted by name."""
    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = point.dist
        found.append(
            DriverInfo(
                point.name,
                point.value,
                None if dist is None else dist.metadata["Name"],
                None if dist is None else dist.version,
            )
        )
    return sorted(found, key=lambda info: info.name)


def parse_driver_options(pairs: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` to a dict; a pair without ``=`` or with an empty key is refused."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise DriverOptionError(f"driver option {pair!r} is not of the form key=value")
        options[key.strip()] = value
    return options


def load_harness_factory(spec: str) -> HarnessFactory:
    """Resolve an entry point name, or ``module:factory``, to the harness factory."""
    if not spec:
        raise DriverNotFoundError("no driver given")
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == spec:
            try:
                loaded = point.load()
            except Exception as error:
                raise DriverLoadError(
                    f"driver {spec!r}: importing {point.value} failed: {describe_exception(error)}"
                ) from error
            return _callable(spec, loaded)
    if ":" not in spec:
        installed = [info.name for info in available_drivers()]
        close = close_matches(spec, installed)
        if close:
            raise DriverNotFoundError(f"driver {spec!r} is not installed; did you mean {' or '.join(close)}?")
        names = ", ".join(installed) or "none"
        raise DriverNotFoundError(
            f"driver {spec!r} is not installed (installed drivers: {names}); "
            "give an installed name or module:factory"
        )
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise DriverLoadError(
            f"driver {spec!r}: importing {module_name} failed: {describe_exception(error)}"
        ) from error
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise DriverNotFoundError(
                f"driver {spec!r}: {module_name} has no attribute {attribute!r}"
            ) from None
        except Exception as error:
            raise DriverLoadError(
                f"driver {spec!r}: looking up {attribute!r} failed: {describe_exception(error)}"
            ) from error
    return _callable(spec, target)


def _callable(spec: str, target: object) -> HarnessFactory:
    if not callable(target):
        raise DriverLoadError(f"driver {spec!r}: {safe_repr(target)} is not callable")
    return target


def load_harness(spec: str, options: Mapping[str, str] | None = None) -> DriverHarness:
    """Load the factory for ``spec`` and build its harness with ``options``.

    A factory that is a coroutine function is an async driver's
    (``runlane_conformance.aio``): it is served through ``async_harness``, so
    it may be registered directly.
    """
    factory = load_harness_factory(spec)
    if inspect.iscoroutinefunction(factory):
        from .aio import async_harness  # the adapter imports this module

        factory = async_harness(factory)
    try:
        harness = factory(dict(options or {}))
    except HarnessError:
        raise
    except Exception as error:
        raise DriverLoadError(
            f"driver {spec!r}: its harness factory raised {describe_exception(error)}"
        ) from error
    if not callable(getattr(harness, "open_store", None)):
        raise DriverLoadError(
            f"driver {spec!r}: the factory returned {safe_repr(harness)}, which has no open_store()"
        )
    return harness


def positive_int_option(
    driver: str, name: str, text: str, *, error: type[Exception] = DriverOptionError
) -> int:
    """Parse one ``--option name=text`` that must be a positive integer, or raise ``error`` naming it."""
    stripped = text.strip()
    if not stripped.isdigit() or int(stripped) < 1:
        raise error(f"{driver} driver option {name}={text!r} is not a positive integer")
    return int(stripped)


def storage_limits_from_options(
    driver: str, options: Mapping[str, str], *, error: type[Exception] = DriverOptionError
) -> StorageLimits | None:
    """The limits the ``STORAGE_LIMIT_OPTIONS`` among ``options`` ask for; ``None`` if none is given.

    Options not given keep the contract's defaults. Values must be positive
    integers, and together they must make a coherent profile (a record may
    not be allowed to exceed the transaction byte limit, for example);
    anything else raises ``error`` with one line naming the driver, so a
    harness can raise its own option error type.
    """
    values = {
        name: positive_int_option(driver, name, options[name], error=error)
        for name in STORAGE_LIMIT_OPTIONS
        if name in options
    }
    if not values:
        return None
    try:
        return replace(StorageLimits(), **values)
    except StorageProfileError as problem:
        raise error(f"{driver} driver limits are incoherent: {problem}") from problem


def settle_store(store: object, *, timeout: float) -> bool | None:
    """Call the store's optional ``settle`` hook: ``None`` when it offers none, else whether it converged.

    A hook that raises is the driver's failure and propagates; a hook that
    returns anything but a bool is refused, because "maybe" is not an answer
    a check can rely on.
    """
    hook = getattr(store, "settle", None)
    if not callable(hook):
        return None
    converged = hook(timeout=timeout)
    if not isinstance(converged, bool):
        raise TypeError(f"settle(timeout=...) must return a bool, got {converged!r}")
    return converged
