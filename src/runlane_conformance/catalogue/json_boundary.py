"""json_boundary: The JSON boundary at the driver: plain mappings handed to create/replace are parsed, never
trusted.

The requirements of the ``json_boundary`` area, one ``Requirement`` value each. A check in
``suites/test_json_boundary.py`` is decorated with the value it checks, and a mutant in
``tests/mutants`` names the value it must fail, so finding the usages of a value finds both
(docs/maintainers.md).
"""

from __future__ import annotations

from ._model import RequirementLevel, requirement

__all__ = ["CYCLES", "MISMATCH", "NON_FINITE", "NUMBERS", "SCHEMA_VERSION", "VALID_MAPPING"]

CLAUSE = "Keep logical records in core"

VALID_MAPPING = requirement(
    "json_boundary.valid-mapping-accepted",
    RequirementLevel.MUST,
    CLAUSE,
    "A well-formed plain mapping given to create() or replace() commits exactly like the built record.",
)
NON_FINITE = requirement(
    "json_boundary.non-finite-numbers-refused",
    RequirementLevel.MUST,
    CLAUSE,
    "NaN, Infinity and -Infinity anywhere in a document are refused at the driver boundary; nothing commits.",
)
CYCLES = requirement(
    "json_boundary.reference-cycles-refused",
    RequirementLevel.MUST,
    CLAUSE,
    "A document containing a reference cycle is refused at the driver boundary; nothing commits.",
)
SCHEMA_VERSION = requirement(
    "json_boundary.schema-version-one-only",
    RequirementLevel.MUST,
    CLAUSE,
    "Only the envelope {schemaVersion: 1, value: {...}} is accepted; any other version or envelope shape "
    "is refused and nothing commits.",
)
MISMATCH = requirement(
    "json_boundary.key-document-index-mismatch-refused",
    RequirementLevel.MUST,
    CLAUSE,
    "A write whose key or index entries disagree with its document is refused as invalid or corrupt; "
    "nothing commits.",
)
NUMBERS = requirement(
    "json_boundary.numbers-kept-exactly",
    RequirementLevel.MUST,
    CLAUSE,
    "Every number the codecs accept reads back as the same JSON number: integers of any size exactly, "
    "floats bit for bit (an integral float stays a float, -0.0 keeps its sign), whatever spelling the "
    "written JSON text used.",
)
