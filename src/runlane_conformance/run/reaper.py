"""Nothing the driver started outlives the run: the CLI adopts every orphan and ends them all.

A driver runs in supervised children (``supervise``), each the leader of its own
process group, and a child's whole group is killed when it ends. That leaves two
ways for a driver's process to escape: a daemon that calls ``setsid`` (a new
session, so a new group) and double-forks, and anything whose parent died first
(it is handed to the nearest *subreaper*, normally ``init``, where nobody here
can find it). Such a process could rewrite the report after the CLI exited.

* ``become_subreaper`` (Linux, ``PR_SET_CHILD_SUBREAPER``): orphans among our
  descendants are reparented to this process instead of ``init``, so they stay
  in our process tree whatever sessions they start.
* ``end_descendants``: kills every process in our tree (by walking ``/proc``
  parent links down from this process, never up, so our own parent and
  processes outside our tree are never touched) until none is left, and reaps
  the ones that became our children. Each process is identified by a pidfd (or,
  where pidfds are missing, by its start time) before it is signalled, so a
  pid reused by an unrelated process in the meantime is never killed.

Other systems: FreeBSD's ``procctl(PROC_REAP_ACQUIRE)`` and macOS have no
Python binding here; there the supervisor's process-group kill is the bound, and
a ``setsid`` daemon can escape (``docs/trust.md`` says so). ``end_descendants``
then does nothing and returns 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "ProcessEntry",
    "become_subreaper",
    "descendants",
    "end_descendants",
    "is_subreaper",
    "reap_adopted",
]

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
#: How long ``end_descendants`` keeps killing newly found descendants before it gives up.
END_SECONDS = 5.0


@dataclass(frozen=True)
class ProcessEntry:
    """One process as ``/proc/PID/stat`` shows it: its parent, state letter and start time (ticks)."""

    pid: int
    parent: int
    state: str
    start_time: int


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants; true when the platform allowed it."""
    libc = _libc()
    if libc is None:
        return False
    return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0


def is_subreaper() -> bool:
    """Whether this process is currently a child subreaper (always false off Linux)."""
    libc = _libc()
    if libc is None:
        return False
    flag = ctypes.c_int(0)
    if int(libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)) != 0:
        return False
    return flag.value != 0


def _entry(pid: int) -> ProcessEntry | None:
    """``/proc/PID/stat`` parsed, or ``None`` when the process is gone (or unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            raw = stream.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcessEntry(pid, int(fields[1]), fields[0].decode("ascii", "replace"), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _all_processes() -> Iterator[ProcessEntry]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if name.isdigit():
            entry = _entry(int(name))
            if entry is not None:
                yield entry


def descendants(root: int | None = None) -> list[ProcessEntry]:
    """Every process below ``root`` (default: this process) in the parent tree, nearest first."""
    top = os.getpid() if root is None else root
    children: dict[int, list[ProcessEntry]] = {}
    for entry in _all_processes():
        children.setdefault(entry.parent, []).append(entry)
    found: list[ProcessEntry] = []
    frontier = [top]
    seen = {top}
    while frontier:
        parent = frontier.pop(0)
        for entry in children.get(parent, []):
            if entry.pid not in seen:
                seen.add(entry.pid)
                found.append(entry)
                frontier.append(entry.pid)
    return found


def _kill(entry: ProcessEntry) -> int | None:
    """SIGKILL ``entry`` if that pid is still the same process; returns a pidfd to wait on, if any."""
    pidfd: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(entry.pid)
    now = _entry(entry.pid)
    # With a pidfd held, the pid cannot be reused; the start time then proves it is the process we saw.
    if now is None or now.start_time != entry.start_time:
        if pidfd is not None:
            os.close(pidfd)
        return None
    try:
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(entry.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    return pidfd


def _reap(entry: ProcessEntry, me: int) -> None:
    if entry.parent == me:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(entry.pid, os.WNOHANG)


def end_descendants(timeout: float = END_SECONDS) -> int:
    """Kill every descendant of this process and reap those that are our children; how many were killed.

    Repeats until a walk of ``/proc`` finds no live descendant (a process forked
    during one round is found in the next) or ``timeout`` seconds passed. Call it
    only when nothing below this process is meant to live on (the supervised
    children are already gone). Does nothing where ``/proc`` is missing.
    """
    if not os.path.isdir("/proc/self"):
        return 0
    me = os.getpid()
    killed: set[tuple[int, int]] = set()
    deadline = time.monotonic() + timeout
    while True:
        found = descendants(me)
        for entry in found:
            _reap(entry, me)
        live = [entry for entry in found if entry.state not in ("Z", "X")]
        if not live:
            break
        pidfds: list[int] = []
        for entry in live:
            pidfd = _kill(entry)
            killed.add((entry.pid, entry.start_time))
            if pidfd is not None:
                pidfds.append(pidfd)
        try:
            if pidfds:
                # A pidfd turns readable when its process has exited: wait for them, briefly.
                with contextlib.suppress(OSError, ValueError):
                    select.select(pidfds, [], [], 0.05)
            else:
                time.sleep(0.01)
        finally:
            for pidfd in pidfds:
                os.close(pidfd)
        if time.monotonic() > deadline:
            break
    for entry in descendants(me):
        _reap(entry, me)
    return len(killed)


def reap_adopted(keep: set[int]) -> int:
    """Reap every exited child of ours whose pid is not in ``keep``; how many were reaped.

    A subreaper inherits every orphan below it, and an orphan that exits stays a zombie (a pid
    and a process-table slot) until its new parent waits for it. A driver that forks without
    waiting would otherwise fill the process table during a run (one did: 11,900 zombies in
    45 s). The supervisor calls this on every turn of its loop with the pids of its own
    children in ``keep``: those are waited for by their ``Popen`` objects, which need their
    exit status. Each exited child is first looked at without being reaped (``WNOWAIT``); the
    scan stops at one of ``keep`` (the supervisor collects it on its next turn) and never
    blocks (``WNOHANG``).
    """
    reaped = 0
    while True:
        try:
            seen = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, OSError, AttributeError):
            return reaped
        if seen is None or seen.si_pid == 0 or seen.si_pid in keep:
            return reaped
        try:
            os.waitpid(seen.si_pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            return reaped
        reaped += 1
