"""The harness behind the ``sqlite`` entry point: one SQLite file per store.

Options (``--runlane-option key=value``):

* ``path``: the database file to use. Without it every store is a fresh
  temporary file, deleted when the store closes. With it, ``open_store()``
  empties that file's tables and ``close()`` leaves the file in place for
  inspection; only one store may be open on it at a time.
* ``busy_timeout``: seconds a transaction waits for another one's write lock
  before trying again (default 30).
* ``synchronous``: ``full`` (default: a commit survives power loss) or
  ``normal`` (a commit survives a process crash; faster).
* ``exclusive_candidates``: ``true`` (default) to advertise exclusive candidate
  selection (every selection is already exclusive under the write lock: a
  competing selector waits for it), ``false`` to refuse exclusive mode;
* ``max_transaction_attempts``: how many lock waits of ``busy_timeout`` before giving up (default 3).
* the five limits (``max_point_reads``, ``max_query_results``,
  ``max_transaction_records``, ``max_record_bytes``, ``max_transaction_bytes``):
  each replaces that one default; together they must stay coherent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping

from runlane_conformance import (
    STORAGE_LIMIT_OPTIONS,
    Clock,
    FaultHook,
    StorageLimits,
    positive_int_option,
    storage_limits_from_options,
)

from .driver import SCHEMA, SqliteStorageDriver, forget_gate, open_connection

__all__ = ["SqliteHarness", "SqliteOptionError", "SqliteStoreHandle", "harness"]

_OPTIONS = (
    "path",
    "busy_timeout",
    "synchronous",
    "max_transaction_attempts",
    "exclusive_candidates",
    *STORAGE_LIMIT_OPTIONS,
)


class SqliteOptionError(ValueError):
    """A bad ``--runlane-option``; the message is one line for the user."""


class SqliteStoreHandle:
    """One SQLite file; ``connect()`` opens independent instances on it."""

    def __init__(self, harness: SqliteHarness, path: str, *, owned: bool, delete: bool) -> None:
        self._harness = harness
        self._path = path
        self._owned = owned
        self._delete = delete
        self._drivers: list[SqliteStorageDriver] = []
        self._closed = False

    def connect(self, *, clock: Clock | None = None) -> SqliteStorageDriver:
        return self._open(clock, None)

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> SqliteStorageDriver:
        """An instance that opens its connections and runs every statement through ``hook``.

        This is the faults suite's in-process hook: a file database has no
        wire for the fault proxy to cut, so the hook stands in for a
        connection that breaks before, during or after a statement.
        """
        return self._open(clock, hook)

    def _open(self, clock: Clock | None, hook: FaultHook | None) -> SqliteStorageDriver:
        if self._closed:
            raise SqliteOptionError(f"the store {self._path} was closed")
        driver = SqliteStorageDriver(
            self._path,
            faults=hook,
            clock=clock,
            limits=self._harness.limits,
            busy_timeout=self._harness.busy_timeout,
            synchronous=self._harness.synchronous,
            max_transaction_attempts=self._harness.max_transaction_attempts,
            exclusive_candidates=self._harness.exclusive_candidates,
        )
        self._drivers.append(driver)
        return driver

    def address(self) -> str:
        """The database file: a child process attaches to the same store by opening it."""
        return self._path

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in self._drivers:
            driver.close()
        self._drivers.clear()
        self._harness._forget(self)
        if self._owned:
            forget_gate(self._path)
        if self._owned and self._delete:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self._path + suffix)


class SqliteHarness:
    """Opens stores: fresh temporary files, or the one ``path`` the user named."""

    def __init__(
        self,
        *,
        path: str | None = None,
        limits: StorageLimits | None = None,
        busy_timeout: float = 30.0,
        synchronous: str = "FULL",
        max_transaction_attempts: int = 3,
        exclusive_candidates: bool = True,
    ) -> None:
        self.path = path
        self.exclusive_candidates = exclusive_candidates
        self.limits = limits
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self.max_transaction_attempts = max_transaction_attempts
        self._directory: str | None = None
        self._open: list[SqliteStoreHandle] = []

    def _create(self, path: str, *, empty: bool) -> None:
        conn = open_connection(path, busy_timeout=self.busy_timeout, synchronous=self.synchronous)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA:
                conn.execute(statement)
            if empty:
                conn.execute("DELETE FROM records")
                conn.execute("DELETE FROM index_entries")
                conn.execute("DELETE FROM commit_markers")
            conn.execute("COMMIT")
        finally:
            conn.close()

    def open_store(self) -> SqliteStoreHandle:
        if self.path is not None:
            if self._open:
                raise SqliteOptionError(
                    f"the store at {self.path} is already open; a fixed path holds one store at a time"
                )
            self._create(self.path, empty=True)
            handle = SqliteStoreHandle(self, self.path, owned=True, delete=False)
        else:
            if self._directory is None:
                self._directory = tempfile.mkdtemp(prefix="runlane-sqlite-")
            path = os.path.join(self._directory, f"store-{uuid.uuid4().hex}.sqlite3")
            self._create(path, empty=False)
            handle = SqliteStoreHandle(self, path, owned=True, delete=True)
        self._open.append(handle)
        return handle

    def attach(self, address: object) -> SqliteStoreHandle:
        """A handle on an existing store file (from ``address()``); closing it keeps the file."""
        if not isinstance(address, str) or not os.path.exists(address):
            raise SqliteOptionError(f"sqlite store address {address!r} is not an existing database file")
        return SqliteStoreHandle(self, address, owned=False, delete=False)

    def _forget(self, handle: SqliteStoreHandle) -> None:
        if handle in self._open:
            self._open.remove(handle)

    def close(self) -> None:
        for handle in list(self._open):
            handle.close()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def _positive_int(name: str, text: str) -> int:
    return positive_int_option("sqlite", name, text, error=SqliteOptionError)


def _positive_float(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise SqliteOptionError(f"sqlite driver option {name}={text!r} is not a positive number of seconds")
    return value


def harness(options: Mapping[str, str]) -> SqliteHarness:
    """The ``runlane.storage_drivers`` entry point target for ``sqlite``."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise SqliteOptionError(
            f"sqlite driver does not know option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(_OPTIONS)}"
        )
    path = options.get("path")
    if path is not None:
        path = path.strip()
        if not path or path == ":memory:":
            raise SqliteOptionError("sqlite driver option path= must name a file (stores must be shareable)")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise SqliteOptionError(
                f"sqlite driver option path={path!r}: directory {directory} does not exist"
            )
        path = os.path.abspath(path)
    synchronous = options.get("synchronous", "full").strip().upper()
    if synchronous not in ("FULL", "NORMAL"):
        raise SqliteOptionError(
            f"sqlite driver option synchronous={options['synchronous']!r}: use full or normal"
        )
    busy_timeout = (
        _positive_float("busy_timeout", options["busy_timeout"]) if "busy_timeout" in options else 30.0
    )
    attempts = (
        _positive_int("max_transaction_attempts", options["max_transaction_attempts"])
        if "max_transaction_attempts" in options
        else 3
    )
    exclusive = options.get("exclusive_candidates", "true").strip().lower()
    if exclusive not in ("true", "false"):
        raise SqliteOptionError(
            f"sqlite driver option exclusive_candidates={options['exclusive_candidates']!r}: "
            "use true or false"
        )
    limits = storage_limits_from_options("sqlite", options, error=SqliteOptionError)
    return SqliteHarness(
        path=path,
        limits=limits,
        busy_timeout=busy_timeout,
        synchronous=synchronous,
        max_transaction_attempts=attempts,
        exclusive_candidates=exclusive == "true",
    )
