"""Exclusive candidate selection: disjoint pages across instances, held until the attempt ends."""

from __future__ import annotations

import threading

import pytest

from runlane_conformance.contract.catalog import StorageCandidateMode
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.local import LocalStorageDriver

from .helpers import by_expiry, expiry, lease, lease_key, names, seed

EXCLUSIVE = StorageCandidateMode.EXCLUSIVE


@pytest.fixture
def queue(driver: LocalStorageDriver) -> LocalStorageDriver:
    seed(driver, *(lease(name, expires=expiry(minute)) for minute, name in enumerate("abcdef")))
    return driver


def select(driver: LocalStorageDriver, limit: int, mode: StorageCandidateMode = EXCLUSIVE) -> list[str]:
    return driver.transaction(lambda tx: names(tx.query_candidates(by_expiry(limit), mode=mode)))


def test_profile_offers_exclusive_candidates(driver: LocalStorageDriver) -> None:
    assert driver.profile.exclusive_candidates is True


def test_rows_held_by_another_instance_are_skipped(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    def work(tx: StorageTransaction) -> tuple[list[str], list[str]]:
        mine = names(tx.query_candidates(by_expiry(2), mode=EXCLUSIVE))
        theirs = select(other, 2)  # second instance, while the first still holds a and b
        return mine, theirs

    assert queue.transaction(work) == (["a", "b"], ["c", "d"])


def test_holds_are_released_when_the_attempt_commits(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    assert select(queue, 2) == ["a", "b"]
    assert select(other, 2) == ["a", "b"]
    assert queue.store.stats()["holds"] == 0


def test_holds_are_released_when_the_callback_raises(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    def work(tx: StorageTransaction) -> None:
        tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)
        raise RuntimeError("worker crashed")

    with pytest.raises(RuntimeError):
        queue.transaction(work)
    assert select(other, 2) == ["a", "b"]


def test_holds_are_released_when_the_attempt_is_replayed(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seen_by_other: list[list[str]] = []
    pages: list[list[str]] = []

    def bump_f(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("f")])
        assert current is not None
        tx.replace(current, lease("f", holder="other", expires=expiry(5)))

    def work(tx: StorageTransaction) -> None:
        pages.append(names(tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)))
        [f] = tx.get([lease_key("f")])
        assert f is not None
        if len(pages) == 1:
            other.transaction(bump_f)  # forces a replay of this attempt
        else:
            seen_by_other.append(select(other, 2))  # the replay holds a and b again, nothing more
        tx.replace(f, lease("f", holder="first", expires=expiry(5)))

    queue.transaction(work)
    assert pages == [["a", "b"], ["a", "b"]]
    assert seen_by_other == [["c", "d"]]
    assert queue.store.stats()["holds"] == 0


def test_the_same_attempt_sees_its_own_held_rows_again(queue: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> tuple[list[str], list[str]]:
        return (
            names(tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)),
            names(tx.query_candidates(by_expiry(3), mode=EXCLUSIVE)),
        )

    assert queue.transaction(work) == (["a", "b"], ["a", "b", "c"])


def test_no_lookahead_row_is_held(queue: LocalStorageDriver, other: LocalStorageDriver) -> None:
    def work(tx: StorageTransaction) -> list[str]:
        page = tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)
        assert page.cursor is not None
        return select(other, 1)

    assert queue.transaction(work) == ["c"]


def test_advisory_mode_and_plain_query_never_hold(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    def work(tx: StorageTransaction) -> tuple[list[str], list[str], list[str]]:
        tx.query_candidates(by_expiry(2), mode=StorageCandidateMode.ADVISORY)
        tx.query_candidates(by_expiry(2))
        queue.query(by_expiry(2))
        return (
            select(other, 2),
            names(other.query(by_expiry(2))),
            select(other, 2, StorageCandidateMode.ADVISORY),
        )

    assert queue.transaction(work) == (["a", "b"], ["a", "b"], ["a", "b"])


def test_advisory_readers_still_see_rows_held_exclusively(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    def work(tx: StorageTransaction) -> list[str]:
        tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)
        return select(other, 2, StorageCandidateMode.ADVISORY)

    assert queue.transaction(work) == ["a", "b"]


def test_an_exclusive_page_of_only_busy_rows_is_empty(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    def work(tx: StorageTransaction) -> list[str]:
        tx.query_candidates(by_expiry(6), mode=EXCLUSIVE)
        return select(other, 6)

    assert queue.transaction(work) == []


def test_a_busy_rows_owner_committing_does_not_replay_the_skipper(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    holding = threading.Event()
    may_commit = threading.Event()
    errors: list[BaseException] = []

    def holder(tx: StorageTransaction) -> None:
        page = tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)  # 1. holder takes a and b
        records = tx.get([item.key for item in page.items])
        holding.set()
        assert may_commit.wait(10)  # 3. ... and commits only once the skipper has scanned
        for record in records:
            assert record is not None
            tx.replace(record, lease(record.key.id[1], holder="done", expires=expiry(30)))

    def run_holder() -> None:
        try:
            queue.transaction(holder)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run_holder)
    thread.start()
    assert holding.wait(10)
    skipper_pages: list[list[str]] = []

    def skipper(tx: StorageTransaction) -> None:
        skipper_pages.append(names(tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)))  # 2. skips a and b
        if len(skipper_pages) == 1:
            may_commit.set()
            thread.join(10)
            assert not thread.is_alive()
        tx.create(lease(f"marker{len(skipper_pages)}", holder=None))

    other.transaction(skipper)  # 4. the skipper commits without a replay: it never saw a or b
    assert errors == []
    assert skipper_pages == [["c", "d"]]


def test_a_new_row_appearing_in_an_exclusive_scan_still_conflicts(
    queue: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    pages: list[list[str]] = []

    def work(tx: StorageTransaction) -> None:
        pages.append(names(tx.query_candidates(by_expiry(2), mode=EXCLUSIVE)))
        if len(pages) == 1:
            seed(other, lease("aa", expires=expiry(0)))
        tx.create(lease(f"marker{len(pages)}", holder=None))

    queue.transaction(work)
    assert pages == [["a", "b"], ["a", "aa"]]
