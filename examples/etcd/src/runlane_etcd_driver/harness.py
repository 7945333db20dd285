"""The harness behind the ``etcd`` entry point: one fresh key prefix per store.

Options (``--runlane-option key=value``):

* ``endpoints``: the cluster's members, ``http://host:port,...`` (default
  ``http://127.0.0.1:2379``); an instance talks to the first that answers
  and moves to the next when one stops answering;
* ``max_transaction_attempts``: how many lost attempts before ``StorageConflictError`` (default 32);
* ``exclusive_hold_ms``: how long an exclusive hold survives an owner that never releases it (a
  crashed process), in milliseconds, rounded up to whole seconds (etcd's lease TTL; default 60000);
* the five limits (``max_point_reads``, ``max_query_results``,
  ``max_transaction_records``, ``max_record_bytes``, ``max_transaction_bytes``):
  each replaces that one default; together they must stay coherent.

``open_store()`` picks the prefix ``runlane/<uuid hex>/`` (nothing is written
until the first commit); closing the store deletes every key under it with
one range delete. ``address()`` is ``(endpoints, prefix)``, which a child
process hands to ``attach()`` to open instances on the same store.

Fault injection: ``proxy_target()`` is the first member's client address, and
``connect_through(address)`` opens an instance that talks to ``address``
only (no other member to move to), so the ``faults`` suite's loopback proxy
sees every request.
"""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from collections.abc import Mapping, Sequence

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    Clock,
    StorageLimits,
    positive_int_option,
    storage_limits_from_options,
)

from .client import EndpointError, EtcdEndpoints, b64, parse_endpoints
from .driver import EtcdStorageDriver
from .layout import prefix_end

__all__ = [
    "DEFAULT_ENDPOINTS",
    "EtcdHarness",
    "EtcdOptionError",
    "EtcdStoreHandle",
    "harness",
    "new_prefix",
    "probe",
]

DEFAULT_ENDPOINTS = "http://127.0.0.1:2379"
_OPTIONS = ("endpoints", "max_transaction_attempts", "exclusive_hold_ms", *STORAGE_LIMIT_OPTIONS)
_PREFIX = re.compile(r"runlane/[0-9a-f]{32}/")


class EtcdOptionError(ValueError):
    """A bad ``--runlane-option`` or address; the message is one line for the user."""


def probe(endpoints: str) -> str | None:
    """``None`` when a member of ``endpoints`` answers a read; else why not."""
    try:
        members = EtcdEndpoints(parse_endpoints(endpoints))
    except ValueError as error:
        return str(error)
    try:
        members.read("/kv/range", {"key": b64(b"runlane/probe")})
    except EndpointError as error:
        return str(error)
    finally:
        members.close()
    return None


def new_prefix() -> str:
    return f"runlane/{uuid.uuid4().hex}/"


class EtcdStoreHandle:
    """One key prefix; ``connect()`` opens independent instances (each its own sessions) on it."""

    def __init__(self, harness: EtcdHarness, prefix: str, *, owned: bool) -> None:
        self._harness = harness
        self.prefix = prefix
        self._owned = owned
        self._drivers: list[EtcdStorageDriver] = []
        self._closed = False

    def connect(self, *, clock: Clock | None = None) -> EtcdStorageDriver:
        return self._open(self._harness.endpoints, clock)

    def proxy_target(self) -> tuple[str, int]:
        """The ``(host, port)`` the faults suite's proxy stands in for: the first member."""
        return self._harness.endpoints[0]

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> EtcdStorageDriver:
        """An instance on this store that sends every request to ``address`` instead of the members."""
        host, port = address
        return self._open(((host, int(port)),), clock)

    def _open(self, endpoints: Sequence[tuple[str, int]], clock: Clock | None) -> EtcdStorageDriver:
        if self._closed:
            raise EtcdOptionError(f"the store {self.prefix} was closed")
        harness = self._harness
        driver = EtcdStorageDriver(
            endpoints,
            self.prefix,
            clock=clock,
            limits=harness.limits,
            max_transaction_attempts=harness.max_transaction_attempts,
            hold_ms=harness.exclusive_hold_ms,
        )
        self._drivers.append(driver)
        return driver

    def address(self) -> tuple[str, str]:
        """``(endpoints, prefix)``: enough for another process to reach the same store."""
        return (self._harness.endpoints_text, self.prefix)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in self._drivers:
            driver.close()
        self._drivers.clear()
        if self._owned:
            self._harness._drop(self)


class EtcdHarness:
    """Opens stores as fresh key prefixes on one etcd cluster, and deletes them when they close."""

    def __init__(
        self,
        *,
        endpoints: str = DEFAULT_ENDPOINTS,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_hold_ms: int = 60_000,
    ) -> None:
        self.endpoints_text = endpoints
        self.endpoints = parse_endpoints(endpoints)
        self.limits = limits
        self.max_transaction_attempts = max_transaction_attempts
        self.exclusive_hold_ms = exclusive_hold_ms
        self._admin = EtcdEndpoints(self.endpoints)
        self._lock = threading.Lock()
        self._open: list[EtcdStoreHandle] = []

    def open_store(self) -> EtcdStoreHandle:
        handle = EtcdStoreHandle(self, new_prefix(), owned=True)
        with self._lock:
            self._open.append(handle)
        return handle

    def attach(self, address: object) -> EtcdStoreHandle:
        """A handle on an existing store from ``address()``; closing it keeps the keys."""
        if (
            not isinstance(address, (tuple, list))
            or len(address) != 2
            or not all(isinstance(part, str) for part in address)
            or not _PREFIX.fullmatch(address[1])
        ):
            raise EtcdOptionError(f"etcd store address {address!r} is not (endpoints, prefix)")
        endpoints, prefix = address
        if endpoints != self.endpoints_text:
            raise EtcdOptionError(
                f"store {prefix} lives on {endpoints}, but this harness uses {self.endpoints_text}"
            )
        return EtcdStoreHandle(self, prefix, owned=False)

    def _drop(self, handle: EtcdStoreHandle) -> None:
        with self._lock:
            if handle in self._open:
                self._open.remove(handle)
        if not _PREFIX.fullmatch(handle.prefix):  # never let a malformed prefix become a wide delete
            raise EtcdOptionError(f"{handle.prefix!r} is not a runlane store prefix")
        start = handle.prefix.encode("ascii")
        # When the cluster is gone there is nothing left to clean up on it from here.
        with contextlib.suppress(EndpointError):
            self._admin.read("/kv/deleterange", {"key": b64(start), "range_end": b64(prefix_end(start))})

    def close(self) -> None:
        for handle in list(self._open):
            handle.close()
        self._admin.close()


def _positive_int(name: str, text: str) -> int:
    return positive_int_option("etcd", name, text, error=EtcdOptionError)


def harness(options: Mapping[str, str]) -> EtcdHarness:
    """The ``runlane.storage_drivers`` entry point target for ``etcd``; connects lazily."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise EtcdOptionError(
            f"etcd driver does not know option(s) {', '.join(unknown)}; valid options: {', '.join(_OPTIONS)}"
        )
    endpoints = options.get("endpoints", DEFAULT_ENDPOINTS).strip()
    try:
        parse_endpoints(endpoints)
    except ValueError as error:
        raise EtcdOptionError(f"etcd driver option endpoints={endpoints!r}: {error}") from error
    attempts = (
        _positive_int("max_transaction_attempts", options["max_transaction_attempts"])
        if "max_transaction_attempts" in options
        else 32
    )
    hold_ms = (
        _positive_int("exclusive_hold_ms", options["exclusive_hold_ms"])
        if "exclusive_hold_ms" in options
        else 60_000
    )
    limits = storage_limits_from_options("etcd", options, error=EtcdOptionError)
    return EtcdHarness(
        endpoints=endpoints, limits=limits, max_transaction_attempts=attempts, exclusive_hold_ms=hold_ms
    )
