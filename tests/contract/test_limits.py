"""The shared limit meter: every limit is accepted exactly at its value and refused one past it.

A refusal is a ``StorageLimitError`` that names the limit, so core can split the work by type alone.
"""

from __future__ import annotations

import pytest

from runlane_conformance import (
    QueryRecordsCommand,
    StorageIndexName,
    StorageLimitError,
    StorageLimitName,
    StorageLimits,
    StorageRecordKey,
    StorageTableName,
    StorageTransactionMeter,
    check_storage_record_size,
    create_storage_limit_error,
    measure_storage_record,
)

from .helpers import lease_record, lease_record_of_size

RECORD_BYTES = 200
LIMITS = StorageLimits(
    max_point_reads=3,
    max_query_results=4,
    max_transaction_records=5,
    max_record_bytes=RECORD_BYTES,
    max_transaction_bytes=3 * RECORD_BYTES,
)


def key(name: str) -> StorageRecordKey:
    return StorageRecordKey(StorageTableName.LEASES, ("env-a", name))


def keys(count: int, prefix: str = "k") -> list[StorageRecordKey]:
    return [key(f"{prefix}{i}") for i in range(count)]


def assert_limit(
    error: pytest.ExceptionInfo[StorageLimitError], limit: StorageLimitName, maximum: int, actual: int
) -> None:
    assert error.value.limit is limit
    assert (error.value.maximum, error.value.actual) == (maximum, actual)


# --- point reads -----------------------------------------------------------------------------------------


def test_point_reads_are_accepted_at_the_limit_and_refused_one_past_it() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.add_point_reads(keys(3))
    with pytest.raises(StorageLimitError) as error:
        meter.add_point_reads(keys(1, "more"))
    assert_limit(error, StorageLimitName.POINT_READS, 3, 4)


def test_point_reads_count_positions_so_duplicates_count_twice() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.add_point_reads([key("a")] * 3)
    assert meter.point_reads == 3
    with pytest.raises(StorageLimitError) as error:
        StorageTransactionMeter(LIMITS).add_point_reads([key("a")] * 4)
    assert_limit(error, StorageLimitName.POINT_READS, 3, 4)


def test_point_reads_accumulate_across_calls_in_one_attempt() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.add_point_reads(keys(2))
    meter.add_point_reads([key("k0")])
    with pytest.raises(StorageLimitError) as error:
        meter.add_point_reads([key("k0")])
    assert error.value.limit is StorageLimitName.POINT_READS


# --- query results ---------------------------------------------------------------------------------------


def test_query_page_size_is_accepted_at_the_limit_and_refused_one_past_it() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.check_query(QueryRecordsCommand(StorageIndexName.LEASES_BY_EXPIRY, "env-a", 4))
    with pytest.raises(StorageLimitError) as error:
        meter.check_query(QueryRecordsCommand(StorageIndexName.LEASES_BY_EXPIRY, "env-a", 5))
    assert_limit(error, StorageLimitName.QUERY_RESULTS, 4, 5)


# --- record bytes ----------------------------------------------------------------------------------------


def test_record_bytes_are_the_utf8_size_of_the_canonical_document() -> None:
    record = lease_record("é😀")
    assert measure_storage_record(record) == len(record.document.text.encode("utf-8")) == record.document.size
    assert measure_storage_record(record) == measure_storage_record(lease_record("ab")) + 4


def test_a_record_is_accepted_at_the_byte_limit_and_refused_one_byte_past_it() -> None:
    assert check_storage_record_size(lease_record_of_size(RECORD_BYTES), LIMITS) == RECORD_BYTES
    with pytest.raises(StorageLimitError) as error:
        check_storage_record_size(lease_record_of_size(RECORD_BYTES + 1), LIMITS)
    assert_limit(error, StorageLimitName.RECORD_BYTES, RECORD_BYTES, RECORD_BYTES + 1)


def test_an_oversized_write_is_refused_before_it_is_counted() -> None:
    meter = StorageTransactionMeter(LIMITS)
    oversized = lease_record_of_size(RECORD_BYTES + 1)
    with pytest.raises(StorageLimitError) as error:
        meter.add_write(oversized.key, oversized)
    assert error.value.limit is StorageLimitName.RECORD_BYTES
    assert (meter.keys, meter.bytes) == (set(), 0)


def test_an_oversized_appended_record_is_refused() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.add_appended(["a"], [RECORD_BYTES])
    with pytest.raises(StorageLimitError) as error:
        meter.add_appended(["b"], [RECORD_BYTES + 1])
    assert_limit(error, StorageLimitName.RECORD_BYTES, RECORD_BYTES, RECORD_BYTES + 1)


# --- transaction records ---------------------------------------------------------------------------------


def test_transaction_records_are_accepted_at_the_limit_and_refused_one_past_it() -> None:
    meter = StorageTransactionMeter(LIMITS)
    for name in ("a", "b", "c", "d", "e"):
        meter.add_write(key(name), None)
    with pytest.raises(StorageLimitError) as error:
        meter.add_write(key("f"), None)
    assert_limit(error, StorageLimitName.TRANSACTION_RECORDS, 5, 6)


def test_transaction_records_count_distinct_keys_across_reads_writes_and_appends() -> None:
    limits = StorageLimits(
        max_point_reads=10, max_transaction_records=5, max_record_bytes=200, max_transaction_bytes=600
    )
    meter = StorageTransactionMeter(limits)
    meter.add_point_reads([key("a"), key("b"), key("a")])  # two records
    written = lease_record("a")
    meter.add_write(written.key, written)  # same key as a read: still two
    meter.add_write(key("b"), None)  # deleting a read key: still two
    meter.add_appended([key("c").encoded, key("head").encoded], [10, 10])  # four
    meter.add_write(key("d"), None)  # five: exactly at the limit
    assert len(meter.keys) == 5
    with pytest.raises(StorageLimitError) as error:
        meter.add_point_reads([key("e")])
    assert_limit(error, StorageLimitName.TRANSACTION_RECORDS, 5, 6)


# --- transaction bytes -----------------------------------------------------------------------------------


def test_transaction_bytes_are_accepted_at_the_limit_and_refused_one_byte_past_it() -> None:
    meter = StorageTransactionMeter(LIMITS)
    for prefix in ("a", "b", "c"):
        record = lease_record_of_size(RECORD_BYTES, prefix=prefix)
        meter.add_write(record.key, record)
    assert meter.bytes == 3 * RECORD_BYTES
    smallest = lease_record("z")
    with pytest.raises(StorageLimitError) as error:
        meter.add_write(smallest.key, smallest)
    assert_limit(
        error, StorageLimitName.TRANSACTION_BYTES, 3 * RECORD_BYTES, 3 * RECORD_BYTES + smallest.document.size
    )


def test_one_byte_past_the_transaction_limit_is_refused() -> None:
    meter = StorageTransactionMeter(LIMITS)
    first = lease_record_of_size(RECORD_BYTES, prefix="a")
    meter.add_write(first.key, first)
    meter.add_appended([key("x").encoded], [RECORD_BYTES])
    meter.add_appended([key("y").encoded], [RECORD_BYTES - 1])
    assert meter.bytes == 3 * RECORD_BYTES - 1
    meter.add_appended([key("z").encoded], [1])
    with pytest.raises(StorageLimitError) as error:
        meter.add_appended([key("w").encoded], [1])
    assert_limit(error, StorageLimitName.TRANSACTION_BYTES, 3 * RECORD_BYTES, 3 * RECORD_BYTES + 1)


def test_deletes_and_reads_add_no_bytes() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.add_point_reads(keys(3))
    meter.add_write(key("k0"), None)
    assert meter.bytes == 0


def test_appended_records_and_head_count_their_bytes() -> None:
    meter = StorageTransactionMeter(LIMITS)
    meter.add_appended([key("r1").encoded, key("r2").encoded, key("head").encoded], [100, 100, 50])
    assert (len(meter.keys), meter.bytes) == (3, 250)


# --- the error itself ------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", list(StorageLimitName))
def test_create_storage_limit_error_names_the_limit_and_both_sizes(limit: StorageLimitName) -> None:
    error = create_storage_limit_error(limit, 10, 11)
    assert isinstance(error, StorageLimitError)
    assert (error.limit, error.maximum, error.actual) == (limit, 10, 11)


def test_limit_names_are_the_profile_field_names() -> None:
    assert {limit.value for limit in StorageLimitName} == set(StorageLimits.__dataclass_fields__)
