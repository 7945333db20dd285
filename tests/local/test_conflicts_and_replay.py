"""Optimistic validation and replay, each interleaving written out step by step.

In every test the first instance (``driver``) is inside its callback when the
second instance (``other``) commits; the first then tries to commit. The
``attempts`` lists record what each attempt of the first callback saw, so the
tests check both that a conflict was detected (a second attempt ran) and that
the replay started from a fresh snapshot.
"""

from __future__ import annotations

import pytest

from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.local import LocalStorageDriver, LocalStoreHandle, create_local_storage_driver

from .helpers import expiry, lease, lease_key, seed


def holder(driver: LocalStorageDriver, name: str) -> object:
    [record] = driver.transaction(lambda tx: tx.get([lease_key(name)]))
    return None if record is None else record.document.value["holder"]


def set_holder(driver: LocalStorageDriver, name: str, value: str) -> None:
    def work(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key(name)])
        assert current is not None
        tx.replace(current, lease(name, holder=value))

    driver.transaction(work)


def test_absent_read_then_create_elsewhere_conflicts(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    attempts: list[StoredRecord | None] = []

    def work(tx: StorageTransaction) -> None:
        [seen] = tx.get([lease_key("a")])  # 1. first reads "a" as absent
        attempts.append(seen)
        if len(attempts) == 1:
            seed(other, lease("a", holder="other"))  # 2. other creates "a" and commits
        tx.create(lease("b"))  # 3. first writes something that depended on "a" being absent

    driver.transaction(work)  # 4. first's commit must fail and replay
    assert attempts[0] is None and attempts[1] is not None
    assert holder(driver, "a") == "other"


def test_present_read_then_replace_elsewhere_conflicts(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("a", holder="h0"))
    seen: list[object] = []

    def work(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        seen.append(current.document.value["holder"])
        if len(seen) == 1:
            set_holder(other, "a", "other")  # lost update, if undetected
        tx.replace(current, lease("a", holder=f"{current.document.value['holder']}+first"))

    driver.transaction(work)
    assert seen == ["h0", "other"]
    assert holder(driver, "a") == "other+first"


def test_read_only_dependency_prevents_write_skew(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("x", holder="free"), lease("y", holder="free"))
    attempts = 0

    def claim_y_if_x_free(tx: StorageTransaction) -> None:
        nonlocal attempts
        attempts += 1
        x, y = tx.get([lease_key("x"), lease_key("y")])
        assert x is not None and y is not None
        if attempts == 1:
            set_holder(other, "x", "other")  # the dependency "x is free" is broken
        if x.document.value["holder"] == "free":
            tx.replace(y, lease("y", holder="first"))

    driver.transaction(claim_y_if_x_free)
    assert attempts == 2
    assert holder(driver, "y") == "free"  # replay saw x taken and did not claim y


def test_delete_and_identical_recreate_elsewhere_still_conflicts(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("a"))
    versions: list[str] = []

    def recreate(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.delete(current)

    def work(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        versions.append(current.version.value)
        if len(versions) == 1:
            other.transaction(recreate)
            seed(other, lease("a"))  # same content, so only the version tells them apart
        tx.replace(current, lease("a", holder="first"))

    driver.transaction(work)
    assert len(versions) == 2 and versions[0] != versions[1]
    assert holder(driver, "a") == "first"


def test_blind_creates_racing_have_exactly_one_winner(handle: LocalStoreHandle) -> None:
    driver = handle.connect()
    other = handle.connect()
    calls = 0

    def blind(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            seed(other, lease("a", holder="other"))
        tx.create(lease("a", holder="first"))

    with pytest.raises(StorageConflictError):
        driver.transaction(blind)
    assert calls == driver.max_transaction_attempts
    assert holder(driver, "a") == "other"


def test_read_only_attempts_see_one_consistent_snapshot(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("x", holder="v1"), lease("y", holder="v1"))

    def move_both(tx: StorageTransaction) -> None:
        x, y = tx.get([lease_key("x"), lease_key("y")])
        assert x is not None and y is not None
        tx.replace(x, lease("x", holder="v2"))
        tx.replace(y, lease("y", holder="v2"))

    def read_skew(tx: StorageTransaction) -> tuple[object, object]:
        [x] = tx.get([lease_key("x")])
        other.transaction(move_both)  # commits between the two reads
        [y] = tx.get([lease_key("y")])
        assert x is not None and y is not None
        return x.document.value["holder"], y.document.value["holder"]

    first, second = driver.transaction(read_skew)
    assert first == second


def test_a_snapshot_is_taken_at_the_first_read_not_when_the_attempt_starts(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    calls = 0

    def work(tx: StorageTransaction) -> object:
        nonlocal calls
        calls += 1
        seed(other, lease(f"a{calls}"))
        [seen] = tx.get([lease_key(f"a{calls}")])
        assert seen is not None
        tx.create(lease(f"b{calls}"))
        return seen.key.id[1]

    assert driver.transaction(work) == "a1"
    assert calls == 1


def test_replay_runs_the_callback_on_a_fresh_attempt_object(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("a"))
    objects: list[StorageTransaction] = []

    def work(tx: StorageTransaction) -> int:
        objects.append(tx)
        [current] = tx.get([lease_key("a")])
        assert current is not None
        if len(objects) == 1:
            set_holder(other, "a", "other")
        tx.replace(current, lease("a", holder=f"first{len(objects)}"))
        return len(objects)

    assert driver.transaction(work) == 2  # only the committed attempt's value escapes
    assert objects[0] is not objects[1]
    assert holder(driver, "a") == "first2"


def test_attempts_are_bounded_then_a_conflict_error_is_raised() -> None:
    from runlane_conformance.local import local_harness

    harness = local_harness({"max_transaction_attempts": "3"})
    store = harness.open_store()
    first, second = store.connect(), store.connect()
    seed(first, lease("a", holder="0"))
    calls = 0

    def always_loses(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        [current] = tx.get([lease_key("a")])
        assert current is not None
        set_holder(second, "a", str(calls))
        tx.replace(current, lease("a", holder="never"))

    with pytest.raises(StorageConflictError):
        first.transaction(always_loses)
    assert calls == 3
    assert holder(first, "a") == "3"
    harness.close()


def test_a_conflict_error_raised_by_the_callback_itself_is_not_replayed() -> None:
    driver = create_local_storage_driver()
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        raise StorageConflictError("from somewhere else")

    with pytest.raises(StorageConflictError, match="somewhere else"):
        driver.transaction(work)
    assert calls == 1


def test_aborted_attempts_leave_no_trace(driver: LocalStorageDriver, other: LocalStorageDriver) -> None:
    seed(driver, lease("a"))
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        [current] = tx.get([lease_key("a")])
        assert current is not None
        if calls == 1:
            set_holder(other, "a", "other")
            tx.create(lease(f"side-effect-{calls}"))
        tx.replace(current, lease("a", holder="first"))

    driver.transaction(work)
    assert holder(driver, "side-effect-1") is None


def test_unrelated_commits_do_not_conflict(driver: LocalStorageDriver, other: LocalStorageDriver) -> None:
    seed(driver, lease("a"), lease("b", holder=None))
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        [current] = tx.get([lease_key("a")])
        assert current is not None
        set_holder(other, "b", "other")  # b is released, so it is in no index either
        tx.replace(current, lease("a", expires=expiry(7)))

    driver.transaction(work)
    assert calls == 1
