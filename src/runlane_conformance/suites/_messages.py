"""Failure messages shared by the suites: what was expected, what came back, and whose rule it is.

Every ``assert`` in the suites carries a message (``tests/test_suite_messages.py``
keeps it so). Most say something specific to their check; the helpers here
cover the two shapes that recur in every area, so they read the same
everywhere:

* ``missing``: a record the check itself wrote (and nothing in the check
  deleted) read back as absent. The check was about something else, so the
  message says that this breaks a more basic rule first, and which one, so a
  driver author starts from the cause and not from this check's requirement;
* ``differs``: a value came back other than the one the rule predicts; the
  message names the thing, the rule in words, and both values;
* ``refused``: the suites' ``pytest.raises``. When the driver raises nothing,
  pytest alone says only "DID NOT RAISE"; this says what the check did, that
  it was accepted, which error was expected, and the requirement whose rule
  that breaks (``tests/test_suite_messages.py`` keeps bare ``pytest.raises``
  out of the suites);
* ``propagated``: the same for a check whose callback raises on purpose to
  test something else (rows released, positions not consumed): when the
  exception does not come back, the more basic callback-error rule is broken
  first, and the message says so.

The messages are built only when an assertion fails (an ``assert``
statement's message is evaluated lazily), so they may be as long as helps.
"""

from __future__ import annotations

from types import TracebackType
from typing import Generic, TypeVar

import pytest

from runlane_conformance.catalogue import Requirement

__all__ = ["CALLBACK_ERROR_RULE", "Refusal", "differs", "missing", "propagated", "refused"]

E = TypeVar("E", bound=BaseException)

#: The rule every check that raises from its callback relies on (declared in the ``replay`` area).
CALLBACK_ERROR_RULE = "replay.callback-error-rolls-back-and-propagates"


def missing(what: str, *, written: str = "the check wrote it earlier and nothing deleted it") -> str:
    """The message for a record that must be present and read back as absent.

    ``what`` names the record (``"lease k"``); ``written`` says why it must exist.
    """
    return (
        f"{what} read as absent, but {written}: a committed record must stay readable by every instance "
        "(point_reads.returns-committed-content); this check cannot judge its own rule without it and fails "
        "because of that"
    )


def differs(what: str, expected: object, got: object, rule: str) -> str:
    """The message for a value that is not the one the rule predicts: ``rule`` is the rule in words."""
    return f"{what}: expected {expected!r}, got {got!r}; {rule}"


class Refusal(Generic[E]):
    """A ``pytest.raises`` whose failure, when nothing is raised, says which rule was broken.

    Entering yields pytest's ``ExceptionInfo`` (filled once the expected error
    was caught, so ``.value`` works after the block as with ``pytest.raises``).
    An exception of another type is not caught: it propagates untouched, so
    the driver's own frame stays the innermost one a report shows. When the
    block raises nothing, an ``AssertionError`` carrying ``message`` fails the
    check, which keeps its own requirement ID in every report.
    """

    def __init__(self, expected: type[E] | tuple[type[E], ...], message: str) -> None:
        self._expected = expected
        self.message = message
        self._info: pytest.ExceptionInfo[E] = pytest.ExceptionInfo.for_later()

    def __enter__(self) -> pytest.ExceptionInfo[E]:
        return self._info

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        __tracebackhide__ = True
        if exc is None:
            raise AssertionError(self.message)
        if not isinstance(exc, self._expected) or tb is None:
            return False
        self._info.fill_unfilled((type(exc), exc, tb))
        return True


def _names(expected: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(kind.__name__ for kind in types)


def refused(
    expected: type[E] | tuple[type[E], ...],
    *,
    what: str,
    rule: Requirement,
    accepted: str = "the driver accepted it (nothing was raised)",
) -> Refusal[E]:
    """Expect ``expected`` from the block; if nothing is raised, fail naming ``rule``.

    ``what`` says what the check did (``"appended one record of max_record_bytes
    + 1 bytes"``); ``accepted`` says what happened instead when that is not
    simply the driver accepting it (core went ahead, the error never reached
    the caller); ``rule`` is the requirement the acceptance breaks, named by
    ID and in words from the catalog, so the two cannot drift apart.
    """
    return Refusal(
        expected,
        f"{what}, and {accepted}; expected {_names(expected)}. This breaks {rule.id}: {rule.summary}",
    )


def propagated(expected: type[E] | tuple[type[E], ...], *, what: str) -> Refusal[E]:
    """Expect the callback's own ``expected`` back from ``transaction()``, a rule this check relies on.

    The check raised it on purpose to look at something else; when
    ``transaction()`` returns normally instead, the callback-error rule of
    the ``replay`` area is broken first, and the message says this check
    fails because of that rather than suggesting a fault in its own rule.
    """
    return Refusal(
        expected,
        f"{what}, but driver.transaction() returned normally; expected the callback's "
        f"{_names(expected)} to reach the caller: an exception raised by the callback must roll its attempt "
        f"back and propagate unchanged ({CALLBACK_ERROR_RULE}); this check cannot judge its own rule "
        "without it and fails because of that",
    )
