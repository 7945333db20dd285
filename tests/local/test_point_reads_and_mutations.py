"""Point reads, conditional create, exact replace/delete, versions and defensive values."""

from __future__ import annotations

import pytest

from runlane_conformance.contract.errors import StorageCorruptionError, StorageValidationError
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.local import LocalStorageDriver

from .helpers import by_expiry, expiry, lease, lease_key, names, seed


def read(driver: LocalStorageDriver, *keys: str) -> list[StoredRecord | None]:
    return driver.transaction(lambda tx: tx.get([lease_key(name) for name in keys]))


def test_get_keeps_positions_duplicates_and_misses(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"), lease("b"))
    got = read(driver, "b", "missing", "a", "b")
    assert [None if r is None else r.key.id[1] for r in got] == ["b", None, "a", "b"]
    assert got[0] == got[3]


def test_get_of_empty_list_returns_empty_list(driver: LocalStorageDriver) -> None:
    assert driver.transaction(lambda tx: tx.get([])) == []


def test_get_refuses_a_string_instead_of_keys(driver: LocalStorageDriver) -> None:
    with pytest.raises(StorageValidationError):
        driver.transaction(lambda tx: tx.get("leases:env/a"))  # type: ignore[arg-type]


def test_created_record_is_read_back_with_its_document_and_indexes(driver: LocalStorageDriver) -> None:
    record = lease("a", expires=expiry(3))
    seed(driver, record)
    [stored] = read(driver, "a")
    assert stored is not None
    assert stored.key == record.key
    assert stored.document == record.document
    assert stored.indexes == record.indexes


def test_create_accepts_a_mapping_and_validates_it(driver: LocalStorageDriver) -> None:
    record = lease("a")
    as_mapping = {
        "key": {"table": "leases", "id": ["env", "a"]},
        "document": record.document.to_json(),
        "indexes": [
            {"index": entry.index.value, "partition": entry.partition, "sort": entry.sort}
            for entry in record.indexes
        ],
    }
    driver.transaction(lambda tx: tx.create(as_mapping))  # type: ignore[arg-type]
    assert read(driver, "a")[0] is not None


def test_create_refuses_a_mapping_whose_indexes_disagree_with_its_document(
    driver: LocalStorageDriver,
) -> None:
    record = lease("a")
    bad = {
        "key": {"table": "leases", "id": ["env", "a"]},
        "document": record.document.to_json(),
        "indexes": [],
    }
    with pytest.raises(StorageCorruptionError):
        driver.transaction(lambda tx: tx.create(bad))  # type: ignore[arg-type]
    assert read(driver, "a") == [None]


def test_replace_moves_every_index_entry_in_the_same_commit(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a", expires=expiry(1)), lease("b", expires=expiry(2)))

    def move(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.replace(current, lease("a", expires=expiry(9)))

    driver.transaction(move)
    page = driver.query(by_expiry())
    assert names(page) == ["b", "a"]
    assert [item.sort for item in page.items][1] == lease("a", expires=expiry(9)).indexes[0].sort


def test_replace_that_drops_the_index_entry_removes_it(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))

    def release(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.replace(current, lease("a", holder=None))

    driver.transaction(release)
    assert names(driver.query(by_expiry())) == []
    assert read(driver, "a")[0] is not None


def test_delete_removes_the_record_and_its_index_entries(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"), lease("b"))

    def remove(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.delete(current)

    driver.transaction(remove)
    assert read(driver, "a") == [None]
    assert names(driver.query(by_expiry())) == ["b"]


def test_every_commit_assigns_a_new_positive_decimal_version(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))
    [first] = read(driver, "a")
    assert first is not None

    def bump(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.replace(current, lease("a", expires=expiry(5)))

    driver.transaction(bump)
    [second] = read(driver, "a")
    assert second is not None
    assert first.version != second.version
    assert int(first.version.value) > 0 and int(second.version.value) > 0


def test_versions_are_never_reused_after_delete_and_identical_recreate(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))
    seen = set()
    for _ in range(3):
        [current] = read(driver, "a")
        assert current is not None
        assert current.version not in seen
        seen.add(current.version)
        driver.transaction(lambda tx, current=current: tx.delete(tx.get([current.key])[0]))  # type: ignore[arg-type]
        seed(driver, lease("a"))
    assert len(seen) == 3


def test_versions_come_from_a_store_wide_counter_shared_by_instances(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(driver, lease("a"))
    seed(other, lease("b"))
    [a, b] = read(driver, "a", "b")
    assert a is not None and b is not None
    assert a.version != b.version


def test_read_records_are_immutable_and_share_nothing_mutable(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))
    [stored] = read(driver, "a")
    assert stored is not None
    with pytest.raises(AttributeError):
        stored.version = stored.version  # type: ignore[misc]
    with pytest.raises(TypeError):
        stored.document.value["holder"] = "thief"  # type: ignore[index]
    copy = stored.document.to_json()
    copy["value"]["holder"] = "thief"  # type: ignore[index]
    [again] = read(driver, "a")
    assert again is not None and again.document.value["holder"] == "worker"


def test_caller_input_mutated_after_create_changes_nothing_stored(driver: LocalStorageDriver) -> None:
    record = lease("a")
    envelope = record.document.to_json()
    as_mapping = {"key": {"table": "leases", "id": ["env", "a"]}, "document": envelope, "indexes": []}
    as_mapping["indexes"] = [
        {"index": e.index.value, "partition": e.partition, "sort": e.sort} for e in record.indexes
    ]
    driver.transaction(lambda tx: tx.create(as_mapping))  # type: ignore[arg-type]
    envelope["value"]["holder"] = "changed later"  # type: ignore[index]
    [stored] = read(driver, "a")
    assert stored is not None and stored.document.value["holder"] == "worker"


def test_an_exception_in_the_callback_rolls_back_every_staged_mutation(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))

    class Boom(Exception):
        pass

    def fail(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.delete(current)
        tx.create(lease("b"))
        raise Boom

    with pytest.raises(Boom):
        driver.transaction(fail)
    assert [r is not None for r in read(driver, "a", "b")] == [True, False]


def test_only_the_committed_attempts_value_is_returned(driver: LocalStorageDriver) -> None:
    assert driver.transaction(lambda tx: ("value", tx.get([lease_key("a")]))) == ("value", [None])
