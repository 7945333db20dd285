"""How a driver plugs into the suites: harness factories found by entry point, loaded and configured.

The shapes a harness and its stores take are in ``harness_protocols`` (re-exported here).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from importlib.metadata import entry_points

from .contract.errors import RunlaneError, StorageProfileError
from .contract.values import StorageLimits
from .harness_protocols import (
    ClusterStore,
    DeclaredCluster,
    DriverHarness,
    FaultHookStore,
    HarnessFactory,
    PartitionableCluster,
    ProxiedStore,
    SettlingStore,
    StoreHandle,
)
from .safe_text import describe_exception, safe_repr
from .suggest import close_matches

__all__ = [
    "ENTRY_POINT_GROUP",
    "STORAGE_LIMIT_OPTIONS",
    "ClusterStore",
    "DeclaredCluster",
    "DriverHarness",
    "DriverInfo",
    "DriverLoadError",
    "DriverNotFoundError",
    "DriverOptionError",
    "FaultHookStore",
    "HarnessError",
    "HarnessFactory",
    "PartitionableCluster",
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
        from .aio import async_harness  # only an async factory pays for importing asyncio

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
