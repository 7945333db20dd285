"""The sandbox an isolated backend runs in: bubblewrap's namespaces, with nothing of the judge in reach.

``--isolation process`` already keeps the driver's code out of every process that judges it. The
sandbox takes away what a process of the same user could still do to the judge from outside:

* **one PID namespace per run**, with a fresh ``/proc`` that shows only the run's sandboxed
  processes: the judge's processes, their open pipes (``/proc/PID/fd/N``) and their memory are
  out of sight, and out of reach of ``kill`` and ``ptrace``. Every backend of the run joins the
  same namespace, so two of them never see the same process id: an engine that names its users
  by process id in a shared file (LMDB's reader table) works across them as it does on a
  machine. The namespace is held by a small process started for the run (``RunSandbox``:
  bubblewrap's own init, waiting on a pipe from the judge); when the run ends the judge closes
  that pipe and ends it, and the kernel kills every process left in the namespace, daemons
  included, at once (no ``/proc`` walk racing a fork). ``--die-with-parent`` ends it with the
  judge too, and ends each backend with the check process that started it.
* **its own mount namespace** per backend, where the whole file system is mounted read-only (the
  driver and its packages can be read and loaded; the report, the JUnit file, the judge's run
  directory and the toolkit's installation cannot be written), with one private writable
  directory, made for the run and named by ``TMPDIR`` (``/tmp`` itself stays read-only: a driver
  or its environment may live there). Every backend of one run shares that directory, so a store
  one backend creates there can be attached by another (a cross-process competitor); it is
  removed when the run ends.
* **its own user namespace** (one per run, shared like the PID namespace: it owns it, and it is
  what lets an unprivileged user create the others), **its own IPC and UTS namespaces** per
  backend, and **its own network namespace** per backend with only a private loopback, unless the
  run says ``--sandbox-network host`` (a driver that talks to a database server needs the
  machine's network; then the sandbox limits files and processes, not the network).

What the backends of one run share they share with each other only: they run the same driver, and
one can signal or read another (as the processes of one program can on a machine), never the judge
or another run, which has a namespace of its own.

How a backend joins: bubblewrap's ``--pidns FD --userns FD`` (and ``--userns2 FD``, see
``RunSandbox._start``) take open namespace files. The judge holds them open for the run, and the
backend's command line opens them from the judge's ``/proc/PID/fd`` through ``sh`` (a check
process or a cross-process worker that starts a backend inherits nothing but the command line). A
descriptor names the namespace itself, not a process id that could be reused: once the run's
namespace is gone, a backend cannot start in it, nor in any other.

Why bubblewrap (Debian's ``bubblewrap`` package) rather than ``unshare(1)``: ``unshare`` creates
the namespaces, but a read-only view of the whole file system with one writable directory, a fresh
``/proc`` and ``/dev``, death with the parent and a new session would then be a mount script of
our own, run as the driver's first process; bubblewrap does exactly this setup in one audited
setuid-free program that Flatpak builds on. It is optional: where it is missing, too old to join a
namespace (``--pidns`` came with 0.4), or the kernel refuses unprivileged namespaces,
``sandbox_unavailable`` says why, the run prints it and does not mark itself isolated
(``environment.sandbox`` is null, and ``badge`` draws no "(isolated)").
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from enum import StrEnum

__all__ = [
    "BWRAP",
    "WRITABLE_VARIABLE",
    "RunSandbox",
    "SandboxError",
    "SandboxNetwork",
    "bwrap_program",
    "sandbox_description",
    "sandbox_unavailable",
]

#: The bubblewrap program.
BWRAP = "bwrap"
#: Names directories (``os.pathsep``-separated) the sandbox may write at their own paths. Set by
#: whoever runs the CLI (a driver cannot set the judge's environment), e.g. a test that collects
#: markers from the backend; the report's ``environment.sandbox`` lists them.
WRITABLE_VARIABLE = "RUNLANE_SANDBOX_WRITABLE"
#: How long the run's namespace may take to come up, and to go after its pipe is closed.
START_SECONDS = 30.0
STOP_SECONDS = 5.0
#: ioctl(2) on a namespace file: a descriptor of the user namespace that owns it (Linux 4.9).
_NS_GET_USERNS = 0xB701


class SandboxError(Exception):
    """The run's namespace could not be made (the message says why)."""


def writable_directories() -> list[str]:
    """The existing directories ``WRITABLE_VARIABLE`` names, absolute."""
    named = os.environ.get(WRITABLE_VARIABLE, "")
    return [os.path.abspath(d) for d in named.split(os.pathsep) if d and os.path.isdir(d)]


class SandboxNetwork(StrEnum):
    """What network the sandboxed backend sees."""

    #: A private loopback only: nothing outside the sandbox can be reached.
    NONE = "none"
    #: The machine's network (a driver that talks to a database server).
    HOST = "host"


def _holder_argv(program: str, info_fd: int) -> list[str]:
    """The process that holds the run's user and PID namespaces: bubblewrap's init and ``cat``.

    ``cat`` copies one byte from the judge back when the sandbox is up, then waits for the end of
    its input: the judge closing the pipe ends the namespace. It needs no network of any kind.
    """
    return [
        program,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--info-fd",
        str(info_fd),
        "--",
        shutil.which("cat") or "cat",
    ]


def _join_script(namespaces: Sequence[tuple[str, str]]) -> str:
    """``sh`` code that opens the run's namespace files and becomes bubblewrap (``$0``) joining them.

    ``namespaces`` are (bubblewrap option, path) pairs. The backend inherits one descriptor of its
    own (the driver's options, its number in ``PRIVATE_OPTIONS_FD_VARIABLE``); the namespaces go on
    other low numbers (``sh`` names only descriptors 0 to 9, and three namespaces need six).
    """
    # Imported here: protocol.client loads jsonschema, which the CLI's start-up must not.
    from ..protocol.client import PRIVATE_OPTIONS_FD_VARIABLE

    def joining(first: int) -> str:
        numbers = range(first, first + len(namespaces))
        options = " ".join(f"{flag} {fd}" for (flag, _), fd in zip(namespaces, numbers, strict=True))
        opens = " ".join(
            f"{fd}<{shlex.quote(path)}" for (_, path), fd in zip(namespaces, numbers, strict=True)
        )
        return f'exec "$0" {options} "$@" {opens}'

    low = "|".join(str(fd) for fd in range(3, 3 + len(namespaces)))
    return (
        f'case "${{{PRIVATE_OPTIONS_FD_VARIABLE}-}}" in\n'
        f"{low}) {joining(3 + len(namespaces))} ;;\n"
        f"*) {joining(3)} ;;\n"
        "esac\n"
    )


def _backend_flags(network: SandboxNetwork, private_tmp: str, cwd: str) -> list[str]:
    """bubblewrap's options for one backend in the run's namespaces (after ``--userns``/``--pidns``)."""
    return [
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        *(["--unshare-net"] if network is SandboxNetwork.NONE else []),
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        private_tmp,
        private_tmp,
        *[flag for directory in writable_directories() for flag in ("--bind", directory, directory)],
        "--setenv",
        "TMPDIR",
        private_tmp,
        "--chdir",
        cwd,
        "--",
    ]


def _read_info(fd: int, deadline: float) -> dict[str, object]:
    """bubblewrap's ``--info-fd`` object (read until it parses, or the pipe ends)."""
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            info = json.loads(data)
            if isinstance(info, dict):
                return info
    raise SandboxError("bubblewrap did not say which process holds the namespaces")


class RunSandbox:
    """One run's sandbox: the process holding its namespaces, and the prefix that starts a backend in it.

    ``prefix`` is the command a backend's own command line follows (``sh``, then bubblewrap joining
    the run's user and PID namespaces with a mount, IPC, UTS and, with ``SandboxNetwork.NONE``,
    network namespace of its own). ``close`` ends the namespace (every process in it) and removes
    the private directory when ``own_tmp`` says it was made for the run. Raises ``SandboxError``
    when the namespace cannot be made.
    """

    def __init__(
        self,
        program: str,
        network: SandboxNetwork,
        private_tmp: str,
        cwd: str | None = None,
        *,
        own_tmp: bool = True,
    ) -> None:
        self.network = network
        self.private_tmp = private_tmp
        self._own_tmp = own_tmp
        self._namespaces: list[int] = []
        self._init: int | None = None
        info_read, info_write = os.pipe()
        try:
            self._holder = subprocess.Popen(
                _holder_argv(program, info_write),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(info_write,),
                # A terminal's Ctrl-C reaches the judge, which still needs the backends to finish
                # the run in order; the namespace ends when the judge closes it.
                start_new_session=True,
            )
        except OSError as error:
            os.close(info_read)
            raise SandboxError(f"bubblewrap could not run: {error}") from error
        finally:
            os.close(info_write)
        try:
            self._start(info_read, time.monotonic() + START_SECONDS)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(info_read)
        # In the order _open_namespaces opens them: the PID namespace, its owner, the holder's own.
        flags = ["--pidns", "--userns", "--userns2"]
        held = [
            (flag, f"/proc/{os.getpid()}/fd/{fd}") for flag, fd in zip(flags, self._namespaces, strict=False)
        ]
        self.prefix = [
            shutil.which("sh") or "/bin/sh",
            "-c",
            _join_script(held),
            program,
            *_backend_flags(network, private_tmp, cwd or os.getcwd()),
        ]

    def _failed(self, what: str) -> SandboxError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._holder.wait(1)
        assert self._holder.stderr is not None
        if self._holder.poll() is not None:
            os.set_blocking(self._holder.stderr.fileno(), False)
            with contextlib.suppress(OSError, TypeError):
                lines = (self._holder.stderr.read() or b"").decode("utf-8", "replace").strip().splitlines()
                if lines:
                    what = lines[-1]
        return SandboxError(what)

    def _start(self, info_read: int, deadline: float) -> None:
        assert self._holder.stdin is not None and self._holder.stdout is not None
        try:
            info = _read_info(info_read, deadline)
        except SandboxError as error:
            raise self._failed(str(error)) from None
        child = info.get("child-pid")
        if not isinstance(child, int):
            raise SandboxError("bubblewrap did not say which process holds the namespaces")
        # The holder's init, by a descriptor that no reused process id can redirect: ending it ends
        # the namespace, and it reads as ended only once every process in the namespace is gone.
        # Kept (and ever signalled) only once its namespace is known to be the one bubblewrap made.
        init: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            init = os.pidfd_open(child)
        try:
            self._open_namespaces(info, child, deadline)
        except BaseException:
            if init is not None:
                os.close(init)
            raise
        self._init = init

    def _open_namespaces(self, info: dict[str, object], child: int, deadline: float) -> None:
        """Wait until the holder runs, then open its namespaces (``self._namespaces``)."""
        assert self._holder.stdin is not None and self._holder.stdout is not None
        # Up once the holder's command runs: then the user namespace has its ids and /proc is mounted.
        try:
            self._holder.stdin.write(b"\n")
            self._holder.stdin.flush()
        except OSError:
            raise self._failed("the namespace holder ended at once") from None
        ready, _, _ = select.select([self._holder.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready or not os.read(self._holder.stdout.fileno(), 1):
            raise self._failed("the namespace holder did not start")
        # Nothing more is read from the holder: a backend that opens its pipes through /proc then
        # writes to no reader (the judge keeps only the pipe whose end stops the run's namespace).
        for stream in (self._holder.stdout, self._holder.stderr):
            if stream is not None:
                stream.close()
        try:
            pid = os.open(f"/proc/{child}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
            self._namespaces.append(pid)
            if os.fstat(pid).st_ino != info.get("pid-namespace", os.fstat(pid).st_ino):
                raise SandboxError("the namespace holder is not the process bubblewrap started")
            # Joining a PID namespace takes the powers of the user namespace that owns it. Without
            # privileges bubblewrap makes two: the owner (where the real user is root, to mount
            # /dev) and, inside it, one mapping the real user back, where the holder runs. A
            # backend then sets up in the owner and runs in the inner one (``--userns2``).
            owner = fcntl.ioctl(pid, _NS_GET_USERNS)
            self._namespaces.append(owner)
            inner = os.open(f"/proc/{child}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            self._namespaces.append(inner)
        except OSError as error:
            raise SandboxError(f"the run's namespaces could not be opened: {error}") from None
        os.set_inheritable(owner, False)
        if os.fstat(inner).st_ino == os.fstat(owner).st_ino:
            os.close(self._namespaces.pop())

    def close(self) -> None:
        """End the run's namespace and everything in it; remove the run's private directory.

        The kernel kills every process of a PID namespace when its init ends; the init is not
        reaped (its descriptor does not read as ended) before they all are gone, so nothing of
        the run is left when this returns. Without a pidfd (Linux before 5.3) the end of the
        holder's pipe ends it, and the last processes may outlive this call by a moment.
        """
        init, self._init = self._init, None
        if init is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(init, signal.SIGKILL)
                select.select([init], [], [], STOP_SECONDS)
            os.close(init)
        if self._holder.stdin is not None:
            with contextlib.suppress(OSError):
                self._holder.stdin.close()
        try:
            self._holder.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            # bubblewrap's init dies with it (--die-with-parent), and the namespace with its init.
            self._holder.kill()
            self._holder.wait()
        for stream in (self._holder.stdout, self._holder.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        while self._namespaces:
            os.close(self._namespaces.pop())
        if self._own_tmp:
            shutil.rmtree(self.private_tmp, ignore_errors=True)

    def __enter__(self) -> RunSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.cache
def sandbox_unavailable(network: SandboxNetwork = SandboxNetwork.NONE) -> str | None:
    """Why no sandbox can be made here, or ``None`` when one can (tried once per process, ~20 ms).

    The probe makes a run's namespaces and starts one process in them, as a backend would start.
    """
    if not sys.platform.startswith("linux"):
        return "the sandbox needs Linux namespaces"
    program = shutil.which(BWRAP)
    if program is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        with RunSandbox(program, network, tempfile.gettempdir(), "/", own_tmp=False) as sandbox:
            probe: Sequence[str] = [*sandbox.prefix, sys.executable, "-c", "pass"]
            done = subprocess.run(probe, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except SandboxError as error:
        return f"bubblewrap could not create the namespaces: {error}"
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not run: {error}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap could not join the run's namespaces: {reason[-1] if reason else done.returncode}"
    return None


def sandbox_description(network: SandboxNetwork) -> str:
    """What the report records for a sandboxed run."""
    writable = writable_directories()
    also = f"; also writable: {', '.join(writable)}" if writable else ""
    shared = "pid, user (one of each for the run)"
    return f"bubblewrap: {shared}, mount, ipc, uts namespaces; network {network.value}{also}"


def bwrap_program() -> str:
    """The bubblewrap program's path (only after ``sandbox_unavailable`` returned ``None``)."""
    return shutil.which(BWRAP) or BWRAP
