"""The report document, typed: what ``report.builder`` produces and every renderer reads.

A report is a JSON document in one of two shapes (see ``report/schema.json``, the one schema both
must satisfy): ``ResultsReport``, for a run that reached a plan (``run`` or the ``report``
command), and ``UnfinishedReport``, for one that holds no results (running, broken, or
interrupted before a plan). The shapes are ``TypedDict`` s, so the document stays the plain JSON
value it is on disk (nothing to convert, and the bytes written are unchanged) while every reader is
type-checked against its fields. ``tests/report/test_model_matches_schema.py`` checks, field by
field, that these types and the schema file describe the same document.
"""

# No ``from __future__ import annotations``: on Python 3.11 a TypedDict only sees ``NotRequired``
# in an evaluated annotation, and ``__required_keys__`` must be right for the schema test.
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "AreaEntry",
    "Certification",
    "CheckEntry",
    "DriverEntry",
    "Environment",
    "FailureEntry",
    "LimitEntry",
    "Report",
    "RequirementEntry",
    "ResultsReport",
    "RunEntry",
    "UnfinishedReport",
]

#: How a requirement, a limit or a group of checks ended in a report.
Status: TypeAlias = Literal["passed", "failed", "gated", "not_run", "inconclusive"]


class Toolkit(TypedDict):
    name: str
    version: str
    suite_digest: str


class UnfinishedToolkit(TypedDict):
    name: str
    version: str


class Plugin(TypedDict):
    name: str
    version: str


class Environment(TypedDict):
    """What judged the driver (``run.model.RunEnvironment``)."""

    python: str
    pytest: str
    hypothesis: str
    plugins: list[Plugin]
    supervised: bool
    isolation: Literal["process", "none"]
    sandbox: NotRequired[str | None]


class Python(TypedDict):
    version: str
    implementation: str


class DriverEntry(TypedDict):
    """The driver as the user named it; secret-looking option values are ``***``."""

    spec: str
    target: str
    options: dict[str, str]
    distribution: str | None
    version: str | None


class UnfinishedDriver(TypedDict):
    spec: str
    options: dict[str, str]


class CheckCounts(TypedDict):
    required: int
    run: int
    passed: int
    failed: int
    gated: int
    not_run: int
    inconclusive: int


class ExpectedFailureEntry(TypedDict):
    id: str
    reason: str
    result: str


class RunEntry(TypedDict):
    """How the run was asked for and how it ended (``run.status``: a ``RunStatus`` with results)."""

    status: str
    seed: int
    hypothesis_profile: str
    areas: list[str]
    requirements: list[str]
    workers: int
    check_timeout_seconds: float
    started_at: str
    duration_seconds: float
    checks: CheckCounts
    problems: list[str]
    examples: NotRequired[str | None]
    expected_failures: NotRequired[list[ExpectedFailureEntry]]


class UnfinishedRun(TypedDict):
    """Who was being certified, and why there is nothing to show (``exit_code`` null while running)."""

    status: str
    seed: int
    hypothesis_profile: str
    areas: list[str]
    requirements: list[str]
    workers: int
    started_at: str
    exit_code: NotRequired[int | None]
    problems: list[str]


class Limits(TypedDict):
    max_point_reads: int
    max_query_results: int
    max_transaction_records: int
    max_record_bytes: int
    max_transaction_bytes: int


class Profile(TypedDict):
    """The profile the driver advertised to the preflight probe."""

    durability: str
    clock_authority: str
    index_consistency: str
    append: bool
    exclusive_candidates: bool
    limits: Limits
    offered: list[str]


class LimitEntry(TypedDict):
    """One limit as the checks measured it: accepted at N, refused at N + 1."""

    name: str
    advertised: int
    status: Status
    accepted_at: int | None
    rejected_at: int | None
    reason: NotRequired[str | None]
    requirements: list[str]


class CheckEntry(TypedDict):
    """One profile claim the report verifies, with the requirements that are its evidence."""

    name: str
    status: Status
    reason: NotRequired[str | None]
    requirements: list[str]


class CapabilityEntry(TypedDict):
    offered: bool
    status: Status


class Capabilities(TypedDict):
    append: CapabilityEntry
    exclusive_candidates: CapabilityEntry
    faults: CapabilityEntry


class OutcomeCounts(TypedDict):
    passed: int
    failed: int
    gated: int
    not_run: int
    inconclusive: int


class GateReason(TypedDict):
    reason: str
    count: int


class AreaEntry(TypedDict):
    area: str
    requirements: OutcomeCounts
    checks: OutcomeCounts
    duration_seconds: float
    gate_reasons: list[GateReason]


class Expectation(TypedDict):
    reason: str
    result: str


class Evidence(TypedDict):
    nodeid: str
    examples: int
    steps: int


class FailureEntry(TypedDict):
    """One failing (or unfinished) check of a requirement, with the lines that replay it."""

    nodeid: str
    message: str
    details: NotRequired[str]
    reproduce: str
    pytest: str
    hypothesis_blob: NotRequired[str | None]
    stack: NotRequired[str | None]
    driver_frame: NotRequired[str | None]
    #: A failed history check's findings as data (``report_witness.WITNESS_SCHEMA``).
    witness: NotRequired[dict[str, Any]]


class RequirementEntry(TypedDict):
    """One catalogued requirement's outcome across its checks."""

    id: str
    area: str
    level: Literal["MUST", "SHOULD"]
    clause: NotRequired[str]
    summary: NotRequired[str]
    capability: NotRequired[str | None]
    outcome: Status
    reason: str | None
    checks: int
    duration_seconds: float
    expected_failure: NotRequired[Expectation]
    evidence: NotRequired[list[Evidence]]
    failures: NotRequired[list[FailureEntry]]


class Certification(TypedDict):
    """The claim ``badge`` recomputes (``report.verify.check_claim``) before it vouches for it."""

    certified: bool
    level: str
    complete: bool
    must_failed: list[str]
    should_failed: list[str]
    inconclusive: list[str]


class UnfinishedCertification(TypedDict):
    """Fixed by the schema: an unfinished report never certifies."""

    certified: Literal[False]
    level: Literal["none"]
    complete: Literal[False]
    must_failed: list[str]
    should_failed: list[str]


class ResultsReport(TypedDict):
    """A run that reached a plan: every requirement's outcome and the certification it comes to."""

    report_version: int
    kind: Literal["certification", "capabilities"]
    generated_at: str
    toolkit: Toolkit
    environment: Environment
    python: Python
    platform: str
    driver: DriverEntry
    run: RunEntry
    profile: Profile
    limits: list[LimitEntry]
    checks: list[CheckEntry]
    capabilities: Capabilities
    areas: list[AreaEntry]
    requirements: list[RequirementEntry]
    certification: Certification


class UnfinishedReport(TypedDict):
    """A run with no results (running, broken, or interrupted before a plan): it never certifies."""

    report_version: int
    kind: Literal["certification"]
    generated_at: str
    toolkit: UnfinishedToolkit
    python: Python
    platform: str
    driver: UnfinishedDriver
    run: UnfinishedRun
    certification: UnfinishedCertification


#: Either shape, as read back from a file.
Report: TypeAlias = ResultsReport | UnfinishedReport
