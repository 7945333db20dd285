"""Ordered-append streams: what a batch becomes, where it may land, and what it costs.

Each test name states the rule it protects, so a failure tells a driver
author (or a maintainer of the helpers) exactly which promise broke.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlane_conformance
from runlane_conformance import (
    U64_MAX,
    AppendRecordsCommand,
    StorageCorruptionError,
    StorageDocument,
    StorageIndexName,
    StorageLimitError,
    StorageLimitName,
    StorageLimits,
    StorageRecordKey,
    StorageRecordVersion,
    StorageStreamExhaustedError,
    StorageStreamName,
    StorageTableName,
    StorageTransactionMeter,
    StorageValidationError,
    StoredRecord,
    build_storage_record,
    materialize_storage_append,
    measure_storage_append,
    parse_append_records_command,
    parse_storage_document,
    read_storage_stream_position,
    storage_stream_layouts,
    storage_unsigned_integer_codec,
)

OBSERVATIONS = StorageStreamName.OBSERVATIONS
LAYOUT = storage_stream_layouts[OBSERVATIONS]
VECTORS: dict[str, Any] = json.loads(
    (Path(runlane_conformance.__file__).parent / "fixtures" / "vectors" / "streams.json").read_text("utf-8")
)


def observation(n: int = 0, **data: Any) -> dict[str, Any]:
    return {"source": {"kind": "run", "id": f"run-{n}"}, "data": dict(data)}


def command(*values: dict[str, Any], partition: str = "prod") -> AppendRecordsCommand:
    return parse_append_records_command(
        {"stream": "observations", "partition": partition, "values": list(values)}
    )


def stored(record_key: StorageRecordKey, document: object) -> StoredRecord:
    """A stored head exactly as a careless driver could hand it over: no table checks ran."""
    head = object.__new__(StoredRecord)
    object.__setattr__(head, "key", record_key)
    object.__setattr__(head, "version", StorageRecordVersion("7"))
    object.__setattr__(head, "document", parse_storage_document(document))
    object.__setattr__(head, "indexes", ())
    return head


def head_document(next_value: object, partition: str = "prod", **extra: object) -> dict[str, object]:
    value: dict[str, object] = {"stream": "observations", "partition": partition, "next": next_value}
    value.update(extra)
    return {"schemaVersion": 1, "value": value}


def records_limited(records: int) -> StorageLimits:
    """Limits where only the transaction record count is tight (bytes stay coherent and generous)."""
    return StorageLimits(max_transaction_records=records, max_transaction_bytes=records * 400 * 1024)


def committed_head(next_position: int, partition: str = "prod") -> StoredRecord:
    """A head as the materializer would have written it."""
    record = materialize_storage_append(command(observation(), partition=partition), next_position - 1).head
    return StoredRecord.committed(record, StorageRecordVersion("1"))


# --------------------------------------------------------------------------- layout


def test_observations_layout_names_its_tables_fields_and_index() -> None:
    assert set(storage_stream_layouts) == set(StorageStreamName)
    assert LAYOUT.stream is OBSERVATIONS
    assert LAYOUT.record_table is StorageTableName.OBSERVATIONS
    assert LAYOUT.head_table is StorageTableName.STREAM_HEADS
    assert LAYOUT.index is StorageIndexName.OBSERVATIONS_BY_POSITION
    assert (LAYOUT.position_field, LAYOUT.partition_field) == ("position", "environment")
    assert LAYOUT.head_key("prod") == StorageRecordKey(
        StorageTableName.STREAM_HEADS, ("observations", "prod")
    )


def test_layouts_cannot_be_changed_by_callers() -> None:
    with pytest.raises(TypeError):
        storage_stream_layouts[OBSERVATIONS] = LAYOUT  # type: ignore[index]


@pytest.mark.parametrize(("lower", "higher"), [(1, 2), (9, 10), (99, 100), (2**63, U64_MAX - 1)])
def test_record_keys_and_index_sorts_follow_numeric_position_order(lower: int, higher: int) -> None:
    assert LAYOUT.record_key("prod", lower).encoded < LAYOUT.record_key("prod", higher).encoded
    assert LAYOUT.record_index("prod", lower).sort < LAYOUT.record_index("prod", higher).sort


@pytest.mark.parametrize("position", [0, -1, U64_MAX + 1, 1.0, True, "1"])
def test_layout_refuses_positions_outside_one_to_u64_max(position: Any) -> None:
    with pytest.raises(StorageValidationError):
        LAYOUT.record_key("prod", position)


def test_layout_recognises_the_head_and_records_of_its_partition_only() -> None:
    assert LAYOUT.owns_key("prod", LAYOUT.head_key("prod"))
    assert LAYOUT.owns_key("prod", LAYOUT.record_key("prod", 5))
    assert not LAYOUT.owns_key("prod", LAYOUT.head_key("dev"))
    assert not LAYOUT.owns_key("prod", LAYOUT.record_key("dev", 5))
    assert not LAYOUT.owns_key("prod", StorageRecordKey(StorageTableName.LEASES, ("prod", "x")))


# --------------------------------------------------------------------------- the command boundary


def test_parsing_a_command_returns_it_unchanged_because_it_validated_itself() -> None:
    built = command(observation())
    assert parse_append_records_command(built) is built


def test_appended_values_are_copied_so_later_caller_mutation_changes_nothing() -> None:
    nested = {"tags": ["a"], "count": 1}
    value = {"source": {"kind": "run", "id": "r"}, "data": nested}
    values = [value]
    parsed = parse_append_records_command({"stream": "observations", "partition": "prod", "values": values})
    direct = AppendRecordsCommand(OBSERVATIONS, "prod", values)  # type: ignore[arg-type]
    before = materialize_storage_append(parsed, 1)

    values.append(observation(2))
    value["source"]["id"] = "other"  # type: ignore[index]
    nested["tags"].append("b")  # type: ignore[attr-defined]
    nested["count"] = 99

    for cmd in (parsed, direct):
        assert len(cmd.values) == 1
        assert cmd.values[0]["source"] == {"kind": "run", "id": "r"}
        assert cmd.values[0]["data"] == {"tags": ("a",), "count": 1}
        assert materialize_storage_append(cmd, 1) == before


def test_command_values_are_immutable() -> None:
    built = command(observation(data=1))
    with pytest.raises(TypeError):
        built.values[0]["data"] = {}  # type: ignore[index]
    with pytest.raises(AttributeError):
        built.values = ()  # type: ignore[misc]


def test_empty_batch_is_rejected() -> None:
    with pytest.raises(StorageValidationError):
        command()


def test_value_carrying_the_position_field_is_rejected() -> None:
    with pytest.raises(StorageValidationError):
        command({**observation(), "position": "1"})


def test_value_whose_partition_field_disagrees_with_the_command_is_rejected() -> None:
    with pytest.raises(StorageValidationError):
        command({**observation(), "environment": "dev"}, partition="prod")


def test_value_whose_partition_field_agrees_is_accepted_and_an_absent_one_is_filled_in() -> None:
    appended = materialize_storage_append(
        command({**observation(1), "environment": "prod"}, observation(2)), 1
    )
    assert [record.document.value["environment"] for record in appended.records] == ["prod", "prod"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_rejected(bad: float) -> None:
    with pytest.raises(StorageValidationError):
        command(observation(x=bad))


def test_reference_cycles_are_rejected() -> None:
    data: dict[str, Any] = {}
    data["self"] = data
    with pytest.raises(StorageValidationError):
        command({"source": {"kind": "run", "id": "r"}, "data": data})


@pytest.mark.parametrize(
    "source",
    [
        {"stream": "observations", "partition": "prod"},
        {"stream": "observations", "partition": "prod", "values": [observation()], "extra": 1},
        {"stream": "nope", "partition": "prod", "values": [observation()]},
        {"stream": "observations", "partition": "", "values": [observation()]},
        {"stream": "observations", "partition": 3, "values": [observation()]},
        {"stream": "observations", "partition": "prod", "values": observation()},
        {"stream": "observations", "partition": "prod", "values": "abc"},
        {"stream": "observations", "partition": "prod", "values": [[1, 2]]},
        {"stream": "observations", "partition": "prod", "values": [{"data": {}}]},
        {
            "stream": "observations",
            "partition": "prod",
            "values": [{"source": {"kind": "", "id": "r"}, "data": {}}],
        },
        ["observations", "prod", []],
    ],
    ids=[
        "missing-values",
        "extra-member",
        "unknown-stream",
        "empty-partition",
        "non-string-partition",
        "values-not-array",
        "values-a-string",
        "value-not-object",
        "value-without-source",
        "empty-source-kind",
        "not-a-mapping",
    ],
)
def test_malformed_commands_are_rejected_as_validation_errors(source: Any) -> None:
    with pytest.raises(StorageValidationError):
        parse_append_records_command(source)


# --------------------------------------------------------------------------- reading the head


def test_absent_head_starts_the_stream_at_position_one() -> None:
    assert read_storage_stream_position(OBSERVATIONS, "prod", None) == 1
    assert read_storage_stream_position("observations", "prod", None) == 1


def test_contiguous_batches_follow_each_other_through_the_head() -> None:
    first = materialize_storage_append(command(observation(1), observation(2), observation(3)), 1)
    assert first.positions == (1, 2, 3)
    head = StoredRecord.committed(first.head, StorageRecordVersion("1"))
    start = read_storage_stream_position(OBSERVATIONS, "prod", head)
    assert start == 4

    second = materialize_storage_append(command(observation(4), observation(5)), start)
    assert (second.first_position, second.last_position, second.next_position) == (4, 5, 6)
    assert [record.document.value["position"] for record in second.records] == ["4", "5"]
    assert (
        read_storage_stream_position(OBSERVATIONS, "prod", StoredRecord.committed(second.head, head.version))
        == 6
    )


def test_materialized_records_carry_matching_keys_indexes_and_documents() -> None:
    appended = materialize_storage_append(command(observation(1, a=1), observation(2)), 41)
    for position, record in zip(appended.positions, appended.records, strict=True):
        assert record.key == LAYOUT.record_key("prod", position)
        assert record.indexes == (LAYOUT.record_index("prod", position),)
        assert record.document.value["position"] == str(position)
        # the same record, rebuilt through the table codec, is identical: layout and table agree
        assert (
            build_storage_record(StorageTableName.OBSERVATIONS, record.document.to_json()["value"]) == record
        )
    assert appended.head.key == LAYOUT.head_key("prod")
    assert appended.head.document.value == {"stream": "observations", "partition": "prod", "next": "43"}


@pytest.mark.parametrize(
    ("document", "record_key"),
    [
        (head_document("042"), None),
        (head_document("0"), None),
        (head_document(""), None),
        (head_document("+3"), None),
        (head_document("3.0"), None),
        (head_document("\u0663"), None),  # ARABIC-INDIC DIGIT THREE: a digit, but not a canonical one
        (head_document(3), None),
        (head_document(None), None),
        (head_document("3", last="2"), None),
        ({"schemaVersion": 1, "value": {"stream": "observations", "partition": "prod"}}, None),
        (head_document("3", partition="dev"), None),
        ({"schemaVersion": 1, "value": {"stream": "other", "partition": "prod", "next": "3"}}, None),
        (head_document("3"), StorageRecordKey(StorageTableName.STREAM_HEADS, ("observations", "dev"))),
        (head_document("3"), StorageRecordKey(StorageTableName.OBSERVATIONS, ("observations", "prod"))),
    ],
    ids=[
        "leading-zero",
        "zero",
        "empty",
        "signed",
        "decimal-point",
        "non-ascii-digit",
        "json-number",
        "null",
        "extra-field",
        "missing-next",
        "other-partition-in-document",
        "other-stream-in-document",
        "other-partition-key",
        "other-table-key",
    ],
)
def test_corrupt_head_is_reported_as_corruption(
    document: object, record_key: StorageRecordKey | None
) -> None:
    head = stored(record_key or LAYOUT.head_key("prod"), document)
    with pytest.raises(StorageCorruptionError):
        read_storage_stream_position(OBSERVATIONS, "prod", head)


@pytest.mark.parametrize("next_value", [str(U64_MAX + 1), "9" * 21, "1" + "0" * 5000])
def test_head_beyond_u64_is_reported_as_exhausted(next_value: str) -> None:
    with pytest.raises(StorageStreamExhaustedError):
        read_storage_stream_position(
            OBSERVATIONS, "prod", stored(LAYOUT.head_key("prod"), head_document(next_value))
        )


def test_head_table_itself_refuses_a_next_outside_one_to_u64_max() -> None:
    for next_value in ("0", str(U64_MAX + 1), "007"):
        with pytest.raises(StorageCorruptionError):
            StoredRecord(
                LAYOUT.head_key("prod"),
                StorageRecordVersion("1"),
                StorageDocument(head_document(next_value)["value"]),
            )


# --------------------------------------------------------------------------- u64 boundaries


def test_last_position_u64_max_minus_one_fits_with_a_head_of_u64_max() -> None:
    appended = materialize_storage_append(command(observation()), U64_MAX - 1)
    assert appended.positions == (U64_MAX - 1,)
    assert appended.records[0].document.value["position"] == str(U64_MAX - 1)
    assert appended.head.document.value["next"] == str(U64_MAX)


def test_batch_ending_at_u64_max_minus_one_fits() -> None:
    appended = materialize_storage_append(
        command(observation(1), observation(2), observation(3)), U64_MAX - 3
    )
    assert appended.positions == (U64_MAX - 3, U64_MAX - 2, U64_MAX - 1)
    assert appended.head.document.value["next"] == str(U64_MAX)


@pytest.mark.parametrize(
    ("size", "start"), [(1, U64_MAX), (2, U64_MAX - 1), (4, U64_MAX - 3), (1, U64_MAX + 1)]
)
def test_batch_whose_head_would_pass_u64_max_is_refused_as_exhausted(size: int, start: int) -> None:
    with pytest.raises(StorageStreamExhaustedError):
        materialize_storage_append(command(*(observation(i) for i in range(size))), start)


def test_head_at_u64_max_reads_back_but_admits_no_batch() -> None:
    head = committed_head(U64_MAX)
    start = read_storage_stream_position(OBSERVATIONS, "prod", head)
    assert start == U64_MAX
    with pytest.raises(StorageStreamExhaustedError):
        materialize_storage_append(command(observation()), start)


@pytest.mark.parametrize("start", [0, -5, 1.0, True, "1", None])
def test_start_must_be_a_positive_integer(start: Any) -> None:
    with pytest.raises(StorageValidationError):
        materialize_storage_append(command(observation()), start)


# --------------------------------------------------------------------------- measurement


def test_measurement_counts_every_record_plus_the_head() -> None:
    cmd = command(observation(1), observation(2, big="x" * 100))
    measured = measure_storage_append(cmd, StorageLimits())
    assert measured.record_count == 3
    assert len(measured.encoded_keys) == len(set(measured.encoded_keys)) == 3
    assert measured.encoded_keys[-1] == LAYOUT.head_key("prod").encoded
    assert measured.sizes == (*measured.record_sizes, measured.head_size)
    assert measured.bytes == sum(measured.sizes)


def test_measurement_is_exact_when_every_position_has_twenty_digits() -> None:
    cmd = command(observation(1), observation(2))
    measured = measure_storage_append(cmd, StorageLimits())
    appended = materialize_storage_append(cmd, 10**19)
    assert measured.record_sizes == tuple(record.document.size for record in appended.records)
    assert measured.head_size == StorageDocument({**appended.head.document.value, "next": str(U64_MAX)}).size


def test_record_that_only_fits_at_short_positions_is_refused_before_allocation() -> None:
    cmd = command(observation(data="x" * 200))
    widest = measure_storage_append(cmd, StorageLimits()).record_sizes[0]
    at_one = materialize_storage_append(cmd, 1).records[0].document.size
    assert at_one == widest - 19
    tight = StorageLimits(max_record_bytes=widest - 1, max_transaction_bytes=100 * (widest - 1))
    with pytest.raises(StorageLimitError) as raised:
        measure_storage_append(cmd, tight)
    assert raised.value.limit is StorageLimitName.RECORD_BYTES
    assert raised.value.actual == widest
    exact = StorageLimits(max_record_bytes=widest, max_transaction_bytes=100 * widest)
    assert measure_storage_append(cmd, exact).record_sizes == (widest,)


def test_append_alone_over_the_record_limit_is_refused_counting_the_head() -> None:
    cmd = command(*(observation(i) for i in range(4)))
    with pytest.raises(StorageLimitError) as raised:
        measure_storage_append(cmd, records_limited(4))
    assert (raised.value.limit, raised.value.actual) == (StorageLimitName.TRANSACTION_RECORDS, 5)
    assert measure_storage_append(cmd, records_limited(5)).record_count == 5


def test_append_alone_over_the_byte_limit_is_refused() -> None:
    cmd = command(observation(1), observation(2))
    total = measure_storage_append(cmd, StorageLimits()).bytes
    limits = StorageLimits(max_record_bytes=total - 1, max_transaction_bytes=total - 1)
    with pytest.raises(StorageLimitError) as raised:
        measure_storage_append(cmd, limits)
    assert (raised.value.limit, raised.value.actual) == (StorageLimitName.TRANSACTION_BYTES, total)


def test_append_is_charged_together_with_point_work_in_one_meter() -> None:
    cmd = command(observation(1), observation(2))
    measured = measure_storage_append(cmd, StorageLimits())
    point_keys = [StorageRecordKey(StorageTableName.LEASES, ("prod", name)) for name in ("a", "b")]

    meter = StorageTransactionMeter(records_limited(5))
    meter.add_point_reads(point_keys)
    measured.charge(meter)
    assert (len(meter.keys), meter.bytes) == (5, measured.bytes)

    over = StorageTransactionMeter(records_limited(4))
    over.add_point_reads(point_keys)
    with pytest.raises(StorageLimitError) as raised:
        measured.charge(over)
    assert raised.value.limit is StorageLimitName.TRANSACTION_RECORDS


_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_values = st.lists(
    st.builds(
        lambda kind, ident, data: {"source": {"kind": kind, "id": ident}, "data": data},
        st.text(min_size=1, max_size=8),
        st.text(min_size=1, max_size=8),
        st.dictionaries(st.text(max_size=6), _json, max_size=3),
    ),
    min_size=1,
    max_size=5,
)


@settings(deadline=None, print_blob=True, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(values=_values, partition=st.text(min_size=1, max_size=12), data=st.data())
def test_measurement_before_allocation_bounds_the_materialized_sizes_for_any_start(
    values: list[dict[str, Any]], partition: str, data: st.DataObject
) -> None:
    cmd = parse_append_records_command({"stream": "observations", "partition": partition, "values": values})
    start = data.draw(
        st.one_of(
            st.integers(min_value=1, max_value=1000),
            st.integers(min_value=1, max_value=U64_MAX - len(values)),
            st.just(U64_MAX - len(values)),
        ),
        label="start",
    )
    measured = measure_storage_append(cmd, StorageLimits())
    appended = materialize_storage_append(cmd, start)

    assert appended.positions == tuple(range(start, start + len(values)))
    assert appended.head.document.value["next"] == str(start + len(values))
    actual = [record.document.size for record in appended.records]
    assert all(bound >= size for bound, size in zip(measured.record_sizes, actual, strict=True))
    assert measured.head_size >= appended.head.document.size
    assert measured.bytes >= sum(actual) + appended.head.document.size


# --------------------------------------------------------------------------- golden vectors


def _vector_record(expected: dict[str, Any], record: Any) -> None:
    assert record.key == StorageRecordKey(expected["key"]["table"], tuple(expected["key"]["id"]))
    assert record.key.encoded == expected["encodedKey"]
    assert record.document == parse_storage_document(expected["document"])
    assert record.document.text == expected["canonicalText"]
    assert record.document.size == expected["bytes"]
    assert [(entry.index.value, entry.partition, entry.sort) for entry in record.indexes] == [
        (entry["index"], entry["partition"], entry["sort"]) for entry in expected["indexes"]
    ]


@pytest.mark.parametrize("vector", VECTORS["materializations"], ids=lambda vector: vector["name"])
def test_materialization_matches_golden_vector(vector: dict[str, Any]) -> None:
    start = storage_unsigned_integer_codec.decode(vector["start"])
    appended = materialize_storage_append(vector["command"], start)
    assert str(appended.first_position) == vector["firstPosition"]
    assert str(appended.last_position) == vector["lastPosition"]
    _vector_record(vector["head"], appended.head)
    assert len(appended.records) == len(vector["records"])
    for position, expected, record in zip(
        appended.positions, vector["records"], appended.records, strict=True
    ):
        assert str(position) == expected["position"]
        _vector_record(expected, record)


@pytest.mark.parametrize("vector", VECTORS["refusals"], ids=lambda vector: vector["name"])
def test_refused_batch_matches_golden_vector(vector: dict[str, Any]) -> None:
    assert vector["error"] == "exhausted"
    with pytest.raises(StorageStreamExhaustedError):
        materialize_storage_append(vector["command"], int(vector["start"]))


@pytest.mark.parametrize("vector", VECTORS["heads"], ids=lambda vector: vector["name"])
def test_head_reading_matches_golden_vector(vector: dict[str, Any]) -> None:
    raw = vector["head"]
    head = (
        None
        if raw is None
        else stored(StorageRecordKey(raw["key"]["table"], tuple(raw["key"]["id"])), raw["document"])
    )
    error = vector.get("error")
    if error is None:
        assert str(read_storage_stream_position(OBSERVATIONS, vector["partition"], head)) == vector["next"]
        return
    expected = {"corruption": StorageCorruptionError, "exhausted": StorageStreamExhaustedError}[error]
    with pytest.raises(expected):
        read_storage_stream_position(OBSERVATIONS, vector["partition"], head)


# --------------------------------------------------------------------------- the tables


def test_observation_position_must_agree_with_its_key() -> None:
    record = materialize_storage_append(command(observation()), 5).records[0]
    moved = StorageDocument({**record.document.value, "position": "6"})
    with pytest.raises(StorageCorruptionError):
        StoredRecord(record.key, StorageRecordVersion("1"), moved, record.indexes)


@pytest.mark.parametrize("position", ["0", "05", str(U64_MAX + 1), "-1", ""])
def test_observation_position_must_be_a_positive_canonical_u64(position: str) -> None:
    value = {**observation(), "environment": "prod", "position": position}
    with pytest.raises(StorageValidationError):
        build_storage_record(StorageTableName.OBSERVATIONS, value)


def test_observation_source_needs_kind_and_id() -> None:
    for source in ({"kind": "run"}, {"kind": "run", "id": ""}, {"kind": "run", "id": "r", "x": 1}, "run"):
        value = {"environment": "prod", "position": "1", "source": source, "data": {}}
        with pytest.raises(StorageValidationError):
            build_storage_record(StorageTableName.OBSERVATIONS, value)
