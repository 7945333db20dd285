"""The harness behind the ``mysql`` entry point: one fresh database per store.

Options (``--runlane-option key=value``):

* ``host``, ``port``, ``user``, ``password``: the server (default ``root@127.0.0.1:3306``, no password);
* ``max_transaction_attempts``: how many lost attempts before ``StorageConflictError`` (default 32);
* ``lock_wait_timeout``: seconds a statement waits for a lock before the attempt is rolled back and
  replayed (InnoDB's ``innodb_lock_wait_timeout`` for this driver's sessions, default 10);
* ``isolation``: ``serializable`` (default, the only level that keeps the contract),
  ``repeatable_read`` or ``read_committed``, to show what the suites make of a weaker level;
* ``exclusive_candidates``: ``true`` (default) to advertise and serve exclusive candidate selection,
  ``false`` to refuse it;
* the five limits (``max_point_reads``, ``max_query_results``, ``max_transaction_records``,
  ``max_record_bytes``, ``max_transaction_bytes``): each replaces that one default; together they
  must stay coherent.

``open_store()`` hands out a fresh database ``runlane_<uuid>`` (created in advance, on the harness's
admin thread, while the previous store is in use); closing the store drops it with everything in it
on that thread (``drain()`` waits for the drops, ``close()`` of the harness always does).
``address()`` is ``(host, port, database)``, which a child process hands to ``attach()`` to open
instances on the same store (the login comes from the child's own options).

Fault injection: a store names the server it talks to (``proxy_target()``) and opens instances
whose every connection goes to another address instead (``connect_through(address)``), so the
toolkit's ``faults`` suite can put its loopback proxy in between.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

import pymysql

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    Clock,
    StorageLimits,
    positive_int_option,
    storage_limits_from_options,
)

from .driver import (
    ISOLATION_LEVELS,
    Connection,
    ConnectionPool,
    MysqlServer,
    MysqlStorageDriver,
    create_database,
    drop_database,
    open_connection,
)

__all__ = [
    "DEFAULT_SERVER",
    "MysqlHarness",
    "MysqlOptionError",
    "MysqlStoreHandle",
    "harness",
    "probe",
    "server_from_options",
]

DEFAULT_SERVER = MysqlServer("127.0.0.1", 3306, "root", "")
_OPTIONS = (
    "host",
    "port",
    "user",
    "password",
    "max_transaction_attempts",
    "lock_wait_timeout",
    "exclusive_candidates",
    "isolation",
    *STORAGE_LIMIT_OPTIONS,
)


class MysqlOptionError(ValueError):
    """A bad ``--runlane-option``; the message is one line for the user."""


def probe(server: MysqlServer = DEFAULT_SERVER, timeout: int = 3) -> str | None:
    """``None`` when ``server`` answers ``SELECT 1``; otherwise why not, in one line."""
    try:
        conn = pymysql.connect(
            host=server.host,
            port=server.port,
            user=server.user,
            password=server.password,
            connect_timeout=timeout,
        )
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
        finally:
            conn.close()
    except pymysql.err.Error as error:
        return " ".join(str(error).split()) or type(error).__name__
    return None


class MysqlStoreHandle:
    """One database; ``connect()`` opens independent instances on it."""

    def __init__(self, harness: MysqlHarness, database: str, *, owned: bool) -> None:
        self._harness = harness
        self.database = database
        self._owned = owned
        self._drivers: list[MysqlStorageDriver] = []
        self._closed = False

    def connect(self, *, clock: Clock | None = None) -> MysqlStorageDriver:
        return self._open(self._harness.server, clock, pooled=True)

    def proxy_target(self) -> tuple[str, int]:
        """The TCP ``(host, port)`` of the server (for the faults suite's proxy)."""
        return self._harness.server.host, self._harness.server.port

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> MysqlStorageDriver:
        """An instance on this store whose connections (reconnections included) all go to ``address``."""
        host, port = address
        return self._open(self._harness.server.at(host, port), clock)

    def _open(self, server: MysqlServer, clock: Clock | None, *, pooled: bool = False) -> MysqlStorageDriver:
        if self._closed:
            raise MysqlOptionError(f"the store {self.database} was closed")
        harness = self._harness
        driver = MysqlStorageDriver(
            server,
            self.database,
            clock=clock,
            limits=harness.limits,
            max_transaction_attempts=harness.max_transaction_attempts,
            exclusive_candidates=harness.exclusive_candidates,
            lock_wait_timeout=harness.lock_wait_timeout,
            pool=harness.pool if pooled else None,
            isolation=harness.isolation,
        )
        self._drivers.append(driver)
        return driver

    def address(self) -> tuple[str, int, str]:
        """``(host, port, database)``: enough for another process to reach the same store."""
        return (self._harness.server.host, self._harness.server.port, self.database)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in self._drivers:
            driver.close()
        self._drivers.clear()
        if self._owned:
            self._harness._drop(self)


class MysqlHarness:
    """Opens stores as fresh databases on one server, and drops them when they close."""

    def __init__(
        self,
        *,
        server: MysqlServer = DEFAULT_SERVER,
        limits: StorageLimits | None = None,
        max_transaction_attempts: int = 32,
        exclusive_candidates: bool = True,
        lock_wait_timeout: int = 10,
        isolation: str = "serializable",
    ) -> None:
        self.server = server
        self.isolation = isolation
        self.limits = limits
        self.max_transaction_attempts = max_transaction_attempts
        self.exclusive_candidates = exclusive_candidates
        self.lock_wait_timeout = lock_wait_timeout
        self._admin: Connection | None = None
        self._lock = threading.Lock()
        self._open: list[MysqlStoreHandle] = []
        # Every DDL statement runs on one admin thread (one connection, never shared between threads):
        # the next store's database is created while the current one is in use, and a closed store's
        # database is dropped behind the caller's back. Suites open a fresh store per check and per
        # generated history, so this takes the DDL (about a third of a second) off each of them.
        self._ddl: ThreadPoolExecutor | None = None
        #: Idle connections the instances of every store share (see ``ConnectionPool``).
        self.pool = ConnectionPool(server, lock_wait_timeout=lock_wait_timeout, isolation=isolation)
        self._spare: Future[str] | None = None
        self._drops: list[Future[None]] = []

    def _admin_connection(self) -> Connection:
        if self._admin is None or not self._admin.open:
            # A leaked transaction's metadata lock must not make dropping a store hang for long.
            self._admin = open_connection(self.server, None, lock_wait_timeout=10)
            with self._admin.cursor() as cur:
                cur.execute("SET SESSION lock_wait_timeout = 10")
        return self._admin

    def _executor(self) -> ThreadPoolExecutor:
        if self._ddl is None:
            self._ddl = ThreadPoolExecutor(max_workers=1, thread_name_prefix="runlane-mysql-ddl")
        return self._ddl

    def _create(self) -> str:
        database = f"runlane_{uuid.uuid4().hex}"
        create_database(self._admin_connection(), database)
        return database

    def open_store(self) -> MysqlStoreHandle:
        """A fresh, empty database (usually created in advance), and the next one started."""
        with self._lock:
            executor = self._executor()
            spare, self._spare = self._spare, None
            if spare is not None:
                try:
                    database = spare.result()
                except pymysql.err.Error:
                    database = executor.submit(self._create).result()  # the server may be back now
            else:
                database = executor.submit(self._create).result()
            self._spare = executor.submit(self._create)
            handle = MysqlStoreHandle(self, database, owned=True)
            self._open.append(handle)
        return handle

    def attach(self, address: object) -> MysqlStoreHandle:
        """A handle on an existing store from ``address()``; closing it keeps the database."""
        if (
            not isinstance(address, (tuple, list))
            or len(address) != 3
            or not isinstance(address[0], str)
            or not isinstance(address[1], int)
            or not isinstance(address[2], str)
        ):
            raise MysqlOptionError(f"mysql store address {address!r} is not (host, port, database)")
        host, port, database = address
        if (host, port) != (self.server.host, self.server.port):
            raise MysqlOptionError(
                f"store {database} lives on {host}:{port}, but this harness uses {self.server}"
            )
        return MysqlStoreHandle(self, database, owned=False)

    def _drop(self, handle: MysqlStoreHandle) -> None:
        """Drop the store's database on the admin thread (its instances are already closed)."""
        with self._lock:
            if handle in self._open:
                self._open.remove(handle)
            self._drops = [drop for drop in self._drops if not drop.done()]
            self._drops.append(
                self._executor().submit(lambda: drop_database(self._admin_connection(), handle.database))
            )

    def drain(self) -> None:
        """Wait until every database dropped so far is gone (re-raising a failed drop)."""
        with self._lock:
            drops, self._drops = self._drops, []
        for drop in drops:
            drop.result()

    def close(self) -> None:
        """Drop every store this harness opened and the spare, then close the admin connection."""
        for handle in list(self._open):
            handle.close()
        with self._lock:
            spare, self._spare = self._spare, None
            executor, self._ddl = self._ddl, None
        if executor is not None:
            if spare is not None:
                with contextlib.suppress(pymysql.err.Error):
                    database = spare.result()
                    executor.submit(lambda: drop_database(self._admin_connection(), database)).result()
            self.drain()
            executor.shutdown(wait=True)
        self.pool.close()
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _positive_int(name: str, text: str) -> int:
    return positive_int_option("mysql", name, text, error=MysqlOptionError)


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise MysqlOptionError(f"mysql driver option {name}={text!r}: use true or false")


def server_from_options(options: Mapping[str, str]) -> MysqlServer:
    """The server the options name (defaults: root with no password at 127.0.0.1:3306)."""
    host = options.get("host", DEFAULT_SERVER.host).strip()
    if not host:
        raise MysqlOptionError("mysql driver option host is empty")
    port = _positive_int("port", options["port"]) if "port" in options else DEFAULT_SERVER.port
    if port > 65535:
        raise MysqlOptionError(f"mysql driver option port={port} is not a TCP port")
    return MysqlServer(host, port, options.get("user", DEFAULT_SERVER.user), options.get("password", ""))


def harness(options: Mapping[str, str]) -> MysqlHarness:
    """The ``runlane.storage_drivers`` entry point target for ``mysql``; connects lazily."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise MysqlOptionError(
            f"mysql driver does not know option(s) {', '.join(unknown)}; valid options: {', '.join(_OPTIONS)}"
        )
    attempts = (
        _positive_int("max_transaction_attempts", options["max_transaction_attempts"])
        if "max_transaction_attempts" in options
        else 32
    )
    wait = (
        _positive_int("lock_wait_timeout", options["lock_wait_timeout"])
        if "lock_wait_timeout" in options
        else 10
    )
    exclusive = _flag("exclusive_candidates", options.get("exclusive_candidates", "true"))
    isolation = options.get("isolation", "serializable").strip()
    if isolation not in ISOLATION_LEVELS:
        raise MysqlOptionError(
            f"mysql driver option isolation={isolation!r}: use {', '.join(ISOLATION_LEVELS)}"
        )
    limits = storage_limits_from_options("mysql", options, error=MysqlOptionError)
    return MysqlHarness(
        server=server_from_options(options),
        limits=limits,
        max_transaction_attempts=attempts,
        exclusive_candidates=exclusive,
        lock_wait_timeout=wait,
        isolation=isolation,
    )
