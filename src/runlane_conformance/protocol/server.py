"""The Python backend: serves any installed Python driver over the protocol on stdin/stdout.

``python -m runlane_conformance.backend --driver local`` makes the reference
driver answer from another process, so it is judged through the same
boundary as a driver written in any other language; any ``--driver`` the
CLI accepts works (an entry point name or ``module:factory``), with
``--option k=v`` passed to its harness factory.

Requests may depend on each other across the pipe: a transaction's thread
waits inside its driver's transaction loop for the toolkit to finish an
attempt, while that attempt's ``get`` arrives and must run, and a competing
transaction on another connection may arrive meanwhile too, or wait for a
lock the first one holds. So stdin is never left unread while a request
waits: the thread that reads a request answers it itself (most requests are
answered in microseconds, and waking a second thread for each would cost
more than the answer), and hands the reading to another thread of a pool as
soon as the request has to wait: at once when the driver asks the toolkit
something (an attempt, the injected clock, a fault decision), and after a
few milliseconds, noticed by a watchdog, when it is held up inside the
driver (a lock, a slow server). A driver therefore sees the calls, threads
and overlaps the suites make in process; requests that arrive together may
be answered one after the other, as a scheduler may run them in process.

The process's own stdout is moved away before any driver code runs: file
descriptor 1 then points at stderr, so a stray ``print`` in a driver lands in
the log the toolkit keeps, and only protocol messages reach the pipe.
"""

from __future__ import annotations

import argparse
import base64
import builtins
import itertools
import json
import os
import pickle
import queue
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import IO, Any, TypeVar

from ..contract.errors import (
    StorageError,
    StorageUnsupportedError,
    StorageUsageError,
    StorageValidationError,
)
from ..contract.protocols import StorageDriver, StorageTransaction
from ..contract.values import StoredRecord
from ..faults.plan import InjectedFault
from ..harness import (
    DriverHarness,
    FaultHookStore,
    HarnessError,
    ProxiedStore,
    SettlingStore,
    StoreHandle,
    load_harness,
    parse_driver_options,
    settle_store,
)
from .client import PRIVATE_OPTIONS_FD_VARIABLE, PROTOCOL_VERSION
from .errors import CALLBACK_FAILED, ERROR_KINDS, error_from_wire, error_to_wire
from .wire import (
    append_from_wire,
    date_from_wire,
    date_to_wire,
    key_from_wire,
    mode_from_wire,
    new_record_from_wire,
    page_to_wire,
    profile_to_wire,
    query_from_wire,
    stored_record_from_wire,
    stored_record_to_wire,
)

__all__ = ["BackendServer", "main"]

_OPERATOR_READS = ("get_run", "list_runs", "list_run_events")


class CallbackFailedError(Exception):
    """Raised inside the driver's callback when the toolkit's callback raised something non-contract
    and did not describe it (a toolkit older than ``exception`` descriptions)."""


_STAND_INS: dict[tuple[str, str, type[BaseException]], type[BaseException]] = {}
_STAND_INS_LOCK = threading.Lock()


def _exception_type(described: Mapping[str, Any]) -> type[BaseException]:
    """The class to raise for a described exception: the very class when this process has it, else a stand-in.

    The very class is used when it is built in, or when its module is already imported here (the
    toolkit's and the driver's own modules are: both sides run the same code). Otherwise a class of
    the same name and module is made once, derived from the same nearest built-in base, so every
    ``except`` clause a driver can write about it (``Exception``, ``BaseException``,
    ``ConnectionError``, ...) decides as it would in process.
    """
    name, module, base_name = described.get("type"), described.get("module"), described.get("base")
    base = getattr(builtins, base_name, None) if isinstance(base_name, str) else None
    if not (isinstance(base, type) and issubclass(base, BaseException)):
        base = Exception
    if not isinstance(name, str) or not name:
        return base
    module = module if isinstance(module, str) else "builtins"
    if module == "builtins":
        found = getattr(builtins, name, None)
        return found if isinstance(found, type) and issubclass(found, base) else base
    target: object = sys.modules.get(module)
    for part in name.split(".") if target is not None else ():
        target = getattr(target, part, None)
    if isinstance(target, type) and issubclass(target, base):
        return target
    key = (module, name, base)
    with _STAND_INS_LOCK:
        stand_in = _STAND_INS.get(key)
        if stand_in is None:
            stand_in = type(
                name.rpartition(".")[2],
                (base,),
                {
                    "__module__": module,
                    "__qualname__": name,
                    "__doc__": "Stands in for an exception class of the toolkit, with the same bases.",
                },
            )
            _STAND_INS[key] = stand_in
    return stand_in


def _instance(klass: type[BaseException], described: Mapping[str, Any], message: str) -> BaseException:
    args = described.get("args")
    try:
        return klass(*args) if isinstance(args, list) else klass(message)
    except Exception:  # a constructor of its own: the instance is made without it, with its args
        error = klass.__new__(klass)
        error.args = tuple(args) if isinstance(args, list) else (message,)
        return error


T = TypeVar("T")

# One encoder and one decoder for every message (``json.dumps``/``loads`` build or pick one each time).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_decode = json.JSONDecoder().decode

#: How long a request may hold up the reading of stdin before the watchdog hands the reading on.
HAND_OVER_AFTER = 0.002

_READ = object()  # the pool task "take over the reading of stdin"


class _Workers:
    """A pool of threads, each woken (or started) to read stdin next or to answer one request.

    Requests block on each other across the pipe (see the module docstring),
    so there is no upper bound: a task that finds no idle thread starts a
    new one.
    """

    def __init__(self, read: Callable[[], None], handle: Callable[[Mapping[str, Any]], None]) -> None:
        self._read = read
        self._handle = handle
        self._inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, task: object) -> None:
        """Queue ``_READ`` or a request for a thread of the pool."""
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1  # one idle thread is now promised this task
        self._inbox.put(task)
        if spawn:
            threading.Thread(target=self._work, name="runlane-backend-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            task = self._inbox.get()
            if task is _READ:
                self._read()
            else:
                self._handle(task)  # type: ignore[arg-type]
            with self._lock:
                self._idle += 1


class _Reading:
    """Who reads stdin: one thread at a time, which may be busy answering what it read.

    ``turn`` counts the requests the reader started answering; ``busy`` says
    it is answering one instead of reading. ``hand_over`` gives the reading
    to a thread of the pool while the reader is busy (the watchdog asks when
    one turn has lasted too long); the busy thread, once done, sees it is no
    longer the reader and waits for its replies on its own queue instead.
    """

    def __init__(self, workers: _Workers) -> None:
        self._workers = workers
        self._lock = threading.Lock()
        self._reader: int | None = None
        self._busy = False
        self._turn = 0

    def start_reading(self) -> None:
        """The calling thread (a new one, or one of the pool) is the reader from now on."""
        with self._lock:
            self._reader = threading.get_ident()
            self._busy = False

    def keep_reading(self) -> bool:
        """Whether the calling thread is still the reader; if it is, it reads next (it is not busy)."""
        with self._lock:
            if self._reader != threading.get_ident():
                return False
            self._busy = False
            return True

    def start_answering(self) -> None:
        """The reader answers something (a request it read, or what it asked for) instead of reading."""
        with self._lock:
            self._busy = True
            self._turn += 1

    def busy_turn(self) -> int | None:
        with self._lock:
            return self._turn if self._busy else None

    def hand_over(self, turn: int) -> None:
        """Give the reading to the pool if the reader is still busy with ``turn``."""
        with self._lock:
            if not self._busy or self._turn != turn:
                return
            self._reader = None
            self._busy = False
        self._workers.submit(_READ)


class _RemoteFaultHook:
    """The driver's ``FaultHook`` inside the backend: each round trip asks the toolkit what to do.

    The toolkit's own fault switch counts the write and decides (run it, cut before it, or lose
    its reply after it), and applies a delay before answering, so the suite sees exactly the
    writes and faults it would see with the driver in its own process.
    """

    def __init__(self, server: BackendServer, hook: str) -> None:
        self._server = server
        self._hook = hook

    def round_trip(self, action: Callable[[], T]) -> T:
        reply = self._server._ask({"op": "fault", "hook": self._hook})
        if "error" in reply:
            raise self._server.exception_from_wire(reply["error"], context="fault")
        decision = reply["ok"]
        fault = decision.get("fault") if isinstance(decision, Mapping) else None
        if fault == "none":
            return action()
        if fault == "lose_reply":
            action()
        elif fault != "cut":
            raise StorageUsageError(f"the toolkit answered a fault request with {decision!r}")
        raise InjectedFault(str(decision.get("message") or f"injected fault: {fault}"))


class _Connection:
    def __init__(self, store: str, driver: StorageDriver) -> None:
        self.store = store
        self.driver = driver
        self.attempts: dict[str, StorageTransaction] = {}


def _package_version() -> str:
    try:
        return version("runlane-conformance")
    except PackageNotFoundError:  # pragma: no cover - always installed in practice
        return "0"


def _address_to_wire(address: object) -> object:
    """JSON as it is if it survives a JSON round trip; otherwise a pickled object (for this backend only)."""
    if address is None:
        return None
    try:
        if json.loads(json.dumps(address)) == address:
            return {"json": address}
    except (TypeError, ValueError):
        pass
    return {"pickle": base64.b64encode(pickle.dumps(address)).decode("ascii")}


def _address_from_wire(wire: object) -> object:
    if isinstance(wire, Mapping) and set(wire) == {"json"}:
        return wire["json"]
    if isinstance(wire, Mapping) and set(wire) == {"pickle"} and isinstance(wire["pickle"], str):
        return pickle.loads(base64.b64decode(wire["pickle"]))
    raise StorageValidationError("not an address this backend handed out")


class BackendServer:
    """Answers protocol requests for one harness; ``serve()`` runs until stdin closes or ``shutdown``."""

    def __init__(self, harness: DriverHarness, driver_name: str, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self._harness = harness
        self._driver_name = driver_name
        self._stdin = stdin
        self._stdout = stdout
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stores: dict[str, StoreHandle] = {}
        self._connections: dict[str, _Connection] = {}
        self._waiting: dict[int, queue.SimpleQueue[Mapping[str, Any]]] = {}
        self._stop = threading.Event()
        self._workers = _Workers(self._read_requests, self._handle)
        self._reading = _Reading(self._workers)
        #: The thread running each attempt's callback (the one inside the driver's transaction).
        self._attempt_threads: dict[str, int] = {}
        #: Per thread (``attempts``): the attempts with a call in progress that this thread answers.
        self._busy_attempts = threading.local()
        #: Exceptions the driver raised from a call of a running attempt, by the id sent with them,
        #: and the ids by attempt: a callback that lets one through gets that very object back.
        self._raised: dict[str, BaseException] = {}
        self._raised_by_attempt: dict[str, list[str]] = {}
        self._ops: dict[str, Callable[[Mapping[str, Any]], object]] = {
            "hello": self._hello,
            "open": self._open,
            "attach": self._attach,
            "close_store": self._close_store,
            "settle": self._settle,
            "connect": self._connect,
            "disconnect": self._disconnect,
            "transaction": self._transaction,
            "query": self._query,
            "get_run": self._get_run,
            "list_runs": self._list_runs,
            "list_run_events": self._list_run_events,
            "get": self._get,
            "query_candidates": self._query_candidates,
            "now": self._now,
            "create": self._create,
            "replace": self._replace,
            "delete": self._delete,
            "append": self._append,
            "shutdown": self._shutdown,
        }

    # -- the pipe ----------------------------------------------------------------------------------

    def _send(self, message: Mapping[str, Any]) -> None:
        line = _encode(message) + "\n"
        with self._write_lock:
            self._stdout.write(line.encode("utf-8"))
            self._stdout.flush()

    def _ask(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """Send a request to the toolkit and wait for its reply (the toolkit bounds its own side).

        The reader waits by reading on: it answers the requests of its own
        attempts (which run on this thread in process too) and hands every
        other request to the pool, until the reply comes.
        """
        request_id = next(self._ids)
        inbox: queue.SimpleQueue[Mapping[str, Any]] = queue.SimpleQueue()
        with self._lock:
            self._waiting[request_id] = inbox
        reading = self._reading.keep_reading()
        self._send({"id": request_id, **message})
        if reading:
            reply = self._read_until(inbox)
            if reply is not None:
                self._reading.start_answering()
                return reply
        return inbox.get()

    def serve(self) -> None:
        """Serve until stdin closes (the toolkit closes it after ``shutdown``, or when it exits)."""
        threading.Thread(target=self._watch, name="runlane-backend-watchdog", daemon=True).start()
        self._workers.submit(_READ)
        self._stop.wait()

    def _watch(self) -> None:
        """Hand the reading on when one answer has held it up for longer than ``HAND_OVER_AFTER``."""
        seen: int | None = None
        while not self._stop.wait(HAND_OVER_AFTER):
            turn = self._reading.busy_turn()
            if turn is not None and turn == seen:
                self._reading.hand_over(turn)
                turn = None
            seen = turn

    def _read_requests(self) -> None:
        """Become the reader: answer requests here until the reading is handed over."""
        self._reading.start_reading()
        self._read_until(None)

    def _read_until(self, inbox: queue.SimpleQueue[Mapping[str, Any]] | None) -> Mapping[str, Any] | None:
        """Read stdin until the reply for ``inbox`` arrives, or the reading is handed over (``None``).

        A request is answered on this thread when nothing above it on this
        thread's stack waits (``inbox`` is ``None``) or when it is a request
        of an attempt whose callback this thread runs and which has no call in
        progress here; any other request might wait for what this thread is
        waiting for (or, in process, would overlap a call on another thread),
        so the pool answers it.
        """
        reading = self._reading
        me = threading.get_ident()
        busy: set[str] = self._busy_attempts.__dict__.setdefault("attempts", set())
        for raw in iter(self._stdin.readline, b""):
            message: dict[str, Any] = _decode(raw.decode("utf-8"))
            if "re" in message:
                with self._lock:
                    waiting = self._waiting.pop(message["re"])
                if waiting is inbox:
                    return message
                waiting.put(message)
                continue
            attempt = message.get("attempt")
            if not isinstance(attempt, str):
                attempt = None
            # Of its own attempts' requests, not one whose attempt is inside a call on this thread:
            # that request comes from another toolkit thread, and in process runs on another thread.
            mine = attempt is not None and attempt not in busy and self._attempt_threads.get(attempt) == me
            if inbox is not None and not mine:
                self._workers.submit(message)
                continue
            reading.start_answering()
            if attempt is None or attempt in busy:
                self._handle(message)
            else:
                busy.add(attempt)
                try:
                    self._handle(message)
                finally:
                    busy.discard(attempt)
            if not reading.keep_reading():
                return None
            if inbox is not None and not inbox.empty():
                # The reply came while this thread answered (and read, for that answer's own wait).
                return inbox.get()
        self._stop.set()
        return None

    def _handle(self, message: Mapping[str, Any]) -> None:
        request_id = message.get("id")
        op = message.get("op")
        handler = self._ops.get(op) if isinstance(op, str) else None
        try:
            if handler is None:
                raise StorageUsageError(f"this backend has no operation {op!r}")
            result = handler(message)
        except BaseException as error:
            wire = error_to_wire(error)
            attempt = getattr(error, "runlane_attempt", None)
            if attempt is not None:
                wire["attempt"] = attempt
            called = message.get("attempt")
            if isinstance(called, str) and called in self._attempt_threads:
                wire["raised"] = self._keep_raised(called, error)
            self._send({"re": request_id, "error": wire})
            return
        self._send({"re": request_id, "ok": result})

    # -- exceptions crossing back ------------------------------------------------------------------

    def _keep_raised(self, attempt: str, error: BaseException) -> str:
        """Remember ``error``, raised by a call of running ``attempt``, until its transaction ends; its id."""
        raised = f"x{next(self._ids)}"
        with self._lock:
            self._raised[raised] = error
            self._raised_by_attempt.setdefault(attempt, []).append(raised)
        return raised

    def _forget_raised(self, attempt: str) -> None:
        with self._lock:
            for raised in self._raised_by_attempt.pop(attempt, ()):
                self._raised.pop(raised, None)

    def exception_from_wire(self, wire: Mapping[str, Any], *, context: str) -> BaseException:
        """The exception to raise in the driver's code for the toolkit's ``error`` member.

        With the toolkit's ``exception`` description, the driver meets what it would meet in
        process: its own exception object when the toolkit's code let one through, otherwise
        an exception of the same class (or a stand-in with the same bases), arguments and
        chain. Without one, a contract kind gives its contract error and anything else
        ``CallbackFailedError``.
        """
        described = wire.get("exception")
        if isinstance(described, Mapping):
            return self._rebuild(described, context, set())
        if wire.get("kind") in ERROR_KINDS:
            return error_from_wire(wire, context=context)
        return CallbackFailedError(f"{CALLBACK_FAILED}: {wire.get('message', '')}")

    def _rebuild(self, described: Mapping[str, Any], context: str, seen: set[int]) -> BaseException:
        raised = described.get("raised")
        if isinstance(raised, str):
            with self._lock:
                original = self._raised.get(raised)
            if original is not None:
                return original  # the very object, its own chain included
        message = described.get("message")
        message = message if isinstance(message, str) else ""
        error: BaseException
        if described.get("kind") in ERROR_KINDS:
            error = error_from_wire({**described, "message": message}, context=context)
        else:
            error = _instance(_exception_type(described), described, message)
        seen.add(id(described))
        cause, chained = described.get("cause"), described.get("context")
        if isinstance(cause, Mapping) and id(cause) not in seen:
            error.__cause__ = self._rebuild(cause, context, seen)
        if described.get("context_is_cause") is True:
            error.__context__ = error.__cause__
        elif isinstance(chained, Mapping) and id(chained) not in seen:
            error.__context__ = self._rebuild(chained, context, seen)
        error.__suppress_context__ = described.get("suppress_context") is True
        return error

    # -- lookups -----------------------------------------------------------------------------------

    def _connection(self, message: Mapping[str, Any]) -> _Connection:
        connection = self._connections.get(message.get("connection"))  # type: ignore[arg-type]
        if connection is None:
            raise StorageUsageError(f"no open connection {message.get('connection')!r}")
        return connection

    def _attempt(self, message: Mapping[str, Any]) -> StorageTransaction:
        attempt = message.get("attempt")
        for connection in list(self._connections.values()):
            tx = connection.attempts.get(attempt)  # type: ignore[arg-type]
            if tx is not None:
                return tx
        raise StorageUsageError(f"no attempt {attempt!r} on an open connection")

    # -- lifecycle ---------------------------------------------------------------------------------

    def _hello(self, message: Mapping[str, Any]) -> object:
        offered = message.get("protocol")
        if not isinstance(offered, list) or PROTOCOL_VERSION not in offered:
            raise StorageUsageError(f"this backend speaks protocol {PROTOCOL_VERSION}, not {offered!r}")
        store = self._harness.open_store()
        try:
            driver = store.connect()
            profile = driver.profile
            driver.close()
        finally:
            store.close()
        return {
            "protocol": PROTOCOL_VERSION,
            "name": "runlane-python-backend",
            "version": _package_version(),
            "driver": self._driver_name,
            "profile": profile_to_wire(profile),
        }

    def _add_store(self, handle: StoreHandle) -> object:
        store = f"s{next(self._ids)}"
        with self._lock:
            self._stores[store] = handle
        answer: dict[str, object] = {"store": store, "address": _address_to_wire(handle.address())}
        # Every optional hook of the store handle crosses, so the toolkit's handle offers exactly
        # what this one does: the fault mechanisms (an isolated run keeps the faults suite) and
        # ``settle`` (an eventual driver keeps the checks that settle first).
        if isinstance(handle, ProxiedStore):
            host, port = handle.proxy_target()
            answer["proxy_target"] = [host, port]
        if isinstance(handle, FaultHookStore):
            answer["fault_hook"] = True
        if isinstance(handle, SettlingStore):
            answer["settle"] = True
        return answer

    def _open(self, message: Mapping[str, Any]) -> object:
        return self._add_store(self._harness.open_store())

    def _attach(self, message: Mapping[str, Any]) -> object:
        return self._add_store(self._harness.attach(_address_from_wire(message.get("address"))))

    def _close_store(self, message: Mapping[str, Any]) -> object:
        store = message.get("store")
        with self._lock:
            handle = self._stores.pop(store, None)  # type: ignore[arg-type]
            closing = [cid for cid, conn in self._connections.items() if conn.store == store]
            connections = [self._connections.pop(cid) for cid in closing]
        if handle is None:
            raise StorageUsageError(f"no open store {store!r}")
        for connection in connections:
            connection.driver.close()
        handle.close()
        return None

    def _settle(self, message: Mapping[str, Any]) -> object:
        """Call the store handle's ``settle`` hook; whether the indexes caught up within ``timeout``."""
        store = message.get("store")
        handle = self._stores.get(store)  # type: ignore[arg-type]
        if handle is None:
            raise StorageUsageError(f"no open store {store!r}")
        timeout = message.get("timeout")
        if type(timeout) not in (int, float) or not timeout >= 0:  # type: ignore[operator]
            raise StorageValidationError("settle needs timeout, a number of seconds >= 0")
        converged = settle_store(handle, timeout=float(timeout))  # type: ignore[arg-type]
        if converged is None:
            raise StorageUnsupportedError(f"store {store!r} offers no settle hook")
        return converged

    def _connect(self, message: Mapping[str, Any]) -> object:
        store = message.get("store")
        handle = self._stores.get(store)  # type: ignore[arg-type]
        if handle is None:
            raise StorageUsageError(f"no open store {store!r}")
        connection = f"c{next(self._ids)}"
        clock = {"clock": self._remote_clock(connection)} if message.get("clock") else {}
        through = message.get("through")
        hook = message.get("fault_hook")
        if hook is not None:
            if not isinstance(handle, FaultHookStore):
                raise StorageUsageError(f"store {store!r} offers no fault hook")
            if not isinstance(hook, str):
                raise StorageValidationError("fault_hook needs the toolkit's hook id, a string")
            driver = handle.connect_with_faults(_RemoteFaultHook(self, hook), **clock)
        elif through is not None:
            if not isinstance(handle, ProxiedStore):
                raise StorageUsageError(f"store {store!r} offers no proxy target")
            if not (isinstance(through, list) and len(through) == 2):
                raise StorageValidationError("through needs [host, port]")
            driver = handle.connect_through((str(through[0]), int(through[1])), **clock)
        else:
            driver = handle.connect(**clock)
        with self._lock:
            self._connections[connection] = _Connection(store, driver)  # type: ignore[arg-type]
        return {
            "connection": connection,
            "profile": profile_to_wire(driver.profile),
            "operator_reads": all(callable(getattr(driver, name, None)) for name in _OPERATOR_READS),
        }

    def _remote_clock(self, connection: str) -> Callable[[], datetime]:
        def clock() -> datetime:
            reply = self._ask({"op": "clock", "connection": connection})
            if "error" in reply:
                raise self.exception_from_wire(reply["error"], context="clock")
            return date_from_wire(reply["ok"])

        return clock

    def _disconnect(self, message: Mapping[str, Any]) -> object:
        with self._lock:
            connection = self._connections.pop(message.get("connection"), None)  # type: ignore[arg-type]
        if connection is None:
            raise StorageUsageError(f"no open connection {message.get('connection')!r}")
        connection.driver.close()
        return None

    def _shutdown(self, message: Mapping[str, Any]) -> object:
        """Nothing to do before stdin closes, which the toolkit does next; answering is the point."""
        return None

    # -- transactions ------------------------------------------------------------------------------

    def _transaction(self, message: Mapping[str, Any]) -> object:
        connection = self._connection(message)
        transaction = message.get("id")

        def callback(tx: StorageTransaction) -> str:
            attempt = f"a{next(self._ids)}"
            connection.attempts[attempt] = tx
            attempts.append(attempt)
            self._attempt_threads[attempt] = threading.get_ident()
            reply = self._ask({"op": "attempt", "transaction": transaction, "attempt": attempt})
            if "ok" in reply:
                return attempt
            error = self.exception_from_wire(reply["error"], context="the callback")
            error.runlane_attempt = attempt  # type: ignore[attr-defined]
            raise error

        attempts: list[str] = []
        try:
            return {"attempt": connection.driver.transaction(callback)}
        finally:
            for attempt in attempts:
                self._attempt_threads.pop(attempt, None)
                self._forget_raised(attempt)

    def _get(self, message: Mapping[str, Any]) -> object:
        keys = message.get("keys")
        if not isinstance(keys, list):
            raise StorageValidationError("get needs keys, an array")
        records = self._attempt(message).get([key_from_wire(key) for key in keys])
        return [None if record is None else stored_record_to_wire(record) for record in records]

    def _query_candidates(self, message: Mapping[str, Any]) -> object:
        tx = self._attempt(message)
        command = query_from_wire(message.get("command"))
        return page_to_wire(tx.query_candidates(command, mode=mode_from_wire(message.get("mode"))))

    def _now(self, message: Mapping[str, Any]) -> object:
        return date_to_wire(self._attempt(message).now())

    def _create(self, message: Mapping[str, Any]) -> object:
        self._attempt(message).create(new_record_from_wire(message.get("record")))
        return None

    def _replace(self, message: Mapping[str, Any]) -> object:
        tx = self._attempt(message)
        tx.replace(
            stored_record_from_wire(message.get("current")), new_record_from_wire(message.get("record"))
        )
        return None

    def _delete(self, message: Mapping[str, Any]) -> object:
        self._attempt(message).delete(stored_record_from_wire(message.get("current")))
        return None

    def _append(self, message: Mapping[str, Any]) -> object:
        self._attempt(message).append(append_from_wire(message.get("command")))
        return None

    # -- reads outside transactions ----------------------------------------------------------------

    def _query(self, message: Mapping[str, Any]) -> object:
        return page_to_wire(self._connection(message).driver.query(query_from_wire(message.get("command"))))

    def _operator(self, message: Mapping[str, Any], name: str) -> Any:
        reader = getattr(self._connection(message).driver, name, None)
        if not callable(reader):
            raise StorageUsageError(f"this backend's driver has no {name}()")
        return reader

    def _get_run(self, message: Mapping[str, Any]) -> object:
        record = self._operator(message, "get_run")(message.get("environment"), message.get("run_id"))
        return None if record is None else _operator_record(record)

    def _list_runs(self, message: Mapping[str, Any]) -> object:
        page = self._operator(message, "list_runs")(
            message.get("environment"), limit=message.get("limit"), cursor=message.get("cursor")
        )
        return _operator_page(page)

    def _list_run_events(self, message: Mapping[str, Any]) -> object:
        page = self._operator(message, "list_run_events")(
            message.get("environment"),
            message.get("run_id"),
            limit=message.get("limit"),
            cursor=message.get("cursor"),
        )
        return _operator_page(page)


def _operator_record(record: object) -> object:
    if not isinstance(record, StoredRecord):
        raise TypeError(
            f"an operator read returned {type(record).__name__}; the protocol carries StoredRecord"
        )
    return stored_record_to_wire(record)


def _operator_page(page: Any) -> object:
    items = page.get("items") if isinstance(page, Mapping) else getattr(page, "items", None)
    cursor = page.get("cursor") if isinstance(page, Mapping) else getattr(page, "cursor", None)
    if items is None:
        raise TypeError(f"an operator read returned {type(page).__name__}, which has no items")
    return {"items": [_operator_record(item) for item in items], "cursor": cursor}


def _private_options() -> dict[str, str]:
    """The driver options the toolkit handed over on an inherited pipe (``PRIVATE_OPTIONS_FD_VARIABLE``).

    They come this way rather than as ``--option`` so that no password or DSN is ever on a
    command line, where every local user can read it. Raises ``ValueError`` for anything but a
    JSON object of strings.
    """
    named = os.environ.pop(PRIVATE_OPTIONS_FD_VARIABLE, None)
    if named is None:
        return {}
    fd = int(named)
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    options = json.loads(b"".join(chunks) or b"{}")
    if not isinstance(options, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in options.items()
    ):
        raise ValueError("the private driver options are not a JSON object of strings")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Serve one driver until the toolkit closes stdin or asks for ``shutdown``; 2 for a usage error."""
    parser = argparse.ArgumentParser(
        prog="python -m runlane_conformance.backend",
        description="Serve a Python storage driver over the Runlane driver backend protocol "
        "(JSON lines on stdin/stdout; see docs/driver-protocol.md). Started by the toolkit's "
        "`process` driver, not by hand.",
    )
    parser.add_argument("--driver", required=True, help="an installed driver name or module:factory")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="driver harness option (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        options = {**parse_driver_options(args.option), **_private_options()}
    except (HarnessError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # Protocol messages get a private copy of fd 1; fd 1 itself (and sys.stdout) now go to stderr.
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        harness = load_harness(args.driver, options)
    except HarnessError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    server = BackendServer(harness, args.driver, sys.stdin.buffer, protocol_out)
    try:
        server.serve()
    finally:
        try:
            harness.close()
        except StorageError as error:
            print(f"closing the harness failed: {error}", file=sys.stderr)
    return 0
