"""exclusive_selection: Exclusive candidates: a row handed to one open attempt is handed to no other until
that attempt ends.

The requirements of the ``exclusive_selection`` area, one ``Requirement`` value each. A check in
``suites/test_exclusive_selection.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ADVISORY",
    "DISJOINT",
    "DISJOINT_PROCESSES",
    "FULL_PAGE",
    "NO_LOOKAHEAD",
    "RELEASED_AT_COMMIT",
    "RELEASED_AT_ROLLBACK",
    "RELEASED_PROCESSES",
    "SAME_SCAN",
]

CLAUSE = "Add optional exclusive candidates"
CAPABILITY = "exclusive_candidates"

DISJOINT = requirement(
    "exclusive_selection.disjoint-across-instances",
    RequirementLevel.MUST,
    CLAUSE,
    "Two open attempts on independent instances never both receive the same row from exclusive selection, "
    "however far the first has gone (point reads, now(), staged writes) before it ends.",
    capability=CAPABILITY,
)
RELEASED_AT_COMMIT = requirement(
    "exclusive_selection.released-at-commit",
    RequirementLevel.MUST,
    CLAUSE,
    "Rows held by an attempt are released when it commits, so a later exclusive selection gets them.",
    capability=CAPABILITY,
)
RELEASED_AT_ROLLBACK = requirement(
    "exclusive_selection.released-at-rollback",
    RequirementLevel.MUST,
    CLAUSE,
    "Rows held by an attempt are released when it rolls back (the callback raised or the attempt is "
    "replayed), so a later selection gets them.",
    capability=CAPABILITY,
)
ADVISORY = requirement(
    "exclusive_selection.advisory-never-holds",
    RequirementLevel.MUST,
    CLAUSE,
    "Advisory selection (the default mode) and driver.query neither hold rows nor skip rows others hold.",
    capability=CAPABILITY,
)
FULL_PAGE = requirement(
    "exclusive_selection.full-page-continues",
    RequirementLevel.MUST,
    CLAUSE,
    "A full exclusive page with more rows after it returns a cursor; following it selects the next rows, "
    "and a cursor after the last row leads to an empty page.",
    capability=CAPABILITY,
)
NO_LOOKAHEAD = requirement(
    "exclusive_selection.no-lookahead-hold",
    RequirementLevel.MUST,
    CLAUSE,
    "Only returned rows are held: after a page of k from k+1 free rows, another attempt gets row k+1.",
    capability=CAPABILITY,
)
SAME_SCAN = requirement(
    "exclusive_selection.scans-like-advisory",
    RequirementLevel.MUST,
    f"{CLAUSE}; Use the closed index catalog",
    "On rows nobody else holds, exclusive selection returns what advisory selection returns: the same "
    "partition, range bounds, direction, tie order and pages through its cursors; it refuses a cursor used "
    "under another scope, and an attempt is never kept from rows it holds itself.",
    capability=CAPABILITY,
)
DISJOINT_PROCESSES = requirement(
    "exclusive_selection.disjoint-across-processes",
    RequirementLevel.MUST,
    CLAUSE,
    "Attempts open at the same time in different processes never both receive the same row from exclusive "
    "selection.",
    capability="cross_process+exclusive_candidates",
)
RELEASED_PROCESSES = requirement(
    "exclusive_selection.released-across-processes",
    RequirementLevel.MUST,
    CLAUSE,
    "Rows an attempt in one process held are free for exclusive selection in every other process as soon "
    "as that attempt committed or rolled back.",
    capability="cross_process+exclusive_candidates",
)
