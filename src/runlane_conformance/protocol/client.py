"""The toolkit's end of the pipe: one backend process, its messages, its deadlines and its failures.

``BackendProcess`` starts a backend, reads its stderr on a thread of its
own, and matches every message on its stdout to the request that is waiting
for it. Stdout has no thread of its own: a thread waiting for an answer
reads it, one at a time (the others wait on their own queues, and the
reader routes what it reads for them there), so a reply wakes only the
thread that asked, not a reader and then the asker. When the reading thread
has its answer it lets go, and a waiting thread takes over. Every wait has a
deadline, so a silent backend costs one timeout, never a hang. A
transaction's caller also receives the backend's ``attempt`` requests: it
runs the callback itself (on the thread that called ``transaction()``, as an
in-process driver would) and restarts its deadline afterwards, so the time
the toolkit spends inside a callback is never counted against the backend.
Nothing reads while no thread waits: what the backend sends meanwhile (a
late ``clock`` question, or a message the protocol forbids) is read, and
answered or judged, by the next thread that waits.

Anything the protocol does not allow (a line that is not one JSON object,
not UTF-8 or too long; an answer to an id nobody is waiting for, including
a second answer; an attempt for a transaction that is not running; an
unknown operation) *poisons* the process: it is killed, every waiting
caller gets the same one-line ``BackendError``, and so does every later
call. So is a missed deadline, and a caller that abandons a request (an
interrupt, a check's own timeout): a late answer can then never be taken
for a fresh one. The harness starts a new backend for the next store.

With ``colocate`` (Linux), the backend starts on the CPU the starting thread
is running on, and that thread stays there while the backend lives: the two
processes take turns, never run at once, and a wake-up on the same CPU costs
a few microseconds where one across CPUs (on a virtual machine above all)
costs tens. Threads the starting thread creates meanwhile (the reader, a
check's competitors) inherit the CPU; the thread's own CPU set is given back
when the backend is closed.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import queue
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, cast

from ..contract.errors import StorageValidationError
from ..faults.plan import FaultHook, InjectedFault
from ..safe_text import one_line, redact_text
from .errors import (
    BackendError,
    BackendExitedError,
    BackendProtocolError,
    BackendTimeoutError,
    error_from_wire,
    exception_to_wire,
)
from .wire import date_to_wire

__all__ = [
    "CPU_SLOT_VARIABLE",
    "PRIVATE_OPTIONS_FD_VARIABLE",
    "PROTOCOL_VERSION",
    "BackendProcess",
    "MessageTap",
]

#: The protocol version this toolkit speaks.
PROTOCOL_VERSION = 1
#: Set by the supervisor of ``--workers N`` for each child (0 .. N - 1): a colocated backend then
#: runs on that CPU of the allowed ones, so two workers' backends never share one by chance.
CPU_SLOT_VARIABLE = "RUNLANE_CPU_SLOT"
#: Bytes asked of stdout at a time: small enough to come from the heap (a read of a megabyte
#: maps fresh memory each time, and its page faults cost more than the exchange).
_READ_SIZE = 65536
_STDERR_LINES = 20
_STDERR_CHARS = 2000

#: Called with ("in" | "out", message) for every message; tests use it to validate both directions.
MessageTap = Callable[[str, Mapping[str, Any]], None]


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-finite number {name}")


# One encoder and one decoder for every message (``json.dumps``/``loads`` with options build new ones).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_decode = json.JSONDecoder(parse_constant=_reject_constant).decode


def _current_cpu() -> int | None:
    """The CPU the calling thread runs on (Linux: field 39 of /proc/thread-self/stat), or None."""
    try:
        with open("/proc/thread-self/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _colocate() -> tuple[int, set[int]] | None:
    """Keep the calling thread (and what it starts next) on one CPU; its native id and old CPU set.

    The CPU is the one the worker's slot names (``CPU_SLOT_VARIABLE``), otherwise the one the
    thread runs on. ``None`` when there is nothing to do or no way to do it: no
    ``sched_setaffinity``, a thread already held to one CPU, or a CPU that cannot be read.
    """
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        allowed = os.sched_getaffinity(0)
        slot = os.environ.get(CPU_SLOT_VARIABLE, "")
        cpu = sorted(allowed)[int(slot) % len(allowed)] if slot.isdigit() and allowed else _current_cpu()
        if len(allowed) < 2 or cpu is None or cpu not in allowed:
            return None
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return None
    return threading.get_native_id(), set(allowed)


#: Put in a waiting thread's queue when the reading is free: "try to take it over".
_YOUR_TURN: tuple[str, Mapping[str, Any]] = ("turn", {})


@dataclass
class _Pending:
    """One request waiting for its reply (and, for a transaction, for attempt requests).

    ``waiting`` is true while its thread may block on ``inbox``: a thread that stops reading
    wakes every such one, so the pipe is never left unread while somebody waits for it.
    """

    op: str
    inbox: queue.SimpleQueue[tuple[str, Mapping[str, Any]] | None] = field(default_factory=queue.SimpleQueue)
    waiting: bool = False


@dataclass
class AttemptOutcomes:
    """What each attempt's callback did, by attempt id: its value, or the exception it raised."""

    values: dict[str, object] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)


#: Names the file descriptor a backend reads its driver's options from (one JSON object, then EOF).
PRIVATE_OPTIONS_FD_VARIABLE = "RUNLANE_BACKEND_OPTIONS_FD"


def _private_pipe(options: Mapping[str, str]) -> int:
    """A pipe's read end holding ``options`` as JSON (written whole, write end closed)."""
    data = json.dumps(dict(options)).encode("utf-8")
    if len(data) > 60_000:  # a pipe's buffer holds 64 KiB; more would block this write
        raise BackendExitedError("the driver options are too long to hand to a backend (more than 60 kB)")
    read_end, write_end = os.pipe()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
    finally:
        os.close(write_end)
    return read_end


class BackendProcess:
    """A running backend and the pending requests on its pipe.

    ``timeout`` bounds every exchange; ``max_line_bytes`` bounds one
    incoming line. ``tap`` sees every message in both directions.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        max_line_bytes: int,
        tap: MessageTap | None = None,
        env: Mapping[str, str] | None = None,
        colocate: bool = False,
        private: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.timeout = timeout
        self.max_line_bytes = max_line_bytes
        self._tap = tap
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._failure: tuple[type[BackendError], str] | None = None
        self._clocks: dict[str, Callable[[], Any]] = {}
        self._fault_hooks: dict[str, FaultHook] = {}
        self._next_hook = 1
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        # Before the start: the backend inherits the starting thread's CPU set.
        self._colocated = _colocate() if colocate else None
        # ``private`` (the driver's options: passwords, DSNs) goes on a pipe the backend inherits,
        # never on its command line or in its environment, which other local users can read.
        private_fd = None if private is None else _private_pipe(private)
        variables = dict(env or {})
        if private_fd is not None:
            variables[PRIVATE_OPTIONS_FD_VARIABLE] = str(private_fd)
        try:
            self._process = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env={**os.environ, **variables} if variables else None,
                pass_fds=() if private_fd is None else (private_fd,),
                # A process group of its own: a terminal's Ctrl-C reaches the toolkit, which closes
                # the backend itself, and a kill reaches whatever the backend started too.
                start_new_session=True,
            )
        except OSError as error:
            self._release_cpu()
            raise BackendExitedError(f"could not start backend {self.command!r}: {error}") from error
        finally:
            if private_fd is not None:
                os.close(private_fd)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._stdin: IO[bytes] = self._process.stdin
        self._stdout = self._process.stdout.fileno()
        # ``fail`` writes to this pipe to wake a thread polling stdout: a backend whose own
        # children keep its stdout open after it is killed must not hold the reader until its
        # deadline.
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self._poller = select.poll()
        self._poller.register(self._stdout, select.POLLIN)
        self._poller.register(self._wake_read, select.POLLIN)
        self._reading = threading.Lock()  # held by the one thread reading stdout
        self._unread = bytearray()  # what was read from stdout and not yet split into lines
        self._stderr_thread = threading.Thread(
            target=self._read_stderr, name="runlane-backend-stderr", daemon=True
        )
        self._stderr_thread.start()

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def failed(self) -> bool:
        return self._failure is not None

    # -- failure -----------------------------------------------------------------------------------

    def _stderr_tail(self) -> str:
        if self._process.poll() is not None:
            self._stderr_thread.join(0.5)
        lines = [line for line in self._stderr if line.strip()]
        if not lines:
            return ""
        text = " | ".join(line.strip() for line in lines)
        if len(text) > _STDERR_CHARS:
            text = "..." + text[-_STDERR_CHARS:]
        return f"; backend stderr: {text}"

    def fail(self, kind: type[BackendError], message: str) -> None:
        """Poison the process: remember the first failure, kill it, wake every waiting caller."""
        with self._lock:
            if self._failure is not None:
                return
            self._failure = (kind, message)
            waiting = list(self._pending.values())
            self._pending.clear()
        for pending in waiting:
            pending.inbox.put(None)
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"!")
        self._kill()

    def failure(self) -> BackendError:
        """A fresh exception for the failure that poisoned the process (raise it; do not share it).

        The message is one cleaned line: the backend's output is untrusted text
        (escape sequences, control characters), and credentials in the command
        line (a database URL's password) are redacted.
        """
        assert self._failure is not None
        kind, message = self._failure
        return kind(one_line(redact_text(f"backend {self.command!r}: {message}{self._stderr_tail()}")))

    def _kill(self) -> None:
        if self._process.poll() is None:
            if hasattr(os, "killpg"):  # POSIX: the whole group the backend leads
                with contextlib.suppress(OSError):
                    os.killpg(self._process.pid, signal.SIGKILL)
            self._process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(5)

    def close(self, *, grace: float = 5.0) -> None:
        """Ask the backend to stop (``shutdown``), then close its stdin; kill it if it lingers."""
        if self._failure is None:
            with contextlib.suppress(BackendError):
                self.request("shutdown", {}, timeout=grace)
        with contextlib.suppress(OSError):
            self._stdin.close()
        try:
            self._process.wait(grace)
        except subprocess.TimeoutExpired:
            self._kill()
        with self._lock:
            if self._failure is None:
                self._failure = (BackendExitedError, "the backend was shut down")
        # Closed only when no thread can be polling them (a closed descriptor's number may be
        # reused at once); a thread still reading after the grace period keeps them open.
        if self._reading.acquire(timeout=grace):
            for fd in (self._wake_read, self._wake_write):
                with contextlib.suppress(OSError):
                    os.close(fd)
            with contextlib.suppress(OSError):
                self._process.stdout.close()  # type: ignore[union-attr]
        self._release_cpu()

    def _release_cpu(self) -> None:
        """Give the thread that started the backend its CPU set back (if it was changed and still holds)."""
        colocated, self._colocated = self._colocated, None
        if colocated is None:
            return
        thread, allowed = colocated
        if thread not in {alive.native_id for alive in threading.enumerate()}:
            return  # gone: its id may name another thread by now
        with contextlib.suppress(OSError):
            if len(os.sched_getaffinity(thread)) == 1:
                os.sched_setaffinity(thread, allowed)

    # -- writing -----------------------------------------------------------------------------------

    def _send(self, message: Mapping[str, Any]) -> None:
        try:
            line = _encode(message) + "\n"
        except (TypeError, ValueError) as error:
            raise StorageValidationError(f"cannot put {message.get('op')!r} on the wire: {error}") from error
        if self._tap is not None:
            self._tap("out", message)
        try:
            # stdin is unbuffered: one write() is one system call, which a signal arriving while a
            # large line is half through the pipe cuts short. The rest must follow, or the backend
            # waits for the end of a line that never comes.
            rest = memoryview(line.encode("utf-8"))
            with self._write_lock:
                while rest:
                    rest = rest[self._stdin.write(rest) :]
        except (BrokenPipeError, OSError, ValueError):
            code = self._process.poll()
            if code is None:
                self.fail(BackendExitedError, "the backend closed its stdin (it exited)")
            else:
                self.fail(BackendExitedError, f"the backend exited (code {code}) while the toolkit needed it")
            raise self.failure() from None

    def _reply(
        self, request_id: object, *, ok: object = None, error: Mapping[str, object] | None = None
    ) -> None:
        message: dict[str, Any] = {"re": request_id}
        if error is None:
            message["ok"] = ok
        else:
            message["error"] = dict(error)
        self._send(message)

    # -- requests ----------------------------------------------------------------------------------

    def request(self, op: str, params: Mapping[str, Any], *, timeout: float | None = None) -> Any:
        """Send one request and return its ``ok`` value, or raise what its ``error`` stands for."""
        reply = self.exchange(op, params, timeout=timeout)
        if "error" in reply:
            raise self.error(reply["error"], op)
        return reply["ok"]

    def exchange(
        self,
        op: str,
        params: Mapping[str, Any],
        *,
        on_attempt: Callable[[Mapping[str, Any]], None] | None = None,
        timeout: float | None = None,
    ) -> Mapping[str, Any]:
        """Send one request and return its whole reply (``ok`` or ``error``, already checked to be one).

        ``on_attempt`` runs every ``attempt`` request the backend sends for
        this request (only ``transaction`` gets any); the deadline restarts
        after each.
        """
        limit = self.timeout if timeout is None else timeout
        pending = _Pending(op)
        with self._lock:
            if self._failure is not None:
                raise self.failure()
            request_id = self._next_id
            self._next_id += 1
            self._pending[request_id] = pending
        finished = False
        try:
            self._send({"id": request_id, "op": op, **params})
            deadline = time.monotonic() + limit
            while True:
                item = self._next(pending, deadline)
                if item is None:
                    if self._failure is None:
                        self.fail(BackendTimeoutError, f"no answer to {op!r} within {limit:g}s")
                    raise self.failure()
                what, message = item
                if what == "reply":
                    finished = True
                    return message
                if on_attempt is None:  # pragma: no cover - routed only to transactions
                    self.fail(BackendProtocolError, f"an attempt request arrived for {op!r}")
                    raise self.failure()
                on_attempt(message)
                deadline = time.monotonic() + limit
        finally:
            if not finished:
                with self._lock:
                    abandoned = self._pending.pop(request_id, None) is not None
                if abandoned and self._failure is None:
                    # The caller gave up (an interrupt or a check timeout): a late answer must never be
                    # mistaken for a fresh one, so this backend is done.
                    self.fail(BackendError, f"the toolkit abandoned its {op!r} request before the answer")

    def error(self, wire: object, op: str) -> Exception:
        """The exception an ``error`` member stands for; a malformed or unknown one poisons the process."""
        if not isinstance(wire, Mapping):
            self.fail(BackendProtocolError, f"the error answering {op!r} is not an object")
            return self.failure()
        error = error_from_wire(wire, context=repr(op))
        if isinstance(error, BackendProtocolError):
            self.fail(BackendProtocolError, str(error))
            return self.failure()
        return error

    def run_attempt(
        self,
        message: Mapping[str, Any],
        callback: Callable[[str], object],
        outcomes: AttemptOutcomes,
    ) -> None:
        """Run one attempt's callback and answer the backend's ``attempt`` request."""
        attempt = message.get("attempt")
        if not isinstance(attempt, str) or attempt in outcomes.values or attempt in outcomes.errors:
            self.fail(
                BackendProtocolError, f"attempt request with a missing or reused attempt id {attempt!r}"
            )
            raise self.failure()
        try:
            value = callback(attempt)
        except BaseException as error:
            outcomes.errors[attempt] = error
            # Described in full (type, base, chain, the backend's own object if it is one), so the
            # driver's code meets the exception it would meet in process (``exception_to_wire``).
            self._reply(message["id"], error=exception_to_wire(error))
            return
        outcomes.values[attempt] = value
        self._reply(message["id"], ok=None)

    # -- clocks ------------------------------------------------------------------------------------

    def register_clock(self, connection: str, clock: Callable[[], Any]) -> None:
        with self._lock:
            self._clocks[connection] = clock

    def forget_clock(self, connection: str) -> None:
        with self._lock:
            self._clocks.pop(connection, None)

    def _answer_clock(self, message: Mapping[str, Any]) -> None:
        clock = self._clocks.get(message.get("connection"))  # type: ignore[arg-type]
        if clock is None:
            self.fail(BackendProtocolError, f"clock request for a connection without a clock: {message!r}")
            return
        try:
            moment = date_to_wire(clock())
        except BaseException as error:
            with contextlib.suppress(BackendError):
                self._reply(message["id"], error=exception_to_wire(error))
            return
        with contextlib.suppress(BackendError):
            self._reply(message["id"], ok=moment)

    # -- fault hooks -------------------------------------------------------------------------------

    def register_fault_hook(self, hook: FaultHook) -> str:
        """Keep ``hook`` under a new id, which a ``connect`` names before the connection exists.

        The id is the toolkit's, not a connection's: a driver may make its first store exchange
        while it is being connected, before the toolkit has learnt the connection id.
        """
        with self._lock:
            hook_id = f"h{self._next_hook}"
            self._next_hook += 1
            self._fault_hooks[hook_id] = hook
        return hook_id

    def forget_fault_hook(self, hook_id: str) -> None:
        with self._lock:
            self._fault_hooks.pop(hook_id, None)

    def _answer_fault(self, message: Mapping[str, Any]) -> None:
        """Let the suite's hook decide one round trip of the backend's driver, and say what it decided.

        The hook is handed a stand-in for the exchange: whether it ran the stand-in before raising
        ``InjectedFault`` tells a cut (the store never saw the write) from a lost reply.
        """
        with self._lock:
            hook = self._fault_hooks.get(message.get("hook"))  # type: ignore[arg-type]
        if hook is None:
            self.fail(BackendProtocolError, f"fault request for a hook that is not open: {message!r}")
            return
        ran = False

        def exchange() -> None:
            nonlocal ran
            ran = True

        try:
            hook.round_trip(exchange)
            answer: dict[str, str] = {"fault": "none"}
        except InjectedFault as fault:
            answer = {"fault": "lose_reply" if ran else "cut", "message": str(fault)}
        except BaseException as error:
            with contextlib.suppress(BackendError):
                self._reply(message["id"], error=exception_to_wire(error))
            return
        with contextlib.suppress(BackendError):
            self._reply(message["id"], ok=answer)

    # -- reading -----------------------------------------------------------------------------------

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        stream = io.BufferedReader(cast(io.RawIOBase, self._process.stderr), 65536)
        for raw in iter(lambda: stream.readline(65536), b""):
            self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _next(self, pending: _Pending, deadline: float) -> tuple[str, Mapping[str, Any]] | None:
        """The next message for ``pending`` (read by this thread if nobody else reads), or ``None``.

        ``None`` means the backend failed or the deadline passed without a message.
        """
        while self._failure is None:
            pending.waiting = True  # before trying the reading: see _Pending
            try:
                item = pending.inbox.get(block=False)
            except queue.Empty:
                item = _YOUR_TURN
            if item is not _YOUR_TURN:
                pending.waiting = False
                return item
            if self._reading.acquire(blocking=False):
                pending.waiting = False
                try:
                    self._read_for(pending, deadline)
                finally:
                    self._reading.release()
                    self._wake_waiting()
                if time.monotonic() >= deadline and pending.inbox.empty():
                    return None
                continue
            try:
                item = pending.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pending.waiting = False
                return None
            if item is not _YOUR_TURN:
                pending.waiting = False
                return item
        return None

    def _wake_waiting(self) -> None:
        """Tell every thread that may be blocked on its queue that the reading is free."""
        with self._lock:
            waiting = [pending for pending in self._pending.values() if pending.waiting]
        for pending in waiting:
            pending.inbox.put(_YOUR_TURN)

    def _read_for(self, pending: _Pending, deadline: float) -> None:
        """Read and route stdout's messages until one is for ``pending``, the deadline, or a failure."""
        limit = self.max_line_bytes
        unread = self._unread
        scanned = 0
        while self._failure is None and pending.inbox.empty():
            end = unread.find(b"\n", scanned)
            if end >= 0:
                if end + 1 > limit:
                    self.fail(BackendProtocolError, f"the backend sent a line longer than {limit} bytes")
                    return
                raw = bytes(unread[: end + 1])
                del unread[: end + 1]
                scanned = 0
                self._dispatch(raw)
                continue
            if len(unread) > limit:
                self.fail(BackendProtocolError, f"the backend sent a line longer than {limit} bytes")
                return
            scanned = len(unread)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                ready = self._poller.poll(math.ceil(remaining * 1000))
                if self._failure is not None:
                    return
                chunk = os.read(self._stdout, _READ_SIZE) if ready else None
            except (OSError, ValueError):  # closed under us: the backend was closed or killed
                chunk = b""
            if chunk is None:
                return
            if not chunk:
                self._stdout_ended()
                return
            unread += chunk

    def _stdout_ended(self) -> None:
        """The backend closed its stdout (whatever was left without a newline is dropped): it exited."""
        if self._failure is not None:
            return
        try:
            code = self._process.wait(1.0)
        except subprocess.TimeoutExpired:
            self.fail(BackendExitedError, "the backend closed its stdout while the toolkit needed it")
            return
        self.fail(BackendExitedError, f"the backend exited (code {code}) while the toolkit needed it")

    def _dispatch(self, raw: bytes) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(BackendProtocolError, "the backend wrote bytes that are not UTF-8 to stdout")
            return
        try:
            message = _decode(text)
        except (ValueError, RecursionError):
            shown = text.strip()
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            self.fail(
                BackendProtocolError,
                f"the backend wrote a line to stdout that is not a protocol message: {shown!r} "
                "(stdout carries only protocol messages; log to stderr)",
            )
            return
        if not isinstance(message, dict):
            self.fail(
                BackendProtocolError, f"the backend sent a message that is not a JSON object: {text[:80]!r}"
            )
            return
        if self._tap is not None:
            try:
                self._tap("in", message)
            except Exception as error:
                self.fail(BackendProtocolError, f"invalid message from the backend: {error}")
                return
        if "re" in message:
            self._route_reply(message)
        elif message.get("op") == "attempt":
            self._route_attempt(message)
        elif message.get("op") == "clock":
            threading.Thread(target=self._answer_clock, args=(message,), daemon=True).start()
        elif message.get("op") == "fault":
            threading.Thread(target=self._answer_fault, args=(message,), daemon=True).start()
        else:
            self.fail(BackendProtocolError, f"the backend sent an unknown message: {text.strip()[:120]!r}")

    def _route_reply(self, message: dict[str, Any]) -> None:
        request_id = message["re"]
        ok_or_error = ("ok" in message) != ("error" in message)
        with self._lock:
            pending = self._pending.pop(request_id, None) if type(request_id) is int else None
        if pending is None:
            self.fail(
                BackendProtocolError,
                f"the backend answered request id {request_id!r}, which is not waiting for an answer "
                "(an unknown id, or a second answer)",
            )
            return
        if not ok_or_error:
            self.fail(BackendProtocolError, f"the answer to {pending.op!r} has neither exactly ok nor error")
            pending.inbox.put(None)
            return
        pending.inbox.put(("reply", message))

    def _route_attempt(self, message: dict[str, Any]) -> None:
        transaction = message.get("transaction")
        with self._lock:
            pending = self._pending.get(transaction) if type(transaction) is int else None
        if pending is None or pending.op != "transaction" or "id" not in message:
            self.fail(
                BackendProtocolError,
                f"the backend asked for an attempt of transaction {transaction!r}, which is not running",
            )
            return
        pending.inbox.put(("attempt", message))
