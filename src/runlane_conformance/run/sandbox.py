"""The sandbox an isolated backend runs in: bubblewrap's namespaces, with nothing of the judge in reach.

``--isolation process`` already keeps the driver's code out of every process that judges it. The
sandbox takes away what a process of the same user could still do to the judge from outside:

* **its own PID namespace**, with a fresh ``/proc`` that shows only the sandbox's processes: the
  judge's processes, their open pipes (``/proc/PID/fd/N``) and their memory are out of sight, and
  out of reach of ``kill`` and ``ptrace``. When the namespace's first process ends, the kernel
  kills every process left in it, daemons included, at once (no ``/proc`` walk racing a fork);
  ``--die-with-parent`` ends it when the check process that started it dies.
* **its own mount namespace**, where the whole file system is mounted read-only (the driver and
  its packages can be read and loaded; the report, the JUnit file, the judge's run directory and
  the toolkit's installation cannot be written), with one private writable directory, made for
  the run and named by ``TMPDIR`` (``/tmp`` itself stays read-only: a driver or its environment
  may live there). Every backend of one run shares that directory, so a store one backend creates
  there can be attached by another (a cross-process competitor); it is removed when the run ends.
* **its own user, IPC and UTS namespaces** (the user namespace is what lets an unprivileged user
  create the others), and **its own network namespace** with only a private loopback, unless the
  run says ``--sandbox-network host`` (a driver that talks to a database server needs the
  machine's network; then the sandbox limits files and processes, not the network).

Why bubblewrap (Debian's ``bubblewrap`` package) rather than ``unshare(1)``: ``unshare`` creates
the namespaces, but a read-only view of the whole file system with one writable directory, a fresh
``/proc`` and ``/dev``, death with the parent and a new session would then be a mount script of
our own, run as the driver's first process; bubblewrap does exactly this setup in one audited
setuid-free program that Flatpak builds on. It is optional: where it is missing or the kernel
refuses unprivileged namespaces, ``sandbox_unavailable`` says why, the run prints it and does not
mark itself isolated (``environment.sandbox`` is null, and ``badge`` draws no "(isolated)").
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from enum import StrEnum

__all__ = [
    "BWRAP",
    "WRITABLE_VARIABLE",
    "SandboxNetwork",
    "bwrap_program",
    "sandbox_argv",
    "sandbox_description",
    "sandbox_unavailable",
]

#: The bubblewrap program.
BWRAP = "bwrap"
#: Names directories (``os.pathsep``-separated) the sandbox may write at their own paths. Set by
#: whoever runs the CLI (a driver cannot set the judge's environment), e.g. a test that collects
#: markers from the backend; the report's ``environment.sandbox`` lists them.
WRITABLE_VARIABLE = "RUNLANE_SANDBOX_WRITABLE"


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


def _namespaces(network: SandboxNetwork) -> list[str]:
    flags = ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if network is SandboxNetwork.NONE:
        flags.append("--unshare-net")
    return flags


def sandbox_argv(
    program: str, network: SandboxNetwork, private_tmp: str, cwd: str | None = None
) -> list[str]:
    """The bubblewrap command line that runs what follows it in the sandbox (see the module docstring).

    ``private_tmp`` is the one directory the sandbox may write (``TMPDIR`` names it). The caller
    appends the command.
    """
    return [
        program,
        *_namespaces(network),
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
        cwd or os.getcwd(),
        "--",
    ]


@functools.cache
def sandbox_unavailable(network: SandboxNetwork = SandboxNetwork.NONE) -> str | None:
    """Why no sandbox can be made here, or ``None`` when one can (tried once per process, ~10 ms)."""
    if not sys.platform.startswith("linux"):
        return "the sandbox needs Linux namespaces"
    program = shutil.which(BWRAP)
    if program is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [*sandbox_argv(program, network, tempfile.gettempdir(), "/"), sys.executable, "-c", "pass"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not run: {error}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap could not create the namespaces: {reason[-1] if reason else done.returncode}"
    return None


def sandbox_description(network: SandboxNetwork) -> str:
    """What the report records for a sandboxed run."""
    writable = writable_directories()
    also = f"; also writable: {', '.join(writable)}" if writable else ""
    return f"bubblewrap: pid, mount, user, ipc, uts namespaces; network {network.value}{also}"


def bwrap_program() -> str:
    """The bubblewrap program's path (only after ``sandbox_unavailable`` returned ``None``)."""
    return shutil.which(BWRAP) or BWRAP
