"""What the mysql driver promises beyond the suites: options, databases, locks, deadlock victims, replays."""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections.abc import Callable, Iterator

import pymysql
import pytest
from runlane_mysql_driver import (
    DEFAULT_SERVER,
    MysqlHarness,
    MysqlOptionError,
    MysqlServer,
    MysqlStorageDriver,
    MysqlStoreHandle,
    harness,
    probe,
)

from runlane_conformance import (
    Leases,
    NewStorageRecord,
    QueryRecordsResult,
    StorageCandidateMode,
    StorageConflictError,
    StorageCorruptionError,
    StorageLimits,
    StorageQueryRange,
    StorageRangeBound,
    StorageTransaction,
    StorageUnsupportedError,
)


def _leases() -> Leases:
    return Leases(environment=f"env-{uuid.uuid4().hex[:8]}")


def _admin() -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    return pymysql.connect(host=DEFAULT_SERVER.host, port=DEFAULT_SERVER.port, user=DEFAULT_SERVER.user)


def _database_exists(database: str) -> bool:
    conn = _admin()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s", (database,)
            )
            row = cur.fetchone()
    finally:
        conn.close()
    return row is not None and row[0] == 1


def _holder(driver: MysqlStorageDriver, leases: Leases, name: str) -> object:
    (record,) = driver.transaction(lambda tx: tx.get([leases.key(name)]))
    assert record is not None, f"lease {name} must exist"
    return record.document.value["holder"]


def _overwrite(driver: MysqlStorageDriver, record: NewStorageRecord) -> None:
    def replace(tx: StorageTransaction) -> None:
        (current,) = tx.get([record.key])
        assert current is not None
        tx.replace(current, record)

    driver.transaction(replace)


@pytest.fixture
def my_harness() -> Iterator[MysqlHarness]:
    made = harness({})
    yield made
    made.close()


# -- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"colour": "blue"}, "does not know option(s) colour"),
        ({"port": "70000"}, "not a TCP port"),
        ({"port": "x"}, "port"),
        ({"exclusive_candidates": "perhaps"}, "exclusive_candidates"),
        ({"max_transaction_attempts": "0"}, "max_transaction_attempts"),
        ({"lock_wait_timeout": "0"}, "lock_wait_timeout"),
        ({"isolation": "snapshot"}, "isolation='snapshot'"),
        ({"max_record_bytes": "10", "max_transaction_bytes": "5"}, "incoherent"),
    ],
)
def test_bad_options_are_refused_with_one_line(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(MysqlOptionError) as caught:
        harness(options)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_the_harness_connects_lazily_and_the_probe_says_why_a_server_is_absent() -> None:
    made = harness({"port": "1"})  # no connection yet: loading a driver never needs the server
    made.close()
    reason = probe(MysqlServer("127.0.0.1", 1, "root", ""), timeout=2)
    assert reason is not None and "\n" not in reason
    assert probe() is None


def test_limit_and_capability_options_shape_the_profile() -> None:
    made = harness({"max_point_reads": "7"})
    try:
        profile = made.open_store().connect().profile
        assert profile.limits == StorageLimits(max_point_reads=7)
        assert profile.exclusive_candidates and not profile.append
    finally:
        made.close()


# -- databases -------------------------------------------------------------------------------------


def test_each_store_is_a_fresh_database_dropped_on_close(my_harness: MysqlHarness) -> None:
    first, second = my_harness.open_store(), my_harness.open_store()
    assert first.database != second.database and first.database.startswith("runlane_")
    leases = _leases()
    first.connect().transaction(lambda tx: tx.create(leases.record("only-in-first")))
    assert second.connect().transaction(lambda tx: tx.get([leases.key("only-in-first")])) == [None]
    first.close()
    my_harness.drain()
    assert not _database_exists(first.database)
    assert _database_exists(second.database)


def test_closing_the_harness_drops_every_store_it_opened() -> None:
    made = harness({})
    stores = [made.open_store() for _ in range(3)]
    stores[0].connect()
    made.close()
    assert not any(_database_exists(store.database) for store in stores)


def test_a_tampered_document_is_reported_as_corruption(my_harness: MysqlHarness) -> None:
    store = my_harness.open_store()
    leases = _leases()
    driver = store.connect()
    driver.transaction(lambda tx: tx.create(leases.record("k")))
    conn = _admin()
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"UPDATE `{store.database}`.records SET document = %s WHERE k = %s",
                (b'{"schemaVersion":1,"value":{"not":"a lease"}}', leases.key("k").encoded.encode()),
            )
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(StorageCorruptionError):
        driver.transaction(lambda tx: tx.get([leases.key("k")]))


def test_versions_keep_rising_across_delete_re_create_and_rolled_back_attempts(
    my_harness: MysqlHarness,
) -> None:
    driver = my_harness.open_store().connect()
    leases = _leases()
    seen = []

    def create_then_fail(tx: StorageTransaction) -> None:
        tx.create(leases.record("k"))
        raise RuntimeError("rolled back")

    for _ in range(3):
        with pytest.raises(RuntimeError):
            driver.transaction(create_then_fail)
        driver.transaction(lambda tx: tx.create(leases.record("k")))
        record = driver.transaction(lambda tx: tx.get([leases.key("k")]))[0]
        assert record is not None
        seen.append(int(record.version.value))
        driver.transaction(lambda tx: tx.delete(tx.get([leases.key("k")])[0]))  # type: ignore[arg-type]
    assert seen == sorted(set(seen)), f"versions were reused or went back: {seen}"


def test_a_query_with_an_exotic_bound_matches_the_range_rule(my_harness: MysqlHarness) -> None:
    driver = my_harness.open_store().connect()
    leases = _leases()

    def create_four(tx: StorageTransaction) -> None:
        for at in range(4):
            tx.create(leases.record(f"n{at}", at=at))

    driver.transaction(create_four)
    cut = leases.sort(2)
    for bound in (cut + "\x00", cut + "é", cut[:5] + "\U0010ffff", cut[:5] + "\ud800"):
        for inclusive in (True, False):
            scope = StorageQueryRange(StorageRangeBound(bound, inclusive))
            expected = [leases.sort(at) for at in range(4) if scope.contains(leases.sort(at))]
            assert [item.sort for item in driver.query(leases.query(range=scope)).items] == expected


# -- locking: competitors wait, deadlock victims replay --------------------------------------------


def test_a_writer_waits_for_an_attempt_that_read_the_record(my_harness: MysqlHarness) -> None:
    store = my_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()
    first.transaction(lambda tx: tx.create(leases.record("k", holder="0")))
    writer = threading.Thread(target=lambda: _overwrite(second, leases.record("k", holder="w")), daemon=True)

    def read_then_let_write(tx: StorageTransaction) -> object:
        (current,) = tx.get([leases.key("k")])  # a shared lock until this attempt ends
        assert current is not None
        writer.start()
        writer.join(0.5)
        blocked = writer.is_alive()
        return (current.document.value["holder"], blocked)

    assert first.transaction(read_then_let_write) == ("0", True), (
        "the writer must wait for the attempt that share-locked the record (a locking driver)"
    )
    writer.join(10)
    assert not writer.is_alive(), "the writer must go on once the reading attempt committed"
    assert _holder(first, leases, "k") == "w"


def test_a_deadlock_victim_is_replayed_and_both_increments_survive(my_harness: MysqlHarness) -> None:
    store = my_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()
    first.transaction(lambda tx: tx.create(leases.record("counter", holder="0")))
    attempts: list[str] = []
    rival: list[threading.Thread] = []

    def increment(label: str) -> Callable[[StorageTransaction], None]:
        def run(tx: StorageTransaction) -> None:
            (current,) = tx.get([leases.key("counter")])  # both attempts share-lock the counter ...
            assert current is not None
            attempts.append(label)
            if label == "first" and not rival:
                rival.append(threading.Thread(target=lambda: second.transaction(increment("second"))))
                rival[0].start()
                rival[0].join(0.5)  # ... the rival reads too, and blocks upgrading to write it
            value = int(str(current.document.value["holder"])) + 1
            tx.replace(current, leases.record("counter", holder=str(value)))  # ... so one is a victim

        return run

    first.transaction(increment("first"))
    rival[0].join(30)
    assert not rival[0].is_alive()
    assert _holder(first, leases, "counter") == "2", "both increments must survive the deadlock"
    assert len(attempts) == 3, f"exactly one of the two attempts is a deadlock victim and replays: {attempts}"


def test_a_lock_wait_timeout_swallowed_by_the_callback_still_replays() -> None:
    made = harness({"lock_wait_timeout": "1"})
    try:
        store = made.open_store()
        owner, waiter = store.connect(), store.connect()
        leases = _leases()
        owner.transaction(lambda tx: tx.create(leases.record("k", at=1)))
        outcomes: list[str] = []
        release = threading.Event()
        claimed = threading.Event()

        def hold(tx: StorageTransaction) -> None:
            tx.query_candidates(leases.query(), mode=StorageCandidateMode.EXCLUSIVE)  # X-locks k
            claimed.set()
            release.wait(30)

        holder_thread = threading.Thread(target=lambda: owner.transaction(hold), daemon=True)
        holder_thread.start()
        assert claimed.wait(10)

        def read(tx: StorageTransaction) -> str:
            try:
                tx.get([leases.key("k")])  # waits one second for the exclusive owner, then times out
            except StorageConflictError:
                outcomes.append("swallowed")
                release.set()  # the owner ends, so the replay can read
                return "from the refused attempt"
            outcomes.append("read")
            return "from the replay"

        assert waiter.transaction(read) == "from the replay"
        assert outcomes == ["swallowed", "read"]
        holder_thread.join(10)
    finally:
        made.close()


def test_a_callback_that_always_loses_gives_up_after_the_attempt_budget() -> None:
    made = harness({"max_transaction_attempts": "3", "lock_wait_timeout": "1"})
    try:
        store = made.open_store()
        first, second = store.connect(), store.connect()
        leases = _leases()
        first.transaction(lambda tx: tx.create(leases.record("k", at=1)))
        attempts = []
        release = threading.Event()
        claimed = threading.Event()

        def hold(tx: StorageTransaction) -> None:
            page = tx.query_candidates(leases.query(), mode=StorageCandidateMode.EXCLUSIVE)
            assert len(page.items) == 1
            claimed.set()
            release.wait(30)

        owner = threading.Thread(target=lambda: first.transaction(hold), daemon=True)
        owner.start()
        assert claimed.wait(10)

        def blocked(tx: StorageTransaction) -> None:
            attempts.append(1)
            tx.get([leases.key("k")])

        try:
            with pytest.raises(StorageConflictError):
                second.transaction(blocked)
        finally:
            release.set()
            owner.join(10)
        assert len(attempts) == 3
    finally:
        made.close()


# -- exclusive candidates --------------------------------------------------------------------------


def _keys(page: QueryRecordsResult) -> list[str]:
    return [str(item.key) for item in page.items]


def test_exclusive_selections_are_disjoint_hold_no_lookahead_row_and_do_not_wait(
    my_harness: MysqlHarness,
) -> None:
    store = my_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()

    def create_four(tx: StorageTransaction) -> None:
        for at in range(4):
            tx.create(leases.record(f"n{at}", at=at))

    first.transaction(create_four)
    inner: list[QueryRecordsResult] = []
    narrow = StorageQueryRange(StorageRangeBound(leases.sort(0)), StorageRangeBound(leases.sort(1)))

    def hold_range(tx: StorageTransaction) -> QueryRecordsResult:
        # A partial page (two of two in the range): InnoDB's range scan would also lock n2, the row
        # after the range; the driver claims records by key instead, so n2 stays free.
        page = tx.query_candidates(leases.query(range=narrow), mode=StorageCandidateMode.EXCLUSIVE)
        worker = threading.Thread(
            target=lambda: inner.append(
                second.transaction(
                    lambda other: other.query_candidates(
                        leases.query(limit=4), mode=StorageCandidateMode.EXCLUSIVE
                    )
                )
            ),
            daemon=True,
        )
        worker.start()
        worker.join(10)
        assert not worker.is_alive(), "an exclusive selection waited for rows another attempt holds"
        return page

    held = first.transaction(hold_range)
    assert _keys(held) == [str(leases.key("n0")), str(leases.key("n1"))]
    assert _keys(inner[0]) == [str(leases.key("n2")), str(leases.key("n3"))]
    after = first.transaction(
        lambda tx: tx.query_candidates(leases.query(), mode=StorageCandidateMode.EXCLUSIVE)
    )
    assert len(after.items) == 4, "rows held by an attempt must be released when it commits"


def test_exclusive_mode_is_refused_when_disabled() -> None:
    made = harness({"exclusive_candidates": "false"})
    try:
        driver = made.open_store().connect()
        assert not driver.profile.exclusive_candidates
        with pytest.raises(StorageUnsupportedError):
            driver.transaction(
                lambda tx: tx.query_candidates(_leases().query(), mode=StorageCandidateMode.EXCLUSIVE)
            )
        with pytest.raises(StorageUnsupportedError):
            driver.transaction(lambda tx: tx.append(object()))
    finally:
        made.close()


# -- another process -------------------------------------------------------------------------------


def _child_writes(address: tuple[str, int, str], environment: str) -> None:
    made = harness({"host": address[0], "port": str(address[1])})
    store = made.attach(address)
    leases = Leases(environment=environment)
    store.connect().transaction(lambda tx: tx.create(leases.record("from-child", holder="child")))
    store.close()
    made.close()


def test_a_child_process_attaches_by_address_and_its_commit_is_seen(my_harness: MysqlHarness) -> None:
    store: MysqlStoreHandle = my_harness.open_store()
    leases = _leases()
    child = multiprocessing.get_context("spawn").Process(
        target=_child_writes, args=(store.address(), leases.environment)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert _holder(store.connect(), leases, "from-child") == "child"
    assert _database_exists(store.database), "closing an attached handle must not drop the store"
