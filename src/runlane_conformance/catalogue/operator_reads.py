"""operator_reads: The optional read model shows exactly what is committed, no more and no later.

The requirements of the ``operator_reads`` area, one ``Requirement`` value each. A check in
``suites/test_operator_reads.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "CURSOR_SCOPE",
    "DEFENSIVE_COPIES",
    "HISTORY_ORDER",
    "LISTED_ONCE",
    "PAGE_LIMIT",
    "TOMBSTONE_HIDES",
    "VISIBLE_AT_ONCE",
]

CLAUSE = "Keep operator reads separate"
CAPABILITY = "operator_reads"

VISIBLE_AT_ONCE = requirement(
    "operator_reads.committed-run-visible-at-once",
    RequirementLevel.MUST,
    CLAUSE,
    "Right after a commit, another instance's operator reads show the run with exactly the committed "
    "summary (the same document a point read returns) and its committed history; a run is found only "
    "in its own environment.",
    capability=CAPABILITY,
)
LISTED_ONCE = requirement(
    "operator_reads.list-shows-each-visible-run-once",
    RequirementLevel.MUST,
    CLAUSE,
    "Paging through list_runs with its cursors yields every visible run of the environment exactly once, "
    "each page within its limit, and nothing from other environments.",
    capability=CAPABILITY,
)
HISTORY_ORDER = requirement(
    "operator_reads.history-in-sequence-order",
    RequirementLevel.MUST,
    CLAUSE,
    "list_run_events returns exactly the run's own events (never those of the same run id in another "
    "environment), in ascending sequence order across pages, whatever order they were committed in.",
    capability=CAPABILITY,
)
TOMBSTONE_HIDES = requirement(
    "operator_reads.tombstone-hides-run-and-history",
    RequirementLevel.MUST,
    CLAUSE,
    "The commit that tombstones a run removes it and its whole history from every operator read at once; "
    "no read shows a partial history, before or after.",
    capability=CAPABILITY,
)
CURSOR_SCOPE = requirement(
    "operator_reads.cursor-bound-to-filters",
    RequirementLevel.MUST,
    CLAUSE,
    "A list cursor only continues the listing it came from: used with another environment, run or list "
    "it is refused, or at most ignored, and never skips or leaks rows.",
    capability=CAPABILITY,
)
DEFENSIVE_COPIES = requirement(
    "operator_reads.returns-defensive-copies",
    RequirementLevel.MUST,
    CLAUSE,
    "Changing a returned run, summary, event, nested value or page changes nothing the driver returns later.",
    capability=CAPABILITY,
)
PAGE_LIMIT = requirement(
    "operator_reads.page-limit-bounded",
    RequirementLevel.MUST,
    "Keep operator reads separate (a joined read remains bounded); Report a profile that is true (limits)",
    "An operator list page never holds more than its limit nor more than max_query_results: a limit past "
    "max_query_results is refused with StorageLimitError(max_query_results) or served in pages within it.",
    capability=CAPABILITY,
)
