"""What the postgres driver promises beyond the conformance suites: options, schemas, replays, locks."""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from runlane_postgres_driver import (
    DEFAULT_DSN,
    PostgresHarness,
    PostgresOptionError,
    PostgresStorageDriver,
    PostgresStoreHandle,
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


def _schema_exists(schema: str) -> bool:
    with psycopg.connect(DEFAULT_DSN, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None and row[0] == 1


def _overwrite(driver: PostgresStorageDriver, record: NewStorageRecord) -> None:
    """Replace the committed record at ``record.key`` in a transaction of its own."""

    def replace(tx: StorageTransaction) -> None:
        (current,) = tx.get([record.key])
        assert current is not None
        tx.replace(current, record)

    driver.transaction(replace)


@pytest.fixture
def pg_harness() -> Iterator[PostgresHarness]:
    made = harness({})
    yield made
    made.close()


@pytest.fixture
def exclusive_harness() -> Iterator[PostgresHarness]:
    made = harness({})  # exclusive candidates are on by default
    yield made
    made.close()


# -- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"colour": "blue"}, "does not know option(s) colour"),
        ({"dsn": "host=127.0.0.1 port"}, "not a connection string"),
        ({"exclusive_candidates": "perhaps"}, "exclusive_candidates"),
        ({"max_transaction_attempts": "0"}, "max_transaction_attempts"),
        ({"max_record_bytes": "10", "max_transaction_bytes": "5"}, "incoherent"),
    ],
)
def test_bad_options_are_refused_with_one_line(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(PostgresOptionError) as caught:
        harness(options)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_the_harness_connects_lazily_and_the_probe_says_why_a_server_is_absent() -> None:
    absent = "postgresql://127.0.0.1:1/test"
    made = harness({"dsn": absent})  # no connection yet: loading a driver never needs the server
    made.close()
    reason = probe(absent, timeout=2)
    assert reason is not None and "\n" not in reason
    assert probe(DEFAULT_DSN) is None


def test_limit_and_capability_options_shape_the_profile() -> None:
    made = harness({"max_point_reads": "7"})
    try:
        profile = made.open_store().connect().profile
        assert profile.limits == StorageLimits(max_point_reads=7)
        assert profile.exclusive_candidates and not profile.append
    finally:
        made.close()


# -- schemas ---------------------------------------------------------------------------------------


def test_each_store_is_a_fresh_schema_dropped_on_close(pg_harness: PostgresHarness) -> None:
    first, second = pg_harness.open_store(), pg_harness.open_store()
    assert first.schema != second.schema and first.schema.startswith("runlane_")
    leases = _leases()
    first.connect().transaction(lambda tx: tx.create(leases.record("only-in-first")))
    assert second.connect().transaction(lambda tx: tx.get([leases.key("only-in-first")])) == [None]
    first.close()
    assert not _schema_exists(first.schema)
    assert _schema_exists(second.schema)


def test_closing_the_harness_drops_every_store_it_opened() -> None:
    made = harness({})
    stores = [made.open_store() for _ in range(3)]
    stores[0].connect()
    made.close()
    assert not any(_schema_exists(store.schema) for store in stores)


def test_a_tampered_document_is_reported_as_corruption(pg_harness: PostgresHarness) -> None:
    store = pg_harness.open_store()
    leases = _leases()
    driver = store.connect()
    driver.transaction(lambda tx: tx.create(leases.record("k")))
    with psycopg.connect(DEFAULT_DSN, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.records SET document = %s WHERE key = %s").format(
                sql.Identifier(store.schema)
            ),
            ('{"schemaVersion":1,"value":{"not":"a lease"}}', leases.key("k").encoded),
        )
    with pytest.raises(StorageCorruptionError):
        driver.transaction(lambda tx: tx.get([leases.key("k")]))


def test_versions_keep_rising_across_delete_and_re_create(pg_harness: PostgresHarness) -> None:
    driver = pg_harness.open_store().connect()
    leases = _leases()
    seen = []
    for _ in range(3):
        driver.transaction(lambda tx: tx.create(leases.record("k")))
        record = driver.transaction(lambda tx: tx.get([leases.key("k")]))[0]
        assert record is not None
        seen.append(int(record.version.value))
        driver.transaction(lambda tx, record=record: tx.delete(tx.get([leases.key("k")])[0]))  # type: ignore[misc]
    assert seen == sorted(set(seen)), f"versions were reused or went back: {seen}"


def test_a_query_with_an_exotic_bound_matches_the_range_rule(pg_harness: PostgresHarness) -> None:
    driver = pg_harness.open_store().connect()
    leases = _leases()

    def create_four(tx: StorageTransaction) -> None:
        for at in range(4):
            tx.create(leases.record(f"n{at}", at=at))

    driver.transaction(create_four)
    cut = leases.sort(2)
    for bound in (cut + "\x00", cut + "é", cut[:5] + "\U0010ffff"):  # PostgreSQL text cannot hold NUL
        for inclusive in (True, False):
            scope = StorageQueryRange(StorageRangeBound(bound, inclusive))
            expected = [leases.sort(at) for at in range(4) if scope.contains(leases.sort(at))]
            assert [item.sort for item in driver.query(leases.query(range=scope)).items] == expected


# -- replays ---------------------------------------------------------------------------------------


def test_a_stale_read_is_replayed_not_blocked(pg_harness: PostgresHarness) -> None:
    store = pg_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()
    first.transaction(lambda tx: tx.create(leases.record("k", holder="0")))
    attempts: list[str | None] = []

    def bump(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("k")])
        assert current is not None
        holder = current.document.value["holder"]
        attempts.append(holder)  # type: ignore[arg-type]
        if len(attempts) == 1:
            # Another instance commits in the middle: SERIALIZABLE lets it through at once.
            _overwrite(second, leases.record("k", holder="other"))
        tx.replace(current, leases.record("k", holder=f"{holder}+first"))

    first.transaction(bump)
    assert attempts == ["0", "other"], "the first attempt read a value that changed; it must be replayed"
    final = first.transaction(lambda tx: tx.get([leases.key("k")]))[0]
    assert final is not None and final.document.value["holder"] == "other+first"


def test_an_attempt_the_server_refused_is_replayed_even_if_the_callback_swallows_the_error(
    exclusive_harness: PostgresHarness,
) -> None:
    store = exclusive_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()
    first.transaction(lambda tx: tx.create(leases.record("k", at=1)))
    outcomes: list[str] = []

    def select(tx: StorageTransaction) -> str:
        tx.get([leases.key("k")])  # fixes this attempt's snapshot
        if not outcomes:
            _overwrite(second, leases.record("k", at=1, holder="moved"))
        try:
            # Locking a row changed after the snapshot is a serialization failure (40001).
            tx.query_candidates(leases.query(), mode=StorageCandidateMode.EXCLUSIVE)
        except StorageConflictError:
            outcomes.append("swallowed")
            return "from the refused attempt"
        outcomes.append("selected")
        return "from the replay"

    assert first.transaction(select) == "from the replay"
    assert outcomes == ["swallowed", "selected"]


def test_a_callback_that_always_loses_gives_up_after_the_attempt_budget() -> None:
    made = harness({"max_transaction_attempts": "3"})
    try:
        store = made.open_store()
        first, second = store.connect(), store.connect()
        leases = _leases()
        first.transaction(lambda tx: tx.create(leases.record("k", holder="0")))
        attempts = []

        def always_stale(tx: StorageTransaction) -> None:
            (current,) = tx.get([leases.key("k")])
            attempts.append(1)
            _overwrite(second, leases.unique("k"))
            assert current is not None
            tx.replace(current, leases.record("k", holder="never"))

        with pytest.raises(StorageConflictError):
            first.transaction(always_stale)
        assert len(attempts) == 3
    finally:
        made.close()


# -- exclusive candidates --------------------------------------------------------------------------


def _keys(page: QueryRecordsResult) -> list[str]:
    return [str(item.key) for item in page.items]


def test_exclusive_selections_on_two_instances_are_disjoint_and_do_not_wait(
    exclusive_harness: PostgresHarness,
) -> None:
    store = exclusive_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()

    def create_four(tx: StorageTransaction) -> None:
        for at in range(4):
            tx.create(leases.record(f"n{at}", at=at))

    first.transaction(create_four)
    inner: list[QueryRecordsResult] = []

    def hold_two(tx: StorageTransaction) -> QueryRecordsResult:
        page = tx.query_candidates(leases.query(limit=2), mode=StorageCandidateMode.EXCLUSIVE)
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

    held = first.transaction(hold_two)
    assert _keys(held) == [str(leases.key("n0")), str(leases.key("n1"))]
    assert held.cursor is not None, "a full exclusive page carries a cursor"
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


def _child_writes(address: tuple[str, str], environment: str) -> None:
    made = harness({"dsn": address[0]})
    store = made.attach(address)
    leases = Leases(environment=environment)
    store.connect().transaction(lambda tx: tx.create(leases.record("from-child", holder="child")))
    store.close()
    made.close()


def test_a_child_process_attaches_by_address_and_its_commit_is_seen(pg_harness: PostgresHarness) -> None:
    store: PostgresStoreHandle = pg_harness.open_store()
    leases = _leases()
    child = multiprocessing.get_context("spawn").Process(
        target=_child_writes, args=(store.address(), leases.environment)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    record = store.connect().transaction(lambda tx: tx.get([leases.key("from-child")]))[0]
    assert record is not None and record.document.value["holder"] == "child"
    assert _schema_exists(store.schema), "closing an attached handle must not drop the store"
