"""The fifth blind batch's drivers in the kill table, each under the requirement that refuses it.

``blind_batch5.py`` holds 33 broken drivers written from the contract without reading the suites.
Each is enrolled here under the requirement whose check refuses it at seed 0 (the rule its bug was
written against where that check fails, else the check that crossed its bug), so a change that lets
one of them certify again fails CI by name. Six survived the suites as they were
(``blind_batch5.md``); the checks added with this batch refuse them: the crossed-shapes scans of every
index (``cursors``), key spellings in every table (``point_reads.keys-of-any-shape``), deletes beside
a run's records in every table (``mutations.exact-delete``) and a write skew raced on a late attempt
(``conflicts.read-only-dependency``).
"""

from __future__ import annotations

from runlane_conformance.catalogue import all_requirements
from tests.mutants.blind_batch5 import BLIND5_MUTANTS
from tests.mutants.catalog import Mutant

#: blind driver name -> the ID of the requirement that kills it.
KILLED_BY: dict[str, str] = {
    "page_three_loses_its_last_row": "cursors.pages-join-to-one-scan",
    "links_by_token_lookahead_row_returned": "model.differential-scans",
    "operator_list_runs_ties_in_key_order": "operator_reads.list-shows-each-visible-run-once",
    "operator_get_run_shows_tombstoned_child": "pruning.tombstone-hides-in-one-commit",
    "operator_list_runs_cached_per_instance": "operator_reads.tombstone-hides-run-and-history",
    "clock_of_the_first_instance": "sealing.now-uses-injected-client-clock",
    "append_deferred_keeps_reads_open": "append.seals-reads",
    "point_reads_second_chunk_by_row_order": "limits.transaction-records-boundary",
    "json_integers_past_2_53_through_double": "json_boundary.numbers-kept-exactly",
    "json_strings_cut_at_64_kib": "limits.record-bytes-boundary",
    "limits_transaction_records_advertised_one_low": "limits.transaction-records-boundary",
    "limits_record_bytes_counted_in_characters": "limits.record-bytes-boundary",
    "limits_query_page_at_maximum_refused": "limits.query-results-boundary",
    "sort_astral_characters_in_utf16_order": "cursors.ascending-order",
    "schedules_next_occurrence_in_whole_seconds": "cursors.range-bounds",
    "outbox_availability_ties_in_insertion_order": "cursors.ascending-order",
    "events_sequence_in_int32_column": "cursors.ascending-order",
    "wait_token_timeouts_before_1970_sort_last": "cursors.ascending-order",
    "keys_schedule_ids_case_insensitive": "point_reads.keys-of-any-shape",
    "keys_owner_idempotency_pad_space": "point_reads.keys-of-any-shape",
    "keys_unicode_normalised": "point_reads.keys-of-any-shape",
    "versions_per_row_restart_after_delete": "conflicts.versions-never-reused",
    "run_delete_cascades_to_events": "mutations.exact-delete",
    "run_delete_cascades_to_completion_marker": "completion_waits.marker-outlives-waiters",
    "descending_scan_not_a_dependency": "conflicts.index-phantom",
    "short_page_range_stops_at_last_row": "conflicts.index-phantom",
    "replayed_attempt_reuses_first_time": "sealing.now-uses-injected-client-clock",
    "third_attempt_validates_only_writes": "conflicts.read-only-dependency",
    "exclusive_descending_is_advisory": "exclusive_selection.disjoint-across-instances",
    "exclusive_released_when_read_phase_ends": "exclusive_selection.disjoint-across-instances",
    "exclusive_holds_leak_after_callback_error": "exclusive_selection.released-at-rollback",
    "append_head_through_a_double": "append.position-bounds",
    "append_refuses_the_last_usable_position": "append.position-bounds",
}

_BY_NAME = {mutant.name: mutant for mutant in BLIND5_MUTANTS}
_REQUIREMENTS = all_requirements()

MUTANTS: list[Mutant] = [
    Mutant(f"blind5-{name}", _BY_NAME[name].target, _REQUIREMENTS[requirement], _BY_NAME[name].breaks)
    for name, requirement in KILLED_BY.items()
]
