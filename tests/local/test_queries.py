"""Index scans: order, direction, ranges, cursors, and the scanned range as a dependency."""

from __future__ import annotations

import pytest

from runlane_conformance.contract.catalog import StorageQueryDirection
from runlane_conformance.contract.cursors import parse_query_records_result
from runlane_conformance.contract.encodings import (
    encode_storage_tuple_prefix_upper_bound,
    storage_tuple_codec,
)
from runlane_conformance.contract.errors import StorageCursorError, StorageLimitError
from runlane_conformance.contract.protocols import StorageTransaction
from runlane_conformance.contract.values import QueryRecordsCommand, StorageQueryRange, StorageRangeBound
from runlane_conformance.local import LocalStorageDriver

from .helpers import by_expiry, expiry, lease, lease_key, names, seed

ASC = StorageQueryDirection.ASCENDING
DESC = StorageQueryDirection.DESCENDING


def sort_of(minute: int) -> str:
    return storage_tuple_codec.encode((expiry(minute),))


@pytest.fixture
def leases(driver: LocalStorageDriver) -> LocalStorageDriver:
    # minute 1: b and a (a tie broken by encoded key); minute 2: c; minute 3: d;
    # e lives in another environment and f is released (in no index)
    seed(
        driver,
        lease("b", expires=expiry(1)),
        lease("a", expires=expiry(1)),
        lease("c", expires=expiry(2)),
        lease("d", expires=expiry(3)),
        lease("e", expires=expiry(2), environment="elsewhere"),
        lease("f", holder=None, expires=expiry(2)),
    )
    return driver


def scan_all(driver: LocalStorageDriver, command: QueryRecordsCommand) -> list[str]:
    seen: list[str] = []
    while True:
        page = parse_query_records_result(command, driver.query(command))
        seen.extend(names(page))
        if page.cursor is None:
            return seen
        command = command.with_cursor(page.cursor)


def test_ascending_order_is_encoded_sort_then_encoded_key(leases: LocalStorageDriver) -> None:
    assert names(leases.query(by_expiry())) == ["a", "b", "c", "d"]


def test_descending_reverses_the_whole_order(leases: LocalStorageDriver) -> None:
    assert names(leases.query(by_expiry(direction=DESC))) == ["d", "c", "b", "a"]


def test_a_partition_never_leaks_into_another(leases: LocalStorageDriver) -> None:
    assert names(leases.query(by_expiry(environment="elsewhere"))) == ["e"]
    assert names(leases.query(by_expiry(environment="nowhere"))) == []


@pytest.mark.parametrize(
    ("lower", "upper", "expected"),
    [
        (StorageRangeBound(sort_of(1), True), None, ["a", "b", "c", "d"]),
        (StorageRangeBound(sort_of(1), False), None, ["c", "d"]),
        (None, StorageRangeBound(sort_of(2), True), ["a", "b", "c"]),
        (None, StorageRangeBound(sort_of(2), False), ["a", "b"]),
        (StorageRangeBound(sort_of(2), True), StorageRangeBound(sort_of(2), True), ["c"]),
        (StorageRangeBound(sort_of(2), False), StorageRangeBound(sort_of(3), False), []),
        (StorageRangeBound(sort_of(1), False), StorageRangeBound(sort_of(3), True), ["c", "d"]),
    ],
)
@pytest.mark.parametrize("direction", [ASC, DESC])
def test_every_range_bound(
    leases: LocalStorageDriver,
    lower: StorageRangeBound | None,
    upper: StorageRangeBound | None,
    expected: list[str],
    direction: StorageQueryDirection,
) -> None:
    command = by_expiry(query_range=StorageQueryRange(lower, upper), direction=direction)
    wanted = expected if direction is ASC else expected[::-1]
    assert names(leases.query(command)) == wanted
    assert (
        scan_all(leases, command.__class__(command.index, command.partition, 1, command.range, direction))
        == wanted
    )


def test_tuple_prefix_range_uses_the_exclusive_upper_bound(leases: LocalStorageDriver) -> None:
    prefix = StorageQueryRange.prefix((expiry(2),))
    assert prefix.upper == StorageRangeBound(encode_storage_tuple_prefix_upper_bound((expiry(2),)), False)
    assert names(leases.query(by_expiry(query_range=prefix))) == ["c"]


@pytest.mark.parametrize("direction", [ASC, DESC])
@pytest.mark.parametrize("page_size", [1, 2, 3, 4, 5])
def test_pages_joined_equal_one_unpaged_scan(
    leases: LocalStorageDriver, direction: StorageQueryDirection, page_size: int
) -> None:
    whole = names(leases.query(by_expiry(direction=direction)))
    assert scan_all(leases, by_expiry(page_size, direction=direction)) == whole


def test_a_full_page_returns_a_cursor_even_when_nothing_follows(leases: LocalStorageDriver) -> None:
    page = leases.query(by_expiry(4))
    assert page.cursor is not None
    rest = leases.query(by_expiry(4, cursor=page.cursor))
    assert names(rest) == [] and rest.cursor is None


def test_a_short_page_returns_no_cursor(leases: LocalStorageDriver) -> None:
    assert leases.query(by_expiry(5)).cursor is None


def test_a_cursor_from_another_scope_is_refused(leases: LocalStorageDriver) -> None:
    cursor = leases.query(by_expiry(1)).cursor
    with pytest.raises(StorageCursorError):
        leases.query(by_expiry(1, direction=DESC, cursor=cursor))
    with pytest.raises(StorageCursorError):
        leases.query(by_expiry(1, environment="elsewhere", cursor=cursor))
    with pytest.raises(StorageCursorError):
        leases.transaction(lambda tx: tx.query_candidates(by_expiry(1, direction=DESC, cursor=cursor)))


def test_query_limit_beyond_max_query_results_is_refused(leases: LocalStorageDriver) -> None:
    with pytest.raises(StorageLimitError):
        leases.query(by_expiry(101))
    assert len(leases.query(by_expiry(100)).items) == 4


def test_query_outside_a_transaction_sees_the_latest_commit(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    seed(other, lease("g", expires=expiry(0)))
    assert names(leases.query(by_expiry(1))) == ["g"]


def test_candidate_pages_are_read_from_the_attempt_snapshot(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    def work(tx: StorageTransaction) -> list[str]:
        tx.get([lease_key("zz")])  # takes the snapshot
        seed(other, lease("g", expires=expiry(0)))
        return names(tx.query_candidates(by_expiry()))

    assert leases.transaction(work) == ["a", "b", "c", "d"]


# -- the scanned range is a dependency ----------------------------------------------------------------


def test_an_empty_candidate_page_conflicts_with_a_record_appearing_in_range(
    driver: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    pages: list[list[str]] = []

    def work(tx: StorageTransaction) -> None:
        pages.append(names(tx.query_candidates(by_expiry())))
        if len(pages) == 1:
            seed(other, lease("phantom"))
        if not pages[-1]:
            tx.create(lease("only-if-empty", holder=None))

    driver.transaction(work)
    assert pages == [[], ["phantom"]]
    assert driver.transaction(lambda tx: tx.get([lease_key("only-if-empty")])) == [None]


def test_a_row_moving_out_of_the_index_between_query_and_point_read_conflicts(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    pages: list[list[str]] = []

    def release_a(tx: StorageTransaction) -> None:
        [current] = tx.get([lease_key("a")])
        assert current is not None
        tx.replace(current, lease("a", holder=None, expires=expiry(1)))

    def work(tx: StorageTransaction) -> None:
        page = tx.query_candidates(by_expiry(1))
        pages.append(names(page))
        if len(pages) == 1:
            other.transaction(release_a)
        [current] = tx.get([page.items[0].key])
        assert current is not None
        tx.replace(current, lease(current.key.id[1], holder="claimed", expires=expiry(1)))

    leases.transaction(work)
    assert pages == [["a"], ["b"]]


def test_a_change_past_the_end_of_a_full_page_does_not_conflict(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.query_candidates(by_expiry(2))  # a, b: the scan stopped at b
        if calls == 1:
            seed(other, lease("late", expires=expiry(9)))
        tx.create(lease("x", holder=None))

    leases.transaction(work)
    assert calls == 1


def test_a_change_inside_a_scanned_page_conflicts(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.query_candidates(by_expiry(2))  # a, b
        if calls == 1:
            seed(other, lease("ab", expires=expiry(1)))  # ties on sort, key sorts between a and b
        tx.create(lease("x", holder=None))

    leases.transaction(work)
    assert calls == 2


def test_a_change_outside_the_range_or_partition_does_not_conflict(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    calls = 0
    only_minute_1 = StorageQueryRange.prefix((expiry(1),))

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.query_candidates(by_expiry(query_range=only_minute_1))
        if calls == 1:
            seed(
                other,
                lease("later", expires=expiry(5)),
                lease("away", environment="elsewhere", expires=expiry(1)),
            )
        tx.create(lease("x", holder=None))

    leases.transaction(work)
    assert calls == 1


def test_a_page_continued_from_a_cursor_depends_only_on_what_follows_it(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    cursor = leases.query(by_expiry(2)).cursor  # after b
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.query_candidates(by_expiry(2, cursor=cursor))  # c, d
        if calls == 1:
            seed(other, lease("early", expires=expiry(0)))  # before the cursor
        tx.create(lease("x", holder=None))

    leases.transaction(work)
    assert calls == 1


@pytest.mark.parametrize("direction", [ASC, DESC])
def test_bounds_that_no_codec_produces_still_follow_tuple_order(
    leases: LocalStorageDriver, direction: StorageQueryDirection
) -> None:
    # "sort of minute 1, then NUL, then 0" sorts after every entry of minute 1 in tuple order,
    # although a naive flat-string comparison would let minute-1 entries through
    odd = StorageQueryRange(StorageRangeBound(sort_of(1) + "\x000", True), None)
    expected = ["c", "d"] if direction is ASC else ["d", "c"]
    assert names(leases.query(by_expiry(query_range=odd, direction=direction))) == expected


def test_a_descending_scan_depends_on_what_it_scanned(
    leases: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    calls = 0

    def work(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.query_candidates(by_expiry(2, direction=DESC))  # d, c: the scan stopped at c
        if calls == 1:
            seed(other, lease("early", expires=expiry(0)))  # past the end of the page: no conflict
        elif calls == 2:
            raise AssertionError("replayed for a change outside the scanned part")
        tx.create(lease(f"x{calls}", holder=None))

    leases.transaction(work)
    calls = 0

    def phantom(tx: StorageTransaction) -> None:
        nonlocal calls
        calls += 1
        tx.query_candidates(by_expiry(2, direction=DESC))
        if calls == 1:
            seed(other, lease("late", expires=expiry(9)))  # before d in descending order: conflict
        tx.create(lease(f"y{calls}", holder=None))

    leases.transaction(phantom)
    assert calls == 2
