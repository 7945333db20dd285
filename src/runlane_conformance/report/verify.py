"""The verifier ``badge`` uses: a report's claim recomputed from its own content.

A badge vouches for a file anyone could have edited, so ``check_claim`` trusts nothing the report
says about itself: it recomputes the certification from the report's requirement outcomes with this
toolkit's catalogue and ``run.certification.certify`` (the function the run itself uses) and
refuses any mismatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .. import __version__
from ..contract.values import StorageLimits, StorageProfile
from ..fixtures.gating import ProfileFacts, gating_reason
from ..run.certification import Certification, certify
from ..run.outcomes import RequirementOutcome, RunStatus
from .model import Report, ResultsReport
from .schema import ReportError, is_unfinished

__all__ = ["check_claim", "verified_report"]


def _facts_from_report(document: Mapping[str, Any]) -> ProfileFacts:
    profile = document["profile"]
    offered = set(profile["offered"])
    return ProfileFacts(
        profile=StorageProfile(
            durability=profile["durability"],
            clock_authority=profile["clock_authority"],
            index_consistency=profile["index_consistency"],
            limits=StorageLimits(**profile["limits"]),
            exclusive_candidates=profile["exclusive_candidates"],
            append=profile["append"],
        ),
        operator_reads="operator_reads" in offered,
        cross_process="cross_process" in offered,
        faults="faults" in offered,
        cluster="cluster" in offered,
        cluster_partition="cluster_partition" in offered,
    )


def check_claim(document: Mapping[str, Any]) -> Certification:
    """Recompute a validated report's verdict from its own requirement outcomes; refuse a mismatch.

    The catalogue is this toolkit's, so a report naming another toolkit version
    is refused. A report must list every catalogued requirement once, each at
    its catalogued level; a gated requirement must be gated for exactly the
    reason its capability gets from the report's own profile; and the recomputed
    certification (by ``run.verdict.certify``, the function the run itself uses)
    must equal the one the report claims. Raises ``ReportError`` (one line) otherwise.
    """
    version = document["toolkit"]["version"]
    if version != __version__:
        raise ReportError(
            f"the report was made by runlane-conformance {version}; this is {__version__}, "
            "whose catalogue cannot vouch for it"
        )
    if document["kind"] != "certification":
        raise ReportError("the report is a capabilities report, not a certification run")
    status = document["run"]["status"]
    if status == RunStatus.RUNNING.value:
        raise ReportError(
            "the report is from a run that has not finished (still running, or its process was killed)"
        )
    if status == RunStatus.BROKEN.value:
        raise ReportError("the report is from a run that broke before reaching a verdict")
    if status != RunStatus.COMPLETE.value or is_unfinished(document):
        raise ReportError(f"the report is from a {status} run, which is never a certification")
    from ..run import certify as certify_run

    catalog = certify_run.SUITE_CATALOG()
    outcomes: dict[str, RequirementOutcome] = {}
    try:
        facts = _facts_from_report(document)
    except Exception as error:
        raise ReportError(f"the report's profile is not a valid profile: {error}") from None
    for entry in document["requirements"]:
        rid = entry["id"]
        if rid in outcomes:
            raise ReportError(f"the report lists requirement {rid} twice")
        requirement = catalog.get(rid)
        if requirement is None:
            raise ReportError(f"the report lists {rid}, which is not in the catalogue")
        if entry["level"] != requirement.level.value:
            raise ReportError(
                f"the report gives {rid} level {entry['level']}, the catalogue {requirement.level}"
            )
        outcome = RequirementOutcome(entry["outcome"])
        if outcome is RequirementOutcome.GATED:
            expected = (
                None if requirement.capability is None else gating_reason(requirement.capability, facts)
            )
            if expected is None or entry["reason"] != expected:
                raise ReportError(f"the report gates {rid}, which its own profile does not gate")
        outcomes[rid] = outcome
    missing = sorted(set(catalog) - set(outcomes))
    if missing:
        raise ReportError(f"the report lacks {len(missing)} catalogued requirement(s), e.g. {missing[0]}")
    recomputed = certify(
        outcomes,
        catalog,
        facts.offered(),
        status=RunStatus(status),
        problems=document["run"]["problems"],
    )
    claim = document["certification"]
    if (claim["certified"], claim["level"]) != (recomputed.certified, recomputed.level):
        raise ReportError(
            f"the report claims certified={claim['certified']} at level {claim['level']}, but its own "
            f"outcomes give certified={recomputed.certified} at level {recomputed.level}"
        )
    return recomputed


def verified_report(document: Report) -> ResultsReport:
    """``document``, once ``check_claim`` vouched for it (raises ``ReportError`` otherwise)."""
    check_claim(document)
    return cast(ResultsReport, document)  # check_claim refuses every report without results
