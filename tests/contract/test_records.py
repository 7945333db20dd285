"""Write inputs: documents and new records are validated once, frozen, and agree with their table."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from runlane_conformance import (
    NewStorageRecord,
    StorageCorruptionError,
    StorageDocument,
    StorageIndexEntry,
    StorageIndexName,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTableName,
    StorageValidationError,
    StoredRecord,
    encode_storage_document,
    iso_date_codec,
    parse_new_storage_record,
    parse_storage_record_key,
)

from .helpers import EXPIRES_AT, lease_record, lease_value


def raw_record(**overrides: Any) -> dict[str, Any]:
    """A write input as plain, mutable JSON-like data (what an untrusted caller hands over)."""
    record = {
        "key": {"table": "leases", "id": ["env-a", "lease-1"]},
        "document": {"schemaVersion": 1, "value": lease_value()},
        "indexes": [
            {
                "index": "LeasesByExpiry",
                "partition": "env-a",
                "sort": StorageIndexEntry.of(StorageIndexName.LEASES_BY_EXPIRY, "env-a", EXPIRES_AT).sort,
            }
        ],
    }
    record.update(overrides)
    return record


# --- encode_storage_document -----------------------------------------------------------------------------


def test_encode_storage_document_applies_the_table_codec_and_freezes() -> None:
    document = encode_storage_document("leases", lease_value())
    assert isinstance(document, StorageDocument)
    assert document.value["name"] == "lease-1"
    assert document.text.startswith('{"schemaVersion":1,"value":{"environment":"env-a"')


@pytest.mark.parametrize(
    "value",
    [
        {**lease_value(), "expiresAt": "yesterday"},
        {**lease_value(), "unknown": 1},
        {k: v for k, v in lease_value().items() if k != "holder"},
        {**lease_value(), "holder": math.nan},
    ],
    ids=["bad-date", "extra-field", "missing-field", "non-finite"],
)
def test_encode_storage_document_refuses_a_value_its_table_does_not_accept(value: dict[str, object]) -> None:
    with pytest.raises(StorageValidationError):
        encode_storage_document(StorageTableName.LEASES, value)


# --- parse_new_storage_record ----------------------------------------------------------------------------


def test_a_built_record_is_reused_as_is() -> None:
    record = lease_record()
    assert parse_new_storage_record(record) is record


def test_a_raw_record_is_parsed_into_an_equal_immutable_record() -> None:
    parsed = parse_new_storage_record(raw_record())
    assert parsed == lease_record()
    assert isinstance(parsed.document.value["name"], str)
    with pytest.raises(FrozenInstanceError):
        parsed.key = parsed.key  # type: ignore[misc]


def test_a_parsed_record_owns_its_values_so_later_caller_mutation_changes_nothing() -> None:
    raw = raw_record()
    parsed = parse_new_storage_record(raw)
    text = parsed.document.text
    raw["document"]["value"]["holder"] = "someone-else"
    raw["indexes"].clear()
    raw["key"]["id"].append("x")
    assert parsed.document.text == text
    assert len(parsed.indexes) == 1
    assert parsed.key.id == ("env-a", "lease-1")


def test_a_raw_record_is_revalidated_even_when_its_parts_are_already_frozen() -> None:
    built = lease_record()
    reparsed = parse_new_storage_record(
        {"key": built.key, "document": built.document, "indexes": built.indexes}
    )
    assert reparsed == built and reparsed is not built
    with pytest.raises(StorageCorruptionError):
        parse_new_storage_record({"key": built.key, "document": built.document, "indexes": ()})


@pytest.mark.parametrize(
    "source",
    [
        None,
        [],
        raw_record(extra=1),
        {k: v for k, v in raw_record().items() if k != "key"},
        {k: v for k, v in raw_record().items() if k != "document"},
        raw_record(key={"table": "nope", "id": ["a"]}),
        raw_record(key={"table": "leases", "id": []}),
        raw_record(key={"table": "leases", "id": "env-a"}),
        raw_record(document={"schemaVersion": 2, "value": lease_value()}),
        raw_record(indexes={"index": "LeasesByExpiry"}),
        raw_record(indexes=[{"index": "Everything", "partition": "env-a", "sort": "61"}]),
    ],
    ids=[
        "none",
        "array",
        "extra-member",
        "missing-key",
        "missing-document",
        "unknown-table",
        "empty-id",
        "string-id",
        "schema-version-2",
        "indexes-not-array",
        "unknown-index",
    ],
)
def test_a_malformed_write_input_is_a_validation_error(source: object) -> None:
    with pytest.raises(StorageValidationError):
        parse_new_storage_record(source)


@pytest.mark.parametrize(
    "source",
    [
        raw_record(key={"table": "leases", "id": ["env-a", "lease-2"]}),
        raw_record(key={"table": "runs", "id": ["env-a", "lease-1"]}),
        raw_record(indexes=[]),
        raw_record(indexes=[{"index": "LeasesByExpiry", "partition": "env-b", "sort": "61"}]),
        raw_record(
            indexes=[
                {
                    "index": "LeasesByExpiry",
                    "partition": "env-a",
                    "sort": StorageIndexEntry.of(
                        StorageIndexName.LEASES_BY_EXPIRY,
                        "env-a",
                        iso_date_codec.encode(iso_date_codec.decode(EXPIRES_AT).replace(year=2030)),
                    ).sort,
                }
            ]
        ),
        raw_record(document={"schemaVersion": 1, "value": {**lease_value(), "expiresAt": "soon"}}),
    ],
    ids=[
        "key-of-another-record",
        "key-in-another-table",
        "missing-index-entry",
        "index-partition-wrong",
        "index-sort-wrong",
        "document-invalid",
    ],
)
def test_a_record_whose_key_document_and_indexes_disagree_is_corruption(source: object) -> None:
    with pytest.raises(StorageCorruptionError):
        parse_new_storage_record(source)


def test_a_released_lease_must_not_keep_its_index_entry() -> None:
    released = lease_record(holder=None)
    assert released.indexes == ()
    held = lease_record()
    with pytest.raises(StorageCorruptionError):
        NewStorageRecord(released.key, released.document, held.indexes)


def test_record_keys_parse_from_mappings_and_reuse_built_keys() -> None:
    key = StorageRecordKey(StorageTableName.LEASES, ("env-a", "x"))
    assert parse_storage_record_key(key) is key
    assert parse_storage_record_key({"table": "leases", "id": ("env-a", "x")}) == key
    for bad in ({"table": "leases"}, {"table": "leases", "id": ["a"], "x": 1}, "leases:a"):
        with pytest.raises(StorageValidationError):
            parse_storage_record_key(bad)


def test_a_stored_record_is_checked_like_a_new_one() -> None:
    record = lease_record()
    version = StorageRecordVersion("3")
    stored = StoredRecord.committed(record, version)
    assert stored.as_new() == record
    assert StoredRecord(record.key, version, record.document, record.indexes) == stored
    with pytest.raises(StorageCorruptionError):
        StoredRecord(record.key, version, record.document, ())
    with pytest.raises(StorageValidationError):
        StoredRecord(record.key, "3", record.document, record.indexes)  # type: ignore[arg-type]
