"""mutations: Conditional create, exact replace and delete, one write per key, atomic index movement.

The requirements of the ``mutations`` area, one ``Requirement`` value each. A check in
``suites/test_mutations.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "CREATE_READ_ABSENT",
    "CREATE_READ_PRESENT",
    "CREATE_UNREAD",
    "EXACT_DELETE",
    "EXACT_REPLACE",
    "INDEX_MOVED",
    "INDEX_REMOVED",
    "NO_KEY_CHANGE",
    "NO_PARTIAL_BATCH",
    "ONE_PER_KEY",
    "ROLLBACK",
]

CLAUSE = "Treat each transaction callback as a new attempt"

CREATE_UNREAD = requirement(
    "mutations.create-unread-key",
    RequirementLevel.MUST,
    CLAUSE,
    "create() of a key the attempt never read commits while the key is absent, and never overwrites "
    "a record that exists at commit.",
)
CREATE_READ_ABSENT = requirement(
    "mutations.create-read-absent-key",
    RequirementLevel.MUST,
    CLAUSE,
    "create() of a key this attempt read as absent commits.",
)
CREATE_READ_PRESENT = requirement(
    "mutations.create-read-present-key-refused",
    RequirementLevel.MUST,
    CLAUSE,
    "create() of a key this attempt read as present is refused with StorageDuplicateMutationError.",
)
EXACT_REPLACE = requirement(
    "mutations.exact-replace",
    RequirementLevel.MUST,
    CLAUSE,
    "replace() commits for the record and version read in this attempt and is refused "
    "(StorageKeyChangeError) for any record this attempt did not read at that version.",
)
EXACT_DELETE = requirement(
    "mutations.exact-delete",
    RequirementLevel.MUST,
    CLAUSE,
    "delete() removes the record read in this attempt and is refused (StorageKeyChangeError) for any "
    "record this attempt did not read at that version.",
)
ONE_PER_KEY = requirement(
    "mutations.one-mutation-per-key",
    RequirementLevel.MUST,
    CLAUSE,
    "A second mutation of one key in one attempt is refused with StorageDuplicateMutationError.",
)
NO_KEY_CHANGE = requirement(
    "mutations.replace-keeps-key",
    RequirementLevel.MUST,
    CLAUSE,
    "A replacement whose record has another key is refused with StorageKeyChangeError.",
)
INDEX_MOVED = requirement(
    "mutations.replace-moves-index-entries",
    RequirementLevel.MUST,
    CLAUSE,
    "Replacing a record replaces all its index entries in the same commit: queries right after the "
    "commit show only the new entries.",
)
INDEX_REMOVED = requirement(
    "mutations.delete-removes-index-entries",
    RequirementLevel.MUST,
    CLAUSE,
    "Deleting a record removes all its index entries in the same commit.",
)
ROLLBACK = requirement(
    "mutations.callback-error-rolls-back",
    RequirementLevel.MUST,
    CLAUSE,
    "When the callback raises, the error propagates and none of the attempt's staged writes is visible.",
)
NO_PARTIAL_BATCH = requirement(
    "mutations.no-partial-batch",
    RequirementLevel.MUST,
    CLAUSE,
    "When one staged create loses its condition (another instance created the key before commit), none "
    "of the attempt's creates, replacements and deletes commit: the attempt is replayed or fails, and is "
    "never reported as done with only part of its writes applied.",
)
