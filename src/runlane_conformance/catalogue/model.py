"""model: Random transaction histories checked against a model: the driver must behave like a serial store.

The requirements of the ``model`` area, one ``Requirement`` value each. A check in
``suites/test_model.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = ["DIFFERENTIAL_READS", "DIFFERENTIAL_SCANS", "SCAN_RELATIONS", "SERIALIZABLE"]


SERIALIZABLE = requirement(
    "model.serial-equivalent-histories",
    RequirementLevel.MUST,
    "Treat each transaction callback as a new attempt; Use the closed index catalog",
    "Random histories of reads, queries, creates, replaces, deletes, raising callbacks and competing "
    "commits leave every record, every index scan and every returned read equal to some serial order.",
)
DIFFERENTIAL_READS = requirement(
    "model.differential-reads",
    RequirementLevel.MUST,
    "Keep logical records in core; Treat each transaction callback as a new attempt",
    "Random programs over every table (creates, replaces, deletes, blind creates, raising callbacks, "
    "several instances, clock jumps of seconds to decades, steps run in another OS process where the "
    "store has an address) read and leave exactly what the one serial outcome does: every point read "
    "position by position, every error by kind, every key's content afterwards, and versions that follow "
    "the contract's rules; a commit reply lost or a connection broken while another instance commits ends "
    "in one of the serializable outcomes (never success unapplied, never applied twice, never in part).",
)
DIFFERENTIAL_SCANS = requirement(
    "model.differential-scans",
    RequirementLevel.MUST,
    "Use the closed index catalog",
    "Scans drawn at random inside random programs (any index of the catalogue, any partition, random "
    "range bounds, both directions, random page sizes, query, advisory and exclusive candidates, any "
    "instance) join their pages to exactly the entries the one serial outcome holds; two exclusive "
    "selections open together share no record, however far the clock jumps meanwhile.",
)
SCAN_RELATIONS = requirement(
    "model.scan-relations",
    RequirementLevel.MUST,
    "Use the closed index catalog; Add optional exclusive candidates",
    "Whatever legitimate choices a driver makes, its own answers agree with each other after random "
    "writes to every table: a range equals its two adjacent sub-ranges joined, descending is ascending "
    "reversed, an uncontended exclusive selection equals the advisory scan, and every instance reads the "
    "same scans, records and versions.",
)
