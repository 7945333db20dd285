"""The ``process`` driver: a harness whose driver lives in a backend process, spoken to over the protocol.

``runlane-certify run --driver process --option command="node backend.mjs"``
certifies whatever driver that program serves. Every object here is a thin
proxy: each call becomes one request, every value crosses in its canonical
JSON form (``wire``), and every contract error comes back as its own type
(``errors``). The suites therefore run unchanged, and judge the backend's
driver, not these proxies: nothing here enforces a contract rule. The only
checks made on this side are the ones the wire forces: an argument that has
no canonical form (a key that is not a ``StorageRecordKey``, a record that
does not parse) is refused with ``StorageValidationError`` before it is
sent, as the contract's own parsers would refuse it.

Options:

* ``command`` (required): the backend's command line, split like a shell would;
* ``timeout``: seconds any one exchange may take (default 30); inside a
  transaction the clock restarts after each attempt's callback;
* ``max_line_bytes``: the longest line accepted from the backend (default 64 MiB);
* ``validate``: ``true`` to check every message in both directions against
  the protocol's JSON Schema (slower; the toolkit's own tests use it);
* ``backend_options``: a JSON object of the backend driver's own options. They are handed to
  the backend on an inherited pipe (its number in ``RUNLANE_BACKEND_OPTIONS_FD``), never on its
  command line, where every local user could read them with ``ps``; ``runlane_conformance.backend``
  reads them there. ``--isolation process`` passes the run's ``--option`` values this way;
* ``colocate``: ``false`` to let the operating system place the backend on any
  CPU. By default (Linux) it runs on the CPU of the toolkit thread that starts
  it, which stays there while it lives: the two take turns, and a wake-up
  across CPUs costs more than most answers (see ``docs/driver-protocol.md``, Cost).
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from ..contract.catalog import StorageCandidateMode
from ..contract.errors import StorageValidationError
from ..contract.protocols import Clock, StorageTransaction
from ..contract.records import parse_new_storage_record
from ..contract.streams import AppendRecordsCommand, parse_append_records_command
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageProfile,
    StorageRecordKey,
    StoredRecord,
)
from ..faults.plan import FaultHook
from ..harness import DriverLoadError, DriverOptionError, positive_int_option
from ..local.operator import OperatorPage
from .client import PROTOCOL_VERSION, AttemptOutcomes, BackendProcess, MessageTap
from .errors import BackendError, BackendProtocolError
from .wire import (
    append_to_wire,
    date_from_wire,
    key_to_wire,
    new_record_to_wire,
    page_from_wire,
    profile_from_wire,
    query_to_wire,
    stored_record_from_wire,
    stored_record_to_wire,
)

__all__ = [
    "STORE_HOOKS",
    "BackendInfo",
    "ProcessDriver",
    "ProcessFaultHookStore",
    "ProcessHarness",
    "ProcessOperatorDriver",
    "ProcessProxiedStore",
    "ProcessSettlingStore",
    "ProcessStoreHandle",
    "ProcessTransaction",
    "process_harness",
]

T = TypeVar("T")
_OPTIONS = ("command", "timeout", "max_line_bytes", "validate", "colocate", "backend_options")
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024


class BackendInfo:
    """What a backend said about itself in ``hello``."""

    def __init__(self, name: str, version: str, driver: str, profile: StorageProfile) -> None:
        self.name = name
        self.version = version
        self.driver = driver
        self.profile = profile


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BackendProtocolError(f"{what} is not a string: {value!r}")
    return value


class ProcessTransaction:
    """One attempt of a backend transaction; each call is one request naming the attempt id."""

    def __init__(self, backend: BackendProcess, attempt: str) -> None:
        self._backend = backend
        self._attempt = attempt

    def _call(self, op: str, **params: Any) -> Any:
        return self._backend.request(op, {"attempt": self._attempt, **params})

    def get(self, keys: Sequence[StorageRecordKey]) -> list[StoredRecord | None]:
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
            raise StorageValidationError("get() takes a sequence of StorageRecordKey")
        for key in keys:
            if not isinstance(key, StorageRecordKey):
                raise StorageValidationError(f"{key!r} is not a StorageRecordKey")
        answer = self._call("get", keys=[key_to_wire(key) for key in keys])
        if not isinstance(answer, list):
            raise BackendProtocolError(f"the answer to 'get' is not an array: {answer!r}")
        return [None if item is None else stored_record_from_wire(item) for item in answer]

    def query_candidates(
        self, command: QueryRecordsCommand, *, mode: StorageCandidateMode = StorageCandidateMode.ADVISORY
    ) -> QueryRecordsResult:
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query_candidates() takes a QueryRecordsCommand")
        try:
            parsed = StorageCandidateMode(mode)
        except ValueError as error:
            raise StorageValidationError(f"unknown candidate mode {mode!r}") from error
        return page_from_wire(
            self._call("query_candidates", command=query_to_wire(command), mode=parsed.value)
        )

    def now(self) -> datetime:
        answer = self._call("now")
        try:
            return date_from_wire(answer)
        except StorageValidationError as error:
            raise BackendProtocolError(f"the answer to 'now' is not an ISO date: {answer!r}") from error

    def create(self, record: NewStorageRecord) -> None:
        self._call("create", record=new_record_to_wire(parse_new_storage_record(record)))

    def replace(self, current: StoredRecord, record: NewStorageRecord) -> None:
        if not isinstance(current, StoredRecord):
            raise StorageValidationError("replace() needs the StoredRecord this attempt read")
        parsed = parse_new_storage_record(record)
        self._call("replace", current=stored_record_to_wire(current), record=new_record_to_wire(parsed))

    def delete(self, current: StoredRecord) -> None:
        if not isinstance(current, StoredRecord):
            raise StorageValidationError("delete() needs the StoredRecord this attempt read")
        self._call("delete", current=stored_record_to_wire(current))

    def append(self, command: AppendRecordsCommand) -> None:
        self._call("append", command=append_to_wire(parse_append_records_command(command)))


class ProcessDriver:
    """One driver instance (a backend ``connection``) on a backend store."""

    def __init__(
        self, backend: BackendProcess, connection: str, profile: StorageProfile, clocked: bool
    ) -> None:
        self._backend = backend
        self._connection = connection
        self._profile = profile
        self._clocked = clocked
        self._closed = False
        #: The toolkit's id of the fault hook this instance's store exchanges go through, if any.
        self.fault_hook: str | None = None

    @property
    def profile(self) -> StorageProfile:
        return self._profile

    def transaction(self, callback: Callable[[StorageTransaction], T]) -> T:
        """Ask the backend to run its driver's transaction loop; run each attempt's callback here."""
        outcomes = AttemptOutcomes()
        backend = self._backend

        def run(attempt: str) -> object:
            return callback(ProcessTransaction(backend, attempt))

        def on_attempt(message: Mapping[str, Any]) -> None:
            backend.run_attempt(message, run, outcomes)

        reply = backend.exchange("transaction", {"connection": self._connection}, on_attempt=on_attempt)
        if "error" in reply:
            wire = reply["error"]
            attempt = wire.get("attempt") if isinstance(wire, Mapping) else None
            if attempt is None:
                raise backend.error(wire, "transaction")
            original = outcomes.errors.get(attempt) if isinstance(attempt, str) else None
            if original is None:
                backend.fail(
                    BackendProtocolError,
                    f"the backend blamed attempt {attempt!r} for a transaction's error, "
                    "but that attempt's callback did not raise",
                )
                raise backend.failure()
            raise original  # the callback's own exception object, as an in-process driver hands it back
        answer = reply["ok"]
        committed = answer.get("attempt") if isinstance(answer, Mapping) else None
        if not isinstance(committed, str) or committed not in outcomes.values:
            backend.fail(
                BackendProtocolError,
                f"the backend committed attempt {committed!r}, "
                "which is not an attempt whose callback returned",
            )
            raise backend.failure()
        return outcomes.values[committed]  # type: ignore[return-value]

    def query(self, command: QueryRecordsCommand) -> QueryRecordsResult:
        if not isinstance(command, QueryRecordsCommand):
            raise StorageValidationError("query() takes a QueryRecordsCommand")
        return page_from_wire(
            self._backend.request(
                "query", {"connection": self._connection, "command": query_to_wire(command)}
            )
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._clocked:
            self._backend.forget_clock(self._connection)
        if self.fault_hook is not None:
            self._backend.forget_fault_hook(self.fault_hook)
        if not self._backend.failed:
            self._backend.request("disconnect", {"connection": self._connection})


def _operator_page(answer: object) -> OperatorPage:
    if not isinstance(answer, Mapping) or not isinstance(answer.get("items"), list):
        raise BackendProtocolError(f"an operator page is not an object with items: {answer!r}")
    cursor = answer.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise BackendProtocolError(f"an operator page's cursor is not a string: {cursor!r}")
    return OperatorPage(tuple(stored_record_from_wire(item) for item in answer["items"]), cursor)


class ProcessOperatorDriver(ProcessDriver):
    """A ``ProcessDriver`` whose backend driver also offers the operator read model."""

    def get_run(self, environment: str, run_id: str) -> StoredRecord | None:
        answer = self._backend.request(
            "get_run", {"connection": self._connection, "environment": environment, "run_id": run_id}
        )
        return None if answer is None else stored_record_from_wire(answer)

    def list_runs(self, environment: str, *, limit: int, cursor: str | None = None) -> OperatorPage:
        return _operator_page(
            self._backend.request(
                "list_runs",
                {
                    "connection": self._connection,
                    "environment": environment,
                    "limit": limit,
                    "cursor": cursor,
                },
            )
        )

    def list_run_events(
        self, environment: str, run_id: str, *, limit: int, cursor: str | None = None
    ) -> OperatorPage:
        return _operator_page(
            self._backend.request(
                "list_run_events",
                {
                    "connection": self._connection,
                    "environment": environment,
                    "run_id": run_id,
                    "limit": limit,
                    "cursor": cursor,
                },
            )
        )


class ProcessStoreHandle:
    """A store inside the backend; ``connect()`` opens backend connections on it."""

    def __init__(
        self,
        harness: ProcessHarness,
        backend: BackendProcess,
        store: str,
        address: object,
        target: tuple[str, int] | None = None,
    ) -> None:
        self._harness = harness
        self._backend = backend
        self._store = store
        self._address = address
        self._target = target
        self._drivers: list[ProcessDriver] = []

    def connect(self, *, clock: Clock | None = None) -> ProcessDriver:
        return self._connect(clock, {})

    def _connect(
        self, clock: Clock | None, extra: Mapping[str, Any], hook: FaultHook | None = None
    ) -> ProcessDriver:
        backend = self._backend
        hook_id = None if hook is None else backend.register_fault_hook(hook)
        params = {"store": self._store, "clock": clock is not None, **extra}
        if hook_id is not None:
            params["fault_hook"] = hook_id
        try:
            driver = self._open_connection(params, clock)
        except BaseException:
            if hook_id is not None:
                backend.forget_fault_hook(hook_id)
            raise
        driver.fault_hook = hook_id
        return driver

    def _open_connection(self, params: Mapping[str, Any], clock: Clock | None) -> ProcessDriver:
        backend = self._backend
        answer = backend.request("connect", params)
        if not isinstance(answer, Mapping):
            raise BackendProtocolError(f"the answer to 'connect' is not an object: {answer!r}")
        connection = _text(answer.get("connection"), "a connection id")
        try:
            profile = profile_from_wire(answer.get("profile"))
        except Exception as error:
            raise BackendProtocolError(f"the backend's connection profile is invalid: {error}") from error
        if clock is not None:
            backend.register_clock(connection, clock)
        kind = ProcessOperatorDriver if answer.get("operator_reads") is True else ProcessDriver
        driver = kind(backend, connection, profile, clock is not None)
        self._drivers.append(driver)
        return driver

    def address(self) -> object | None:
        """``None`` when the backend's store is process-local; otherwise the command and its address."""
        if self._address is None:
            return None
        return {"command": self._harness.command, "address": self._address}

    def close(self) -> None:
        """Close the store in the backend; raise the failure if the backend broke while it was open."""
        if self._backend.failed:
            raise self._backend.failure()
        for driver in self._drivers:
            driver.close()
        self._backend.request("close_store", {"store": self._store})


class ProcessFaultHookStore(ProcessStoreHandle):
    """A backend store whose driver routes its store exchanges through a fault hook.

    The hook stays on this side: the backend's driver asks for each round trip (a ``fault``
    request) and the suite's switch decides, so the faults suite runs unchanged.
    """

    def connect_with_faults(self, hook: FaultHook, *, clock: Clock | None = None) -> ProcessDriver:
        return self._connect(clock, {}, hook)


class ProcessProxiedStore(ProcessStoreHandle):
    """A backend store whose driver talks TCP to a server, so the suite's fault proxy can sit between."""

    def proxy_target(self) -> tuple[str, int]:
        assert self._target is not None, "made only for an answer with proxy_target"
        return self._target

    def connect_through(self, address: tuple[str, int], *, clock: Clock | None = None) -> ProcessDriver:
        host, port = address
        return self._connect(clock, {"through": [host, port]})


class ProcessSettlingStore(ProcessStoreHandle):
    """A backend store whose handle offers ``settle`` (``SettlingStore``); one ``settle`` request a call."""

    def settle(self, *, timeout: float) -> bool:
        """Forward the hook; the exchange may take the hook's ``timeout`` on top of the usual one."""
        answer = self._backend.request(
            "settle", {"store": self._store, "timeout": timeout}, timeout=self._backend.timeout + timeout
        )
        if not isinstance(answer, bool):
            raise BackendProtocolError(f"the answer to 'settle' is not a boolean: {answer!r}")
        return answer


#: Every optional hook a store handle may offer in process (the optional protocols of
#: ``runlane_conformance.harness``), the member of ``open``/``attach``'s answer by which a backend
#: says its store offers it, and the handle class that forwards it. The hook-parity test holds this
#: table against those protocols, so a hook added there without a way across fails the suite.
STORE_HOOKS: Mapping[str, tuple[str, type[ProcessStoreHandle]]] = {
    "proxy_target": ("proxy_target", ProcessProxiedStore),
    "connect_through": ("proxy_target", ProcessProxiedStore),
    "connect_with_faults": ("fault_hook", ProcessFaultHookStore),
    "settle": ("settle", ProcessSettlingStore),
}

_HANDLE_CLASSES: dict[tuple[type[ProcessStoreHandle], ...], type[ProcessStoreHandle]] = {}
_HANDLE_CLASSES_LOCK = threading.Lock()


def _handle_class(mixins: tuple[type[ProcessStoreHandle], ...]) -> type[ProcessStoreHandle]:
    """The handle class offering exactly the hooks of ``mixins`` (made once per combination)."""
    if not mixins:
        return ProcessStoreHandle
    if len(mixins) == 1:
        return mixins[0]
    with _HANDLE_CLASSES_LOCK:
        klass = _HANDLE_CLASSES.get(mixins)
        if klass is None:
            name = "".join(mixin.__name__.removeprefix("Process").removesuffix("Store") for mixin in mixins)
            klass = type(
                f"Process{name}Store", mixins, {"__doc__": "A backend store with each of these hooks."}
            )
            _HANDLE_CLASSES[mixins] = klass
    return klass


def _store_handle(
    harness: ProcessHarness, backend: BackendProcess, answer: Mapping[str, Any]
) -> ProcessStoreHandle:
    """A handle offering exactly the hooks the backend said this store offers (fault mechanisms, settle)."""
    store = _text(answer.get("store"), "a store id")
    address = answer.get("address")
    target = answer.get("proxy_target")
    if target is not None:
        if not (
            isinstance(target, list)
            and len(target) == 2
            and isinstance(target[0], str)
            and type(target[1]) is int
        ):
            raise BackendProtocolError(f"a store's proxy_target is not [host, port]: {target!r}")
        target = (target[0], target[1])
    mixins: list[type[ProcessStoreHandle]] = []
    for member, mixin in dict(STORE_HOOKS.values()).items():
        if answer.get(member) not in (None, False) and mixin not in mixins:
            mixins.append(mixin)
    return _handle_class(tuple(mixins))(harness, backend, store, address, target)


class ProcessHarness:
    """Starts the backend (again after it failed) and opens its stores."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        tap: MessageTap | None = None,
        colocate: bool = True,
        backend_options: Mapping[str, str] | None = None,
    ) -> None:
        self._backend_options = None if backend_options is None else dict(backend_options)
        try:
            self.argv = shlex.split(command)
        except ValueError as error:
            raise DriverOptionError(
                f"process driver option command={command!r} is not a command: {error}"
            ) from None
        if not self.argv:
            raise DriverOptionError("process driver option command is empty")
        self.command = command
        self.timeout = timeout
        self.max_line_bytes = max_line_bytes
        self._tap = tap
        self.colocate = colocate
        self._lock = threading.Lock()
        self._backend: BackendProcess | None = None
        self._retired: list[BackendProcess] = []
        self.info = self._start_for_load()

    def _start(self) -> tuple[BackendProcess, BackendInfo]:
        backend = BackendProcess(
            self.argv,
            timeout=self.timeout,
            max_line_bytes=self.max_line_bytes,
            tap=self._tap,
            colocate=self.colocate,
            private=self._backend_options,
        )
        try:
            answer = backend.request("hello", {"protocol": [PROTOCOL_VERSION]})
            info = _hello(answer)
        except BackendError:
            backend.close(grace=1.0)
            raise
        except Exception as error:
            backend.fail(BackendProtocolError, f"invalid hello: {error}")
            raise backend.failure() from None
        return backend, info

    def _start_for_load(self) -> BackendInfo:
        try:
            self._backend, info = self._start()
        except BackendError as error:
            raise DriverLoadError(f"driver 'process': {error}") from None
        return info

    def backend(self) -> BackendProcess:
        """The live backend, started afresh if the previous one failed."""
        with self._lock:
            if self._backend is None or self._backend.failed:
                if self._backend is not None:
                    self._retired.append(self._backend)
                self._backend, self.info = self._start()
            return self._backend

    def _store(self, op: str, params: Mapping[str, Any]) -> ProcessStoreHandle:
        backend = self.backend()
        answer = backend.request(op, params)
        if not isinstance(answer, Mapping):
            raise BackendProtocolError(f"the answer to {op!r} is not an object: {answer!r}")
        return _store_handle(self, backend, answer)

    def open_store(self) -> ProcessStoreHandle:
        return self._store("open", {})

    def attach(self, address: object) -> ProcessStoreHandle:
        if not isinstance(address, Mapping) or address.get("command") != self.command:
            raise DriverLoadError(
                f"driver 'process': {address!r} is not an address of a store of this backend"
            )
        return self._store("attach", {"address": address["address"]})

    def close(self) -> None:
        with self._lock:
            backends = [*self._retired, *([] if self._backend is None else [self._backend])]
            self._retired.clear()
            self._backend = None
        for backend in backends:
            backend.close()


def _hello(answer: object) -> BackendInfo:
    if not isinstance(answer, Mapping):
        raise BackendProtocolError(f"the answer to 'hello' is not an object: {answer!r}")
    if answer.get("protocol") != PROTOCOL_VERSION:
        raise BackendProtocolError(
            f"the backend speaks protocol {answer.get('protocol')!r}; this toolkit speaks {PROTOCOL_VERSION}"
        )
    return BackendInfo(
        _text(answer.get("name"), "the backend name"),
        _text(answer.get("version"), "the backend version"),
        _text(answer.get("driver"), "the backend's driver name"),
        profile_from_wire(answer.get("profile")),
    )


def process_harness(options: Mapping[str, str]) -> ProcessHarness:
    """The ``runlane.storage_drivers`` entry point target for ``process``."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise DriverOptionError(
            f"process driver does not know option(s) {', '.join(unknown)}; "
            f"valid options: {', '.join(_OPTIONS)}"
        )
    command = options.get("command", "").strip()
    if not command:
        raise DriverOptionError(
            'the process driver needs --option command="..." (the backend\'s command line, '
            'e.g. command="python -m runlane_conformance.backend --driver local")'
        )
    timeout = DEFAULT_TIMEOUT
    if "timeout" in options:
        timeout = float(positive_int_option("process", "timeout", options["timeout"]))
    max_line = DEFAULT_MAX_LINE_BYTES
    if "max_line_bytes" in options:
        max_line = positive_int_option("process", "max_line_bytes", options["max_line_bytes"])
    validate = options.get("validate", "false").strip().lower()
    if validate not in ("true", "false"):
        raise DriverOptionError(
            f"process driver option validate={options['validate']!r} is not true or false"
        )
    colocate = options.get("colocate", "true").strip().lower()
    if colocate not in ("true", "false"):
        raise DriverOptionError(
            f"process driver option colocate={options['colocate']!r} is not true or false"
        )
    backend_options: dict[str, str] | None = None
    if "backend_options" in options:
        try:
            parsed = json.loads(options["backend_options"])
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in parsed.items()
        ):
            raise DriverOptionError("process driver option backend_options is not a JSON object of strings")
        backend_options = parsed
    tap = None
    if validate == "true":
        from .schema import validating_tap

        tap = validating_tap()
    return ProcessHarness(
        command,
        timeout=timeout,
        max_line_bytes=max_line,
        tap=tap,
        colocate=colocate == "true",
        backend_options=backend_options,
    )
