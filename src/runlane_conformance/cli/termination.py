"""SIGTERM from the program's first line: held until ``run`` has marked its outputs, then an interrupt.

A CI runner that cancels a job sends SIGTERM, possibly while the program is still importing.
Python's default for SIGTERM ends the process at once, so a run cancelled in its first fraction of
a second would leave the previous run's report untouched at ``--report``, where ``badge`` would
accept it. The console script therefore *holds* SIGTERM (blocks it, so the kernel keeps it
pending) as its first statement; ``app.main`` installs a handler that turns it into
``KeyboardInterrupt``; ``run`` releases it only after the ``running`` marker is on disk (every
other command releases it at once). A SIGTERM sent at any moment after the first statement is thus
delivered after the marker and winds the run down as Ctrl-C does, leaving the outputs marked
``interrupted``. The interpreter's own start-up, before any of our code runs, is the one window
left (docs/trust.md).

Children inherit a blocked signal mask, so nothing may be spawned while SIGTERM is held.
"""

from __future__ import annotations

import contextlib
import signal

__all__ = ["hold_termination", "interrupt_on_termination", "release_termination"]


def hold_termination() -> None:
    """Block SIGTERM in this thread (it stays pending until ``release_termination``)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def release_termination() -> None:
    """Unblock SIGTERM; one that arrived meanwhile is delivered now."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def interrupt_on_termination() -> None:
    """Make SIGTERM raise ``KeyboardInterrupt`` in the main thread (a no-op elsewhere)."""
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _interrupt)
