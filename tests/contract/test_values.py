"""Boundary value types: each one validates itself when built, so holding one is proof of validity."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from runlane_conformance import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageClockAuthority,
    StorageDurability,
    StorageIndexConsistency,
    StorageIndexEntry,
    StorageIndexName,
    StorageLimits,
    StorageProfile,
    StorageProfileError,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StorageRecordVersion,
    StorageTableName,
    StorageValidationError,
    have_equal_storage_record_keys,
    storage_tuple_codec,
)

from .helpers import lease_record

KIB = 1024
MIB = 1024 * 1024
LIMIT_FIELDS = [field.name for field in fields(StorageLimits)]


# --- limits and profile ----------------------------------------------------------------------------------


def test_default_profile_is_exactly_the_reference_profile() -> None:
    profile = StorageProfile()
    assert profile.durability is StorageDurability.PROCESS and profile.durability == "process"
    assert profile.clock_authority is StorageClockAuthority.CLIENT and profile.clock_authority == "client"
    assert (
        profile.index_consistency is StorageIndexConsistency.STRONG and profile.index_consistency == "strong"
    )
    assert profile.limits == StorageLimits(
        max_point_reads=100,
        max_query_results=100,
        max_transaction_records=100,
        max_record_bytes=400 * KIB,
        max_transaction_bytes=4 * MIB,
    )
    assert (profile.limits.max_record_bytes, profile.limits.max_transaction_bytes) == (409_600, 4_194_304)
    assert profile.exclusive_candidates is False
    assert profile.capabilities() == ()


def test_profile_enumerations_are_closed() -> None:
    assert {member.value for member in StorageDurability} == {"process", "durable"}
    assert {member.value for member in StorageClockAuthority} == {
        "client",
        "server_sampled",
        "transaction_authoritative",
    }
    assert {member.value for member in StorageIndexConsistency} == {"strong", "eventual"}


@pytest.mark.parametrize(
    "changes",
    [{"durability": "forever"}, {"clock_authority": "atomic"}, {"index_consistency": "sometimes"}],
    ids=["durability", "clock-authority", "index-consistency"],
)
def test_profile_refuses_unknown_mechanics(changes: dict[str, str]) -> None:
    with pytest.raises(StorageProfileError):
        StorageProfile(**changes)  # type: ignore[arg-type]


def test_profile_accepts_the_spelled_out_mechanics() -> None:
    profile = StorageProfile(durability="durable", clock_authority="transaction_authoritative")  # type: ignore[arg-type]
    assert profile.durability is StorageDurability.DURABLE
    assert profile.clock_authority is StorageClockAuthority.TRANSACTION_AUTHORITATIVE


def test_profile_capability_flags_must_be_booleans() -> None:
    with pytest.raises(StorageProfileError):
        StorageProfile(exclusive_candidates=1)  # type: ignore[arg-type]


def test_transaction_bytes_smaller_than_record_bytes_are_refused() -> None:
    with pytest.raises(StorageProfileError, match="max_record_bytes"):
        StorageLimits(max_record_bytes=1000, max_transaction_bytes=999)
    assert StorageLimits(max_record_bytes=1000, max_transaction_bytes=1000).max_transaction_bytes == 1000


def test_transaction_bytes_must_be_reachable_within_the_record_count() -> None:
    # Two records of at most 10 bytes can carry 20 bytes, never 21.
    assert StorageLimits(max_transaction_records=2, max_record_bytes=10, max_transaction_bytes=20)
    with pytest.raises(StorageProfileError, match="cannot be reached"):
        StorageLimits(max_transaction_records=2, max_record_bytes=10, max_transaction_bytes=21)


@pytest.mark.parametrize("name", LIMIT_FIELDS)
@pytest.mark.parametrize(
    "value", [0, -1, True, 1.5, "10", None], ids=["zero", "negative", "bool", "float", "str", "none"]
)
def test_every_limit_must_be_a_positive_integer(name: str, value: object) -> None:
    with pytest.raises(StorageProfileError, match=name):
        StorageLimits(**{name: value})  # type: ignore[arg-type]


def test_limits_and_profile_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        StorageLimits().max_point_reads = 5  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        StorageProfile().exclusive_candidates = True  # type: ignore[misc]


# --- record versions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1", "9", "10", "42", "18446744073709551616" * 2])
def test_record_versions_are_positive_decimal_strings(text: str) -> None:
    assert StorageRecordVersion(text).value == text
    assert str(StorageRecordVersion(text)) == text


@pytest.mark.parametrize(
    "value",
    ["0", "00", "01", "-1", "+1", "1.0", "1e3", "", " 1", "1 ", "a", "\u0663", 1, None],
    ids=lambda value: repr(value),
)
def test_record_versions_refuse_anything_else(value: object) -> None:
    with pytest.raises(StorageValidationError):
        StorageRecordVersion(value)  # type: ignore[arg-type]


def test_record_versions_compare_by_value() -> None:
    assert StorageRecordVersion("7") == StorageRecordVersion("7")
    assert StorageRecordVersion("7") != StorageRecordVersion("8")


# --- keys ------------------------------------------------------------------------------------------------


def test_a_key_names_a_known_table_and_coerces_its_spelling() -> None:
    key = StorageRecordKey("leases", ["env", "a"])  # type: ignore[arg-type]
    assert key.table is StorageTableName.LEASES
    assert key.id == ("env", "a")
    assert key.encoded == storage_tuple_codec.encode(("leases", "env", "a"))


@pytest.mark.parametrize(
    ("table", "ident"),
    [
        ("no_such_table", ("a",)),
        ("LEASES", ("a",)),
        ("leases", ()),
        ("leases", []),
        ("leases", "abc"),
        ("leases", None),
        ("leases", ("a", 1)),
        ("leases", ("\ud800",)),
    ],
    ids=[
        "unknown-table",
        "wrong-case-table",
        "empty-id",
        "empty-list-id",
        "string-id",
        "none-id",
        "int-part",
        "surrogate",
    ],
)
def test_a_key_needs_a_known_table_and_a_non_empty_id_of_text(table: str, ident: object) -> None:
    with pytest.raises(StorageValidationError):
        StorageRecordKey(table, ident)  # type: ignore[arg-type]


def test_keys_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        StorageRecordKey(StorageTableName.LEASES, ("a",)).id = ("b",)  # type: ignore[misc]


def test_equal_keys_are_recognised_without_encoding() -> None:
    left = StorageRecordKey(StorageTableName.LEASES, ("env", "a"))
    assert have_equal_storage_record_keys(left, StorageRecordKey("leases", ["env", "a"]))  # type: ignore[arg-type]
    assert have_equal_storage_record_keys(left, left)


@pytest.mark.parametrize(
    "other",
    [
        StorageRecordKey(StorageTableName.RUNS, ("env", "a")),
        StorageRecordKey(StorageTableName.LEASES, ("env", "b")),
        StorageRecordKey(StorageTableName.LEASES, ("env",)),
        StorageRecordKey(StorageTableName.LEASES, ("env", "a", "")),
        StorageRecordKey(StorageTableName.LEASES, ("enva",)),
        StorageRecordKey(StorageTableName.LEASES, ("env/a",)),
    ],
    ids=[
        "other-table",
        "other-id",
        "id-prefix",
        "id-extended-by-empty",
        "joined-components",
        "slash-in-component",
    ],
)
def test_different_keys_are_never_equal(other: StorageRecordKey) -> None:
    key = StorageRecordKey(StorageTableName.LEASES, ("env", "a"))
    assert not have_equal_storage_record_keys(key, other)
    assert key.encoded != other.encoded


# --- index entries, records and queries -------------------------------------------------------------------


def test_index_entries_need_a_catalog_index_and_a_canonical_sort() -> None:
    entry = StorageIndexEntry.of(StorageIndexName.LEASES_BY_EXPIRY, "env", "2024")
    assert entry.sort == storage_tuple_codec.encode(("2024",))
    with pytest.raises(StorageValidationError):
        StorageIndexEntry("LeasesByName", "env", entry.sort)  # type: ignore[arg-type]
    with pytest.raises(StorageValidationError):
        StorageIndexEntry(StorageIndexName.LEASES_BY_EXPIRY, "env", "2024-01")
    with pytest.raises(StorageValidationError):
        StorageIndexEntry(StorageIndexName.LEASES_BY_EXPIRY, 1, entry.sort)  # type: ignore[arg-type]


def test_a_record_has_at_most_one_entry_per_index() -> None:
    record = lease_record()
    (entry,) = record.indexes
    with pytest.raises(StorageValidationError, match="one entry per index"):
        NewStorageRecord(record.key, record.document, (entry, entry))


def test_query_commands_name_a_catalog_index_and_a_positive_limit() -> None:
    command = QueryRecordsCommand("LeasesByExpiry", "env", 1)  # type: ignore[arg-type]
    assert command.index is StorageIndexName.LEASES_BY_EXPIRY
    for bad in ({"index": "Everything"}, {"limit": 0}, {"limit": True}, {"partition": None}, {"cursor": 5}):
        arguments: dict[str, object] = {"index": "LeasesByExpiry", "partition": "env", "limit": 1, **bad}
        with pytest.raises(StorageValidationError):
            QueryRecordsCommand(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lower", "upper", "inside", "outside"),
    [
        (
            StorageRangeBound("62", True),
            StorageRangeBound("64", True),
            ["62", "63", "64"],
            ["61", "65", "6401"],
        ),
        (StorageRangeBound("62", False), StorageRangeBound("64", False), ["6201", "63"], ["62", "64"]),
        (None, StorageRangeBound("62", False), ["", "61", "61/62"], ["62", "62/"]),
        (StorageRangeBound("62", True), None, ["62", "62/", "ff"], ["61", "61/ff"]),
        (None, None, ["", "ff"], []),
    ],
    ids=["inclusive", "exclusive", "open-lower", "open-upper", "unbounded"],
)
def test_query_range_bounds(
    lower: StorageRangeBound | None, upper: StorageRangeBound | None, inside: list[str], outside: list[str]
) -> None:
    query_range = StorageQueryRange(lower, upper)
    assert all(query_range.contains(sort) for sort in inside)
    assert not any(query_range.contains(sort) for sort in outside)
