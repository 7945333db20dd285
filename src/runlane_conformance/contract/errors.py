"""The one exception family of the storage contract.

Core decides what to do after a storage failure by the *type* of the error:
a conflict means "replay the attempt", a limit error means "split the work and
try again", a usage error means "core (or the driver) broke a rule and must be
fixed", corruption means "durable state or returned data cannot be trusted",
unavailable means "nothing was committed, try the transaction again later"
and commit-unknown means "find out what happened before doing it again".
Messages are for humans only; nothing in this package ever inspects them.

Each class also derives from the closest built-in exception so that generic
callers (``except ValueError``) keep working.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "RunlaneError",
    "StorageAttemptEndedError",
    "StorageCommitUnknownError",
    "StorageConcurrentUseError",
    "StorageConflictError",
    "StorageCorruptionError",
    "StorageCursorError",
    "StorageDuplicateMutationError",
    "StorageError",
    "StorageKeyChangeError",
    "StorageLimitError",
    "StorageLimitName",
    "StorageProfileError",
    "StorageSealedError",
    "StorageStreamExhaustedError",
    "StorageUnavailableError",
    "StorageUnsupportedError",
    "StorageUsageError",
    "StorageValidationError",
    "create_storage_limit_error",
]


class RunlaneError(Exception):
    """Base of every error this toolkit raises, contract and tooling alike."""


class StorageError(RunlaneError):
    """Base of every error the storage contract defines."""


class StorageConflictError(StorageError):
    """A read dependency changed before commit, or a conditional write lost a race.

    Nothing of the attempt was committed. A driver replays the callback after
    this error until its attempt budget runs out, then raises it to the caller.
    """


class StorageUnavailableError(StorageError, ConnectionError):
    """The store could not be reached or the connection broke, and nothing of the transaction committed.

    A driver raises this only when it knows no attempt of the call committed:
    the failure came before the commit request was sent, or the driver
    established afterwards (for example by a commit marker) that the commit
    did not happen. Retrying the whole transaction later is therefore safe.
    It is also a ``ConnectionError``, so generic network retry code treats it
    as the transient failure it is.
    """


class StorageCommitUnknownError(StorageError):
    """The commit request may or may not have taken effect, and the driver could not find out which.

    Raised when the connection failed after the commit was sent and the
    driver could not resolve the outcome (the store stayed unreachable, or
    it keeps no marker to read back). The transaction committed at most
    once: the driver never replays a callback after an attempt that may have
    committed. The caller must reconcile (read what it meant to write)
    before retrying. Deliberately *not* a ``ConnectionError``: a generic
    "retry on connection errors" loop must not redo work that may be done.
    """


class StorageLimitName(StrEnum):
    """The advertised limits a transaction can exceed."""

    POINT_READS = "max_point_reads"
    QUERY_RESULTS = "max_query_results"
    RECORD_BYTES = "max_record_bytes"
    TRANSACTION_RECORDS = "max_transaction_records"
    TRANSACTION_BYTES = "max_transaction_bytes"


class StorageLimitError(StorageError, ValueError):
    """Atomic work is larger than an advertised limit; nothing was committed.

    Core reacts by splitting a combined batch into smaller transactions, which
    is only safe because the driver never commits part of an oversized one.
    """

    def __init__(self, limit: StorageLimitName, maximum: int, actual: int) -> None:
        super().__init__(f"{limit.value} exceeded: {actual} > {maximum}")
        self.limit = limit
        self.maximum = maximum
        self.actual = actual


def create_storage_limit_error(limit: StorageLimitName, maximum: int, actual: int) -> StorageLimitError:
    """Build the error a driver must raise when work exceeds an advertised limit."""
    return StorageLimitError(limit, maximum, actual)


class StorageValidationError(StorageError, ValueError):
    """Caller input is not a valid contract value (bad JSON, bad envelope, bad key...)."""


class StorageCorruptionError(StorageError):
    """A document, its key and its index entries disagree, or stored data is malformed.

    Raised when input that claims to be a record is inconsistent with its table
    definition, and when a driver returns data that is not a valid contract value.
    """


class StorageCursorError(StorageError, ValueError):
    """A cursor is garbled, tampered with, or used under a different query scope."""


class StorageProfileError(StorageError, ValueError):
    """A driver profile or its limits contradict each other."""


class StorageStreamExhaustedError(StorageError):
    """An append stream head cannot allocate positions inside the unsigned 64-bit range."""


class StorageUnsupportedError(StorageError, NotImplementedError):
    """An optional capability was requested from a driver that does not offer it."""


class StorageUsageError(StorageError, RuntimeError):
    """The transaction protocol was used in a way the contract forbids."""


class StorageSealedError(StorageUsageError):
    """A read was attempted after ``now()`` or after the first mutation sealed the read set."""


class StorageDuplicateMutationError(StorageUsageError):
    """A key was mutated twice in one attempt, or created after being read as present."""


class StorageKeyChangeError(StorageUsageError):
    """A replacement tried to change the key, or replace/delete got a record this attempt never read."""


class StorageAttemptEndedError(StorageUsageError):
    """A transaction object was used after its attempt committed or rolled back."""


class StorageConcurrentUseError(StorageUsageError):
    """One attempt was used from two threads at the same time (overlapping operations)."""
