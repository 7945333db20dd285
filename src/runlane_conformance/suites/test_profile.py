"""Profile: what a driver advertises about itself is coherent, and every checkable claim is true.

Core plans around the profile: it sizes batches by the limits, trusts a
strongly consistent index to show a commit at once, reads time from the
clock it injected, and expects durable data to outlive the process. A
profile that contradicts itself or overstates the driver makes core wrong
without any error, so each claim is verified, not just read.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue.profile import (
    AUTHORITATIVE,
    CLIENT_CLOCK,
    COHERENT,
    CORE_ROOM,
    DURABLE,
    DURABLE_KILLED,
    SERVER_SAMPLED,
    STABLE,
    STRONG_INDEX,
)
from runlane_conformance.contract.catalog import StorageIndexName
from runlane_conformance.contract.encodings import iso_date_codec
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.tables import get_storage_table
from runlane_conformance.contract.values import (
    NewStorageRecord,
    StorageClockAuthority,
    StorageDurability,
    StorageIndexConsistency,
    StorageLimits,
    StorageProfile,
    StorageRecordKey,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import settle_indexes, until_indexed
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import core_floor_reason
from runlane_conformance.fixtures.records import Leases, leases_for
from runlane_conformance.suites._append_support import batch, point_append
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._lifecycle_support import index_scan, read_all
from runlane_conformance.suites._mutations_support import (
    create_all,
    query_candidates_pairs,
    query_pairs,
    read_one,
)
from runlane_conformance.suites._processes_support import w_read_leases, w_write_leases_and_wait

# -- coherence ---------------------------------------------------------------------------------------


def _coherence_problems(profile: object) -> list[str]:
    """Every way ``profile`` breaks the profile rules, checked without trusting its own validation."""
    problems: list[str] = []
    if not isinstance(profile, StorageProfile):
        return [f"profile is a {type(profile).__name__}, not a StorageProfile"]
    for name, enum in (
        ("durability", StorageDurability),
        ("clock_authority", StorageClockAuthority),
        ("index_consistency", StorageIndexConsistency),
    ):
        value = getattr(profile, name)
        if not isinstance(value, enum):
            problems.append(f"{name} = {value!r} is not one of {[member.value for member in enum]}")
    for flag in ("append", "exclusive_candidates"):
        if not isinstance(getattr(profile, flag), bool):
            problems.append(f"{flag} = {getattr(profile, flag)!r} is not a boolean")
    limits = profile.limits
    if not isinstance(limits, StorageLimits):
        return [*problems, f"limits is a {type(limits).__name__}, not StorageLimits"]
    values = {item.name: getattr(limits, item.name) for item in fields(StorageLimits)}
    bad = {name: value for name, value in values.items() if type(value) is not int or value < 1}
    if bad:
        return [*problems, f"limits must be positive integers: {bad}"]
    if limits.max_transaction_bytes < limits.max_record_bytes:
        problems.append(
            f"max_transaction_bytes {limits.max_transaction_bytes} < max_record_bytes "
            f"{limits.max_record_bytes}: a maximal record could never commit"
        )
    if limits.max_transaction_bytes > limits.max_transaction_records * limits.max_record_bytes:
        problems.append(
            f"max_transaction_bytes {limits.max_transaction_bytes} is unreachable with "
            f"{limits.max_transaction_records} records of at most {limits.max_record_bytes} bytes"
        )
    return problems


@COHERENT
def test_the_advertised_profile_is_coherent(driver: StorageDriver) -> None:
    problems = _coherence_problems(driver.profile)
    assert not problems, "the advertised profile is incoherent: " + "; ".join(problems)


@COHERENT
def test_the_advertised_limits_are_valid_storage_limits(driver: StorageDriver) -> None:
    limits = driver.profile.limits
    values = {item.name: getattr(limits, item.name) for item in fields(StorageLimits)}
    rebuilt = StorageLimits(**values)  # raises StorageProfileError when the values contradict each other
    assert rebuilt == limits, "the advertised limits rebuilt from their own values must equal themselves"


@CORE_ROOM
def test_the_advertised_limits_leave_room_for_cores_smallest_atomic_steps(driver: StorageDriver) -> None:
    reason = core_floor_reason(driver.profile.limits)
    why = str(reason).removeprefix("profile: ")
    assert reason is None, f"the advertised limits are too small for core to work: {why}"


@STABLE
def test_every_instance_advertises_the_same_profile(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    assert other_driver.profile == driver.profile, "two instances on one store advertise different profiles"
    if driver.profile.clock_authority is StorageClockAuthority.CLIENT:
        third = connect(clock=lambda: datetime(2030, 1, 1, tzinfo=UTC))
        assert third.profile == driver.profile, (
            "an instance with an injected clock advertises another profile"
        )
    assert driver.profile == driver.profile, "the profile changes between two readings"


@STABLE
def test_the_profile_does_not_change_once_an_instance_has_worked(
    connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    """A profile read before the first transaction is the one core sizes work by: it must stay true after."""
    fresh = connect()
    before = fresh.profile
    create_all(fresh, [leases.unique("worked", at=1)])
    fresh.transaction(lambda tx: tx.get([leases.key("worked")]))
    query_pairs(fresh, leases.query())
    assert fresh.profile == before, (
        f"the profile changed once the instance had run transactions: {before} before, {fresh.profile} after"
    )
    later = connect()
    later.transaction(lambda tx: tx.get([leases.key("worked")]))
    assert later.profile == before, "an instance that has worked advertises another profile than a fresh one"


# -- strong index consistency ------------------------------------------------------------------------


def _listed(driver: StorageDriver, leases: Leases) -> dict[str, list[tuple[object, str]]]:
    return {
        "query": list(query_pairs(driver, leases.query())),
        "query_candidates": list(query_candidates_pairs(driver, leases.query())),
    }


@STRONG_INDEX
def test_a_commit_is_immediately_queryable_on_another_instance(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    record = leases.unique("seen", at=7)
    driver.transaction(lambda tx: tx.create(record))
    for path, pairs in _listed(other_driver, leases).items():
        assert pairs == [(record.key, leases.sort(7))], (
            f"another instance's {path} does not show a just-committed record: {pairs}"
        )


@STRONG_INDEX
def test_moves_and_deletes_are_immediately_visible_on_another_instance(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    create_all(driver, [leases.unique("mover", at=1), leases.unique("doomed", at=2)])
    assert _listed(other_driver, leases)["query"] == [
        (leases.key("mover"), leases.sort(1)),
        (leases.key("doomed"), leases.sort(2)),
    ], (
        "a query on another instance must list both records, in sort order, right after the commit "
        "(strong index)"
    )
    driver.transaction(
        lambda tx: tx.replace(tx.get([leases.key("mover")])[0], leases.unique("mover", at=3))  # type: ignore[arg-type]
    )
    driver.transaction(lambda tx: tx.delete(tx.get([leases.key("doomed")])[0]))  # type: ignore[arg-type]
    for path, pairs in _listed(other_driver, leases).items():
        assert pairs == [(leases.key("mover"), leases.sort(3))], (
            f"another instance's {path} lags behind a committed move and delete: {pairs}"
        )


@STRONG_INDEX
def test_every_commit_in_a_sequence_is_visible_before_the_next(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    expected: list[tuple[object, str]] = []
    for i in range(5):
        writer, reader = (driver, other_driver) if i % 2 == 0 else (other_driver, driver)
        record = leases.unique(f"n{i}", at=i)
        writer.transaction(lambda tx, record=record: tx.create(record))  # type: ignore[misc]
        expected.append((record.key, leases.sort(i)))
        assert _listed(reader, leases)["query_candidates"] == expected, (
            f"commit {i} is not visible to the other instance at once"
        )


def _catalogue_records() -> list[NewStorageRecord]:
    """One record per key from every valid golden document, covering every index a document derives."""
    folder = files("runlane_conformance.fixtures.vectors") / "documents"
    records: dict[str, NewStorageRecord] = {}
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".json"):
            continue
        vector = json.loads(entry.read_text(encoding="utf-8"))
        for case in vector["valid"]:
            record = build_storage_record(vector["table"], case["value"])
            records.setdefault(record.key.encoded, record)
    return list(records.values())


def _expected_entries(records: list[StoredRecord | None]) -> dict[tuple[StorageIndexName, str], list[Any]]:
    expected: dict[tuple[StorageIndexName, str], list[Any]] = {}
    for record in records:
        if record is None:
            continue
        for entry in get_storage_table(record.key.table).derive_indexes(record.document.value):
            expected.setdefault((entry.index, entry.partition), []).append((entry.sort, record.key.encoded))
    return {scope: sorted(items) for scope, items in expected.items()}


def _assert_every_index_current(
    reader: StorageDriver,
    scopes: set[tuple[StorageIndexName, str]],
    expected: dict[tuple[StorageIndexName, str], list[Any]],
    when: str,
) -> None:
    for index, partition in sorted(scopes):
        for path, items in index_scan(reader, index, partition).items():
            assert items == expected.get((index, partition), []), (
                f"{when}: another instance's {path} of {index.value} ({partition}) holds {items}, the stored "
                f"records carry {expected.get((index, partition), [])}; a strong profile covers every index"
            )


@STRONG_INDEX
def test_every_catalogued_index_is_current_at_once_on_another_instance(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    records = _catalogue_records()
    create_all(driver, records)
    partition = "env-a"  # the golden documents' environment; the store is this check's own
    appended = driver.transaction(lambda tx: point_append(tx, batch(partition, "strong", 2)))
    keys = [record.key for record in records] + [record.key for record in appended.records]
    stored = read_all(other_driver, keys)
    expected = _expected_entries(stored)
    scopes = set(expected)
    covered = {index for index, _partition in scopes}
    assert covered == set(StorageIndexName), (
        f"the check's records do not reach every index: {sorted(set(StorageIndexName) - covered)}"
    )
    _assert_every_index_current(other_driver, scopes, expected, "right after the creating commits")

    def delete_all(tx: StorageTransaction, chunk: list[StorageRecordKey]) -> None:
        for current in tx.get(chunk):
            if current is not None:
                tx.delete(current)

    step = max(
        1, min(20, driver.profile.limits.max_transaction_records, driver.profile.limits.max_point_reads)
    )
    for start in range(0, len(keys), step):
        other_driver.transaction(lambda tx, chunk=keys[start : start + step]: delete_all(tx, chunk))  # type: ignore[misc]
    _assert_every_index_current(driver, scopes, {}, "right after deleting every record on another instance")


@STRONG_INDEX
@with_plain_hypothesis_errors("this property")
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["create", "move", "release", "delete"]), st.integers(0, 3), st.integers(0, 9)
        ),
        min_size=1,
        max_size=10,
    )
)
def test_the_other_instance_always_sees_the_latest_index(
    driver: StorageDriver, other_driver: StorageDriver, steps: list[tuple[str, int, int]]
) -> None:
    leases = leases_for(driver, "env", 12)
    model: dict[str, int | None] = {}  # name -> indexed expiry (None: stored but out of the index)
    for number, (action, which, at) in enumerate(steps):
        name = f"n{which}"
        writer, reader = (driver, other_driver) if number % 2 == 0 else (other_driver, driver)
        if name not in model:
            writer.transaction(lambda tx, name=name, at=at: tx.create(leases.unique(name, at=at)))  # type: ignore[misc]
            model[name] = at
        elif action == "delete":
            writer.transaction(lambda tx, name=name: tx.delete(tx.get([leases.key(name)])[0]))  # type: ignore[misc]
            del model[name]
        else:
            new = (
                leases.unique(name, at=at) if action != "release" else leases.record(name, at=at, holder=None)
            )
            writer.transaction(lambda tx, name=name, new=new: tx.replace(tx.get([leases.key(name)])[0], new))  # type: ignore[misc]
            model[name] = at if action != "release" else None
        expected = sorted(
            ((leases.key(n), leases.sort(a)) for n, a in model.items() if a is not None),
            key=lambda pair: (pair[1], pair[0].encoded),
        )
        for path, pairs in _listed(reader, leases).items():
            assert pairs == expected, (
                f"after step {number} ({action} {name}) the other instance's {path} lags"
            )


# -- client clock ------------------------------------------------------------------------------------


class ReadingsClock:
    """A clock that advances one minute per reading and remembers every reading."""

    def __init__(self, start: datetime) -> None:
        self._ticks = itertools.count()
        self.start = start
        self.readings: list[datetime] = []

    def __call__(self) -> datetime:
        value = self.start + timedelta(minutes=next(self._ticks))
        self.readings.append(value)
        return value


@CLIENT_CLOCK
def test_each_attempt_reads_the_injected_clock_afresh(connect: Callable[..., StorageDriver]) -> None:
    clock = ReadingsClock(datetime(2035, 3, 4, tzinfo=UTC))
    driver = connect(clock=clock)
    seen = [driver.transaction(lambda tx: tx.now()) for _ in range(4)]
    assert all(value in clock.readings for value in seen), (
        f"now() gave times the clock never returned: {seen}"
    )
    assert seen == sorted(seen) and len(set(seen)) == len(seen), (
        f"successive attempts must see successive clock readings, got {seen}"
    )


@CLIENT_CLOCK
def test_each_instance_keeps_to_its_own_clock(connect: Callable[..., StorageDriver]) -> None:
    early = ReadingsClock(datetime(2001, 1, 1, tzinfo=UTC))
    late = ReadingsClock(datetime(2090, 1, 1, tzinfo=UTC))
    first, second = connect(clock=early), connect(clock=late)
    for _ in range(2):
        assert first.transaction(lambda tx: tx.now()) in early.readings, (
            "tx.now() on an instance with an injected clock must return a reading of that clock"
        )
        assert second.transaction(lambda tx: tx.now()) in late.readings, (
            "tx.now() on an instance with another injected clock must return a reading of its own clock"
        )


# -- clocks the store owns ---------------------------------------------------------------------------

#: Clocks a store-owned time must not follow: an instance given either still reads the store's clock.
_FAR_PAST = datetime(2001, 1, 1, tzinfo=UTC)
_FAR_FUTURE = datetime(2099, 1, 1, tzinfo=UTC)
#: How far apart two readings of one store clock, taken by back-to-back attempts, may lie. Generous, so a
#: slow driver is never failed for its speed; decades apart is what an injected clock gives.
_SAME_CLOCK_SPREAD = timedelta(hours=1)


def _pinned(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


@SERVER_SAMPLED
def test_server_sampled_time_is_one_reading_of_the_store_clock(connect: Callable[..., StorageDriver]) -> None:
    early, late = connect(clock=_pinned(_FAR_PAST)), connect(clock=_pinned(_FAR_FUTURE))
    readings: list[tuple[str, datetime]] = []
    for name, instance in (("first", early), ("second", late), ("first", early), ("second", late)):
        first, again = instance.transaction(lambda tx: (tx.now(), tx.now()))
        assert first == again, (
            f"now() on the {name} instance returned {first} and then {again} in one attempt: a sampled "
            "time is sampled once and frozen for the attempt"
        )
        assert first not in (_FAR_PAST, _FAR_FUTURE), (
            f"now() on the {name} instance returned {first}, the clock that instance was given at "
            "connect(): a server_sampled driver answers from the store's clock, not the client's"
        )
        readings.append((name, first))
    times = [moment for _, moment in readings]
    assert max(times) - min(times) <= _SAME_CLOCK_SPREAD, (
        f"back-to-back attempts on two instances of one store read times {readings}: more than "
        f"{_SAME_CLOCK_SPREAD} apart, so the instances do not read one store clock"
    )


def _stamp(moment: datetime) -> str:
    return iso_date_codec.encode(moment)


def _stamped(record: StoredRecord | None) -> datetime | None:
    holder = None if record is None else record.document.value.get("holder")
    return None if not isinstance(holder, str) else iso_date_codec.decode(holder)


@AUTHORITATIVE
def test_authoritative_time_never_precedes_a_write_the_attempt_read(
    connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    # Two instances given clocks decades apart: the store's clock, not theirs, decides the time.
    instances = (connect(clock=_pinned(_FAR_FUTURE)), connect(clock=_pinned(_FAR_PAST)))
    key = leases.key("chain")
    chain: list[str] = []

    def step(tx: StorageTransaction) -> tuple[datetime | None, datetime]:
        (current,) = tx.get([key])
        moment = tx.now()
        written = leases.record("chain", at=1, holder=_stamp(moment))
        if current is None:
            tx.create(written)
        else:
            tx.replace(current, written)
        return _stamped(current), moment

    for turn in range(6):
        seen, moment = instances[turn % 2].transaction(step)
        chain.append(f"instance {turn % 2 + 1} read {seen} and got now() {moment}")
        assert seen is None or moment >= seen, (
            "an attempt read a record written by an attempt whose now() was later than its own: "
            + "; ".join(chain)
            + ". With transaction_authoritative time the read set is sealed before the shared clock "
            "is sampled, so a reader's time never precedes its writer's"
        )


@AUTHORITATIVE
def test_authoritative_time_follows_a_write_committed_after_the_attempt_began(
    connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    """A writer on another instance is started once the reader's attempt has begun, before it reads.

    An optimistic driver lets the writer commit at once; the reader then reads that record and its
    now() must not precede the writer's. A driver that locks when an attempt starts (allowed: the read
    set is locked before the clock is sampled) makes the writer wait until the reader ended, or replays
    the reader after it: the reader then reads nothing or reads the write in a later attempt, and the
    same rule judges what it read. The check never waits inside the reader for a writer the driver may
    rightly block; it collects the writer after the reader ended.
    """
    reader, writer = connect(clock=_pinned(_FAR_PAST)), connect(clock=_pinned(_FAR_FUTURE))
    key = leases.key("late")
    written: list[datetime] = []
    started: list[Competitor[None]] = []

    def write(tx: StorageTransaction) -> None:
        moment = tx.now()
        written.append(moment)
        tx.create(leases.record("late", at=2, holder=_stamp(moment)))

    def read(tx: StorageTransaction) -> tuple[datetime | None, datetime]:
        if not started:
            # Before this attempt reads anything, another instance tries to commit the record it will read.
            started.append(compete(lambda: writer.transaction(write)))
        (current,) = tx.get([key])
        moment = tx.now()
        return _stamped(current), moment

    seen, moment = reader.transaction(read)
    writer_ran_inside = started[0].finished_while_open
    started[0].settle()  # a writer the driver made wait commits now that the reader has ended
    assert seen is None or moment >= seen, (
        f"the attempt began, another instance then committed a record stamped {seen} (its now()"
        f"{'' if writer_ran_inside else ', after the driver made it wait'}), and the attempt read that "
        f"record but got now() {moment}, earlier: its time was sampled before its read set was sealed or "
        "locked, which transaction_authoritative time forbids"
    )


# -- transaction-authoritative clock ----------------------------------------------------------------


@AUTHORITATIVE
def test_time_follows_the_commit_order_across_instances(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    """Each attempt reads the previous commit's time from the record it rewrites, then samples now()."""
    instances = [driver, other_driver, connect()]
    key = leases.key("clock")
    seen: list[datetime] = []
    for step in range(9):
        writer = instances[step % len(instances)]

        def callback(tx: StorageTransaction) -> tuple[datetime | None, datetime]:
            [current] = tx.get([key])
            at = tx.now()
            record = leases.record("clock", at=1, holder=iso_date_codec.encode(at))
            if current is None:
                tx.create(record)
                return None, at
            tx.replace(current, record)
            return iso_date_codec.decode(str(current.document.value["holder"])), at

        previous, at = writer.transaction(callback)
        seen.append(at)
        if previous is not None:
            assert at >= previous, (
                f"step {step}: an attempt that read a commit made at {previous} was given now() = {at}, "
                "earlier than that commit: the clock is not shared and sampled after the reads, as "
                "transaction_authoritative promises"
            )
    assert len(seen) == 9, "every step must have committed"


# -- durability --------------------------------------------------------------------------------------


@DURABLE
def test_committed_data_survives_closing_every_instance(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    kept = leases.unique("kept", at=4)
    create_all(driver, [kept, leases.unique("moved", at=5)])
    other_driver.transaction(
        lambda tx: tx.replace(tx.get([leases.key("moved")])[0], leases.unique("moved", at=6))  # type: ignore[arg-type]
    )
    before = [read_one(driver, kept.key), read_one(driver, leases.key("moved"))]
    driver.close()
    other_driver.close()
    again = connect()
    after = [read_one(again, kept.key), read_one(again, leases.key("moved"))]
    assert after == before, "records committed before every instance closed are gone or changed"
    expected = [(kept.key, leases.sort(4)), (leases.key("moved"), leases.sort(6))]

    def index_survived() -> None:
        pairs = query_pairs(again, leases.query())
        assert pairs == expected, (
            f"after every instance closed and a new one connected, the index held {pairs}, expected "
            f"{expected}: index entries are as durable as the records they belong to"
        )

    # An eventual index may still be catching up on the new instance: settle (or wait) first.
    until_indexed(again, index_survived)


@DURABLE_KILLED
def test_commits_of_a_killed_process_are_read_back_by_a_fresh_one(
    driver: StorageDriver, leases: Leases, runlane_workers: Any
) -> None:
    """A worker creates three leases, moves one in the index and deletes another, then is SIGKILLed while
    it waits (no close, no flush, no exit handler); then another process, which opens the store and its
    instance only now, reads the final state."""
    names = ["first", "middle", "last"]
    writer, reader = runlane_workers(2)
    writer.start(w_write_leases_and_wait, leases.environment, names)
    writer.expect("committed")
    writer.kill()
    seen = reader.call(w_read_leases, leases.environment, names)
    env = leases.environment
    expected = {
        "first": leases.record("first", at=1000, holder=f"{env}-first-moved").document.text,
        "middle": leases.record("middle", at=20, holder=f"{env}-middle").document.text,
        "last": None,
    }
    assert seen["documents"] == expected, (
        f"after the writer was killed, a fresh process read {seen['documents']}, expected {expected}: "
        "acknowledged commits must be in durable storage, not in the committing process"
    )
    entries = [
        (leases.sort(20), leases.key("middle").encoded),
        (leases.sort(1000), leases.key("first").encoded),
    ]
    index = [tuple(pair) for pair in seen["index"]]
    if driver.profile.index_consistency is not StorageIndexConsistency.STRONG:
        settle_indexes(driver)  # the fresh process's own read may lag; read again once caught up
        index = [(sort, key.encoded) for key, sort in query_pairs(driver, leases.query(limit=3))]
    assert index == entries, (
        f"after the writer was killed, the index held {index}, expected {entries}: index entries commit with "
        "their records and are as durable as they"
    )
