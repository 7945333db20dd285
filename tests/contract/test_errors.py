"""The error family: callers act on the type, so every class must sit where core expects it."""

from __future__ import annotations

import inspect

import pytest

import runlane_conformance
from runlane_conformance.contract import errors
from runlane_conformance.contract.errors import (
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
)

# Each class with the built-in a generic caller may already catch it as (Exception where none fits),
# and the contract base it must (and must not) derive from.
INTENDED: dict[type[Exception], type[Exception]] = {
    StorageError: Exception,
    StorageConflictError: Exception,
    StorageCorruptionError: Exception,
    StorageStreamExhaustedError: Exception,
    StorageCommitUnknownError: Exception,
    StorageUnavailableError: ConnectionError,
    StorageLimitError: ValueError,
    StorageValidationError: ValueError,
    StorageCursorError: ValueError,
    StorageProfileError: ValueError,
    StorageUnsupportedError: NotImplementedError,
    StorageUsageError: RuntimeError,
    StorageSealedError: RuntimeError,
    StorageDuplicateMutationError: RuntimeError,
    StorageKeyChangeError: RuntimeError,
    StorageAttemptEndedError: RuntimeError,
    StorageConcurrentUseError: RuntimeError,
}
USAGE_ERRORS = [
    StorageSealedError,
    StorageDuplicateMutationError,
    StorageKeyChangeError,
    StorageAttemptEndedError,
    StorageConcurrentUseError,
]


def storage_error_classes() -> set[type[Exception]]:
    return {
        value for value in vars(errors).values() if inspect.isclass(value) and issubclass(value, StorageError)
    }


def test_every_storage_error_class_has_an_intended_place_in_this_table() -> None:
    # A new error class must be added to INTENDED deliberately, with its built-in.
    assert storage_error_classes() == set(INTENDED)


@pytest.mark.parametrize("cls", INTENDED, ids=lambda cls: cls.__name__)
def test_every_error_derives_from_storage_error_runlane_error_and_its_builtin(cls: type[Exception]) -> None:
    assert issubclass(cls, StorageError)
    assert issubclass(cls, RunlaneError)
    assert issubclass(cls, INTENDED[cls])


@pytest.mark.parametrize("cls", USAGE_ERRORS, ids=lambda cls: cls.__name__)
def test_protocol_misuse_errors_are_usage_errors(cls: type[Exception]) -> None:
    assert issubclass(cls, StorageUsageError)


@pytest.mark.parametrize(
    "cls",
    [StorageConflictError, StorageCorruptionError, StorageStreamExhaustedError, StorageCommitUnknownError],
    ids=lambda cls: cls.__name__,
)
def test_conflicts_and_corruption_are_not_mistaken_for_bad_input(cls: type[Exception]) -> None:
    # ``except ValueError`` around input validation must never swallow a retry signal or damaged storage.
    assert not issubclass(cls, (ValueError, RuntimeError))


def test_core_reactions_are_distinguishable_by_type_alone() -> None:
    reactions = [
        StorageConflictError,
        StorageLimitError,
        StorageUsageError,
        StorageCursorError,
        StorageCorruptionError,
        StorageUnsupportedError,
        StorageUnavailableError,
        StorageCommitUnknownError,
    ]
    for cls in reactions:
        for other in reactions:
            if cls is not other:
                assert not issubclass(cls, other), (cls, other)


def test_an_unknown_commit_is_never_caught_as_a_retryable_connection_failure() -> None:
    # Generic "retry on ConnectionError" code may redo work whose commit is unknown only by mistake.
    assert issubclass(StorageUnavailableError, ConnectionError)
    assert not issubclass(StorageCommitUnknownError, (ConnectionError, OSError))
    assert not issubclass(StorageCommitUnknownError, StorageUnavailableError)
    assert not issubclass(StorageUnavailableError, StorageCommitUnknownError)


def test_a_limit_error_can_be_raised_and_caught_by_type() -> None:
    with pytest.raises(StorageError) as caught:
        raise runlane_conformance.create_storage_limit_error(StorageLimitName.POINT_READS, 100, 101)
    assert type(caught.value) is StorageLimitError
    assert caught.value.limit is StorageLimitName.POINT_READS


def test_every_error_class_is_exported_from_the_facade() -> None:
    for cls in (RunlaneError, *INTENDED):
        assert getattr(runlane_conformance, cls.__name__) is cls


def test_every_exception_the_facade_exports_refines_one_intended_reaction() -> None:
    # Errors defined elsewhere (tables, streams, tooling) must still be caught by the right family.
    exported = [
        value
        for name in runlane_conformance.__all__
        if inspect.isclass(value := getattr(runlane_conformance, name)) and issubclass(value, BaseException)
    ]
    assert exported
    for cls in exported:
        assert issubclass(cls, RunlaneError), cls
        if issubclass(cls, StorageError) and cls not in INTENDED:
            assert any(issubclass(cls, base) for base in INTENDED if base is not StorageError), cls
