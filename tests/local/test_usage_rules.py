"""Protocol misuse is refused with the error type core acts on, and changes nothing."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from runlane_conformance.contract.errors import (
    StorageAttemptEndedError,
    StorageConcurrentUseError,
    StorageDuplicateMutationError,
    StorageKeyChangeError,
    StorageSealedError,
    StorageUsageError,
    StorageValidationError,
)
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.local import LocalStorageDriver, LocalStoreHandle, create_local_storage_driver

from .helpers import FIXED, by_expiry, expiry, lease, lease_key, seed


def present(tx: StorageTransaction, name: str) -> StoredRecord:
    [record] = tx.get([lease_key(name)])
    assert record is not None
    return record


# -- now() -----------------------------------------------------------------------------------------


def test_now_is_sampled_once_per_attempt_and_then_frozen() -> None:
    ticks = iter([FIXED, FIXED + timedelta(seconds=1), FIXED + timedelta(seconds=2)])
    driver = create_local_storage_driver(clock=lambda: next(ticks))
    assert driver.transaction(lambda tx: (tx.now(), tx.now(), tx.now())) == (FIXED, FIXED, FIXED)
    assert driver.transaction(lambda tx: tx.now()) == FIXED + timedelta(seconds=1)


def test_now_uses_utc_wall_clock_without_injection() -> None:
    before = datetime.now(UTC)
    sampled = create_local_storage_driver().transaction(lambda tx: tx.now())
    assert before <= sampled <= datetime.now(UTC)
    assert sampled.utcoffset() == timedelta(0)


def test_a_naive_clock_is_refused() -> None:
    driver = create_local_storage_driver(clock=lambda: datetime(2024, 1, 1))
    with pytest.raises(StorageValidationError):
        driver.transaction(lambda tx: tx.now())


@pytest.mark.parametrize("read", ["get", "query_candidates"])
def test_reads_after_now_are_sealed(driver: LocalStorageDriver, read: str) -> None:
    def work(tx: StorageTransaction) -> None:
        tx.now()
        if read == "get":
            tx.get([lease_key("a")])
        else:
            tx.query_candidates(by_expiry())

    with pytest.raises(StorageSealedError):
        driver.transaction(work)


@pytest.mark.parametrize("mutation", ["create", "replace", "delete", "append"])
@pytest.mark.parametrize("read", ["get", "query_candidates"])
def test_reads_after_the_first_mutation_are_sealed(
    driver: LocalStorageDriver, mutation: str, read: str
) -> None:
    seed(driver, lease("a"))

    def work(tx: StorageTransaction) -> None:
        current = present(tx, "a")
        if mutation == "create":
            tx.create(lease("b"))
        elif mutation == "replace":
            tx.replace(current, lease("a", expires=expiry(2)))
        elif mutation == "delete":
            tx.delete(current)
        else:
            tx.append(
                {
                    "stream": "observations",
                    "partition": "env",
                    "values": [{"source": {"kind": "k", "id": "i"}, "data": {}}],
                }
            )  # type: ignore[arg-type]
        if read == "get":
            tx.get([lease_key("c")])
        else:
            tx.query_candidates(by_expiry())

    with pytest.raises(StorageSealedError):
        driver.transaction(work)
    assert driver.transaction(lambda tx: tx.get([lease_key("b")])) == [None]


def test_a_refused_read_does_not_poison_the_attempt(driver: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> str:
        tx.create(lease("a"))
        with pytest.raises(StorageSealedError):
            tx.get([lease_key("b")])
        return "committed"

    assert driver.transaction(work) == "committed"
    assert driver.transaction(lambda tx: tx.get([lease_key("a")]))[0] is not None


# -- one mutation per key ----------------------------------------------------------------------------


def test_a_second_mutation_of_one_key_is_refused(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))

    def work(tx: StorageTransaction) -> None:
        current = present(tx, "a")
        tx.replace(current, lease("a", expires=expiry(1)))
        tx.delete(current)

    with pytest.raises(StorageDuplicateMutationError):
        driver.transaction(work)


def test_creating_one_key_twice_is_refused(driver: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> None:
        tx.create(lease("a"))
        tx.create(lease("a", expires=expiry(1)))

    with pytest.raises(StorageDuplicateMutationError):
        driver.transaction(work)
    assert driver.transaction(lambda tx: tx.get([lease_key("a")])) == [None]


def test_create_of_a_key_read_as_present_is_refused(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))

    def work(tx: StorageTransaction) -> None:
        present(tx, "a")
        tx.create(lease("a", expires=expiry(4)))

    with pytest.raises(StorageDuplicateMutationError):
        driver.transaction(work)


def test_create_of_a_key_read_as_absent_is_allowed(driver: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> None:
        assert tx.get([lease_key("a")]) == [None]
        tx.create(lease("a"))

    driver.transaction(work)
    assert driver.transaction(lambda tx: tx.get([lease_key("a")]))[0] is not None


# -- exact current records ---------------------------------------------------------------------------


def test_a_replacement_cannot_change_the_key(driver: LocalStorageDriver) -> None:
    seed(driver, lease("a"))
    with pytest.raises(StorageKeyChangeError):
        driver.transaction(lambda tx: tx.replace(present(tx, "a"), lease("b")))
    assert driver.transaction(lambda tx: tx.get([lease_key("b")])) == [None]


@pytest.mark.parametrize("operation", ["replace", "delete"])
def test_replace_and_delete_need_the_record_this_attempt_read(
    driver: LocalStorageDriver, operation: str
) -> None:
    seed(driver, lease("a"))
    stale = driver.transaction(lambda tx: present(tx, "a"))

    def work(tx: StorageTransaction) -> None:
        # `stale` came from another attempt; this attempt never read "a"
        if operation == "replace":
            tx.replace(stale, lease("a", expires=expiry(8)))
        else:
            tx.delete(stale)

    with pytest.raises(StorageKeyChangeError):
        driver.transaction(work)


@pytest.mark.parametrize("operation", ["replace", "delete"])
def test_replace_and_delete_refuse_a_version_other_than_the_one_read(
    driver: LocalStorageDriver, operation: str
) -> None:
    seed(driver, lease("a"))
    old = driver.transaction(lambda tx: present(tx, "a"))
    driver.transaction(lambda tx: tx.replace(present(tx, "a"), lease("a", expires=expiry(1))))

    def work(tx: StorageTransaction) -> None:
        present(tx, "a")  # reads the newer version
        if operation == "replace":
            tx.replace(old, lease("a", expires=expiry(2)))
        else:
            tx.delete(old)

    with pytest.raises(StorageKeyChangeError):
        driver.transaction(work)


# -- attempt lifetime and threads --------------------------------------------------------------------


@pytest.mark.parametrize(
    "use",
    ["get", "query_candidates", "now", "create", "replace", "delete", "append"],
)
def test_a_transaction_object_is_dead_after_its_attempt(driver: LocalStorageDriver, use: str) -> None:
    seed(driver, lease("a"))
    kept: list[tuple[StorageTransaction, StoredRecord]] = []
    driver.transaction(lambda tx: kept.append((tx, present(tx, "a"))))
    tx, current = kept[0]
    calls = {
        "get": lambda: tx.get([lease_key("a")]),
        "query_candidates": lambda: tx.query_candidates(by_expiry()),
        "now": tx.now,
        "create": lambda: tx.create(lease("z")),
        "replace": lambda: tx.replace(current, lease("a", expires=expiry(3))),
        "delete": lambda: tx.delete(current),
        "append": lambda: tx.append(
            {
                "stream": "observations",
                "partition": "env",
                "values": [{"source": {"kind": "k", "id": "i"}, "data": {}}],
            }  # type: ignore[arg-type]
        ),
    }
    with pytest.raises(StorageAttemptEndedError):
        calls[use]()
    assert driver.transaction(lambda tx: tx.get([lease_key("z")])) == [None]


def test_a_transaction_object_is_dead_after_its_callback_raised(driver: LocalStorageDriver) -> None:
    kept: list[StorageTransaction] = []

    def work(tx: StorageTransaction) -> None:
        kept.append(tx)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        driver.transaction(work)
    with pytest.raises(StorageAttemptEndedError):
        kept[0].create(lease("a"))


def test_two_threads_using_one_attempt_at_once_are_refused(handle: LocalStoreHandle) -> None:
    inside = threading.Event()
    release = threading.Event()

    def slow_clock() -> datetime:
        inside.set()
        assert release.wait(10)
        return FIXED

    driver = handle.connect(clock=slow_clock)
    outcome: list[BaseException | str] = []

    def work(tx: StorageTransaction) -> None:
        def second_thread() -> None:
            assert inside.wait(10)
            try:
                tx.get([lease_key("a")])
                outcome.append("not refused")
            except BaseException as error:
                outcome.append(error)
            finally:
                release.set()

        thread = threading.Thread(target=second_thread)
        thread.start()
        tx.now()  # blocks in the clock until the second thread has tried
        thread.join(10)
        assert not thread.is_alive()

    driver.transaction(work)
    assert len(outcome) == 1 and isinstance(outcome[0], StorageConcurrentUseError)


def test_a_closed_instance_refuses_work_but_the_store_lives_on(handle: LocalStoreHandle) -> None:
    first, second = handle.connect(), handle.connect()
    seed(first, lease("a"))
    first.close()
    with pytest.raises(StorageUsageError):
        first.transaction(lambda tx: tx.get([lease_key("a")]))
    assert second.transaction(lambda tx: tx.get([lease_key("a")]))[0] is not None
