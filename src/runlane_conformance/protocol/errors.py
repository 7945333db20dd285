"""Error kinds on the wire, and the failures of the protocol itself.

A backend reports a failed request with an error *kind*: a short name that
stands for one of the contract's exception types. ``ERROR_KINDS`` is the one
table both directions use, so a ``StorageConflictError`` raised by a driver in
another process reaches the suites as a ``StorageConflictError`` again, and
core-style callers keep acting on the type alone. Adding a new contract
error type to the protocol is one line in that table; an exception whose own
type is not listed travels as the kind of its nearest listed base class.

The ``BackendError`` family is different: it says the *backend* broke the
protocol (malformed or out-of-order messages, silence past a deadline, an
early exit). Those are never contract errors, so no suite can mistake a
broken backend for a driver that refused something correctly.
"""

from __future__ import annotations

import builtins
import threading
import types
from collections.abc import Mapping

from ..contract.errors import (
    RunlaneError,
    StorageAttemptEndedError,
    StorageCommitUnknownError,
    StorageConcurrentUseError,
    StorageConflictError,
    StorageCorruptionError,
    StorageCursorError,
    StorageDuplicateMutationError,
    StorageError,
    StorageKeyChangeError,
    StorageLimitError,
    StorageLimitName,
    StorageProfileError,
    StorageSealedError,
    StorageStreamExhaustedError,
    StorageUnavailableError,
    StorageUnsupportedError,
    StorageUsageError,
    StorageValidationError,
    create_storage_limit_error,
)

__all__ = [
    "CALLBACK_FAILED",
    "ERROR_KINDS",
    "RAISED_ATTRIBUTE",
    "BackendDriverError",
    "BackendError",
    "BackendExitedError",
    "BackendProtocolError",
    "BackendTimeoutError",
    "error_from_wire",
    "error_kind_of",
    "error_to_wire",
    "exception_to_wire",
]

#: Every contract error type the protocol carries, by its wire name. One line per type.
ERROR_KINDS: Mapping[str, type[StorageError]] = types.MappingProxyType(
    {
        "conflict": StorageConflictError,
        "limit": StorageLimitError,
        "validation": StorageValidationError,
        "corruption": StorageCorruptionError,
        "cursor": StorageCursorError,
        "profile": StorageProfileError,
        "stream_exhausted": StorageStreamExhaustedError,
        "unsupported": StorageUnsupportedError,
        "usage": StorageUsageError,
        "sealed": StorageSealedError,
        "duplicate_mutation": StorageDuplicateMutationError,
        "key_change": StorageKeyChangeError,
        "attempt_ended": StorageAttemptEndedError,
        "concurrent_use": StorageConcurrentUseError,
        "unavailable": StorageUnavailableError,
        "commit_unknown": StorageCommitUnknownError,
    }
)

#: The kind of an attempt whose callback raised something that is not a contract error.
CALLBACK_FAILED = "callback_failed"
#: The kind a backend uses for anything its driver raised that is not a contract error.
INTERNAL = "internal"

_KIND_OF_TYPE = {error_type: kind for kind, error_type in ERROR_KINDS.items()}

#: The attribute the toolkit sets on an exception it made from a backend's error that carried
#: ``raised`` (the backend's id for the exception object its driver raised). When a callback lets
#: that exception out, the toolkit names the id again, and the backend raises its own object.
RAISED_ATTRIBUTE = "runlane_backend_raised"
#: How deep a described exception's chain (``__cause__``/``__context__``) goes on the wire.
_CHAIN_DEPTH = 8


class BackendError(RunlaneError):
    """A driver backend broke the protocol; the message is one line and ends with its stderr, if any."""


class BackendProtocolError(BackendError):
    """The backend sent something the protocol does not allow (bad JSON, wrong id, unknown kind...)."""


class BackendTimeoutError(BackendError, TimeoutError):
    """The backend did not answer (or make progress on a transaction) within the exchange timeout."""


class BackendExitedError(BackendError):
    """The backend process ended, or closed its stdout, while the toolkit still needed it."""


class BackendDriverError(BackendError):
    """The backend's driver failed with something that is not a contract error (kind ``internal``).

    Deliberately not a ``StorageError``: a check that expects a contract
    error must not accept a crash in its place.
    """


def error_kind_of(error: BaseException) -> str | None:
    """The wire kind of ``error``: its own type's or its nearest listed base's; ``None`` if none."""
    for klass in type(error).__mro__:
        kind = _KIND_OF_TYPE.get(klass)
        if kind is not None:
            return kind
    return None


def error_to_wire(error: BaseException) -> dict[str, object]:
    """The ``error`` member of a reply for ``error``; contract errors keep their kind (and limit details).

    Anything else is ``internal``, with an ``exception`` member naming its class and nearest
    built-in base (see ``error_from_wire``).
    """
    kind = error_kind_of(error)
    if kind is None:
        return {
            "kind": INTERNAL,
            "message": f"{type(error).__name__}: {error}",
            "exception": _describe(error, 1, set()),
        }
    wire: dict[str, object] = {"kind": kind, "message": str(error)}
    if isinstance(error, StorageLimitError):
        wire.update(limit=error.limit.value, maximum=error.maximum, actual=error.actual)
    return wire


def _plain_args(error: BaseException) -> list[object] | None:
    """``error.args`` when every one is a JSON scalar (so it can be rebuilt as it was), else ``None``."""
    args = list(error.args)
    if all(arg is None or type(arg) in (str, int, float, bool) for arg in args):
        return args
    return None


def _describe(error: BaseException, depth: int, seen: set[int]) -> dict[str, object]:
    seen.add(id(error))
    klass = type(error)
    base = next(k for k in klass.__mro__ if k.__module__ == "builtins")
    described: dict[str, object] = {
        "type": klass.__qualname__,
        "module": klass.__module__,
        "base": base.__name__,
        "message": str(error),
    }
    args = _plain_args(error)
    if args is not None:
        described["args"] = args
    kind = error_kind_of(error)
    if kind is not None:
        described.update({key: value for key, value in error_to_wire(error).items() if key != "message"})
    raised = getattr(error, RAISED_ATTRIBUTE, None)
    if isinstance(raised, str):
        described["raised"] = raised
    if depth > 1:
        cause, context = error.__cause__, error.__context__
        links = [("cause", cause)]
        if context is not None and context is cause:
            described["context_is_cause"] = True  # ``raise ... from error`` inside ``except error``
        else:
            links.append(("context", context))
        for name, linked in links:
            if linked is not None and id(linked) not in seen:  # ``seen``: the path down, against cycles
                described[name] = _describe(linked, depth - 1, seen)
    seen.discard(id(error))
    if error.__suppress_context__:
        described["suppress_context"] = True
    return described


def exception_to_wire(error: BaseException) -> dict[str, object]:
    """The ``error`` member for an exception the toolkit's side raised (a callback, a clock, a fault hook).

    It is ``error_to_wire``'s answer (the contract kind, or ``callback_failed``) plus
    ``exception``: the type's name, module and nearest built-in base, its message and
    arguments, the backend's id when the exception is one the backend's driver raised
    (``raised``), and its ``cause``/``context`` chain described the same way. A backend uses it
    to raise, inside the driver's code, an exception that the driver's ``except`` clauses treat
    exactly as they would treat the original in process (``KeyboardInterrupt`` stays a
    ``BaseException``, a ``ConnectionError`` its driver raised comes back as that very object).
    Backends that do not know the member ignore it.
    """
    kind = error_kind_of(error)
    wire: dict[str, object] = error_to_wire(error) if kind is not None else {"kind": CALLBACK_FAILED}
    wire["message"] = str(error) if kind is not None else f"{type(error).__name__}: {error}"
    wire["exception"] = _describe(error, _CHAIN_DEPTH, set())
    return wire


def error_from_wire(wire: Mapping[str, object], *, context: str) -> Exception:
    """The exception a reply's ``error`` member stands for.

    A contract kind gives an instance of its contract type; ``internal``
    gives ``BackendDriverError``; an unknown kind or a limit error without
    valid details gives ``BackendProtocolError``. ``context`` names the
    request in messages. A ``raised`` member (the backend's id for the
    exception object its driver raised) is kept on the result as
    ``RAISED_ATTRIBUTE``, so ``exception_to_wire`` can name that object
    again if a callback lets the exception through.
    """
    error = _error_from_wire(wire, context)
    raised = wire.get("raised")
    if isinstance(raised, str) and not isinstance(error, BackendProtocolError):
        setattr(error, RAISED_ATTRIBUTE, raised)
    return error


_DRIVER_ERROR_CLASSES: dict[tuple[str, type[Exception]], type[BackendDriverError]] = {}
_DRIVER_ERROR_CLASSES_LOCK = threading.Lock()


def _driver_error_class(described: Mapping[object, object]) -> type[BackendDriverError]:
    """A ``BackendDriverError`` that also has the driver's exception's nearest built-in base.

    So the checks' own ``except`` clauses (``except ConnectionError``, ``except LookupError``)
    treat a driver's non-contract exception as they would in process, while it stays a
    ``BackendDriverError``: a crash of the judged driver, never one of the toolkit's own types.
    Only ``Exception`` families qualify, and ``AssertionError`` does not (it is how a check
    fails): the backend's word must not stop a run or pass for the judge's verdict.
    """
    name, base_name = described.get("type"), described.get("base")
    base = getattr(builtins, base_name, None) if isinstance(base_name, str) else None
    if (
        not isinstance(base, type)
        or not issubclass(base, Exception)
        or issubclass(base, AssertionError)
        or base is Exception
    ):
        return BackendDriverError
    shown = (
        name.rpartition(".")[2] if isinstance(name, str) and name.rpartition(".")[2].isidentifier() else ""
    )
    key = (shown[:100] or base.__name__, base)
    with _DRIVER_ERROR_CLASSES_LOCK:
        klass = _DRIVER_ERROR_CLASSES.get(key)
        if klass is None:
            try:
                klass = type(key[0], (BackendDriverError, base), {"__module__": __name__})
            except TypeError:  # bases whose layouts cannot be combined
                klass = BackendDriverError
            _DRIVER_ERROR_CLASSES[key] = klass
    return klass


def _error_from_wire(wire: Mapping[str, object], context: str) -> Exception:
    kind = wire.get("kind")
    message = wire.get("message", "")
    if not isinstance(message, str):
        message = repr(message)
    if kind == INTERNAL:
        text = f"the backend's driver failed during {context}: {message}"
        described = wire.get("exception")
        klass = _driver_error_class(described) if isinstance(described, Mapping) else BackendDriverError
        try:
            return klass(text)
        except Exception:  # a built-in base with a constructor of its own
            return BackendDriverError(text)
    error_type = ERROR_KINDS.get(kind) if isinstance(kind, str) else None
    if error_type is None:
        known = ", ".join((*ERROR_KINDS, INTERNAL))
        return BackendProtocolError(
            f"the backend answered {context} with error kind {kind!r}, which the contract does not know "
            f"(known kinds: {known})"
        )
    if error_type is StorageLimitError:
        limit, maximum, actual = wire.get("limit"), wire.get("maximum"), wire.get("actual")
        names = {item.value for item in StorageLimitName}
        if limit not in names or type(maximum) is not int or type(actual) is not int:
            return BackendProtocolError(
                f"the backend answered {context} with a limit error without a valid limit, maximum and actual"
            )
        return create_storage_limit_error(StorageLimitName(limit), maximum, actual)
    return error_type(message)
