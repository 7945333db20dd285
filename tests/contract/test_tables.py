"""Table definitions: a document derives exactly one key and one set of index entries, and breaks no rule.

The golden vectors under ``fixtures/vectors/documents`` are the shared specification
(other-language drivers can load the same files); the targeted tests below them pin
each identity rule that a JSON Schema cannot express, one rule per test.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from importlib.resources import files
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runlane_conformance import (
    TERMINAL_RUN_STATUSES,
    U64_MAX,
    NewStorageRecord,
    OwnerScope,
    RunStatus,
    StorageCorruptionError,
    StorageDocument,
    StorageDocumentRuleError,
    StorageIndexEntry,
    StorageIndexName,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTableName,
    StorageValidationError,
    StoredRecord,
    build_storage_record,
    check_reciprocal_idempotency,
    event_record_key,
    get_storage_table,
    outbox_message_record_key,
    owner_record_key,
    parse_new_storage_record,
    queue_capacity_record_key,
    run_completion_wait_presence_record_key,
    run_record_key,
    schedule_occurrence_id,
    schedule_record_key,
    step_record_key,
    step_token,
    storage_tables,
    storage_tuple_codec,
    tombstone_for_run,
    tombstone_record_key,
    wait_token_link_record_key,
    wait_token_record_key,
)

# Tables defined in contract/stream_tables.py and tested with the streams.
STREAM_TABLES = {StorageTableName.OBSERVATIONS, StorageTableName.STREAM_HEADS}
DOCUMENT_TABLES = sorted(set(StorageTableName) - STREAM_TABLES)
# Rules every table shares; any other rule in a vector is that table's identity rule.
SHARED_RULES = {"schema", "timestamp", "ownership", "key", "indexes", "counter", "table"}
# The identity rules each table documents: its vectors must break every one of them.
IDENTITY_RULES: dict[str, set[str]] = {
    "runs": {"run-completion", "completion-wait", "parent", "tombstone-terminal", "counter"},
    "events": {"sequence"},
    "steps": {"step-token", "sequence", "step-outcome", "counter"},
    "outbox_messages": {"outbox-claim", "counter"},
    "schedules": {"occurrence-id", "occurrence-order"},
    "owners": {"owner-target"},
    "queue_capacity": {"capacity-limit", "counter"},
    "tombstones": {"prune-after", "counter"},
    "wait_tokens": {"wait-token-resolution", "idempotency-owner", "counter"},
    "wait_token_links": set(),
    "run_completion_wait_presence": set(),
    "leases": set(),
}
NO_DERIVED_KEY_RULES = {"ownership", "key", "indexes", "table"}


def _load(table: str) -> dict[str, Any]:
    resource = files("runlane_conformance.fixtures.vectors").joinpath("documents").joinpath(f"{table}.json")
    data: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return data


VECTORS = {table.value: _load(table.value) for table in DOCUMENT_TABLES}
VALID = [(table, case) for table, data in VECTORS.items() for case in data["valid"]]
INVALID = [(table, case) for table, data in VECTORS.items() for case in data["invalid"]]


def _id(item: tuple[str, dict[str, Any]]) -> str:
    return f"{item[0]}/{item[1]['name']}"


def _entries(raw: list[dict[str, str]]) -> list[StorageIndexEntry]:
    entries = [StorageIndexEntry(item["index"], item["partition"], item["sort"]) for item in raw]
    return sorted(entries, key=lambda entry: entry.index.value)


def _rule_of(error: pytest.ExceptionInfo[StorageCorruptionError]) -> str:
    assert isinstance(error.value, StorageDocumentRuleError), f"{error.value!r} does not name its rule"
    return error.value.rule


# --------------------------------------------------------------------------- the vector files


def test_every_document_table_has_a_vector_file_with_valid_and_invalid_cases() -> None:
    for table, data in VECTORS.items():
        assert data["table"] == table
        assert len(data["valid"]) >= 1, table
        assert len(data["invalid"]) >= 3, table
        names = [case["name"] for case in data["valid"] + data["invalid"]]
        assert len(names) == len(set(names)), f"{table} has duplicate case names"


@pytest.mark.parametrize("table", sorted(IDENTITY_RULES))
def test_vectors_break_every_identity_rule_of_their_table(table: str) -> None:
    broken = {case["rule"] for case in VECTORS[table]["invalid"]}
    assert IDENTITY_RULES[table] <= broken, f"no vector breaks {IDENTITY_RULES[table] - broken}"
    unknown = broken - SHARED_RULES - IDENTITY_RULES[table]
    assert not unknown, f"vectors of {table} name undocumented rules {unknown}"
    assert {"schema", "indexes"} & broken, "every table has at least a schema or index vector"


@pytest.mark.parametrize(("table", "case"), VALID, ids=[_id(item) for item in VALID])
def test_valid_document_derives_exactly_its_key_and_index_entries(table: str, case: dict[str, Any]) -> None:
    record = build_storage_record(table, case["value"])
    assert record.key == StorageRecordKey(case["key"]["table"], tuple(case["key"]["id"]))
    assert list(record.indexes) == _entries(case["indexes"])
    declared = set(get_storage_table(table).indexes)
    assert {entry.index for entry in record.indexes} <= declared, "an entry uses an undeclared index"


@pytest.mark.parametrize(("table", "case"), VALID, ids=[_id(item) for item in VALID])
def test_valid_document_is_accepted_as_a_write_input_and_as_a_stored_record(
    table: str, case: dict[str, Any]
) -> None:
    source = {
        "key": case["key"],
        "document": {"schemaVersion": 1, "value": case["value"]},
        "indexes": case["indexes"],
    }
    parsed = parse_new_storage_record(source)
    assert parsed == build_storage_record(table, case["value"])
    stored = StoredRecord(parsed.key, StorageRecordVersion("1"), parsed.document, parsed.indexes)
    assert stored.as_new() == parsed


@pytest.mark.parametrize(("table", "case"), INVALID, ids=[_id(item) for item in INVALID])
def test_invalid_record_is_corruption_naming_the_rule_it_breaks(table: str, case: dict[str, Any]) -> None:
    with pytest.raises(StorageCorruptionError) as error:
        parse_new_storage_record(case["record"])
    assert _rule_of(error) == case["rule"]
    assert error.value.table is StorageTableName(table)


@pytest.mark.parametrize(
    ("table", "case"),
    [item for item in INVALID if item[1]["rule"] not in NO_DERIVED_KEY_RULES],
    ids=[_id(item) for item in INVALID if item[1]["rule"] not in NO_DERIVED_KEY_RULES],
)
def test_invalid_document_value_is_refused_when_building_a_record(table: str, case: dict[str, Any]) -> None:
    with pytest.raises(StorageValidationError):
        build_storage_record(table, case["record"]["document"]["value"])


@pytest.mark.parametrize(("table", "case"), INVALID, ids=[_id(item) for item in INVALID])
def test_invalid_record_is_refused_as_a_stored_record_too(table: str, case: dict[str, Any]) -> None:
    record = case["record"]
    with pytest.raises(StorageCorruptionError):
        StoredRecord(
            StorageRecordKey(record["key"]["table"], tuple(record["key"]["id"])),
            StorageRecordVersion("7"),
            StorageDocument(record["document"]["value"]),
            tuple(_entries(record["indexes"])),
        )


def test_every_table_in_the_catalog_has_a_definition() -> None:
    assert set(storage_tables()) == set(StorageTableName)
    for name, table in storage_tables().items():
        assert table.name is name


def test_every_index_in_the_catalog_belongs_to_exactly_one_table() -> None:
    owners: dict[StorageIndexName, list[StorageTableName]] = {}
    for name, table in storage_tables().items():
        for index in table.indexes:
            owners.setdefault(index, []).append(name)
    assert set(owners) == set(StorageIndexName)
    assert all(len(tables) == 1 for tables in owners.values()), owners


def test_a_key_of_another_table_is_corruption_named_table() -> None:
    case = VECTORS["events"]["valid"][0]
    record = build_storage_record("events", case["value"])
    with pytest.raises(StorageCorruptionError) as error:
        get_storage_table("runs").check_record(record.key, record.document, record.indexes)
    assert _rule_of(error) == "table"


# --------------------------------------------------------------------------- builders used below

BASE = datetime(2030, 1, 1, tzinfo=UTC)


def at(seconds: float) -> str:
    moment = BASE + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}Z"


def valid(table: str, name: str) -> dict[str, Any]:
    """A deep copy of the named valid vector's value."""
    for case in VECTORS[table]["valid"]:
        if case["name"] == name:
            value: dict[str, Any] = copy.deepcopy(case["value"])
            return value
    raise KeyError(name)


def rule_broken_by(table: str, value: dict[str, Any]) -> str:
    """The rule that refuses ``value`` (stored under the key its owner fields name)."""
    with pytest.raises(StorageCorruptionError) as error:
        get_storage_table(table).check_value(StorageDocument(value).value)
    return _rule_of(error)


def _independent_tuple_digest(*components: str) -> str:
    """sha256 of '/'-joined lowercase hex UTF-8 components, written out without the codec."""
    encoded = "/".join(component.encode("utf-8").hex() for component in components)
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------- deterministic identities


@pytest.mark.parametrize("case", VECTORS["steps"]["tokens"], ids=lambda case: case["token"][:12])
def test_step_token_is_the_sha256_of_the_versioned_tuple(case: dict[str, Any]) -> None:
    token = step_token(case["environment"], case["runId"], case["stepName"], case["sequence"])
    assert token == case["token"]
    assert token == _independent_tuple_digest(
        "runlane/step-token/v1", case["environment"], case["runId"], case["stepName"], str(case["sequence"])
    )


@pytest.mark.parametrize("case", VECTORS["schedules"]["occurrenceIds"], ids=lambda case: case["occurrenceAt"])
def test_schedule_occurrence_id_is_the_sha256_of_the_versioned_tuple(case: dict[str, Any]) -> None:
    expected = _independent_tuple_digest(
        "runlane/schedule-occurrence/v1", case["environment"], case["scheduleId"], case["occurrenceAt"]
    )
    assert case["occurrenceId"] == expected
    assert schedule_occurrence_id(case["environment"], case["scheduleId"], case["occurrenceAt"]) == expected


def test_schedule_occurrence_id_is_the_same_for_a_datetime_in_any_timezone() -> None:
    utc = schedule_occurrence_id("env-a", "nightly", BASE)
    shifted = BASE.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert schedule_occurrence_id("env-a", "nightly", shifted) == utc
    assert schedule_occurrence_id("env-a", "nightly", at(0)) == utc


@pytest.mark.parametrize(
    "occurrence_at", ["2030-01-01T00:00:00Z", "2030-01-01 00:00:00.000000Z", "2030-02-30T00:00:00.000000Z"]
)
def test_schedule_occurrence_id_refuses_a_non_canonical_time(occurrence_at: str) -> None:
    with pytest.raises(StorageValidationError):
        schedule_occurrence_id("env-a", "nightly", occurrence_at)


def test_schedule_occurrence_id_refuses_a_naive_datetime() -> None:
    with pytest.raises(StorageValidationError):
        schedule_occurrence_id("env-a", "nightly", datetime(2030, 1, 1))


@pytest.mark.parametrize("sequence", [0, -1, U64_MAX + 1, True, 1.0, "1"])
def test_step_token_refuses_a_sequence_that_is_not_a_positive_u64(sequence: Any) -> None:
    with pytest.raises(StorageValidationError):
        step_token("env-a", "run-1", "charge", sequence)


@pytest.mark.parametrize(
    ("environment", "run_id", "step_name"), [("", "run", "step"), ("env", "", "step"), ("env", "run", "")]
)
def test_step_token_refuses_empty_components(environment: str, run_id: str, step_name: str) -> None:
    with pytest.raises(StorageValidationError):
        step_token(environment, run_id, step_name, 1)


def test_step_token_components_cannot_run_into_each_other() -> None:
    # Plain concatenation would make these equal; the tuple encoding keeps them apart.
    assert step_token("env", "ab", "c", 1) != step_token("env", "a", "bc", 1)
    assert step_token("en", "v/run", "s", 1) != step_token("env/", "run", "s", 1)


_names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, print_blob=True, database=None)
@given(
    environment=_names,
    run_id=_names,
    step_name=_names,
    sequence=st.integers(min_value=1, max_value=U64_MAX),
)
def test_a_step_round_trips_and_any_other_token_is_refused(
    environment: str, run_id: str, step_name: str, sequence: int
) -> None:
    value = {
        **valid("steps", "running-step"),
        "environment": environment,
        "runId": run_id,
        "stepName": step_name,
        "sequence": str(sequence),
        "token": step_token(environment, run_id, step_name, sequence),
    }
    record = build_storage_record("steps", value)
    assert record.key == step_record_key(environment, run_id, value["token"])
    assert (
        parse_new_storage_record(
            {
                "key": {"table": "steps", "id": list(record.key.id)},
                "document": record.document.to_json(),
                "indexes": [
                    {"index": e.index.value, "partition": e.partition, "sort": e.sort} for e in record.indexes
                ],
            }
        )
        == record
    )
    neighbour = sequence - 1 if sequence == U64_MAX else sequence + 1
    value["token"] = step_token(environment, run_id, step_name, neighbour)
    assert rule_broken_by("steps", value) == "step-token"


def test_a_step_token_derived_for_another_run_is_refused_even_under_the_right_key() -> None:
    value = valid("steps", "running-step")
    foreign = step_token(value["environment"], "run-2", value["stepName"], 1)
    value["token"] = foreign
    with pytest.raises(StorageCorruptionError) as error:
        NewStorageRecord(
            step_record_key(value["environment"], "run-1", foreign),
            StorageDocument(value),
            (
                StorageIndexEntry.of(
                    StorageIndexName.STEPS_BY_RUN, "env-a", "run-1", value["stepName"], "0" * 19 + "1"
                ),
            ),
        )
    assert _rule_of(error) == "step-token"


def test_a_schedule_occurrence_id_must_follow_its_time_when_the_schedule_advances() -> None:
    value = valid("schedules", "enabled-with-next-occurrence")
    value["lastOccurrenceAt"], value["lastOccurrenceId"] = (
        value["nextOccurrenceAt"],
        value["nextOccurrenceId"],
    )
    value["nextOccurrenceAt"] = at(3600 + 86400)
    assert rule_broken_by("schedules", value) == "occurrence-id"  # stale id carried over
    value["nextOccurrenceId"] = schedule_occurrence_id("env-a", "nightly", value["nextOccurrenceAt"])
    build_storage_record("schedules", value)


# --------------------------------------------------------------------------- nested ownership


@pytest.mark.parametrize(
    ("table", "case", "foreign_key"),
    [
        ("events", "first-event", lambda: event_record_key("env-a", "run-2", 1)),
        ("events", "first-event", lambda: event_record_key("env-b", "run-1", 1)),
        (
            "steps",
            "running-step",
            lambda: step_record_key("env-a", "run-2", step_token("env-a", "run-1", "charge-card", 1)),
        ),
        (
            "outbox_messages",
            "unclaimed-undelivered",
            lambda: outbox_message_record_key("env-a", "run-2", "msg-1"),
        ),
        (
            "outbox_messages",
            "unclaimed-undelivered",
            lambda: outbox_message_record_key("env-b", "run-1", "msg-1"),
        ),
        ("tombstones", "fresh-tombstone", lambda: tombstone_record_key("env-a", "run-1")),
        (
            "wait_token_links",
            "run-waits-on-token",
            lambda: wait_token_link_record_key("env-a", "tok-1", "run-9"),
        ),
    ],
    ids=lambda item: item if isinstance(item, str) else "",
)
def test_a_run_owned_record_stored_under_another_environment_or_run_is_corruption(
    table: str, case: str, foreign_key: Any
) -> None:
    record = build_storage_record(table, valid(table, case))
    with pytest.raises(StorageCorruptionError) as error:
        NewStorageRecord(foreign_key(), record.document, record.indexes)
    assert _rule_of(error) == "ownership"


@pytest.mark.parametrize(
    ("table", "case", "builder"),
    [
        ("runs", "pending-root-run", lambda v: run_record_key(v["environment"], v["runId"])),
        (
            "events",
            "twelfth-event-sorts-after-second",
            lambda v: event_record_key(v["environment"], v["runId"], int(v["sequence"])),
        ),
        ("steps", "running-step", lambda v: step_record_key(v["environment"], v["runId"], v["token"])),
        (
            "outbox_messages",
            "claimed-sorts-at-claim-end",
            lambda v: outbox_message_record_key(v["environment"], v["runId"], v["messageId"]),
        ),
        (
            "schedules",
            "enabled-with-next-occurrence",
            lambda v: schedule_record_key(v["environment"], v["scheduleId"]),
        ),
        (
            "owners",
            "wait-token-owner",
            lambda v: owner_record_key(v["environment"], OwnerScope(v["scope"]), v["idempotencyKey"]),
        ),
        (
            "queue_capacity",
            "some-slots-in-use",
            lambda v: queue_capacity_record_key(v["environment"], v["queue"]),
        ),
        ("tombstones", "fresh-tombstone", lambda v: tombstone_record_key(v["environment"], v["runId"])),
        (
            "wait_tokens",
            "pending-with-timeout",
            lambda v: wait_token_record_key(v["environment"], v["tokenId"]),
        ),
        (
            "wait_token_links",
            "run-waits-on-token",
            lambda v: wait_token_link_record_key(v["environment"], v["tokenId"], v["runId"]),
        ),
        (
            "run_completion_wait_presence",
            "marker",
            lambda v: run_completion_wait_presence_record_key(v["environment"], v["sourceRunId"]),
        ),
    ],
    ids=lambda item: item if isinstance(item, str) else "",
)
def test_key_builders_name_the_key_the_table_derives(table: str, case: str, builder: Any) -> None:
    value = valid(table, case)
    assert builder(value) == build_storage_record(table, value).key


def test_event_keys_sort_by_sequence_not_by_decimal_text() -> None:
    keys = [event_record_key("env-a", "run-1", n) for n in (1, 2, 12, 100, U64_MAX)]
    assert sorted(keys, key=lambda key: key.encoded) == keys


# --------------------------------------------------------------------------- outbox claim state

CLAIM = {"claimedBy": "relay-1", "claimedUntil": at(70), "claimToken": "claim-abc"}


@pytest.mark.parametrize(
    "present",
    [subset for size in (1, 2) for subset in itertools.combinations(sorted(CLAIM), size)],
    ids=lambda subset: "+".join(subset),
)
def test_an_outbox_claim_is_complete_or_absent(present: tuple[str, ...]) -> None:
    value = valid("outbox_messages", "unclaimed-undelivered")
    value.update({field: CLAIM[field] for field in present})
    assert rule_broken_by("outbox_messages", value) == "outbox-claim"


def test_a_complete_claim_moves_the_message_to_its_claim_end_and_delivery_removes_it() -> None:
    value = valid("outbox_messages", "unclaimed-undelivered")
    claimed = build_storage_record("outbox_messages", {**value, **CLAIM})
    availability = {e.index: e for e in claimed.indexes}[StorageIndexName.OUTBOX_BY_AVAILABILITY]
    assert storage_tuple_codec.decode(availability.sort) == (CLAIM["claimedUntil"],)
    delivered = build_storage_record("outbox_messages", {**value, "deliveredAt": at(80)})
    assert [e.index for e in delivered.indexes] == [StorageIndexName.OUTBOX_BY_RUN]
    assert rule_broken_by("outbox_messages", {**value, **CLAIM, "deliveredAt": at(80)}) == "outbox-claim"


# --------------------------------------------------------------------------- wait tokens


def test_a_resolved_wait_token_carries_resolution_and_resolved_at() -> None:
    value = valid("wait_tokens", "resolved-completed")
    assert rule_broken_by("wait_tokens", {**value, "resolvedAt": None}) == "wait-token-resolution"
    assert rule_broken_by("wait_tokens", {**value, "resolution": None}) == "wait-token-resolution"


def test_a_pending_wait_token_carries_neither_resolution_nor_resolved_at() -> None:
    value = valid("wait_tokens", "pending-with-timeout")
    resolution = {"outcome": "completed", "value": None}
    assert rule_broken_by("wait_tokens", {**value, "resolution": resolution}) == "wait-token-resolution"
    assert rule_broken_by("wait_tokens", {**value, "resolvedAt": at(9)}) == "wait-token-resolution"


def test_a_token_times_out_only_at_or_after_its_timeout() -> None:
    value = valid("wait_tokens", "resolved-by-timeout")
    build_storage_record("wait_tokens", {**value, "resolvedAt": value["timeoutAt"]})
    assert rule_broken_by("wait_tokens", {**value, "resolvedAt": at(601)}) == "wait-token-resolution"


def test_resolving_a_token_moves_it_out_of_the_timeout_index_and_to_its_resolution_time() -> None:
    pending = build_storage_record("wait_tokens", valid("wait_tokens", "pending-with-timeout"))
    resolved = build_storage_record("wait_tokens", valid("wait_tokens", "resolved-completed"))
    assert StorageIndexName.WAIT_TOKENS_BY_TIMEOUT in {e.index for e in pending.indexes}
    by_index = {e.index: e for e in resolved.indexes}
    assert StorageIndexName.WAIT_TOKENS_BY_TIMEOUT not in by_index
    assert storage_tuple_codec.decode(by_index[StorageIndexName.WAIT_TOKENS_BY_STATUS].sort) == (
        "resolved",
        at(100),
    )


@pytest.mark.parametrize("count", ["-1", "18446744073709551616", "1.5", "01", "", 3, None])
@pytest.mark.parametrize(
    ("table", "case", "path"),
    [
        ("runs", "pending-root-run", ("counts", "events")),
        ("runs", "pending-root-run", ("counts", "outboxMessages")),
        ("runs", "pending-root-run", ("counts", "steps")),
        ("runs", "pending-root-run", ("counts", "waitTokenLinks")),
        ("tombstones", "fresh-tombstone", ("counts", "waitTokenLinks")),
        ("wait_tokens", "pending-with-timeout", ("linkCount",)),
    ],
    ids=lambda item: ".".join(item) if isinstance(item, tuple) else item,
)
def test_link_counters_are_unsigned_64_bit_decimals(
    table: str, case: str, path: tuple[str, ...], count: Any
) -> None:
    value = valid(table, case)
    target = value
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = count
    assert rule_broken_by(table, value) in {"schema", "counter"}


@pytest.mark.parametrize("count", ["0", "1", str(U64_MAX)])
def test_link_counters_accept_the_whole_unsigned_64_bit_range(count: str) -> None:
    value = valid("runs", "pending-root-run")
    value["counts"] = dict.fromkeys(value["counts"], count)
    build_storage_record("runs", value)
    build_storage_record("wait_tokens", {**valid("wait_tokens", "pending-with-timeout"), "linkCount": count})


def test_a_wait_token_names_its_idempotency_owner_and_the_owner_names_it_back() -> None:
    token = valid("wait_tokens", "pending-with-timeout")
    owner = valid("owners", "wait-token-owner")
    check_reciprocal_idempotency(token, owner)
    assert token["idempotencyOwner"] == {
        "table": "owners",
        "id": list(owner_record_key("env-a", OwnerScope.WAIT_TOKEN, token["idempotencyKey"]).id),
    }
    assert owner["target"] == {"table": "wait_tokens", "id": ["env-a", token["tokenId"]]}
    token["idempotencyKey"] = "another-key"  # the two fields of the token no longer agree
    assert rule_broken_by("wait_tokens", token) == "idempotency-owner"
    owner["targetId"] = "tok-2"  # the two fields of the owner no longer agree
    assert rule_broken_by("owners", owner) == "owner-target"


@pytest.mark.parametrize("pair", VECTORS["wait_tokens"]["pairs"], ids=lambda pair: pair["name"])
def test_a_non_reciprocal_token_and_owner_pair_is_an_invariant_failure(pair: dict[str, Any]) -> None:
    if pair["reciprocal"]:
        check_reciprocal_idempotency(pair["token"], pair["owner"])
        return
    with pytest.raises(StorageCorruptionError) as error:
        check_reciprocal_idempotency(pair["token"], pair["owner"])
    assert _rule_of(error) == "reciprocal-owner"


# --------------------------------------------------------------------------- runs


def test_run_statuses_and_the_terminal_ones() -> None:
    assert [status.value for status in RunStatus] == [
        "pending",
        "running",
        "waiting",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert {status.value for status in TERMINAL_RUN_STATUSES} == {"succeeded", "failed", "cancelled"}


@pytest.mark.parametrize("status", list(RunStatus))
def test_completed_at_is_set_exactly_for_terminal_runs(status: RunStatus) -> None:
    value = {**valid("runs", "pending-root-run"), "status": status.value}
    with_time, without = {**value, "completedAt": at(5)}, {**value, "completedAt": None}
    good, bad = (with_time, without) if status in TERMINAL_RUN_STATUSES else (without, with_time)
    build_storage_record("runs", good)
    assert rule_broken_by("runs", bad) == "run-completion"


def test_a_waiting_run_is_indexed_under_its_source_run_for_completion() -> None:
    record = build_storage_record("runs", valid("runs", "waiting-child-run"))
    by_index = {e.index: e for e in record.indexes}
    waiter = by_index[StorageIndexName.RUNS_WAITING_FOR_COMPLETION]
    assert (waiter.partition, storage_tuple_codec.decode(waiter.sort)) == ("env-a", ("run-3",))
    assert storage_tuple_codec.decode(by_index[StorageIndexName.RUNS_BY_PARENT].sort)[0] == "run-1"


def test_resuming_a_waiting_run_removes_its_completion_wait_entry() -> None:
    value = valid("runs", "waiting-child-run")
    resumed = build_storage_record("runs", {**value, "status": "running", "waitingForRunId": None})
    assert StorageIndexName.RUNS_WAITING_FOR_COMPLETION not in {e.index for e in resumed.indexes}


@pytest.mark.parametrize("status", [s for s in RunStatus if s is not RunStatus.WAITING])
def test_only_a_waiting_run_may_wait_for_completion(status: RunStatus) -> None:
    value = {**valid("runs", "waiting-child-run"), "status": status.value}
    if status in TERMINAL_RUN_STATUSES:
        value["completedAt"] = at(9)
    assert rule_broken_by("runs", value) == "completion-wait"


def test_tombstoning_a_run_removes_it_from_every_operational_index() -> None:
    value = valid("runs", "succeeded-run-with-maximal-counts")
    assert build_storage_record("runs", value).indexes
    assert build_storage_record("runs", {**value, "tombstonedAt": at(40)}).indexes == ()


def test_runs_by_status_orders_a_status_by_creation_time() -> None:
    sorts = [
        entry
        for n in (30, 2, 11)
        for entry in build_storage_record(
            "runs", {**valid("runs", "pending-root-run"), "runId": f"r{n}", "createdAt": at(n)}
        ).indexes
        if entry.index is StorageIndexName.RUNS_BY_STATUS
    ]
    assert len(sorts) == 3
    assert [storage_tuple_codec.decode(e.sort) for e in sorted(sorts, key=lambda e: e.sort)] == [
        ("pending", at(2)),
        ("pending", at(11)),
        ("pending", at(30)),
    ]


# --------------------------------------------------------------------------- tombstones and presence


def test_a_tombstone_copies_the_runs_exact_counts() -> None:
    run = valid("runs", "waiting-child-run")
    run.update(status="cancelled", waitingForRunId=None, completedAt=at(20))
    tombstone = tombstone_for_run(
        run, tombstoned_at=BASE + timedelta(seconds=21), prune_after=BASE + timedelta(hours=1)
    )
    assert tombstone["counts"] == run["counts"]
    record = build_storage_record("tombstones", tombstone)
    assert record.key == tombstone_record_key("env-a", "run-2")
    assert record.key.id == build_storage_record("runs", run).key.id


def test_a_tombstone_cannot_be_built_from_an_invalid_run() -> None:
    run = valid("runs", "pending-root-run")
    run["counts"]["events"] = "-1"
    with pytest.raises(StorageCorruptionError):
        tombstone_for_run(run, tombstoned_at=BASE, prune_after=BASE)


def test_the_completion_wait_marker_is_tiny_and_never_indexed() -> None:
    record = build_storage_record(
        "run_completion_wait_presence", valid("run_completion_wait_presence", "marker")
    )
    assert record.indexes == ()
    assert record.document.size < 128


def _all_valid_values() -> Iterator[tuple[str, dict[str, Any]]]:
    for table, case in VALID:
        yield table, case["value"]


def test_documents_survive_the_json_envelope_unchanged() -> None:
    for table, value in _all_valid_values():
        record = build_storage_record(table, value)
        assert record.document.to_json() == {"schemaVersion": 1, "value": value}
