"""cursors: Index scans: order, ranges, ties, paging and cursors that only work where they were issued.

The requirements of the ``cursors`` area, one ``Requirement`` value each. A check in
``suites/test_cursors.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ASCENDING",
    "DESCENDING",
    "EVERY_INDEX",
    "EXCLUSIVE_PAGES",
    "GARBLED",
    "PAGES",
    "PARTITIONS",
    "RANGE_BOUNDS",
    "SCOPE",
    "TIES",
    "TUPLE_PREFIX",
]

CATALOG = "Use the closed index catalog; Verification checklist: order, range bounds, tie-breaking"
ENCODINGS = "Use the canonical encodings (tuple-prefix ranges)"
CURSORS = "Use the closed index catalog (cursor scope); Verification checklist: cursor-scope rejection"

ASCENDING = requirement(
    "cursors.ascending-order",
    RequirementLevel.MUST,
    CATALOG,
    "An ascending scan returns index entries ordered by encoded sort value, then by encoded record key.",
)
DESCENDING = requirement(
    "cursors.descending-order",
    RequirementLevel.MUST,
    CATALOG,
    "A descending scan returns the exact reverse of the whole ascending order, across every page.",
)
RANGE_BOUNDS = requirement(
    "cursors.range-bounds",
    RequirementLevel.MUST,
    CATALOG,
    "Inclusive and exclusive lower and upper bounds and open ends select exactly the entries they describe.",
)
TUPLE_PREFIX = requirement(
    "cursors.tuple-prefix-range",
    RequirementLevel.MUST,
    ENCODINGS,
    "A range from a tuple prefix to its exclusive prefix upper bound returns exactly the entries whose "
    "sort tuple starts with that prefix.",
)
TIES = requirement(
    "cursors.ties-broken-by-key",
    RequirementLevel.MUST,
    CATALOG,
    "Entries with equal sort values come in encoded record key order (reversed when descending).",
)
PAGES = requirement(
    "cursors.pages-join-to-one-scan",
    RequirementLevel.MUST,
    CATALOG,
    "Following each page's cursor yields every entry of one unpaged scan exactly once, in the same order.",
)
SCOPE = requirement(
    "cursors.scope-bound",
    RequirementLevel.MUST,
    CURSORS,
    "A cursor reused with another index, partition, range or direction is refused with StorageCursorError.",
)
GARBLED = requirement(
    "cursors.garbled-cursor-rejected",
    RequirementLevel.MUST,
    CURSORS,
    "A garbled, truncated or altered cursor is refused with StorageCursorError, never read as a fresh start.",
)
PARTITIONS = requirement(
    "cursors.partitions-isolated",
    RequirementLevel.MUST,
    CATALOG,
    "A scan returns only entries of its own index and partition, even when partition names share a prefix.",
)
EVERY_INDEX = requirement(
    "cursors.every-catalog-index",
    RequirementLevel.MUST,
    "Use the closed index catalog",
    "Every index of StorageIndexName is served: a scan of each returns exactly the entries its records "
    "carry in that index and partition (no index forgotten, none answered from another index's plan).",
)
EXCLUSIVE_PAGES = requirement(
    "cursors.exclusive-pages-keep-contract-order",
    RequirementLevel.MUST,
    "Use the closed index catalog; Add optional exclusive candidates",
    "Exclusive query_candidates, with no rows held elsewhere, pages exactly like an advisory scan: the same "
    "order and ties in both directions, the same range bounds, and cursors that join the pages.",
    capability="exclusive_candidates",
)
