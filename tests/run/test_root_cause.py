"""A run's failures are read root cause first, each consequence under the failure it follows from."""

from __future__ import annotations

from runlane_conformance.catalogue import AREA_FOUNDATIONS, AREAS, Requirement, RequirementLevel
from runlane_conformance.run.model import RequirementOutcome, RequirementResult
from runlane_conformance.run.root_cause import area_depth, foundations_of, in_root_cause_order


def _failed(requirement_id: str) -> RequirementResult:
    rule = Requirement(requirement_id, RequirementLevel.MUST, "clause", "summary")
    return RequirementResult(rule, RequirementOutcome.FAILED, "failed", ())


def test_every_area_has_foundations_that_are_areas_and_form_no_cycle() -> None:
    assert set(AREA_FOUNDATIONS) == set(AREAS)
    for area, direct in AREA_FOUNDATIONS.items():
        assert set(direct) <= set(AREAS), area
        assert area not in foundations_of(area), f"{area} is built on itself"
        assert all(area_depth(below) < area_depth(area) for below in direct)


def test_a_stale_index_entry_leads_and_the_scans_it_spoils_follow_it() -> None:
    failed = [
        _failed("profile.durable-survives-reconnect"),
        _failed("pruning.tombstone-hides-in-one-commit"),
        _failed("mutations.replace-moves-index-entries"),
        _failed("wait_tokens.index-mappings-exact"),
    ]
    ordered = in_root_cause_order(failed)
    assert ordered[0].requirement.id == "mutations.replace-moves-index-entries"
    assert ordered[0].consequence_of is None
    assert [item.consequence_of for item in ordered[1:]] == [ordered[0].requirement] * 3
    assert len(ordered) == len(failed)


def test_failures_in_unrelated_areas_are_each_a_root() -> None:
    failed = [_failed("json_boundary.rejects-non-finite"), _failed("point_reads.exact-positions")]
    ordered = in_root_cause_order(failed)
    assert all(item.consequence_of is None for item in ordered)
    assert [item.requirement.id for item in ordered] == [
        "point_reads.exact-positions",
        "json_boundary.rejects-non-finite",
    ]


def test_two_failures_of_one_area_are_both_roots() -> None:
    failed = [_failed("mutations.a"), _failed("mutations.b")]
    assert all(item.consequence_of is None for item in in_root_cause_order(failed))
