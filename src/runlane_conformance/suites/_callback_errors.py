"""Exceptions the suites raise from callbacks on purpose, beyond ``Exception``.

A driver that rolls back or ends an attempt in ``except Exception`` misses every
one of these: ``KeyboardInterrupt`` and ``SystemExit`` (a user or supervisor
stopping the process), ``GeneratorExit`` (a coroutine or generator being closed
while it sits in a callback) and ``BaseException`` subclasses frameworks use to
unwind a task. The replay and sealing suites raise each and expect the same
treatment as an ordinary error.
"""

from __future__ import annotations

__all__ = ["BASE_ERRORS", "CallbackAbort"]


class CallbackAbort(BaseException):
    """A BaseException of the suites' own, like the ones frameworks use to unwind a task."""


#: BaseException subclasses a callback can raise, by the name checks use in their ids.
BASE_ERRORS: dict[str, type[BaseException]] = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
    "GeneratorExit": GeneratorExit,
    "custom-BaseException": CallbackAbort,
}
