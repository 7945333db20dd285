"""The async harness behind the ``asyncpg`` entry point: one fresh schema per store.

Options (``--runlane-option key=value``):

* ``dsn``: the server (default ``postgresql://127.0.0.1:5432/test``);
* ``max_transaction_attempts``: lost attempts before ``StorageConflictError`` (default 32);
* ``exclusive_candidates``: ``true`` (default) to advertise and serve exclusive
  candidate selection (``FOR UPDATE SKIP LOCKED``), ``false`` to refuse it;
* the five limits (``max_point_reads`` ... ``max_transaction_bytes``): each
  replaces that one default; together they must stay coherent.

The harness is written against ``runlane_conformance``'s async protocols
(``AsyncDriverHarness``, ``AsyncStoreHandle``) and registered through
``async_harness``, which runs it on its own event loop behind the
synchronous shape the suites call.

``open_store()`` creates the schema ``runlane_apg_<uuid>`` (a prefix of its
own, so it never meets the psycopg example's stores); closing the store
drops it. ``address()`` is ``(dsn, schema)`` for child processes.
``proxy_target()`` and ``connect_through()`` let the faults suite put its
TCP proxy between the instances and the server.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from urllib.parse import urlsplit

import asyncpg

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    Clock,
    StorageLimits,
    async_harness,
    positive_int_option,
    storage_limits_from_options,
)

from .driver import AsyncpgStorageDriver, create_schema, open_connection, quote_identifier

__all__ = [
    "DEFAULT_DSN",
    "AsyncpgHarness",
    "AsyncpgOptionError",
    "AsyncpgStoreHandle",
    "build_harness",
    "harness",
    "probe",
]

DEFAULT_DSN = "postgresql://127.0.0.1:5432/test"
SCHEMA_PREFIX = "runlane_apg_"
_OPTIONS = ("dsn", "max_transaction_attempts", "exclusive_candidates", *STORAGE_LIMIT_OPTIONS)
#: How long dropping a store may wait for a lock before it gives up (a leaked transaction holds one).
_DROP_LOCK_TIMEOUT = "10s"


class AsyncpgOptionError(ValueError):
    """A bad ``--runlane-option``; the message is one line for the user."""


async def probe_async(dsn: str, timeout: float = 3.0) -> str | None:
    """``None`` when the server at ``dsn`` answers ``SELECT 1``; otherwise why not, in one line."""
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
        try:
            await conn.fetchval("SELECT 1")
        finally:
            await conn.close()
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        return " ".join(str(error).split()) or type(error).__name__
    return None


def probe(dsn: str, timeout: float = 3.0) -> str | None:
    """``probe_async`` for synchronous callers (the tests' collection hook)."""
    return asyncio.run(probe_async(dsn, timeout))


class AsyncpgStoreHandle:
    """One schema; ``connect()`` opens independent instances on it."""

    def __init__(self, harness: AsyncpgHarness, schema: str, *, owned: bool) -> None:
        self._harness = harness
        self.schema = schema
        self._owned = owned
        self._drivers: list[AsyncpgStorageDriver] = []
        self._closed = False

    async def connect(self, *, clock: Clock | None = None) -> AsyncpgStorageDriver:
        return self._open(None, clock)

    def proxy_target(self) -> tuple[str, int]:
        """The TCP ``(host, port)`` of the server in the DSN (for the faults suite's proxy)."""
        parts = urlsplit(self._harness.dsn)
        host = parts.hostname or ""
        if not host or host.startswith("/") or "," in (parts.netloc or ""):
            raise AsyncpgOptionError(
                f"asyncpg dsn {self._harness.dsn!r} names no single TCP host, so faults cannot be proxied"
            )
        return host, parts.port or 5432

    async def connect_through(
        self, address: tuple[str, int], *, clock: Clock | None = None
    ) -> AsyncpgStorageDriver:
        """An instance on this store whose connections (reconnections included) all go to ``address``."""
        return self._open(address, clock)

    def _open(self, address: tuple[str, int] | None, clock: Clock | None) -> AsyncpgStorageDriver:
        if self._closed:
            raise AsyncpgOptionError(f"the store {self.schema} was closed")
        harness = self._harness
        dsn, schema = harness.dsn, self.schema

        async def opener() -> asyncpg.Connection:
            if address is None:
                return await open_connection(dsn, schema)
            return await open_connection(dsn, schema, host=address[0], port=address[1])

        driver = AsyncpgStorageDriver(
            opener,
            clock=clock,
            limits=harness.limits,
            max_transaction_attempts=harness.max_transaction_attempts,
            exclusive_candidates=harness.exclusive_candidates,
        )
        self._drivers.append(driver)
        return driver

    def address(self) -> tuple[str, str]:
        """``(dsn, schema)``: enough for another process to reach the same store."""
        return (self._harness.dsn, self.schema)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in self._drivers:
            await driver.close()
        self._drivers.clear()
        if self._owned:
            await self._harness.drop(self)


class AsyncpgHarness:
    """Opens stores as fresh schemas on one server, and drops them when they close."""

    def __init__(
        self,
        *,
        dsn: str = DEFAULT_DSN,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_candidates: bool = True,
    ) -> None:
        self.dsn = dsn
        self.limits = limits
        self.max_transaction_attempts = max_transaction_attempts
        self.exclusive_candidates = exclusive_candidates
        self._admin: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self._open: list[AsyncpgStoreHandle] = []

    async def _admin_connection(self) -> asyncpg.Connection:
        if self._admin is None or self._admin.is_closed():
            self._admin = await asyncpg.connect(
                self.dsn, timeout=5, server_settings={"lock_timeout": _DROP_LOCK_TIMEOUT}
            )
        return self._admin

    async def open_store(self) -> AsyncpgStoreHandle:
        schema = f"{SCHEMA_PREFIX}{uuid.uuid4().hex}"
        async with self._lock:
            await create_schema(await self._admin_connection(), schema)
            handle = AsyncpgStoreHandle(self, schema, owned=True)
            self._open.append(handle)
        return handle

    async def attach(self, address: object) -> AsyncpgStoreHandle:
        """A handle on an existing store from ``address()``; closing it keeps the schema."""
        if (
            not isinstance(address, (tuple, list))
            or len(address) != 2
            or not all(isinstance(part, str) for part in address)
        ):
            raise AsyncpgOptionError(f"asyncpg store address {address!r} is not (dsn, schema)")
        dsn, schema = address
        if dsn != self.dsn:
            raise AsyncpgOptionError(f"store {schema} lives on {dsn}, but this harness uses {self.dsn}")
        return AsyncpgStoreHandle(self, schema, owned=False)

    async def drop(self, handle: AsyncpgStoreHandle) -> None:
        """Drop ``handle``'s schema with everything in it."""
        async with self._lock:
            if handle in self._open:
                self._open.remove(handle)
            conn = await self._admin_connection()
            await conn.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(handle.schema)} CASCADE")

    async def close(self) -> None:
        for handle in list(self._open):
            await handle.close()
        if self._admin is not None:
            await self._admin.close()
            self._admin = None


def _positive_int(name: str, text: str) -> int:
    return positive_int_option("asyncpg", name, text, error=AsyncpgOptionError)


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise AsyncpgOptionError(f"asyncpg driver option {name}={text!r}: use true or false")


async def build_harness(options: Mapping[str, str]) -> AsyncpgHarness:
    """The async harness for ``options``; connects lazily, so loading the driver never needs the server."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise AsyncpgOptionError(
            f"asyncpg driver does not know option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(_OPTIONS)}"
        )
    dsn = options.get("dsn", DEFAULT_DSN).strip()
    if urlsplit(dsn).scheme not in ("postgres", "postgresql"):
        raise AsyncpgOptionError(
            f"asyncpg driver option dsn={dsn!r} is not a postgresql:// URL (asyncpg takes URLs only)"
        )
    attempts = (
        _positive_int("max_transaction_attempts", options["max_transaction_attempts"])
        if "max_transaction_attempts" in options
        else 32
    )
    exclusive = _flag("exclusive_candidates", options.get("exclusive_candidates", "true"))
    limits = storage_limits_from_options("asyncpg", options, error=AsyncpgOptionError)
    return AsyncpgHarness(
        dsn=dsn, limits=limits, max_transaction_attempts=attempts, exclusive_candidates=exclusive
    )


#: The ``runlane.storage_drivers`` entry point target for ``asyncpg``: the async harness behind the adapter.
harness = async_harness(build_harness)
