"""The blind batch's drivers that a check now refuses, in the kill table under the requirement that
refuses them.

``blind_batch.py`` holds 44 broken drivers written from the contract without reading the suites. This
module enrols each one some check refuses, named by the requirement that failed in a full quick
certification at seed 0 (the intended rule where that one failed, else the first that did), so a
change that lets one of them certify again fails CI by name. ``blind_batch.md`` records the rest.
Left out: ``descending_runs_by_status_ties_ascending`` (``model.scan-relations``) and
``absent_reads_untracked_queue_capacity`` (``model.differential-reads``), refused at some seeds but not
at every one of 0, 1, 2: the quick workload draws the crossing they need only sometimes.
"""

from __future__ import annotations

from runlane_conformance.catalogue import (
    append,
    conflicts,
    cursors,
    exclusive_selection,
    json_boundary,
    model,
    mutations,
    operator_reads,
    point_reads,
    pruning,
    wait_tokens,
)
from tests.mutants.blind_batch import BLIND_MUTANTS
from tests.mutants.catalog import Mutant

#: blind driver name -> the requirement that kills it.
KILLED_BY: dict[str, str] = {
    "ttl_leases_an_hour_after_expiry": model.DIFFERENTIAL_READS,
    "ttl_completion_markers_seven_days": model.DIFFERENTIAL_READS,
    "ttl_tombstones_a_day_after_prune_after": model.DIFFERENTIAL_READS,
    "ttl_idempotency_owners_a_day": model.DIFFERENTIAL_READS,
    "ttl_resolved_wait_tokens_thirty_days": wait_tokens.PRUNED,
    "ttl_events_retention_one_year": model.DIFFERENTIAL_READS,
    "instance_caches_finished_runs": model.SCAN_RELATIONS,
    "instance_caches_stream_head": append.MIXED,
    "page_two_range_not_a_dependency": conflicts.INDEX_PHANTOM,
    "page_two_exclusive_not_held": exclusive_selection.FULL_PAGE,
    "page_two_drops_far_bound": cursors.RANGE_BOUNDS,
    "page_two_descending_ties_flipped": cursors.PAGES,
    "descending_leases_upper_bound_inclusive": cursors.RANGE_BOUNDS,
    "index_tombstones_by_prune_after_ignores_range": cursors.RANGE_BOUNDS,
    "index_runs_by_parent_row_outlives_tombstone": pruning.HIDDEN,
    "table_outbox_delete_keeps_availability_row": mutations.INDEX_REMOVED,
    "key_wait_token_links_joined_with_slash": cursors.ASCENDING,
    "operator_events_prefix_like": operator_reads.HISTORY_ORDER,
    "json_astral_mangled": point_reads.RETURNED_CONTENT,
    "json_nul_stripped": point_reads.KEY_SHAPES,
    "json_empty_object_becomes_array": point_reads.RETURNED_CONTENT,
    "json_floats_fourteen_digits": json_boundary.NUMBERS,
    "json_deep_nesting_refused": model.DIFFERENTIAL_READS,
    "append_buffer_survives_replay": append.NOTHING_ON_ROLLBACK,
    "operator_events_page_two_ignores_tombstone": operator_reads.TOMBSTONE_HIDES,
    # Refused by the differential's per-table sweep and widened draws at seeds 0, 1 and 2 (issue 34).
    "clock_leases_past_2038_sort_first": model.DIFFERENTIAL_SCANS,
    "instance_query_cache": model.DIFFERENTIAL_SCANS,
    "instance_marker_negative_cache": model.DIFFERENTIAL_READS,
    "descending_outbox_by_run_reverses_ascending_pages": model.DIFFERENTIAL_SCANS,
    "index_schedules_by_next_occurrence_ignores_partition": model.DIFFERENTIAL_SCANS,
    "table_steps_blind_create_overwrites": model.DIFFERENTIAL_READS,
    "owners_content_hash_versions": model.DIFFERENTIAL_READS,
    "absent_reads_untracked_completion_markers": model.DIFFERENTIAL_READS,
    "sort_order_of_joined_components": model.DIFFERENTIAL_SCANS,
    # Refused once the differential crossed faults (a lost commit reply, a connection broken at the
    # commit or at a read, another instance committing in between), exclusive holds kept open across
    # clock jumps, and steps run in another OS process (issue 34).
    "lost_reply_resolved_by_reading_the_key": model.DIFFERENTIAL_READS,
    "read_fault_reconnects_with_fresh_snapshot": model.DIFFERENTIAL_READS,
    "exclusive_hold_is_a_thirty_second_lease": model.DIFFERENTIAL_SCANS,
    "process_marker_negative_cache": model.DIFFERENTIAL_READS,
    "process_query_cache": model.DIFFERENTIAL_SCANS,
}

_BY_NAME = {mutant.name: mutant for mutant in BLIND_MUTANTS}

MUTANTS: list[Mutant] = [
    Mutant(f"blind-{name}", _BY_NAME[name].target, requirement, _BY_NAME[name].breaks)
    for name, requirement in KILLED_BY.items()
]
