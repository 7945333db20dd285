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
  message names the thing, the rule in words, and both values.

The messages are built only when an assertion fails (an ``assert``
statement's message is evaluated lazily), so they may be as long as helps.
"""

from __future__ import annotations

__all__ = ["differs", "missing"]


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
