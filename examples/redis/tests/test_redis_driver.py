"""What the redis driver promises beyond the conformance suites: options, prefixes, replays, lex bounds."""

from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.crc import key_slot
from runlane_redis_driver import (
    DEFAULT_URL,
    RedisHarness,
    RedisOptionError,
    RedisStorageDriver,
    RedisStoreHandle,
    delete_prefix,
    harness,
    probe,
    release_holds,
)

from runlane_conformance import (
    AppendRecordsCommand,
    Leases,
    NewStorageRecord,
    StorageCandidateMode,
    StorageConflictError,
    StorageCorruptionError,
    StorageDurability,
    StorageLimits,
    StorageQueryDirection,
    StorageQueryRange,
    StorageRangeBound,
    StorageStreamName,
    StorageTransaction,
    read_storage_stream_position,
    storage_stream_layouts,
)


def _leases() -> Leases:
    return Leases(environment=f"env-{uuid.uuid4().hex[:8]}")


def _keys_under(prefix: str) -> list[bytes]:
    client = redis.Redis.from_url(DEFAULT_URL)
    try:
        return sorted(client.scan_iter(match=f"{prefix}*", count=1000))
    finally:
        client.close()


def _overwrite(driver: RedisStorageDriver, record: NewStorageRecord) -> None:
    """Replace the committed record at ``record.key`` in a transaction of its own."""

    def replace(tx: StorageTransaction) -> None:
        (current,) = tx.get([record.key])
        assert current is not None
        tx.replace(current, record)

    driver.transaction(replace)


@pytest.fixture
def redis_harness() -> Iterator[RedisHarness]:
    made = harness({})
    yield made
    made.close()


# -- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"colour": "blue"}, "does not know option(s) colour"),
        ({"url": "http://127.0.0.1:6379"}, "not a redis URL"),
        ({"max_transaction_attempts": "0"}, "max_transaction_attempts"),
        ({"exclusive_hold_ms": "-5"}, "exclusive_hold_ms"),
        ({"max_point_reads": "many"}, "max_point_reads"),
        ({"max_record_bytes": "10", "max_transaction_bytes": "5"}, "incoherent"),
    ],
)
def test_bad_options_are_refused_with_one_line(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(RedisOptionError) as caught:
        harness(options)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_the_harness_connects_lazily_and_the_probe_says_why_a_server_is_absent() -> None:
    absent = "redis://127.0.0.1:1/0"
    made = harness({"url": absent})  # no connection yet: loading a driver never needs the server
    made.close()
    reason = probe(absent, timeout=2)
    assert reason is not None and "\n" not in reason
    assert probe(DEFAULT_URL) is None


def test_options_shape_the_profile_and_the_attempt_budget() -> None:
    made = harness({"max_point_reads": "7", "url": DEFAULT_URL})
    try:
        profile = made.open_store().connect().profile
        assert profile.limits == StorageLimits(max_point_reads=7)
        assert profile.durability is StorageDurability.PROCESS, "Redis here persists nothing"
        assert profile.append and profile.exclusive_candidates
        assert made.max_transaction_attempts == 32 and made.exclusive_hold_ms == 60_000
    finally:
        made.close()


def _create_rows(driver: RedisStorageDriver, leases: Leases, count: int) -> None:
    def create(tx: StorageTransaction) -> None:
        for at in range(count):
            tx.create(leases.record(f"n{at}", at=at))

    driver.transaction(create)


def test_exclusive_holds_expire_and_are_released_at_commit() -> None:
    made = harness({"exclusive_hold_ms": "45000"})
    try:
        driver = made.open_store().connect()
        leases = _leases()
        _create_rows(driver, leases, 2)
        hold = driver.layout.hold(leases.key("n0").encoded)
        client = redis.Redis.from_url(DEFAULT_URL)
        ttl: list[int] = []

        def select(tx: StorageTransaction) -> None:
            tx.query_candidates(leases.query(limit=1), mode=StorageCandidateMode.EXCLUSIVE)
            ttl.append(int(client.pttl(hold)))

        try:
            driver.transaction(select)
            assert 0 < ttl[0] <= 45_000, "a hold must expire, so a crashed owner cannot keep a row forever"
            assert client.exists(hold) == 0, "a committed attempt releases its holds"
        finally:
            client.close()
    finally:
        made.close()


def test_a_row_held_by_a_foreign_token_is_skipped_and_never_released_by_another_owner(
    redis_harness: RedisHarness,
) -> None:
    driver = redis_harness.open_store().connect()
    leases = _leases()
    _create_rows(driver, leases, 2)
    hold = driver.layout.hold(leases.key("n0").encoded)
    client = redis.Redis.from_url(DEFAULT_URL)
    try:
        client.set(hold, "someone-else")  # as a process that crashed mid-attempt would leave it
        page = driver.transaction(
            lambda tx: tx.query_candidates(leases.query(), mode=StorageCandidateMode.EXCLUSIVE)
        )
        assert [item.key for item in page.items] == [leases.key("n1")]
        release_holds(client, driver.layout, "not-the-owner", [leases.key("n0").encoded])
        assert client.get(hold) == b"someone-else", "only the owner's token may release a hold"
        client.delete(hold)  # what the hold's expiry does
        page = driver.transaction(
            lambda tx: tx.query_candidates(leases.query(), mode=StorageCandidateMode.EXCLUSIVE)
        )
        assert [item.key for item in page.items] == [leases.key("n0"), leases.key("n1")]
    finally:
        client.close()


# -- prefixes and cleanup --------------------------------------------------------------------------


def _fill(driver: RedisStorageDriver, leases: Leases) -> None:
    def create(tx: StorageTransaction) -> None:
        tx.create(leases.record("indexed", at=1))
        tx.create(leases.record("unindexed", holder=None))

    driver.transaction(create)


def test_each_store_has_a_fresh_hash_tagged_prefix_and_every_key_lands_in_one_slot(
    redis_harness: RedisHarness,
) -> None:
    first, second = redis_harness.open_store(), redis_harness.open_store()
    assert first.prefix != second.prefix
    assert first.prefix.startswith("{runlane:") and first.prefix.endswith("}:")
    leases = _leases()
    _fill(first.connect(), leases)
    assert second.connect().transaction(lambda tx: tx.get([leases.key("indexed")])) == [None]
    keys = _keys_under(first.prefix)
    # versions counter, 2 version keys, 2 record hashes, 1 index zset, 1 range version, 1 commit marker
    assert len(keys) == 8, keys
    assert {key_slot(key) for key in keys} == {key_slot(first.prefix.encode())}, "one hash slot per store"


def test_closing_a_store_deletes_exactly_its_keys(redis_harness: RedisHarness) -> None:
    first, second = redis_harness.open_store(), redis_harness.open_store()
    leases = _leases()
    _fill(first.connect(), leases)
    _fill(second.connect(), leases)
    client = redis.Redis.from_url(DEFAULT_URL)
    bystander = f"runlane-test-bystander-{uuid.uuid4().hex}"
    try:
        client.set(bystander, "stays")
        first.close()
        assert _keys_under(first.prefix) == []
        assert len(_keys_under(second.prefix)) == 8, "another store's keys must survive"
        assert client.get(bystander) == b"stays"
    finally:
        client.delete(bystander)
        client.close()


def test_closing_the_harness_deletes_every_store_it_opened() -> None:
    made = harness({})
    stores = [made.open_store() for _ in range(3)]
    for store in stores:
        _fill(store.connect(), _leases())
    made.close()
    assert not any(_keys_under(store.prefix) for store in stores)


def test_deleting_refuses_anything_but_a_store_prefix() -> None:
    client = redis.Redis.from_url(DEFAULT_URL)
    try:
        for prefix in ("", "*", "{runlane:*}:", "runlane:", "{runlane:abc}:"):
            with pytest.raises(RedisOptionError):
                delete_prefix(client, prefix)
    finally:
        client.close()


def test_instances_have_their_own_connections(redis_harness: RedisHarness) -> None:
    store = redis_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()
    first.transaction(lambda tx: tx.create(leases.record("k")))
    first.close()  # closing one instance must not touch the other's pool
    assert second.transaction(lambda tx: tx.get([leases.key("k")]))[0] is not None


# -- replays and conflicts -------------------------------------------------------------------------


def test_a_stale_read_is_replayed(redis_harness: RedisHarness) -> None:
    store = redis_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()
    first.transaction(lambda tx: tx.create(leases.record("k", holder="0")))
    attempts: list[str] = []

    def bump(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("k")])
        assert current is not None
        holder = str(current.document.value["holder"])
        attempts.append(holder)
        if len(attempts) == 1:
            _overwrite(second, leases.record("k", holder="other"))  # optimistic: it commits at once
        tx.replace(current, leases.record("k", holder=f"{holder}+first"))

    first.transaction(bump)
    assert attempts == ["0", "other"], "the first attempt read a value that changed; it must be replayed"
    final = first.transaction(lambda tx: tx.get([leases.key("k")]))[0]
    assert final is not None and final.document.value["holder"] == "other+first"


def test_a_read_that_would_mix_two_states_is_refused_and_the_attempt_replayed(
    redis_harness: RedisHarness,
) -> None:
    """The callback never sees a mixed state, even when it swallows the conflict its read raised."""
    store = redis_harness.open_store()
    first, second = store.connect(), store.connect()
    leases = _leases()

    def create_both(tx: StorageTransaction) -> None:
        tx.create(leases.record("a", holder="old"))
        tx.create(leases.record("b", holder="old"))

    first.transaction(create_both)

    def move_both(tx: StorageTransaction) -> None:
        a, b = tx.get([leases.key("a"), leases.key("b")])
        assert a is not None and b is not None
        tx.replace(a, leases.record("a", holder="new"))
        tx.replace(b, leases.record("b", holder="new"))

    seen: list[tuple[str, str] | str] = []

    def read_apart(tx: StorageTransaction) -> tuple[str, str] | str:
        (a,) = tx.get([leases.key("a")])
        if not seen:
            second.transaction(move_both)
        try:
            (b,) = tx.get([leases.key("b")])
        except StorageConflictError:
            seen.append("refused")
            return "from the refused attempt"
        assert a is not None and b is not None
        pair = (str(a.document.value["holder"]), str(b.document.value["holder"]))
        seen.append(pair)
        return pair

    assert first.transaction(read_apart) == ("new", "new")
    assert seen == ["refused", ("new", "new")]


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


def test_a_blind_create_of_an_existing_key_conflicts_and_writes_nothing() -> None:
    made = harness({"max_transaction_attempts": "2"})
    try:
        driver = made.open_store().connect()
        leases = _leases()
        driver.transaction(lambda tx: tx.create(leases.record("k", holder="first")))

        def create_again(tx: StorageTransaction) -> None:
            tx.create(leases.record("other"))
            tx.create(leases.record("k", holder="second"))

        with pytest.raises(StorageConflictError):
            driver.transaction(create_again)
        k, other = driver.transaction(lambda tx: tx.get([leases.key("k"), leases.key("other")]))
        assert k is not None and k.document.value["holder"] == "first"
        assert other is None, "a lost attempt must leave none of its writes behind"
    finally:
        made.close()


def test_versions_keep_rising_across_delete_and_re_create(redis_harness: RedisHarness) -> None:
    driver = redis_harness.open_store().connect()
    leases = _leases()
    seen = []
    for _ in range(3):
        driver.transaction(lambda tx: tx.create(leases.record("k")))
        record = driver.transaction(lambda tx: tx.get([leases.key("k")]))[0]
        assert record is not None
        seen.append(int(record.version.value))

        def delete(tx: StorageTransaction) -> None:
            (current,) = tx.get([leases.key("k")])
            assert current is not None
            tx.delete(current)

        driver.transaction(delete)
    assert seen == sorted(set(seen)), f"versions were reused or went back: {seen}"


def test_a_tampered_document_is_reported_as_corruption(redis_harness: RedisHarness) -> None:
    store: RedisStoreHandle = redis_harness.open_store()
    driver = store.connect()
    leases = _leases()
    driver.transaction(lambda tx: tx.create(leases.record("k")))
    client = redis.Redis.from_url(DEFAULT_URL)
    try:
        client.hset(
            driver.layout.record(leases.key("k").encoded),
            "d",
            '{"schemaVersion":1,"value":{"not":"a lease"}}',
        )
    finally:
        client.close()
    with pytest.raises(StorageCorruptionError):
        driver.transaction(lambda tx: tx.get([leases.key("k")]))


# -- append ----------------------------------------------------------------------------------------


def _observations(partition: str, tag: str, count: int) -> AppendRecordsCommand:
    values: Any = [
        {"source": {"kind": "redis-test", "id": f"{tag}-{i}"}, "data": {"i": i}} for i in range(count)
    ]
    return AppendRecordsCommand(StorageStreamName.OBSERVATIONS, partition, values)


def test_an_append_takes_its_positions_at_commit_so_a_concurrent_batch_needs_no_replay(
    redis_harness: RedisHarness,
) -> None:
    store = redis_harness.open_store()
    first, second = store.connect(), store.connect()
    partition = f"env-{uuid.uuid4().hex[:8]}"
    attempts: list[int] = []

    def append_two(tx: StorageTransaction) -> None:
        attempts.append(1)
        tx.append(_observations(partition, "first", 2))
        if len(attempts) == 1:  # another instance appends while this attempt is open
            second.transaction(lambda other: other.append(_observations(partition, "second", 3)))

    first.transaction(append_two)
    assert attempts == [1], "appends to one partition commute; the open attempt must not be replayed"
    layout = storage_stream_layouts[StorageStreamName.OBSERVATIONS]
    keys = [layout.head_key(partition)] + [layout.record_key(partition, at) for at in range(1, 6)]
    head, *records = first.transaction(lambda tx: tx.get(keys))
    assert read_storage_stream_position(StorageStreamName.OBSERVATIONS, partition, head) == 6
    values: list[Any] = [record.document.to_json()["value"] for record in records if record is not None]
    sources = [value["source"]["id"] for value in values]
    assert sources == ["second-0", "second-1", "second-2", "first-0", "first-1"]


# -- lex bounds ------------------------------------------------------------------------------------

_AT = range(0, 40, 3)
_TAILS = ("", "\x00", "\x01", "\x00zz", "\x7f", "é", "\U0010ffff", "\ud800", "/", "0", "f", "g")


@pytest.fixture(scope="module")
def lex_store() -> Iterator[tuple[RedisStorageDriver, Leases]]:
    made = harness({})
    driver = made.open_store().connect()
    leases = _leases()

    def create(tx: StorageTransaction) -> None:
        for at in _AT:
            tx.create(leases.record(f"n{at}", at=at))

    driver.transaction(create)
    yield driver, leases
    made.close()


def _bound_values(leases: Leases) -> st.SearchStrategy[str]:
    """Sort values, their prefixes, and those followed by awkward characters (NUL, \\x01, non-ASCII)."""
    sorts = st.sampled_from([leases.sort(at) for at in range(-2, 45)])
    prefixes = sorts.flatmap(lambda sort: st.integers(0, len(sort)).map(lambda cut: sort[:cut]))
    base = sorts | prefixes  # whole sorts often: a bound equal to a stored sort is where bugs hide
    tail = st.sampled_from(_TAILS)
    return st.tuples(base, tail).map("".join)


def test_a_bound_right_beside_a_stored_sort_selects_exactly_what_the_range_rule_says(
    lex_store: tuple[RedisStorageDriver, Leases],
) -> None:
    """Every side, inclusivity and awkward tail (NUL sorts below every sort character) on a stored sort."""
    driver, leases = lex_store
    stored = leases.sort(_AT[3])
    for base in (stored, stored[:-1], stored[:-3], leases.sort(_AT[3] + 1)):
        for tail in _TAILS:
            for inclusive in (True, False):
                bound = StorageRangeBound(base + tail, inclusive)
                for scope in (StorageQueryRange(bound, None), StorageQueryRange(None, bound)):
                    expected = [leases.sort(at) for at in _AT if scope.contains(leases.sort(at))]
                    page = driver.query(leases.query(range=scope))
                    assert [item.sort for item in page.items] == expected, (base, tail, scope)


@given(data=st.data())
@settings(deadline=None)
def test_every_range_bound_selects_exactly_what_the_range_rule_says(
    lex_store: tuple[RedisStorageDriver, Leases], data: st.DataObject
) -> None:
    driver, leases = lex_store
    values = _bound_values(leases)
    lower = data.draw(st.none() | st.builds(StorageRangeBound, values, st.booleans()), "lower")
    upper = data.draw(st.none() | st.builds(StorageRangeBound, values, st.booleans()), "upper")
    direction = data.draw(st.sampled_from(StorageQueryDirection), "direction")
    scope = StorageQueryRange(lower, upper)
    expected = [leases.sort(at) for at in _AT if scope.contains(leases.sort(at))]
    if direction is StorageQueryDirection.DESCENDING:
        expected.reverse()
    page = driver.query(leases.query(range=scope, direction=direction))
    assert [item.sort for item in page.items] == expected


# -- another process -------------------------------------------------------------------------------


def _child_writes(address: tuple[str, str], environment: str) -> None:
    made = harness({"url": address[0]})
    store = made.attach(address)
    leases = Leases(environment=environment)
    store.connect().transaction(lambda tx: tx.create(leases.record("from-child", holder="child")))
    store.close()
    made.close()


def test_a_child_process_attaches_by_address_and_its_commit_is_seen(redis_harness: RedisHarness) -> None:
    store = redis_harness.open_store()
    leases = _leases()
    child = multiprocessing.get_context("spawn").Process(
        target=_child_writes, args=(store.address(), leases.environment)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    record = store.connect().transaction(lambda tx: tx.get([leases.key("from-child")]))[0]
    assert record is not None and record.document.value["holder"] == "child"
    assert _keys_under(store.prefix), "closing an attached handle must not delete the store"


def test_an_address_that_is_not_a_store_is_refused(redis_harness: RedisHarness) -> None:
    for address in (
        None,
        "redis://x",
        (DEFAULT_URL, "*"),
        ("redis://127.0.0.1:6380/0", "{runlane:" + "0" * 32 + "}:"),
    ):
        with pytest.raises(RedisOptionError):
            redis_harness.attach(address)
