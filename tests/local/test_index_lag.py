"""The reference driver's eventual-index mode (``index_lag=N``): scans trail commits, point reads never do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runlane_conformance import (
    SettlingStore,
    StorageIndexConsistency,
    StorageTransaction,
    settle_store,
)
from runlane_conformance.contract.table_definitions import RunStatus
from runlane_conformance.harness import DriverOptionError
from runlane_conformance.local import LocalStorageDriver, LocalStoreHandle, local_harness
from runlane_conformance.suites._operator_support import run_record

from .helpers import FIXED, by_expiry, lease, lease_key


@pytest.fixture
def lagging() -> Iterator[LocalStoreHandle]:
    harness = local_harness({"index_lag": "2"})
    yield harness.open_store()
    harness.close()


@pytest.fixture
def lag_driver(lagging: LocalStoreHandle) -> LocalStorageDriver:
    return lagging.connect(clock=lambda: FIXED)


def _create(driver: LocalStorageDriver, name: str) -> None:
    driver.transaction(lambda tx: tx.create(lease(name)))


def _listed(driver: LocalStorageDriver) -> list[str]:
    return [item.key.id[1] for item in driver.query(by_expiry()).items]


def _candidates(driver: LocalStorageDriver) -> list[str]:
    page = driver.transaction(lambda tx: tx.query_candidates(by_expiry()))
    return [item.key.id[1] for item in page.items]


def test_a_lagging_store_advertises_eventual_indexes_and_a_plain_one_strong(
    lag_driver: LocalStorageDriver, driver: LocalStorageDriver
) -> None:
    assert lag_driver.profile.index_consistency is StorageIndexConsistency.EVENTUAL
    assert driver.profile.index_consistency is StorageIndexConsistency.STRONG


def test_scans_trail_by_at_most_the_lag_while_point_reads_are_exact(lag_driver: LocalStorageDriver) -> None:
    for name in ("a", "b", "c", "d"):
        _create(lag_driver, name)
        [stored] = lag_driver.transaction(lambda tx, name=name: tx.get([lease_key(name)]))  # type: ignore[misc]
        assert stored is not None, "a point read must see the commit at once"
    # Four commits, lag two: the first two are indexed, the last two are not yet.
    assert _listed(lag_driver) == ["a", "b"]
    assert _candidates(lag_driver) == ["a", "b"]
    assert lag_driver.store.stats()["unindexed_commits"] == 2


def test_a_removal_is_still_listed_until_the_index_catches_up(lag_driver: LocalStorageDriver) -> None:
    _create(lag_driver, "gone")
    lag_driver.store.settle()

    def delete(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("gone")])
        assert current is not None
        tx.delete(current)

    lag_driver.transaction(delete)
    assert _listed(lag_driver) == ["gone"], "a lagging index still shows the removed entry"
    assert lag_driver.transaction(lambda tx: tx.get([lease_key("gone")])) == [None]
    lag_driver.store.settle()
    assert _listed(lag_driver) == []


def test_settle_makes_every_finished_commit_visible_and_drops_the_history(
    lagging: LocalStoreHandle, lag_driver: LocalStorageDriver
) -> None:
    for name in ("a", "b", "c"):
        _create(lag_driver, name)
    assert isinstance(lagging, SettlingStore)
    assert settle_store(lagging, timeout=1.0) is True
    assert _listed(lag_driver) == ["a", "b", "c"]
    stats = lag_driver.store.stats()
    assert stats["unindexed_commits"] == 0
    assert stats["log_entries"] == 0 and stats["index_events"] == 0 and stats["versions"] == 3


def test_operator_reads_are_exact_even_when_indexes_lag(lag_driver: LocalStorageDriver) -> None:
    lag_driver.transaction(lambda tx: tx.create(run_record("ops", "r1", status=RunStatus.RUNNING)))
    assert _listed(lag_driver) == []  # unrelated index, just showing the store lags
    page = lag_driver.list_runs("ops", limit=10)
    assert [item.key.id[1] for item in page.items] == ["r1"]


def test_a_store_without_lag_is_settled_by_a_no_op(
    handle: LocalStoreHandle, driver: LocalStorageDriver
) -> None:
    _create(driver, "a")
    assert _listed(driver) == ["a"]
    assert settle_store(handle, timeout=1.0) is True
    assert driver.store.stats()["unindexed_commits"] == 0


def test_a_store_without_a_hook_reports_none() -> None:
    assert settle_store(object(), timeout=1.0) is None


@pytest.mark.parametrize("text", ["-1", "x", "1.5", ""])
def test_a_bad_index_lag_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(DriverOptionError, match="index_lag"):
        local_harness({"index_lag": text})


def test_index_lag_zero_is_the_strong_default() -> None:
    harness = local_harness({"index_lag": "0"})
    try:
        store = harness.open_store()
        assert store.connect().profile.index_consistency is StorageIndexConsistency.STRONG
    finally:
        harness.close()
