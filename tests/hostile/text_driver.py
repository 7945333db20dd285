"""A driver whose every word is hostile: the text it hands the toolkit tries to break each output.

``harness`` wraps the reference driver; the ``text_mode`` option says where the hostility goes:

* ``message`` -- every transaction raises an error whose message holds ANSI escapes (clear screen,
  retitle, a forged coloured "CERTIFIED"), a carriage return, control characters, a bidi override,
  lone surrogates, bytes smuggled in with ``surrogateescape``, and the values of the ``password``
  and ``dsn`` options (as a driver that echoes its connection settings would);
* ``huge`` -- every transaction raises an error with a 10 MB message;
* ``unprintable`` -- every transaction raises an error whose ``__str__`` and ``__repr__`` raise;
* ``skip`` -- every transaction raises ``unittest.SkipTest`` with the hostile message as its reason;
* ``everything`` -- the ``message`` error with ten million characters before the hostile text,
  raised from (chained to) the unprintable error: every kind of hostile text in one failure;
* ``factory`` -- the harness factory itself raises the hostile message;
* ``factory_unprintable`` -- the harness factory raises the unprintable error.

``text_once=true`` makes only the first transaction of each process hostile (the rest behave), so
a test pays for one failing check, not for all of them; ``size=N`` changes the huge message's length.
Every other option is accepted and ignored, so tests can pass hostile keys, values and secrets.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from runlane_conformance.harness import DriverHarness
from tests.mutants.wrapping import WrappedDriver, mutant_harness

T = TypeVar("T")

#: Escape sequences and controls a terminal would obey.
ANSI = (
    "\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b[1;32mCERTIFIED\x1b[0m\rbell\x07 nul\x00 del\x7f csi\x9b bidi\u202eevil"
)
#: Text with no UTF-8 form: a lone surrogate, and invalid UTF-8 bytes decoded with surrogateescape.
SURROGATES = "lone \ud800 and " + b"caf\xe9 \xff\xfe".decode("utf-8", "surrogateescape")
#: Ten million characters.
HUGE_LENGTH = 10_000_000


class HostileError(RuntimeError):
    """Raised from inside the driver with the hostile text as its message."""


class UnprintableError(RuntimeError):
    """An error nobody can turn into text."""

    def __str__(self) -> str:
        raise ValueError("this error refuses to be printed")

    def __repr__(self) -> str:
        raise ValueError("and refuses to be represented")


def hostile_message(options: Mapping[str, str]) -> str:
    """The hostile message, echoing the connection settings the way careless drivers do."""
    return (
        f"{ANSI} {SURROGATES} "
        f"connecting with password {options.get('password', '')} to {options.get('dsn', '')}\n"
        "second line\tafter a tab"
    )


def _error(mode: str, options: Mapping[str, str]) -> BaseException:
    if mode == "huge":
        return HostileError("x" * int(options.get("size", HUGE_LENGTH)))
    if mode in ("unprintable", "factory_unprintable"):
        return UnprintableError()
    if mode == "skip":
        return unittest.SkipTest(hostile_message(options))
    return HostileError(hostile_message(options))


def harness(options: Mapping[str, str]) -> DriverHarness:
    mode = options.get("text_mode", "message")
    if mode.startswith("factory"):
        raise _error(mode, options)
    once = options.get("text_once") == "true"
    raised = [False]

    class Hostile(WrappedDriver):
        def transaction(self, callback: Callable[[Any], T]) -> T:
            if once and raised[0]:
                return super().transaction(callback)
            raised[0] = True
            if mode == "everything":
                huge = "x" * int(options.get("size", HUGE_LENGTH))
                raise HostileError(f"{huge} {hostile_message(options)}") from UnprintableError()
            # A fresh error each time: one raised again and again grows its traceback.
            raise _error(mode, options)

    return mutant_harness(Hostile)({})
