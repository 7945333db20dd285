"""Correct drivers whose own code leans on exception types, identities and chains.

Each driver here keeps the storage contract (it certifies at the reference
driver's level) but handles errors the way real drivers do, which makes it
sensitive to *which* exception its code meets: an LMDB-style binding that
lets raw ``ConnectionError`` out of its reads and converts it around the
callback, a retrying client, a driver that re-types its own errors with
``raise ... from``, and one with a separate clause per kind of exception.
Served through the backend protocol (``--isolation process``), each would
certify differently if an exception crossed the boundary as a different
type, lost its identity or its chain; ``tests/correct/test_fragile.py``
certifies each in both modes and compares every requirement's outcome.

All of them wrap the reference driver's store (``LocalStoreHandle``), with its
in-process fault hook, so the ``faults`` area runs and ``+faults`` is part of
their level. Each ``*_harness`` function is a harness factory:
``runlane-certify run --driver tests.correct.fragile:around_callback_harness``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from runlane_conformance.contract.catalog import StorageCandidateMode
from runlane_conformance.contract.errors import (
    StorageAttemptEndedError,
    StorageConflictError,
    StorageCursorError,
    StorageDuplicateMutationError,
    StorageKeyChangeError,
    StorageSealedError,
    StorageUnavailableError,
)
from runlane_conformance.contract.protocols import Clock, StorageDriver, StorageTransaction
from runlane_conformance.contract.streams import AppendRecordsCommand
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageProfile,
    StorageRecordKey,
    StoredRecord,
)
from runlane_conformance.faults.plan import FaultHook
from runlane_conformance.harness import DriverOptionError
from runlane_conformance.local.harness import LocalStoreHandle

__all__ = [
    "FRAGILE_DRIVERS",
    "around_callback_harness",
    "per_kind_clauses_harness",
    "replays_broken_connections_harness",
    "retypes_errors_harness",
]

T = TypeVar("T")


class FragileSealedError(StorageSealedError):
    """The driver's own type for a sealed read (a subclass: the contract's type still matches)."""


class FragileDuplicateMutationError(StorageDuplicateMutationError):
    """The driver's own type for a second mutation of one key."""


class FragileKeyChangeError(StorageKeyChangeError):
    """The driver's own type for a replace/delete of a record this attempt did not read."""


class FragileAttemptEndedError(StorageAttemptEndedError):
    """The driver's own type for a call on a finished attempt."""


class FragileCursorError(StorageCursorError):
    """The driver's own type for a cursor it cannot use."""


class FragileConflictError(StorageConflictError):
    """The driver's own type for a transaction that lost every attempt."""


#: Contract errors the ``retypes_errors`` driver re-raises as its own subclass, ``from`` the original.
_RETYPED: tuple[tuple[type[Exception], Callable[[str], Exception]], ...] = (
    (StorageSealedError, FragileSealedError),
    (StorageDuplicateMutationError, FragileDuplicateMutationError),
    (StorageKeyChangeError, FragileKeyChangeError),
    (StorageAttemptEndedError, FragileAttemptEndedError),
    (StorageCursorError, FragileCursorError),
)


def _retyped(error: Exception) -> Exception | None:
    for contract_type, own in _RETYPED:
        if isinstance(error, contract_type) and not isinstance(error, own):  # type: ignore[arg-type]
            return own(str(error))
    return None


class _Attempt:
    """One attempt of the wrapped reference driver; each style overrides how a call fails.

    ``raw_connection_errors`` undoes the reference driver's conversion inside reads: a read the
    fault hook broke raises the hook's own ``ConnectionError`` object, as a database binding
    with no error mapping of its own would.
    """

    def __init__(self, inner: StorageTransaction, *, raw_connection_errors: bool, retype: bool) -> None:
        self._inner = inner
        self._raw = raw_connection_errors
        self._retype = retype

    def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except StorageUnavailableError as error:
            if self._raw and isinstance(error.__cause__, ConnectionError):
                raise error.__cause__ from None
            raise
        except Exception as error:
            own = _retyped(error) if self._retype else None
            if own is None:
                raise
            raise own from error

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        return self._call(self._inner.get, keys)

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        return self._call(self._inner.query_candidates, command, mode=mode)

    def now(self) -> datetime:
        return self._call(self._inner.now)

    def create(self, record: NewStorageRecord) -> None:
        self._call(self._inner.create, record)

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        self._call(self._inner.replace, current, record)

    def delete(self, current: StoredRecord) -> None:
        self._call(self._inner.delete, current)

    def append(self, command: AppendRecordsCommand) -> None:
        append = getattr(self._inner, "append")  # noqa: B009 - optional on the protocol
        self._call(append, command)


class _FragileDriver:
    """The reference driver, with one style of error handling around its callback and calls."""

    raw_connection_errors = False
    retype = False

    def __init__(self, inner: StorageDriver) -> None:
        self._inner = inner

    @property
    def profile(self) -> StorageProfile:
        return self._inner.profile

    def _attempt(self, tx: StorageTransaction) -> _Attempt:
        return _Attempt(tx, raw_connection_errors=self.raw_connection_errors, retype=self.retype)

    def transaction(self, callback: Callable[[Any], T]) -> T:
        return self._inner.transaction(lambda tx: callback(self._attempt(tx)))

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        return self._inner.query(command)

    def get_run(self, environment: str, run_id: str) -> StoredRecord | None:
        return self._inner.get_run(environment, run_id)  # type: ignore[attr-defined, no-any-return]

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> Any:
        return self._inner.list_runs(environment, limit=limit, cursor=cursor)  # type: ignore[attr-defined]

    def list_run_events(self, environment: str, run_id: str, *, limit: int, cursor: str | None = None) -> Any:
        return self._inner.list_run_events(  # type: ignore[attr-defined]
            environment, run_id, limit=limit, cursor=cursor
        )

    def close(self) -> None:
        self._inner.close()


class AroundCallbackDriver(_FragileDriver):
    """The LMDB-style driver: reads let the raw ``ConnectionError`` out, the transaction converts it.

    ``docs/faults.md`` tells an author to treat the hook's ``InjectedFault`` like the client's own
    connection errors; this driver does it in one place, an ``except ConnectionError`` around the
    callback, and so depends on the very exception its read raised coming back out of the
    callback. Nothing committed (the reference attempt is broken and rolls back), so
    ``StorageUnavailableError`` is the truth.
    """

    raw_connection_errors = True

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: StorageTransaction) -> T:
            try:
                return callback(self._attempt(tx))
            except ConnectionError as error:
                raise StorageUnavailableError(
                    f"the store connection broke during the attempt: {error}"
                ) from error

        return self._inner.transaction(attempt)


class ReplaysBrokenConnectionsDriver(_FragileDriver):
    """As ``AroundCallbackDriver``, but a broken attempt is replayed (twice) before giving up.

    Retrying is safe: an attempt whose connection broke committed nothing. The driver only
    retries what its own reads raised (identity, not type: an error of the callback's own that
    happens to be a ``ConnectionError`` goes through unchanged).
    """

    raw_connection_errors = True
    tries = 3

    def transaction(self, callback: Callable[[Any], T]) -> T:
        broken: list[BaseException] = []
        last: BaseException | None = None

        def attempt(tx: StorageTransaction) -> T:
            try:
                return callback(_Recording(self._attempt(tx), broken))
            except ConnectionError as error:
                if not any(error is mine for mine in broken):
                    raise
                raise _Replay() from error

        for _ in range(self.tries):
            try:
                return self._inner.transaction(attempt)
            except _Replay as replay:
                last = replay.__cause__
                broken.clear()
        raise StorageUnavailableError(f"the store connection kept breaking: {last}") from last


class _Replay(Exception):
    """Internal: the attempt's connection broke; run the transaction again."""


class _Recording:
    """An attempt that remembers the connection errors its own calls raised."""

    def __init__(self, inner: _Attempt, broken: list[BaseException]) -> None:
        self._inner = inner
        self._broken = broken

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except ConnectionError as error:
                self._broken.append(error)
                raise

        return call


class RetypesErrorsDriver(_FragileDriver):
    """Re-raises the reference driver's errors as its own subclasses, ``from`` the original.

    A conflict the driver itself gave up on becomes ``FragileConflictError``; an exception the
    callback raised (a conflict included) is recognised by identity and goes through untouched,
    as the contract asks.
    """

    retype = True

    def transaction(self, callback: Callable[[Any], T]) -> T:
        raised: list[BaseException] = []

        def attempt(tx: StorageTransaction) -> T:
            try:
                return callback(self._attempt(tx))
            except BaseException as error:
                raised.append(error)
                raise

        try:
            return self._inner.transaction(attempt)
        except StorageConflictError as error:
            if any(error is theirs for theirs in raised):
                raise
            raise FragileConflictError(str(error)) from error

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        try:
            return self._inner.query(command)
        except StorageCursorError as error:
            raise FragileCursorError(str(error)) from error


class PerKindClausesDriver(_FragileDriver):
    """One ``except`` clause per kind of callback exception, each leaving through its own path.

    An ``Exception`` is re-raised by name from its clause; anything else (``KeyboardInterrupt``,
    ``SystemExit``, ``GeneratorExit``, a framework's ``BaseException``) by a bare ``raise`` from
    another. ``met`` keeps which clause each failed attempt went through, so a test can see a
    ``BaseException`` that came back as an ``Exception``.
    """

    def __init__(self, inner: StorageDriver) -> None:
        super().__init__(inner)
        self.met: list[tuple[str, type[BaseException]]] = []

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: StorageTransaction) -> T:
            try:
                return callback(self._attempt(tx))
            except Exception as error:
                self.met.append(("exception", type(error)))
                raise error
            except BaseException as error:
                self.met.append(("base", type(error)))
                raise

        return self._inner.transaction(attempt)


class _FragileStore:
    """The reference store handle, handing out one style of fragile driver."""

    def __init__(self, style: type[_FragileDriver]) -> None:
        self._inner = LocalStoreHandle(None, 16)
        self._style = style

    def connect(self, *, clock: Clock | None = None) -> _FragileDriver:
        return self._style(self._inner.connect(clock=clock))

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> _FragileDriver:
        return self._style(self._inner.connect_with_faults(hook, clock=clock))

    def address(self) -> None:
        return None

    def settle(self, *, timeout: float) -> bool:
        return self._inner.settle(timeout=timeout)

    def close(self) -> None:
        self._inner.close()


class _FragileHarness:
    def __init__(self, style: type[_FragileDriver]) -> None:
        self._style = style
        self._stores: list[_FragileStore] = []

    def open_store(self) -> _FragileStore:
        store = _FragileStore(self._style)
        self._stores.append(store)
        return store

    def attach(self, address: object) -> _FragileStore:
        raise DriverOptionError("fragile drivers' stores live in one process and have no address")

    def close(self) -> None:
        for store in self._stores:
            store.close()
        self._stores.clear()


def _factory(style: type[_FragileDriver], options: Mapping[str, str]) -> _FragileHarness:
    if options:
        raise DriverOptionError(f"the fragile drivers take no options, got {', '.join(sorted(options))}")
    return _FragileHarness(style)


def around_callback_harness(options: Mapping[str, str]) -> _FragileHarness:
    """``AroundCallbackDriver``: raw connection errors from reads, converted around the callback."""
    return _factory(AroundCallbackDriver, options)


def replays_broken_connections_harness(options: Mapping[str, str]) -> _FragileHarness:
    """``ReplaysBrokenConnectionsDriver``: an attempt whose own read broke is replayed."""
    return _factory(ReplaysBrokenConnectionsDriver, options)


def retypes_errors_harness(options: Mapping[str, str]) -> _FragileHarness:
    """``RetypesErrorsDriver``: its own subclasses of the contract errors, raised ``from`` the original."""
    return _factory(RetypesErrorsDriver, options)


def per_kind_clauses_harness(options: Mapping[str, str]) -> _FragileHarness:
    """``PerKindClausesDriver``: a separate clause for ``Exception`` and for other ``BaseException``."""
    return _factory(PerKindClausesDriver, options)


#: Every fragile driver, by a short name, as the ``module:factory`` spec the CLI takes.
FRAGILE_DRIVERS: Mapping[str, str] = {
    name: f"{__name__}:{name}_harness"
    for name in ("around_callback", "replays_broken_connections", "retypes_errors", "per_kind_clauses")
}
