"""What a fault is, where it lands, and the in-process injector for drivers that are not networked.

A *write* is one request flight from the driver to its store: for a network
driver, the bytes its client sends before the server answers (however the
kernel splits them); for an in-process driver, one call it routes through
``FaultHook.round_trip``. Writes are numbered from 1, counted from the moment
a switch is armed, across every connection of the instance. Since a driver
issues the same writes for the same transaction on the same state, a fault
placed at write N hits the same step every time it is replayed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar, runtime_checkable

from ..contract.errors import RunlaneError

__all__ = ["ArmedSwitch", "Fault", "FaultHook", "FaultInjector", "FaultKind", "FaultSwitch", "InjectedFault"]

T = TypeVar("T")

#: How long a ``DELAY`` fault holds a write back unless it says otherwise (seconds).
DEFAULT_DELAY = 0.05


class FaultKind(StrEnum):
    """The ways a write can fail."""

    #: The connection breaks before write N reaches the store: the store never sees it.
    CUT = "cut"
    #: Write N reaches the store and is fully processed; its answer is dropped and the connection
    #: breaks. On a commit this is the ambiguous case: the work is done, the driver is not told.
    LOSE_REPLY = "lose_reply"
    #: As ``LOSE_REPLY`` (write N is processed, its answer lost, the connection broken), and every
    #: connection opened afterwards is refused (every later in-process round trip fails) until the
    #: switch is disarmed: the store went down, so a driver cannot find out what write N did.
    REFUSE = "refuse"
    #: Write N is held back for a short, bounded time and then delivered; nothing is lost.
    DELAY = "delay"


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` at write number ``at`` (1-based, counted from arming)."""

    kind: FaultKind
    at: int
    delay: float = DEFAULT_DELAY

    def __post_init__(self) -> None:
        if type(self.at) is not int or self.at < 1:
            raise ValueError(f"a fault lands on a write number >= 1, not {self.at!r}")
        if not 0 <= self.delay <= 5:
            raise ValueError(f"a delay fault waits between 0 and 5 seconds, not {self.delay!r}")

    def describe(self) -> str:
        """One line a failure message can quote: what broke, and where."""
        if self.kind is FaultKind.CUT:
            return f"connection cut before write {self.at}"
        if self.kind is FaultKind.LOSE_REPLY:
            return f"reply to write {self.at} lost (the store processed it)"
        if self.kind is FaultKind.REFUSE:
            return f"store down after processing write {self.at} (reply lost, reconnects refused)"
        return f"write {self.at} delayed {self.delay:g}s"


class InjectedFault(RunlaneError, ConnectionError):
    """Raised by ``FaultInjector.round_trip`` where a real client would report a broken connection.

    A driver wired to the in-process hook handles it exactly like its own
    client's connection errors; it must never reach the driver's caller.
    """


@runtime_checkable
class FaultHook(Protocol):
    """What an in-process driver calls around each exchange with its store."""

    def round_trip(self, action: Callable[[], T]) -> T:
        """Run ``action`` (one exchange with the store) unless the armed fault says otherwise."""
        ...


@runtime_checkable
class FaultSwitch(Protocol):
    """The suite's side of a fault mechanism: arm one fault, count writes, learn whether it fired."""

    def arm(self, fault: Fault | None) -> None:
        """Start counting writes from zero; break the write ``fault`` names (``None``: only count)."""
        ...

    def disarm(self) -> None:
        """Stop counting and injecting; the store is reachable again."""
        ...

    @property
    def writes(self) -> int:
        """Writes seen since the last ``arm``."""
        ...

    @property
    def fired(self) -> bool:
        """Whether the armed fault has taken effect."""
        ...

    def when_fired(self, callback: Callable[[Fault], None] | None) -> None:
        """Call ``callback`` once, at the moment the armed fault lands (``None``: no callback)."""
        ...


class ArmedSwitch:
    """What both fault mechanisms keep as a ``FaultSwitch``: the armed fault, the writes, whether it fired.

    Everything is guarded by ``_lock``, which subclasses use for their own
    state too; ``_on_arm`` is where they clear that state on every ``arm``
    and ``disarm``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = False
        self._fault: Fault | None = None
        self._writes = 0
        self._fired = False
        self._on_fire: Callable[[Fault], None] | None = None

    def when_fired(self, callback: Callable[[Fault], None] | None) -> None:
        """Call ``callback`` once, from the thread that delivers the armed fault, at the moment it lands.

        For ``CUT`` that is before the write reaches the store; for ``LOSE_REPLY`` and ``REFUSE``, once
        the store has answered it (the answer is then dropped). The ``cluster_faults`` suite kills a
        cluster member there, so the kill lands on a counted write. ``arm`` and ``disarm`` leave it in
        place; it is dropped once called, or by ``when_fired(None)``.
        """
        with self._lock:
            self._on_fire = callback

    def _fire_callback(self, fault: Fault) -> None:
        """Run the ``when_fired`` callback, at most once per callback given (called without the lock)."""
        with self._lock:
            callback, self._on_fire = self._on_fire, None
        if callback is not None:
            callback(fault)

    def _on_arm(self) -> None:
        """Clear mechanism-specific state; called with ``_lock`` held."""

    def arm(self, fault: Fault | None) -> None:
        with self._lock:
            self._armed = True
            self._fault = fault
            self._writes = 0
            self._fired = False
            self._on_arm()

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
            self._fault = None
            self._on_arm()

    @property
    def writes(self) -> int:
        with self._lock:
            return self._writes

    @property
    def fired(self) -> bool:
        with self._lock:
            return self._fired


class FaultInjector(ArmedSwitch):
    """The in-process twin of ``FaultProxy``: a ``FaultHook`` a driver calls, and a ``FaultSwitch``.

    ``CUT`` raises ``InjectedFault`` instead of running the action,
    ``LOSE_REPLY`` runs it and then raises (its result is lost), ``REFUSE``
    does the same and then raises instead of running every later action
    until disarmed, and ``DELAY`` waits, then runs it. Thread-safe: writes are numbered in the
    order their round trips begin.
    """

    def round_trip(self, action: Callable[[], T]) -> T:
        """Run ``action`` (one exchange with the store) with the armed fault, if this round trip gets one."""
        with self._lock:
            number = 0
            if not self._armed:
                return_now = True
                fault = None
            else:
                return_now = False
                self._writes += 1
                number = self._writes
                fault = self._fault
                hit = fault is not None and (
                    number == fault.at or (fault.kind is FaultKind.REFUSE and number > fault.at)
                )
                if not hit:
                    fault = None
                elif fault is not None:
                    self._fired = True
        if return_now or fault is None:
            return action()
        if fault.kind is FaultKind.DELAY:
            threading.Event().wait(fault.delay)
            return action()
        if fault.kind is FaultKind.LOSE_REPLY or (fault.kind is FaultKind.REFUSE and number == fault.at):
            try:
                action()
            finally:
                self._fire_callback(fault)
        elif number == fault.at:
            self._fire_callback(fault)
        raise InjectedFault(f"injected fault: {fault.describe()}")
