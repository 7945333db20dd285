"""How many supervised children a run uses, and when ``--workers auto`` adds one.

A check on the reference driver keeps a processor busy from start to end, so more
children than processors only adds start-up cost. A check on a driver backed by a
database mostly waits: for the server, for a lock a competitor holds, for a
lock-wait grace to run out. Those waits overlap when more children run, and the
processors are idle while they happen, so ``auto`` starts one child per processor
and adds another whenever, over the last window, at least half of the machine's
processor time went unused and enough checks are still queued to pay for a new
child's start-up. It never goes past ``AUTO_PER_PROCESSOR`` children per processor
(and ``AUTO_CEILING`` in all).

Idle time is read from ``/proc/stat`` (Linux). Where that file does not exist,
``auto`` stays at one child per processor. How many children ran never changes a
verdict: every check runs alone in its child, from its own seed, whichever child
takes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "AUTO",
    "AUTO_CEILING",
    "AUTO_PER_PROCESSOR",
    "MAX_WORKERS",
    "IdleMeter",
    "WorkerCount",
    "parse_workers",
]

#: The spelling of "choose for me" on the command line and in ``[tool.runlane]``.
AUTO: Final = "auto"
#: ``auto`` never runs more than this many children per processor ...
AUTO_PER_PROCESSOR: Final = 4
#: ... nor more than this many in all.
AUTO_CEILING: Final = 16
#: The most children a run may be asked for. Each child holds a driver, its pipes and, isolated, a
#: backend; past a few dozen they only compete for the same processors and file descriptors (and a
#: typo such as ``--workers 1000000`` would fork until the machine gave out). The bound is the same
#: on every machine, so a configuration valid on one is valid on all.
MAX_WORKERS: Final = 64
#: The share of the machine's processor time that must have gone unused in a window to add a child.
IDLE_SHARE_TO_GROW: Final = 0.5
#: Seconds between two decisions to add a child.
WINDOW_SECONDS: Final = 0.5

_PROC_STAT = "/proc/stat"


def parse_workers(value: object) -> int | Literal["auto"]:
    """A worker count as a user wrote it: a positive integer or ``auto``; ``ValueError`` otherwise."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO:
            return AUTO
        if text.isascii() and text.isdigit() and int(text) >= 1:
            return _bounded(int(text))
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return _bounded(value)
    raise ValueError(f"workers must be a positive integer or 'auto', got {value!r}")


def _bounded(count: int) -> int:
    if count > MAX_WORKERS:
        raise ValueError(f"workers must be at most {MAX_WORKERS}, got {count}")
    return count


@dataclass(frozen=True)
class WorkerCount:
    """The children a run starts with, and the most it may grow to (equal for a fixed count)."""

    start: int
    ceiling: int

    def __post_init__(self) -> None:
        if self.start < 1 or self.ceiling < self.start:
            raise ValueError(f"impossible worker count: start {self.start}, ceiling {self.ceiling}")

    @property
    def grows(self) -> bool:
        """Whether the supervisor may add children while the machine sits idle."""
        return self.ceiling > self.start

    @classmethod
    def fixed(cls, workers: int) -> WorkerCount:
        return cls(workers, workers)

    @classmethod
    def of(cls, requested: int | Literal["auto"], processors: int | None = None) -> WorkerCount:
        """``requested`` as a count: a number is used as given; ``auto`` is described above."""
        if requested != AUTO:
            return cls.fixed(requested)
        cpus = min(MAX_WORKERS, max(1, processors if processors is not None else (os.cpu_count() or 1)))
        ceiling = min(AUTO_CEILING, AUTO_PER_PROCESSOR * cpus) if IdleMeter.available() else cpus
        return cls(cpus, max(cpus, ceiling))


class IdleMeter:
    """The share of the whole machine's processor time that went unused since the last reading."""

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def available() -> bool:
        return IdleMeter._read() is not None

    @staticmethod
    def _read() -> tuple[int, int] | None:
        """(idle, total) jiffies over all processors since boot, or None where they cannot be read."""
        try:
            with open(_PROC_STAT, encoding="ascii") as stat:
                first = stat.readline().split()
        except OSError:
            return None
        if not first or first[0] != "cpu":
            return None
        try:
            fields = [int(value) for value in first[1:]]
        except ValueError:
            return None
        if len(fields) < 5:
            return None
        # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already
        # counted in user and nice, so only the first eight fields make up the total.
        idle = fields[3] + fields[4]
        return idle, sum(fields[:8])

    def idle_share(self) -> float | None:
        """Unused share of processor time since the previous call (None: unreadable or no time passed)."""
        now = self._read()
        last, self._last = self._last, now
        if now is None or last is None:
            return None
        total = now[1] - last[1]
        if total <= 0:
            return None
        return max(0.0, min(1.0, (now[0] - last[0]) / total))
