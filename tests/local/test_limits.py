"""Advertised limits: accepted exactly at the limit, refused one past it, nothing committed, no replay."""

from __future__ import annotations

import contextlib

import pytest

from runlane_conformance.contract.errors import StorageLimitError, StorageLimitName
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.values import StorageLimits
from runlane_conformance.local import LocalStorageDriver, create_local_storage_driver

from .helpers import by_expiry, lease, lease_key, seed

SMALL = StorageLimits(
    max_point_reads=3,
    max_query_results=2,
    max_transaction_records=3,
    max_record_bytes=200,
    max_transaction_bytes=400,
)


@pytest.fixture
def small() -> LocalStorageDriver:
    return create_local_storage_driver(limits=SMALL)


def count(driver: LocalStorageDriver, *names: str) -> int:
    found = driver.transaction(lambda tx: tx.get([lease_key(name) for name in names]))
    return sum(record is not None for record in found)


def test_default_limits_are_the_documented_ones() -> None:
    limits = create_local_storage_driver().profile.limits
    assert (
        limits.max_point_reads,
        limits.max_query_results,
        limits.max_transaction_records,
        limits.max_record_bytes,
        limits.max_transaction_bytes,
    ) == (100, 100, 100, 400 * 1024, 4 * 1024 * 1024)


def test_injected_limits_replace_the_profile_limits(small: LocalStorageDriver) -> None:
    assert small.profile.limits == SMALL


def test_point_reads_count_every_position_including_duplicates(small: LocalStorageDriver) -> None:
    assert len(small.transaction(lambda tx: tx.get([lease_key("a")] * 3))) == 3
    with pytest.raises(StorageLimitError) as caught:
        small.transaction(lambda tx: (tx.get([lease_key("a")] * 2), tx.get([lease_key("a")] * 2)))
    assert caught.value.limit is StorageLimitName.POINT_READS


def test_query_page_size_is_limited(small: LocalStorageDriver) -> None:
    small.transaction(lambda tx: tx.query_candidates(by_expiry(2)))
    with pytest.raises(StorageLimitError) as caught:
        small.transaction(lambda tx: tx.query_candidates(by_expiry(3)))
    assert caught.value.limit is StorageLimitName.QUERY_RESULTS


def test_transaction_records_count_reads_and_writes_together(small: LocalStorageDriver) -> None:
    def at_limit(tx: StorageTransaction) -> None:
        tx.get([lease_key("a"), lease_key("b")])
        tx.create(lease("c"))

    small.transaction(at_limit)

    def one_past(tx: StorageTransaction) -> None:
        tx.get([lease_key("a"), lease_key("b"), lease_key("e")])
        tx.create(lease("d"))  # a fourth distinct key

    with pytest.raises(StorageLimitError) as caught:
        small.transaction(one_past)
    assert caught.value.limit is StorageLimitName.TRANSACTION_RECORDS
    assert count(small, "c", "d") == 1


def test_record_bytes_are_limited_per_record() -> None:
    size = lease("a").document.size
    driver = create_local_storage_driver(
        limits=StorageLimits(
            max_record_bytes=size, max_transaction_bytes=size * 10, max_transaction_records=10
        )
    )
    seed(driver, lease("a"))
    with pytest.raises(StorageLimitError) as caught:
        seed(driver, lease("ab"))  # one byte longer
    assert caught.value.limit is StorageLimitName.RECORD_BYTES
    assert count(driver, "ab") == 0


def test_transaction_bytes_sum_every_write_and_nothing_is_committed() -> None:
    size = lease("a").document.size
    driver = create_local_storage_driver(
        limits=StorageLimits(
            max_record_bytes=size, max_transaction_bytes=size * 2, max_transaction_records=10
        )
    )
    seed(driver, lease("a"), lease("b"))
    with pytest.raises(StorageLimitError) as caught:
        seed(driver, lease("c"), lease("d"), lease("e"))
    assert caught.value.limit is StorageLimitName.TRANSACTION_BYTES
    assert count(driver, "c", "d", "e") == 0


def test_a_limit_error_is_not_replayed(small: LocalStorageDriver) -> None:
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.get([lease_key("a")] * 4)

    with pytest.raises(StorageLimitError):
        small.transaction(work)
    assert calls == 1


def test_an_attempt_that_swallowed_a_limit_error_still_commits_nothing(small: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> str:
        tx.create(lease("a"))
        with contextlib.suppress(StorageLimitError):
            tx.create(lease("b", holder="x" * 300))
        return "pretend all is well"

    with pytest.raises(StorageLimitError):
        small.transaction(work)
    assert count(small, "a", "b") == 0
