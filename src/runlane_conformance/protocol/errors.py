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
    "BackendDriverError",
    "BackendError",
    "BackendExitedError",
    "BackendProtocolError",
    "BackendTimeoutError",
    "error_from_wire",
    "error_kind_of",
    "error_to_wire",
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
    """The ``error`` member of a reply for ``error``; contract errors keep their kind (and limit details)."""
    kind = error_kind_of(error)
    if kind is None:
        return {"kind": INTERNAL, "message": f"{type(error).__name__}: {error}"}
    wire: dict[str, object] = {"kind": kind, "message": str(error)}
    if isinstance(error, StorageLimitError):
        wire.update(limit=error.limit.value, maximum=error.maximum, actual=error.actual)
    return wire


def error_from_wire(wire: Mapping[str, object], *, context: str) -> Exception:
    """The exception a reply's ``error`` member stands for.

    A contract kind gives an instance of its contract type; ``internal``
    gives ``BackendDriverError``; an unknown kind or a limit error without
    valid details gives ``BackendProtocolError``. ``context`` names the
    request in messages.
    """
    kind = wire.get("kind")
    message = wire.get("message", "")
    if not isinstance(message, str):
        message = repr(message)
    if kind == INTERNAL:
        return BackendDriverError(f"the backend's driver failed during {context}: {message}")
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
