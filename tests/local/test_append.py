"""Ordered append: positions allocated atomically at commit, nothing consumed by rollback or replay."""

from __future__ import annotations

from typing import Any

import pytest

from runlane_conformance.contract.catalog import StorageIndexName
from runlane_conformance.contract.encodings import U64_MAX
from runlane_conformance.contract.errors import (
    StorageDuplicateMutationError,
    StorageLimitError,
    StorageStreamExhaustedError,
    StorageUsageError,
)
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.streams import (
    AppendRecordsCommand,
    StorageStreamName,
    storage_stream_layouts,
)
from runlane_conformance.contract.values import QueryRecordsCommand, StorageLimits
from runlane_conformance.local import LocalStorageDriver, create_local_storage_driver

from .helpers import lease, lease_key, seed

LAYOUT = storage_stream_layouts[StorageStreamName.OBSERVATIONS]


def observation(n: int) -> dict[str, Any]:
    return {"source": {"kind": "sensor", "id": f"s{n}"}, "data": {"n": n}}


def batch(*numbers: int, partition: str = "env") -> AppendRecordsCommand:
    return AppendRecordsCommand(
        StorageStreamName.OBSERVATIONS, partition, tuple(observation(n) for n in numbers)
    )


def positions(driver: LocalStorageDriver, partition: str = "env") -> list[tuple[str, object]]:
    page = driver.query(QueryRecordsCommand(StorageIndexName.OBSERVATIONS_BY_POSITION, partition, 100))
    records = driver.transaction(lambda tx: tx.get([item.key for item in page.items]))
    out = []
    for record in records:
        assert record is not None
        data = record.document.value["data"]
        out.append((str(record.document.value["position"]), data["n"]))  # type: ignore[index]
    return out


def head_next(driver: LocalStorageDriver, partition: str = "env") -> object:
    [head] = driver.transaction(lambda tx: tx.get([LAYOUT.head_key(partition)]))
    return None if head is None else head.document.value["next"]


def test_profile_offers_append(driver: LocalStorageDriver) -> None:
    assert driver.profile.append is True


def test_batches_get_contiguous_positions_after_earlier_batches(driver: LocalStorageDriver) -> None:
    driver.transaction(lambda tx: tx.append(batch(1, 2)))
    driver.transaction(lambda tx: tx.append(batch(3)))
    assert positions(driver) == [("1", 1), ("2", 2), ("3", 3)]
    assert head_next(driver) == "4"


def test_append_returns_no_positions(driver: LocalStorageDriver) -> None:
    assert driver.transaction(lambda tx: tx.append(batch(1))) is None


def test_a_mapping_command_is_accepted(driver: LocalStorageDriver) -> None:
    driver.transaction(
        lambda tx: tx.append({"stream": "observations", "partition": "env", "values": [observation(7)]})  # type: ignore[arg-type]
    )
    assert positions(driver) == [("1", 7)]


def test_partitions_have_independent_positions(driver: LocalStorageDriver) -> None:
    driver.transaction(lambda tx: tx.append(batch(1)))
    driver.transaction(lambda tx: tx.append(batch(2, partition="other")))
    assert positions(driver, "other") == [("1", 2)]


def test_append_commits_atomically_with_point_mutations(driver: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> None:
        tx.create(lease("a"))
        tx.append(batch(1))
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        driver.transaction(work)
    assert positions(driver) == [] and head_next(driver) is None

    def both(tx: StorageTransaction) -> None:
        tx.create(lease("a"))
        tx.append(batch(1))

    driver.transaction(both)
    assert positions(driver) == [("1", 1)]
    assert driver.transaction(lambda tx: tx.get([lease_key("a")]))[0] is not None


def test_replayed_attempts_consume_no_positions(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("a"))
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        [current] = tx.get([lease_key("a")])
        assert current is not None
        if calls == 1:
            other.transaction(lambda inner: inner.append(batch(100)))  # another writer appends meanwhile
            other.transaction(
                lambda inner: inner.replace(inner.get([lease_key("a")])[0], lease("a", holder="x"))
            )  # type: ignore[arg-type]
        tx.replace(current, lease("a", holder="first"))
        tx.append(batch(calls))

    driver.transaction(work)
    assert calls == 2
    assert positions(driver) == [("1", 100), ("2", 2)]


def test_concurrent_appends_do_not_conflict_with_each_other(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        other.transaction(lambda inner: inner.append(batch(1)))
        tx.append(batch(2))

    driver.transaction(work)
    assert calls == 1
    assert positions(driver) == [("1", 1), ("2", 2)]


def test_a_point_writer_reading_the_head_conflicts_with_a_native_append(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    from runlane_conformance.contract.streams import materialize_storage_append, read_storage_stream_position

    calls = 0

    def point_writer(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        [head] = tx.get([LAYOUT.head_key("env")])
        start = read_storage_stream_position(StorageStreamName.OBSERVATIONS, "env", head)
        if calls == 1:
            other.transaction(lambda inner: inner.append(batch(1)))
        placed = materialize_storage_append(batch(2), start)
        for record in placed.records:
            tx.create(record)
        if head is None:
            tx.create(placed.head)
        else:
            tx.replace(head, placed.head)

    driver.transaction(point_writer)
    assert calls == 2
    assert positions(driver) == [("1", 1), ("2", 2)]
    assert head_next(driver) == "3"


def test_only_one_append_batch_per_attempt(driver: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> None:
        tx.append(batch(1))
        tx.append(batch(2))

    with pytest.raises(StorageDuplicateMutationError):
        driver.transaction(work)
    assert positions(driver) == []


def test_an_appending_attempt_cannot_mutate_that_stream(driver: LocalStorageDriver) -> None:
    driver.transaction(lambda tx: tx.append(batch(1)))

    def read_then_append(tx: StorageTransaction) -> None:
        tx.get([LAYOUT.head_key("env")])
        tx.append(batch(2))

    with pytest.raises(StorageUsageError):
        driver.transaction(read_then_append)

    def append_then_write(tx: StorageTransaction) -> None:
        tx.append(batch(2))
        tx.create(
            build_storage_record("observations", {**observation(9), "environment": "env", "position": "9"})
        )

    with pytest.raises(StorageDuplicateMutationError):
        driver.transaction(append_then_write)
    assert positions(driver) == [("1", 1)]


def test_an_exhausted_head_fails_without_changing_anything(driver: LocalStorageDriver) -> None:
    near_end = build_storage_record(
        "stream_heads", {"stream": "observations", "partition": "env", "next": str(U64_MAX - 1)}
    )
    seed(driver, near_end)
    with pytest.raises(StorageStreamExhaustedError):
        driver.transaction(lambda tx: tx.append(batch(1, 2)))  # would need head 2**64
    assert head_next(driver) == str(U64_MAX - 1)
    assert positions(driver) == []
    driver.transaction(lambda tx: tx.append(batch(1)))  # the last usable position; head becomes 2**64-1
    assert positions(driver) == [(str(U64_MAX - 1), 1)]
    assert head_next(driver) == str(U64_MAX)
    with pytest.raises(StorageStreamExhaustedError):
        driver.transaction(lambda tx: tx.append(batch(2)))
    assert head_next(driver) == str(U64_MAX)


def test_append_counts_toward_the_transaction_limits() -> None:
    driver = create_local_storage_driver(
        limits=StorageLimits(max_transaction_records=3, max_record_bytes=1000, max_transaction_bytes=3000)
    )
    driver.transaction(lambda tx: tx.append(batch(1, 2)))  # two records + head = 3
    with pytest.raises(StorageLimitError):
        driver.transaction(lambda tx: tx.append(batch(1, 2, 3)))
    with pytest.raises(StorageLimitError):
        driver.transaction(lambda tx: (tx.get([lease_key("a")]), tx.append(batch(1, 2))))
    assert positions(driver) == [("1", 1), ("2", 2)]
