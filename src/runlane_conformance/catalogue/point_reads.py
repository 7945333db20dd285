"""point_reads: ``get`` answers every requested position, and what it returns is the caller's own.

The requirements of the ``point_reads`` area, one ``Requirement`` value each. A check in
``suites/test_point_reads.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ABSENT_IS_NONE",
    "COPIES_IN",
    "COPIES_OUT",
    "INPUT_READ_AT_CALL",
    "KEY_SHAPES",
    "POSITIONS",
    "RETURNED_CONTENT",
]

CLAUSE = "Treat each transaction callback as a new attempt; Verification checklist"

POSITIONS = requirement(
    "point_reads.exact-positions",
    RequirementLevel.MUST,
    CLAUSE,
    "get() returns exactly one result per requested key, in request order, duplicates and misses included.",
)
ABSENT_IS_NONE = requirement(
    "point_reads.absent-keys-read-as-none",
    RequirementLevel.MUST,
    CLAUSE,
    "A key that was never written, or was deleted, reads as None, not as an error or a stale record.",
)
RETURNED_CONTENT = requirement(
    "point_reads.returns-committed-content",
    RequirementLevel.MUST,
    CLAUSE,
    "A read returns the committed key, document and index entries exactly as written, with a version, "
    "for records of every table whatever times they carry (a record never expires by itself).",
)
COPIES_OUT = requirement(
    "point_reads.defensive-copies-out",
    RequirementLevel.MUST,
    "Keep logical records in core (JSON boundaries); Verification checklist: defensive copies",
    "Changing anything reachable from a returned record never changes what is stored.",
)
COPIES_IN = requirement(
    "point_reads.defensive-copies-in",
    RequirementLevel.MUST,
    "Keep logical records in core (JSON boundaries); Verification checklist: defensive copies",
    "Changing the caller's input after a write never changes what is stored.",
)
INPUT_READ_AT_CALL = requirement(
    "point_reads.input-read-at-call",
    RequirementLevel.MUST,
    "Keep logical records in core (JSON boundaries: mutable caller inputs are reparsed); "
    "Treat each transaction callback as a new attempt",
    "create() and replace() take what the caller's input says when they are called: changing or reusing "
    "that mapping (or anything nested in it) later in the same callback never changes what commits.",
)
KEY_SHAPES = requirement(
    "point_reads.keys-of-any-shape",
    RequirementLevel.MUST,
    "Use the canonical encodings",
    "Keys that differ only in case, accents, Unicode normalisation, trailing spaces, a NUL, an astral "
    "character or where a '/' falls between components are distinct records: each reads back its own.",
)
