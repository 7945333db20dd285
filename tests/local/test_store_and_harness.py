"""The harness and entry point, instance independence, and the store's bounded bookkeeping."""

from __future__ import annotations

import pytest

from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import (
    StorageClockAuthority,
    StorageDurability,
    StorageIndexConsistency,
    StorageLimits,
)
from runlane_conformance.harness import DriverLoadError, DriverOptionError, load_harness
from runlane_conformance.local import (
    LocalStorageDriver,
    LocalStoreHandle,
    create_local_storage_driver,
    local_harness,
)

from .helpers import FIXED, by_expiry, expiry, lease, lease_key, names, seed


def test_the_local_entry_point_loads_this_harness() -> None:
    harness = load_harness("local", {"max_point_reads": "7"})
    store = harness.open_store()
    assert store.connect().profile.limits.max_point_reads == 7
    harness.close()


def test_the_profile_is_the_documented_one() -> None:
    profile = create_local_storage_driver().profile
    assert profile.durability is StorageDurability.PROCESS
    assert profile.clock_authority is StorageClockAuthority.CLIENT
    assert profile.index_consistency is StorageIndexConsistency.STRONG
    assert profile.limits == StorageLimits()
    assert profile.exclusive_candidates is True and profile.append is True


def test_a_driver_satisfies_the_driver_protocol() -> None:
    assert isinstance(create_local_storage_driver(), StorageDriver)


def test_each_created_driver_has_a_private_store() -> None:
    first, second = create_local_storage_driver(), create_local_storage_driver()
    seed(first, lease("a"))
    assert second.transaction(lambda tx: tx.get([lease_key("a")])) == [None]


def test_instances_of_one_store_see_each_others_commits_at_once(handle: LocalStoreHandle) -> None:
    first, second = handle.connect(), handle.connect()
    seed(first, lease("a"))
    assert second.transaction(lambda tx: tx.get([lease_key("a")]))[0] is not None
    assert names(second.query(by_expiry())) == ["a"]


def test_each_instance_uses_its_own_injected_clock(handle: LocalStoreHandle) -> None:
    from datetime import timedelta

    later = FIXED + timedelta(days=1)
    first, second = handle.connect(clock=lambda: FIXED), handle.connect(clock=lambda: later)
    assert first.transaction(lambda tx: tx.now()) == FIXED
    assert second.transaction(lambda tx: tx.now()) == later


def test_separate_stores_of_one_harness_are_isolated() -> None:
    harness = local_harness({})
    one, two = harness.open_store(), harness.open_store()
    seed(one.connect(), lease("a"))
    assert two.connect().transaction(lambda tx: tx.get([lease_key("a")])) == [None]
    harness.close()


def test_the_store_is_process_local_so_it_has_no_address() -> None:
    harness = local_harness({})
    assert harness.open_store().address() is None
    with pytest.raises(DriverLoadError):
        harness.attach("anything")
    harness.close()


@pytest.mark.parametrize(
    "options",
    [
        {"colour": "blue"},
        {"max_point_reads": "many"},
        {"max_point_reads": "0"},
        {"max_transaction_attempts": "-1"},
        {"max_record_bytes": "100", "max_transaction_bytes": "50"},
    ],
)
def test_bad_options_raise_one_clear_option_error(options: dict[str, str]) -> None:
    with pytest.raises(DriverOptionError) as caught:
        local_harness(options)
    assert "\n" not in str(caught.value)


def test_options_set_limits_and_the_attempt_budget() -> None:
    harness = local_harness({"max_query_results": "5", "max_transaction_attempts": "2"})
    driver = harness.open_store().connect()
    assert driver.profile.limits == StorageLimits(max_query_results=5)
    assert driver.max_transaction_attempts == 2


def test_closing_the_store_closes_its_instances() -> None:
    from runlane_conformance.contract.errors import StorageUsageError

    harness = local_harness({})
    store = harness.open_store()
    driver = store.connect()
    store.close()
    with pytest.raises(StorageUsageError):
        driver.transaction(lambda tx: None)


# -- bookkeeping stays bounded -------------------------------------------------------------------------


def bump(driver: LocalStorageDriver, name: str, minute: int) -> None:
    def work(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key(name)])
        assert current is not None
        tx.replace(current, lease(name, expires=expiry(minute)))

    driver.transaction(work)


def test_without_live_attempts_only_current_versions_are_kept(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"), lease("b"))
    for minute in range(20):
        bump(driver, "a", minute)
    stats = driver.store.stats()
    assert stats == {
        "records": 2,
        "versions": 2,
        "index_entries": 2,
        "index_events": 0,
        "log_entries": 0,
        "live_snapshots": 0,
        "holds": 0,
        "unindexed_commits": 0,
    }


def test_a_live_snapshot_pins_old_versions_until_it_ends(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("a"))

    def long_reader(tx: StorageTransaction) -> object:
        [before] = tx.get([lease_key("a")])
        for minute in range(1, 6):
            bump(other, "a", minute)
        pinned = driver.store.stats()
        [again] = tx.get([lease_key("a")])
        assert before == again  # the snapshot still sees the first version
        page = names(tx.query_candidates(by_expiry()))
        assert page == ["a"]
        return pinned

    pinned = driver.transaction(long_reader)
    assert pinned["versions"] > 1 and pinned["log_entries"] == 5  # type: ignore[index]
    after = driver.store.stats()
    assert after["versions"] == 1 and after["log_entries"] == 0 and after["index_entries"] == 1
    assert after["index_events"] == 0


def test_deleted_records_leave_nothing_behind(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))
    driver.transaction(lambda tx: tx.delete(tx.get([lease_key("a")])[0]))  # type: ignore[arg-type]
    assert driver.store.stats()["versions"] == 0
    assert driver.store.stats()["index_entries"] == 0


def test_bulk_load_makes_records_readable_and_indexed(driver: LocalStorageDriver) -> None:
    loaded = driver.store.bulk_load(lease(f"n{i:03d}", expires=expiry(i % 60)) for i in range(200))
    assert loaded == 200
    assert len(driver.query(by_expiry(100)).items) == 100
    assert driver.transaction(lambda tx: tx.get([lease_key("n150")]))[0] is not None
    bump(driver, "n150", 1)
