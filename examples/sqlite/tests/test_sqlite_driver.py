"""What the sqlite driver promises beyond the conformance suites: options, files, locking, processes."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runlane_sqlite_driver import SqliteHarness, SqliteOptionError, SqliteStorageDriver, harness
from runlane_sqlite_driver.driver import sql_bound

from runlane_conformance import (
    Leases,
    StorageCandidateMode,
    StorageConcurrentUseError,
    StorageConflictError,
    StorageCorruptionError,
    StorageDurability,
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
    StorageTransaction,
    StorageUnsupportedError,
    StoredRecord,
)


@pytest.fixture
def sqlite_harness() -> Iterator[SqliteHarness]:
    made = harness({})
    yield made
    made.close()


def _leases() -> Leases:
    return Leases(environment=f"env-{uuid.uuid4().hex[:8]}")


# -- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"colour": "blue"}, "does not know option(s) colour"),
        ({"synchronous": "sometimes"}, "synchronous"),
        ({"exclusive_candidates": "maybe"}, "exclusive_candidates"),
        ({"busy_timeout": "-1"}, "busy_timeout"),
        ({"busy_timeout": "soon"}, "busy_timeout"),
        ({"max_point_reads": "0"}, "max_point_reads"),
        ({"max_record_bytes": "10", "max_transaction_bytes": "5"}, "incoherent"),
        ({"path": ":memory:"}, "must name a file"),
        ({"path": "/no/such/directory/store.sqlite3"}, "does not exist"),
    ],
)
def test_bad_options_are_refused_with_one_line(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(SqliteOptionError) as caught:
        harness(options)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_limit_options_replace_only_those_limits(tmp_path: Path) -> None:
    made = harness({"max_point_reads": "7", "max_query_results": "9"})
    try:
        store = made.open_store()
        profile = store.connect().profile
        assert profile.limits == StorageLimits(max_point_reads=7, max_query_results=9)
        assert profile.durability is StorageDurability.DURABLE
        assert not profile.append and profile.exclusive_candidates
    finally:
        made.close()


# -- files -----------------------------------------------------------------------------------------


def test_a_temporary_store_is_one_file_deleted_on_close(sqlite_harness: SqliteHarness) -> None:
    store = sqlite_harness.open_store()
    path = store.address()
    leases = _leases()
    store.connect().transaction(lambda tx: tx.create(leases.record("a")))
    assert os.path.exists(path)
    store.close()
    assert not any(os.path.exists(path + suffix) for suffix in ("", "-wal", "-shm"))


def test_each_store_is_empty_and_isolated(sqlite_harness: SqliteHarness) -> None:
    leases = _leases()
    first, second = sqlite_harness.open_store(), sqlite_harness.open_store()
    first.connect().transaction(lambda tx: tx.create(leases.record("only-in-first")))
    assert second.connect().transaction(lambda tx: tx.get([leases.key("only-in-first")])) == [None]
    assert first.address() != second.address()


def test_a_fixed_path_is_emptied_on_open_and_kept_on_close(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    leases = _leases()
    made = harness({"path": str(path)})
    try:
        store = made.open_store()
        store.connect().transaction(lambda tx: tx.create(leases.record("left-behind")))
        with pytest.raises(SqliteOptionError):
            made.open_store()  # one store at a time on a fixed path
        store.close()
        assert path.exists(), "a store on a user-named file must be kept for inspection"
        again = made.open_store()
        assert again.connect().transaction(lambda tx: tx.get([leases.key("left-behind")])) == [None]
        again.close()
    finally:
        made.close()


def test_versions_are_not_reused_after_reconnecting(sqlite_harness: SqliteHarness) -> None:
    store = sqlite_harness.open_store()
    leases = _leases()
    first = store.connect()
    first.transaction(lambda tx: tx.create(leases.record("k")))
    old = first.transaction(lambda tx: tx.get([leases.key("k")]))[0]
    assert old is not None
    first.transaction(lambda tx: tx.delete(tx.get([leases.key("k")])[0]))  # type: ignore[arg-type]
    first.close()
    again = store.connect()
    again.transaction(lambda tx: tx.create(leases.record("k")))
    new = again.transaction(lambda tx: tx.get([leases.key("k")]))[0]
    assert new is not None and new.version != old.version


def test_a_tampered_document_is_reported_as_corruption(sqlite_harness: SqliteHarness) -> None:
    store = sqlite_harness.open_store()
    leases = _leases()
    driver = store.connect()
    driver.transaction(lambda tx: tx.create(leases.record("k", at=3)))
    raw = sqlite3.connect(store.address())
    with raw:
        raw.execute(
            "UPDATE records SET document = ? WHERE key = ?",
            ('{"schemaVersion":2,"value":{}}', leases.key("k").encoded),
        )
    raw.close()
    with pytest.raises(StorageCorruptionError):
        driver.transaction(lambda tx: tx.get([leases.key("k")]))


# -- locking ---------------------------------------------------------------------------------------


def test_a_second_instance_waits_for_the_write_lock_then_sees_the_commit(
    sqlite_harness: SqliteHarness,
) -> None:
    store = sqlite_harness.open_store()
    leases = _leases()
    first, second = store.connect(), store.connect()
    seen: list[StoredRecord | None] = []
    competitor = threading.Thread(
        target=lambda: seen.append(second.transaction(lambda tx: tx.get([leases.key("k")])[0])), daemon=True
    )

    def hold(tx: StorageTransaction) -> None:
        competitor.start()
        competitor.join(0.3)
        assert competitor.is_alive(), "the competitor ran while the first attempt held the write lock"
        tx.create(leases.record("k", holder="first"))

    first.transaction(hold)
    competitor.join(10)
    assert not competitor.is_alive(), "the competitor never got the lock after the first attempt committed"
    assert seen[0] is not None and seen[0].document.value["holder"] == "first"


def test_a_lock_held_past_every_busy_wait_gives_a_conflict_error() -> None:
    made = harness({"busy_timeout": "0.05", "max_transaction_attempts": "2"})
    try:
        store = made.open_store()
        driver = store.connect()
        blocker = sqlite3.connect(store.address(), isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StorageConflictError):
                driver.transaction(lambda tx: tx.get([_leases().key("k")]))
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert driver.transaction(lambda tx: tx.get([_leases().key("k")])) == [None]
    finally:
        made.close()


def test_append_is_refused(sqlite_harness: SqliteHarness) -> None:
    driver = sqlite_harness.open_store().connect()
    with pytest.raises(StorageUnsupportedError):
        driver.transaction(lambda tx: tx.append(object()))


def test_exclusive_candidates_switched_off_are_refused_and_not_advertised() -> None:
    made = harness({"exclusive_candidates": "false"})
    try:
        driver = made.open_store().connect()
        assert not driver.profile.exclusive_candidates
        with pytest.raises(StorageUnsupportedError):
            driver.transaction(
                lambda tx: tx.query_candidates(_leases().query(), mode=StorageCandidateMode.EXCLUSIVE)
            )
    finally:
        made.close()


# -- another process -------------------------------------------------------------------------------


def _child_writes(address: str, environment: str) -> None:
    store = harness({}).attach(address)
    driver = store.connect()
    leases = Leases(environment=environment)
    driver.transaction(lambda tx: tx.create(leases.record("from-child", holder="child")))
    store.close()


def test_a_child_process_attaches_by_address_and_its_commit_is_seen(sqlite_harness: SqliteHarness) -> None:
    store = sqlite_harness.open_store()
    leases = _leases()
    child = multiprocessing.get_context("spawn").Process(
        target=_child_writes, args=(store.address(), leases.environment)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    record = store.connect().transaction(lambda tx: tx.get([leases.key("from-child")]))[0]
    assert record is not None and record.document.value["holder"] == "child"
    assert os.path.exists(store.address()), "closing an attached handle must not delete the store"


# -- range bounds outside the canonical alphabet ---------------------------------------------------


_SORT_TEXT = st.text(alphabet="0123456789abcdef/", max_size=6)
_BOUND_TEXT = st.text(alphabet=st.sampled_from(["0", "3", "a", "f", "/", "\x00", "~", "é", "\U0010ffff"]))


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sort=_SORT_TEXT, bound=_BOUND_TEXT, inclusive=st.booleans())
def test_a_rewritten_bound_orders_canonical_sorts_like_the_original(
    sort: str, bound: str, inclusive: bool
) -> None:
    rewritten = sql_bound(bound)
    assert rewritten.isascii() and "\x00" not in rewritten
    as_lower = StorageQueryRange(lower=StorageRangeBound(bound, inclusive))
    as_upper = StorageQueryRange(upper=StorageRangeBound(bound, inclusive))
    assert as_lower.contains(sort) == StorageQueryRange(StorageRangeBound(rewritten, inclusive)).contains(
        sort
    )
    assert as_upper.contains(sort) == StorageQueryRange(
        None, StorageRangeBound(rewritten, inclusive)
    ).contains(sort)


def test_a_query_with_an_exotic_bound_matches_the_range_rule(sqlite_harness: SqliteHarness) -> None:
    driver: SqliteStorageDriver = sqlite_harness.open_store().connect()
    leases = _leases()

    def create_four(tx: StorageTransaction) -> None:
        for at in range(4):
            tx.create(leases.record(f"n{at}", at=at))

    driver.transaction(create_four)
    cut = leases.sort(2)
    for bound in (cut + "\x00", cut + "é", cut[:5] + "\U0010ffff"):
        for inclusive in (True, False):
            scope = StorageQueryRange(StorageRangeBound(bound, inclusive))
            expected = [leases.sort(at) for at in range(4) if scope.contains(leases.sort(at))]
            page = driver.query(leases.query(range=scope))
            assert [item.sort for item in page.items] == expected


def test_a_transaction_nested_on_the_same_thread_and_store_is_refused_at_once(
    sqlite_harness: SqliteHarness,
) -> None:
    store = sqlite_harness.open_store()
    outer, inner = store.connect(), store.connect()
    leases = _leases()

    def nest(tx: StorageTransaction) -> None:
        with pytest.raises(StorageConcurrentUseError):
            inner.transaction(lambda other: other.get([leases.key("k")]))
        tx.create(leases.record("k"))

    outer.transaction(nest)
    assert inner.transaction(lambda tx: tx.get([leases.key("k")]))[0] is not None


def test_exclusive_selection_by_default_returns_exactly_the_page_with_a_cursor() -> None:
    made = harness({})
    try:
        driver = made.open_store().connect()
        assert driver.profile.exclusive_candidates
        leases = _leases()

        def create_three(tx: StorageTransaction) -> None:
            for at in range(3):
                tx.create(leases.record(f"n{at}", at=at))

        driver.transaction(create_three)
        page = driver.transaction(
            lambda tx: tx.query_candidates(leases.query(limit=3), mode=StorageCandidateMode.EXCLUSIVE)
        )
        assert [item.sort for item in page.items] == [leases.sort(at) for at in range(3)]
        assert page.cursor is not None, "a full exclusive page carries a cursor (no lookahead row is read)"
    finally:
        made.close()
