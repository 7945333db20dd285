"""The harness behind the ``postgres`` entry point: one fresh schema per store.

Options (``--runlane-option key=value``):

* ``dsn``: the server (default ``postgresql://127.0.0.1:5432/test``);
* ``max_transaction_attempts``: how many lost attempts before ``StorageConflictError`` (default 32);
* ``exclusive_candidates``: ``true`` (default) to advertise and serve exclusive
  candidate selection (``FOR UPDATE SKIP LOCKED``), ``false`` to refuse it;
* ``isolation``: ``serializable`` (default, the only level that keeps the contract),
  ``repeatable_read`` or ``read_committed``: a driver that relies on that level alone,
  to see which anomalies each lets through;
* the five limits (``max_point_reads``, ``max_query_results``,
  ``max_transaction_records``, ``max_record_bytes``, ``max_transaction_bytes``):
  each replaces that one default; together they must stay coherent.

``open_store()`` creates the schema ``runlane_<uuid>``; closing the store
drops it with everything in it. ``address()`` is ``(dsn, schema)``, which a
child process hands to ``attach()`` to open instances on the same store.

Fault injection: a store names the server it talks to (``proxy_target()``,
the DSN's TCP host and port) and opens instances whose every connection goes
to another address instead (``connect_through(address)``), so the ``faults``
suite can put its loopback proxy in between.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    Clock,
    StorageLimits,
    positive_int_option,
    storage_limits_from_options,
)

from .driver import ISOLATION_LEVELS, PostgresStorageDriver, create_schema

__all__ = ["DEFAULT_DSN", "PostgresHarness", "PostgresOptionError", "PostgresStoreHandle", "harness", "probe"]

DEFAULT_DSN = "postgresql://127.0.0.1:5432/test"
_OPTIONS = ("dsn", "max_transaction_attempts", "exclusive_candidates", "isolation", *STORAGE_LIMIT_OPTIONS)
#: How long dropping a store may wait for a lock before it gives up (a leaked transaction holds one).
_DROP_LOCK_TIMEOUT = "10s"


class PostgresOptionError(ValueError):
    """A bad ``--runlane-option``; the message is one line for the user."""


def probe(dsn: str, timeout: int = 3) -> str | None:
    """``None`` when the server at ``dsn`` answers ``SELECT 1``; otherwise why not, in one line."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=timeout) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        return " ".join(str(error).split()) or type(error).__name__
    return None


class PostgresStoreHandle:
    """One schema; ``connect()`` opens independent instances on it."""

    def __init__(self, harness: PostgresHarness, schema: str, *, owned: bool) -> None:
        self._harness = harness
        self.schema = schema
        self._owned = owned
        self._drivers: list[PostgresStorageDriver] = []
        self._closed = False

    def connect(self, *, clock: Clock | None = None) -> PostgresStorageDriver:
        return self._open(self._harness.dsn, clock)

    def proxy_target(self) -> tuple[str, int]:
        """The TCP ``(host, port)`` of the server in the DSN (for the faults suite's proxy)."""
        params = conninfo_to_dict(self._harness.dsn)
        host = str(params.get("hostaddr") or params.get("host") or "")
        if not host or host.startswith("/") or "," in host:
            raise PostgresOptionError(
                f"postgres dsn {self._harness.dsn!r} names no single TCP host, so faults cannot be proxied"
            )
        return host, int(str(params.get("port") or 5432))

    def connect_through(
        self, address: tuple[str, int], *, clock: Clock | None = None
    ) -> PostgresStorageDriver:
        """An instance on this store whose connections (reconnections included) all go to ``address``."""
        host, port = address
        params = {
            key: str(value)
            for key, value in conninfo_to_dict(self._harness.dsn).items()
            if key != "hostaddr" and value is not None
        }
        params.update(host=host, port=str(port))
        return self._open(make_conninfo("", **params), clock)

    def _open(self, dsn: str, clock: Clock | None) -> PostgresStorageDriver:
        if self._closed:
            raise PostgresOptionError(f"the store {self.schema} was closed")
        harness = self._harness
        driver = PostgresStorageDriver(
            dsn,
            self.schema,
            clock=clock,
            limits=harness.limits,
            max_transaction_attempts=harness.max_transaction_attempts,
            exclusive_candidates=harness.exclusive_candidates,
            isolation=harness.isolation,
        )
        self._drivers.append(driver)
        return driver

    def address(self) -> tuple[str, str]:
        """``(dsn, schema)``: enough for another process to reach the same store."""
        return (self._harness.dsn, self.schema)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in self._drivers:
            driver.close()
        self._drivers.clear()
        if self._owned:
            self._harness._drop(self)


class PostgresHarness:
    """Opens stores as fresh schemas on one server, and drops them when they close."""

    def __init__(
        self,
        *,
        dsn: str = DEFAULT_DSN,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_candidates: bool = True,
        isolation: str = "serializable",
    ) -> None:
        self.dsn = dsn
        self.limits = limits
        self.max_transaction_attempts = max_transaction_attempts
        self.exclusive_candidates = exclusive_candidates
        self.isolation = isolation
        self._admin: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._open: list[PostgresStoreHandle] = []

    def _admin_connection(self) -> psycopg.Connection[Any]:
        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
            self._admin.execute(f"SET lock_timeout = '{_DROP_LOCK_TIMEOUT}'")
        return self._admin

    def open_store(self) -> PostgresStoreHandle:
        schema = f"runlane_{uuid.uuid4().hex}"
        with self._lock:
            create_schema(self._admin_connection(), schema)
            handle = PostgresStoreHandle(self, schema, owned=True)
            self._open.append(handle)
        return handle

    def attach(self, address: object) -> PostgresStoreHandle:
        """A handle on an existing store from ``address()``; closing it keeps the schema."""
        if (
            not isinstance(address, (tuple, list))
            or len(address) != 2
            or not all(isinstance(part, str) for part in address)
        ):
            raise PostgresOptionError(f"postgres store address {address!r} is not (dsn, schema)")
        dsn, schema = address
        if dsn != self.dsn:
            raise PostgresOptionError(f"store {schema} lives on {dsn}, but this harness uses {self.dsn}")
        return PostgresStoreHandle(self, schema, owned=False)

    def _drop(self, handle: PostgresStoreHandle) -> None:
        with self._lock:
            if handle in self._open:
                self._open.remove(handle)
            self._admin_connection().execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(handle.schema))
            )

    def close(self) -> None:
        for handle in list(self._open):
            handle.close()
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _positive_int(name: str, text: str) -> int:
    return positive_int_option("postgres", name, text, error=PostgresOptionError)


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise PostgresOptionError(f"postgres driver option {name}={text!r}: use true or false")


def harness(options: Mapping[str, str]) -> PostgresHarness:
    """The ``runlane.storage_drivers`` entry point target for ``postgres``; connects lazily."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise PostgresOptionError(
            f"postgres driver does not know option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(_OPTIONS)}"
        )
    dsn = options.get("dsn", DEFAULT_DSN).strip()
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as error:
        raise PostgresOptionError(f"postgres driver option dsn={dsn!r} is not a connection string") from error
    attempts = (
        _positive_int("max_transaction_attempts", options["max_transaction_attempts"])
        if "max_transaction_attempts" in options
        else 32
    )
    exclusive = _flag("exclusive_candidates", options.get("exclusive_candidates", "true"))
    limits = storage_limits_from_options("postgres", options, error=PostgresOptionError)
    isolation = options.get("isolation", "serializable").strip()
    if isolation not in ISOLATION_LEVELS:
        raise PostgresOptionError(
            f"postgres driver option isolation={isolation!r}: use {', '.join(ISOLATION_LEVELS)}"
        )
    return PostgresHarness(
        dsn=dsn,
        limits=limits,
        max_transaction_attempts=attempts,
        exclusive_candidates=exclusive,
        isolation=isolation,
    )
