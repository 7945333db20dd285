"""limits: Every advertised limit holds exactly at its value and refuses one unit past it, atomically.

The requirements of the ``limits`` area, one ``Requirement`` value each. A check in
``suites/test_limits.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = [
    "ALL_OR_NOTHING",
    "POINT_READS",
    "QUERY_RESULTS",
    "RECORD_BYTES",
    "TRANSACTION_BYTES",
    "TRANSACTION_RECORDS",
]

CLAUSE = "Report a profile that is true (limits); Add optional ordered append (oversized atomic work)"

POINT_READS = requirement(
    "limits.point-reads-boundary",
    RequirementLevel.MUST,
    CLAUSE,
    "An attempt may point-read exactly max_point_reads key positions (duplicates count); one more is "
    "refused with StorageLimitError(max_point_reads).",
)
QUERY_RESULTS = requirement(
    "limits.query-results-boundary",
    RequirementLevel.MUST,
    CLAUSE,
    "A query page of exactly max_query_results is served in full; a larger page limit is refused with "
    "StorageLimitError(max_query_results), in and outside transactions.",
)
RECORD_BYTES = requirement(
    "limits.record-bytes-boundary",
    RequirementLevel.MUST,
    CLAUSE,
    "A document of exactly max_record_bytes commits; one byte more is refused with "
    "StorageLimitError(max_record_bytes) and nothing commits.",
)
TRANSACTION_RECORDS = requirement(
    "limits.transaction-records-boundary",
    RequirementLevel.MUST,
    CLAUSE,
    "An attempt touching exactly max_transaction_records distinct keys commits; one more key is refused "
    "with StorageLimitError(max_transaction_records) and nothing commits.",
)
TRANSACTION_BYTES = requirement(
    "limits.transaction-bytes-boundary",
    RequirementLevel.MUST,
    CLAUSE,
    "An attempt writing exactly max_transaction_bytes commits; one byte more is refused with "
    "StorageLimitError(max_transaction_bytes) and nothing commits.",
)
ALL_OR_NOTHING = requirement(
    "limits.oversized-work-never-split",
    RequirementLevel.MUST,
    CLAUSE,
    "A transaction refused for size commits none of its writes, not even those staged before the limit "
    "was crossed, and the store stays usable afterwards.",
)
