"""How the supervisor hands checks to its children, and when it adds one: small policies, one protocol.

The dispatch loop (``run.supervise``) asks a ``HandOut`` policy how many checks a ready child may
hold and whether the end of the queue may be announced to it yet; ``policy_for`` picks the policy a
run's options call for. ``GrowWhenIdle`` decides when ``--workers auto`` adds a child. None of
them touches a process: they are plain decisions, tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .scaling import IDLE_SHARE_TO_GROW, WINDOW_SECONDS, IdleMeter

__all__ = [
    "MAX_HANDED_OUT",
    "Batched",
    "GrowWhenIdle",
    "HandOut",
    "IdleShare",
    "Lockstep",
    "OneAhead",
    "policy_for",
]

#: Most checks handed to one child at a time: their command lines must fit in the pipe's buffer,
#: or a write to a child busy with a check could block the supervisor.
MAX_HANDED_OUT = 64


class HandOut(Protocol):
    """A policy for handing out queued checks to a ready child."""

    def depth(self) -> int:
        """How many checks a ready child may hold at once (it always holds at least two when it
        can: the second tells pytest what comes next, so fixtures are torn down at the right time)."""
        ...

    def may_announce_end(self, held: int) -> bool:
        """Whether a child holding ``held`` checks may be told the queue is empty (``stop``)."""
        ...


@dataclass(frozen=True)
class Batched:
    """Serial: a pipe-full at a time, so the child never waits for the supervisor between checks."""

    def depth(self) -> int:
        return MAX_HANDED_OUT

    def may_announce_end(self, held: int) -> bool:
        return True


@dataclass(frozen=True)
class OneAhead:
    """Parallel: one check ahead only; a long check must not hold a batch hostage while another
    child idles (a check's length is unknown until it ends)."""

    def depth(self) -> int:
        return 2

    def may_announce_end(self, held: int) -> bool:
        return True


@dataclass(frozen=True)
class Lockstep:
    """``--maxfail``: one ahead, and the end of the queue is announced only in answer to an end (the
    child then holds just the check it runs next), so no child starts a check after the one that
    stopped the run."""

    def depth(self) -> int:
        return 2

    def may_announce_end(self, held: int) -> bool:
        return held <= 1


def policy_for(workers: int, *, growing: bool, max_failures: int | None) -> HandOut:
    """The hand-out policy a run's options call for (see each policy)."""
    if max_failures is not None:
        return Lockstep()
    if workers == 1 and not growing:
        return Batched()
    return OneAhead()


class IdleShare(Protocol):
    """Where ``GrowWhenIdle`` learns how idle the processors were (``scaling.IdleMeter``)."""

    def idle_share(self) -> float | None:
        """Unused share of processor time since the previous call (``None``: unknown)."""
        ...


class GrowWhenIdle:
    """``--workers auto``: add a child when, over the last window, half the machine's processor time
    went unused (``run.scaling``), up to ``ceiling``.

    Only while checks are queued beyond what the children already hold, never while a child is
    still starting (its imports would hide the idle time it is about to use), never once the run
    is stopping, and at most once per window.
    """

    def __init__(self, ceiling: int, meter: IdleShare | None = None) -> None:
        self.ceiling = ceiling
        self._meter = meter if meter is not None else IdleMeter()
        self._next = 0.0

    def should_grow(
        self, now: float, *, alive: int, wanted: int, queued: int, all_ready: bool, stopping: bool
    ) -> bool:
        """Whether to add a child now (``alive`` children running, ``wanted`` asked for)."""
        if stopping or now < self._next:
            return False
        self._next = now + WINDOW_SECONDS
        idle = self._meter.idle_share()
        return not (
            idle is None
            or idle < IDLE_SHARE_TO_GROW
            or alive != wanted
            or alive >= self.ceiling
            or queued <= alive
            or not all_ready
        )
