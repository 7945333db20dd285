"""Ordered append: positions allocated at commit, contiguous, never wasted, shared with point writers.

Only drivers whose profile offers ``append`` are checked. Streams are read
back through the canonical layout only (the ``ObservationsByPosition`` index,
point reads of records and head), and compared with what
``materialize_storage_append`` says a batch placed at its start looks like,
so a native append and core's point-write fallback must agree byte for byte.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from runlane_conformance.catalogue.append import (
    ACROSS_PROCESSES,
    BOUNDS,
    CONCURRENT,
    CONTIGUOUS,
    COPIES,
    ENDED,
    LAYOUT_REQ,
    LIMITS,
    MIXED,
    NOTHING_ON_ROLLBACK,
    OCCUPIED,
    ONE_BATCH,
    OWN_STREAM,
    SEALS,
)
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.encodings import U64_MAX
from runlane_conformance.contract.errors import (
    StorageAttemptEndedError,
    StorageError,
    StorageLimitError,
    StorageLimitName,
    StorageSealedError,
    StorageStreamExhaustedError,
    StorageUsageError,
)
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.streams import (
    AppendRecordsCommand,
    materialize_storage_append,
    measure_storage_append,
)
from runlane_conformance.contract.values import StorageRecordKey
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import chunks, limit_gated, reads, records, values
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.suites._append_support import (
    LAYOUT,
    OBSERVATIONS,
    StreamView,
    append_byte_plan,
    batch,
    observation_values,
    point_append,
    read_stream,
)
from runlane_conformance.suites._messages import missing, propagated, refused
from runlane_conformance.suites._processes_support import w_append_batches
from runlane_conformance.suites._retries_support import RACING, transact_with_retries

#: Append batches, sized from the driver's record limit (each value is a record, the head one more):
#: a batch long enough to show order inside it, and a shorter one after it.
LONG = values(3, least=2)
SHORT = values(2)
#: Keys read back in one attempt, as many as the driver allows.
EVERY_READ = reads(100)


@pytest.fixture
def partition() -> str:
    return f"env-{uuid.uuid4().hex[:8]}"


def _append(driver: StorageDriver, command: AppendRecordsCommand) -> None:
    driver.transaction(lambda tx: tx.append(command))


def _expect_placed(view: StreamView, command: AppendRecordsCommand, start: int) -> None:
    """The batch sits at ``start`` exactly as materialized: documents, keys and index entries."""
    placed = materialize_storage_append(command, start)
    by_position = {position: record for position, record in zip(view.positions, view.records, strict=True)}
    for position, expected in zip(placed.positions, placed.records, strict=True):
        stored = by_position.get(position)
        assert stored is not None, (
            f"position {position} of the batch is missing (stored positions: {view.positions}); positions "
            "must follow one another with no gap (append.positions-contiguous)"
        )
        assert stored.key == expected.key, f"position {position} is stored under {stored.key}"
        assert stored.document == expected.document, f"position {position} holds {stored.document.text}"
        assert set(stored.indexes) == set(expected.indexes), f"position {position} has wrong index entries"


def _expect_contiguous(view: StreamView, count: int) -> None:
    assert view.positions == list(range(1, count + 1)), (
        f"positions must be 1..{count} with no gap or repeat, got {view.positions}"
    )
    assert view.next_position == count + 1, (
        f"after positions 1..{count} the stream head must say {count + 1} is allocated next, it says "
        f"{view.next_position}; the head's layout is append.canonical-layout's rule, and a head read "
        "wrongly there fails this check too"
    )


def _expect_untouched(driver: StorageDriver, partition: str) -> None:
    view = read_stream(driver, partition)
    assert view.head is None and not view.records, (
        f"nothing may be committed: found head {view.head} and positions {view.positions}"
    )


@CONTIGUOUS
@LONG.mark
def test_positions_start_at_one_and_follow_earlier_batches(driver: StorageDriver, partition: str) -> None:
    elsewhere = f"{partition}-b"
    long, short = LONG.of(driver), SHORT.of(driver)
    first, second = batch(partition, "a", long), batch(partition, "b", short)
    third = batch(elsewhere, "c", short)
    for command in (first, second, third):
        _append(driver, command)
    view = read_stream(driver, partition)
    _expect_contiguous(view, long + short)
    expected = [f"a-{i}" for i in range(long)] + [f"b-{i}" for i in range(short)]
    assert view.sources == expected, "batches must keep their order"
    other = read_stream(driver, elsewhere)
    _expect_contiguous(other, short)


@LAYOUT_REQ
@LONG.mark
def test_appended_records_and_head_use_the_canonical_layout(driver: StorageDriver, partition: str) -> None:
    first, second = batch(partition, "a", SHORT.of(driver)), batch(partition, "b", LONG.of(driver))
    start = len(first.values) + 1
    _append(driver, first)
    _append(driver, second)
    view = read_stream(driver, partition)
    _expect_placed(view, first, 1)
    _expect_placed(view, second, start)
    expected_head = materialize_storage_append(second, start).head
    assert view.head is not None, "the head must be readable by a point read"
    assert view.head.key == expected_head.key and view.head.document == expected_head.document, (
        f"the head must be {expected_head.document.text}, got {view.head.document.text}"
    )
    # Point reads by the canonical record keys find the same records (in as many attempts as it takes).
    keys = [LAYOUT.record_key(partition, position) for position in range(1, start + len(second.values))]
    found: list[Any] = []
    for part in chunks(keys, EVERY_READ.of(driver)):

        def read(tx: StorageTransaction, part: list[StorageRecordKey] = part) -> list[Any]:
            return list(tx.get(part))

        found.extend(driver.transaction(read))
    assert [r.document if r else None for r in found] == [r.document for r in view.records], (
        "a point read of the stream's record keys must return the same documents as the stream read "
        "(append.canonical-layout)"
    )


class _Raised(Exception):
    pass


class _Halted(BaseException):
    """Not an Exception (like KeyboardInterrupt): cleanup written for Exception alone misses it."""


@NOTHING_ON_ROLLBACK
@LONG.mark
@pytest.mark.parametrize("raised", [_Raised, _Halted], ids=["exception", "base-exception"])
def test_an_aborted_append_consumes_no_positions(
    driver: StorageDriver, partition: str, raised: type[BaseException]
) -> None:
    lost = LONG.of(driver)

    def aborted(tx: StorageTransaction) -> None:
        tx.append(batch(partition, "lost", lost))
        raise raised

    with propagated(
        raised, what=f"the callback staged an append of {lost} records and then raised {raised.__name__}"
    ):
        driver.transaction(aborted)
    _expect_untouched(driver, partition)
    kept = batch(partition, "kept", SHORT.of(driver))
    _append(driver, kept)
    view = read_stream(driver, partition)
    _expect_contiguous(view, len(kept.values))
    _expect_placed(view, kept, 1)


def _bump_fence(other_driver: StorageDriver, leases: Leases) -> None:
    """Replace the fence record from another instance: the competing commit that makes an attempt replay."""

    def replace(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("fence")])
        assert current is not None, missing(
            "the fence record", written="the check created it before this attempt"
        )
        tx.replace(current, leases.unique("fence"))

    transact_with_retries(other_driver, replace, RACING)


#: A batch beside the fence record the attempt reads and replaces.
BESIDE_FENCE = values(2, beside=1)


@NOTHING_ON_ROLLBACK
@BESIDE_FENCE.mark
def test_a_replayed_append_is_applied_once(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, partition: str
) -> None:
    driver.transaction(lambda tx: tx.create(leases.unique("fence")))
    attempts: list[int] = []
    competitor: list[Competitor[Any]] = []
    count = BESIDE_FENCE.of(driver)

    def callback(tx: StorageTransaction) -> None:
        attempts.append(1)
        (fence,) = tx.get([leases.key("fence")])
        assert fence is not None, missing(
            "the fence record", written="the check created it before this attempt"
        )
        if not competitor:
            competitor.append(compete(lambda: _bump_fence(other_driver, leases)))
        tx.replace(fence, leases.unique("fence"))
        tx.append(batch(partition, f"attempt{len(attempts)}", count))

    transact_with_retries(driver, callback, competitor)
    competitor[0].settle()
    view = read_stream(driver, partition)
    _expect_contiguous(view, count)
    assert view.sources == [f"attempt{len(attempts)}-{i}" for i in range(count)], (
        f"only the committed attempt's batch may remain, got {view.sources}"
    )


@ONE_BATCH
@pytest.mark.parametrize("second", ["same-partition", "other-partition"])
def test_a_second_append_in_one_attempt_is_refused(
    driver: StorageDriver, partition: str, second: str
) -> None:
    other = partition if second == "same-partition" else f"{partition}-b"

    def callback(tx: StorageTransaction) -> None:
        tx.append(batch(partition, "one", 1))
        tx.append(batch(other, "two", 1))

    with refused(
        StorageUsageError,
        what=f"the callback staged a second append batch ({second}) in one attempt",
        rule=ONE_BATCH,
    ):
        driver.transaction(callback)
    _expect_untouched(driver, partition)
    _expect_untouched(driver, other)


@SEALS
@pytest.mark.parametrize("read", ["get", "query_candidates"])
def test_reads_after_append_are_refused(
    driver: StorageDriver, leases: Leases, partition: str, read: str
) -> None:
    def callback(tx: StorageTransaction) -> None:
        tx.append(batch(partition, "a", 1))
        if read == "get":
            tx.get([leases.key("any")])
        else:
            tx.query_candidates(leases.query(limit=1))

    with refused(StorageSealedError, what=f"the callback called {read}() after its append", rule=SEALS):
        driver.transaction(callback)
    _expect_untouched(driver, partition)


def _off_limits_cases(partition: str) -> dict[str, Callable[[StorageTransaction], None]]:
    command = batch(partition, "a", 1)
    stray = materialize_storage_append(batch(partition, "stray", 1), 7)

    def read_head(tx: StorageTransaction) -> None:
        tx.get([LAYOUT.head_key(partition)])
        tx.append(command)

    def read_record(tx: StorageTransaction) -> None:
        tx.get([LAYOUT.record_key(partition, 1)])
        tx.append(command)

    def create_record(tx: StorageTransaction) -> None:
        tx.append(command)
        tx.create(stray.records[0])

    def create_head(tx: StorageTransaction) -> None:
        tx.append(command)
        tx.create(stray.head)

    def create_then_append(tx: StorageTransaction) -> None:
        tx.create(stray.records[0])
        tx.append(command)

    return {
        "read-head-then-append": read_head,
        "read-record-then-append": read_record,
        "append-then-create-record": create_record,
        "append-then-create-head": create_head,
        "create-record-then-append": create_then_append,
    }


@OWN_STREAM
@pytest.mark.parametrize(
    "case",
    [
        "read-head-then-append",
        "read-record-then-append",
        "append-then-create-record",
        "append-then-create-head",
        "create-record-then-append",
    ],
)
def test_an_appending_attempt_leaves_its_own_stream_alone(
    driver: StorageDriver, partition: str, case: str
) -> None:
    with refused(
        StorageUsageError,
        what=f"an appending attempt also touched its own partition's stream ({case})",
        rule=OWN_STREAM,
    ):
        driver.transaction(_off_limits_cases(partition)[case])
    _expect_untouched(driver, partition)


#: Keys of another partition's stream read before appending: its head, then its first record where the
#: attempt has room for both beside one value and the head.
OTHER_STREAM_READS = records(2, beside=2)


@OWN_STREAM
@OTHER_STREAM_READS.mark
def test_reading_another_partitions_stream_is_allowed(driver: StorageDriver, partition: str) -> None:
    elsewhere = f"{partition}-b"
    read = [LAYOUT.head_key(elsewhere), LAYOUT.record_key(elsewhere, 1)][: OTHER_STREAM_READS.of(driver)]
    count = values(2, beside=len(read)).of(driver)

    def callback(tx: StorageTransaction) -> None:
        tx.get(read)
        tx.append(batch(partition, "a", count))

    driver.transaction(callback)
    _expect_contiguous(read_stream(driver, partition), count)


def _point(driver: StorageDriver, command: AppendRecordsCommand) -> None:
    driver.transaction(lambda tx: point_append(tx, command))


@MIXED
@LONG.mark
def test_native_and_point_appends_share_one_stream(driver: StorageDriver, partition: str) -> None:
    long, short = LONG.of(driver), SHORT.of(driver)
    steps = [
        ("native", batch(partition, "n1", short)),
        ("point", batch(partition, "p1", short)),
        ("native", batch(partition, "n2", 1)),
        ("point", batch(partition, "p2", long)),
    ]
    start = 1
    placements = []
    for kind, command in steps:
        if kind == "native":
            _append(driver, command)
        else:
            _point(driver, command)
        placements.append((command, start))
        start += len(command.values)
    view = read_stream(driver, partition)
    _expect_contiguous(view, start - 1)
    for command, first in placements:
        _expect_placed(view, command, first)


@MIXED
@pytest.mark.parametrize("head", ["absent", "present"])
@pytest.mark.parametrize("open_side", ["point-writer", "native"])
@LONG.mark
def test_racing_native_and_point_appends_stay_contiguous(
    driver: StorageDriver, other_driver: StorageDriver, partition: str, head: str, open_side: str
) -> None:
    if head == "present":
        _append(driver, batch(partition, "seed", 1))
    seeded = 1 if head == "present" else 0
    rival = batch(partition, "rival", SHORT.of(driver))
    mine = batch(partition, "mine", LONG.of(driver))
    competitor: list[Competitor[Any]] = []

    def rival_commit() -> None:
        if open_side == "point-writer":
            _append(other_driver, rival)
        else:
            transact_with_retries(other_driver, lambda tx: point_append(tx, rival), RACING)

    def callback(tx: StorageTransaction) -> None:
        if open_side == "point-writer":
            # Reading the head (present or absent) is the dependency a racing native append must break.
            (current,) = tx.get([LAYOUT.head_key(partition)])
            if not competitor:
                competitor.append(compete(rival_commit))
            start = 1 if current is None else int(str(current.document.value["next"]))
            placed = materialize_storage_append(mine, start)
            for record in placed.records:
                tx.create(record)
            if current is None:
                tx.create(placed.head)
            else:
                tx.replace(current, placed.head)
        else:
            tx.append(mine)
            if not competitor:
                competitor.append(compete(rival_commit))

    transact_with_retries(driver, callback, competitor)
    competitor[0].settle()
    view = read_stream(driver, partition)
    _expect_contiguous(view, seeded + len(rival.values) + len(mine.values))
    batches = {source.rpartition("-")[0] for source in view.sources} - {"seed"}
    assert batches == {"rival", "mine"}, f"both racing batches must survive, found {view.sources}"
    rival_first = view.sources.index("rival-0") + 1
    mine_first = view.sources.index("mine-0") + 1
    _expect_placed(view, rival, rival_first)
    _expect_placed(view, mine, mine_first)


def _set_head(driver: StorageDriver, partition: str, next_position: int) -> None:
    """A point writer places the head by hand (as core's fallback path would after many appends)."""
    record = build_storage_record(StorageTableName.STREAM_HEADS, LAYOUT.head_value(partition, next_position))
    driver.transaction(lambda tx: tx.create(record))


@BOUNDS
def test_a_batch_past_the_unsigned_64_bit_range_fails_and_changes_nothing(
    driver: StorageDriver, partition: str
) -> None:
    _set_head(driver, partition, U64_MAX - 1)
    before = read_stream(driver, partition)
    with refused(
        StorageStreamExhaustedError,
        what="with the head at 2**64-2, the check appended a batch of 2 records (the last would need "
        "2**64-1)",
        rule=BOUNDS,
    ):
        _append(driver, batch(partition, "too-many", 2))
    after = read_stream(driver, partition)
    assert after.head == before.head and after.records == (), "an exhausted append must change nothing"
    last = batch(partition, "last", 1)
    _append(driver, last)
    view = read_stream(driver, partition)
    assert view.positions == [U64_MAX - 1], (
        "the last allocatable position is 2**64-2 (the head ends at 2**64-1)"
    )
    _expect_placed(view, last, U64_MAX - 1)
    assert view.next_position == U64_MAX, (
        "after a batch ending at position 2**64-2 the head must allocate 2**64-1 next"
    )
    with refused(
        StorageStreamExhaustedError,
        what="with the head at 2**64-1, the check appended one more record",
        rule=BOUNDS,
    ):
        _append(driver, batch(partition, "one-more", 1))
    assert read_stream(driver, partition) == view, "an exhausted append must change nothing"


@BOUNDS
@LONG.mark
@pytest.mark.parametrize("start", [2**53 + 1, 2**63 - 1], ids=["past-2**53", "across-2**63"])
def test_positions_keep_every_digit_up_to_the_unsigned_range(
    driver: StorageDriver, partition: str, start: int
) -> None:
    """Positions are exact decimal integers: no double (2**53) and no signed 64-bit column (2**63)."""
    _set_head(driver, partition, start)
    count = LONG.of(driver)
    command = batch(partition, "wide", count)
    _append(driver, command)
    view = read_stream(driver, partition)
    assert view.positions == list(range(start, start + count)), (
        f"with the head at {start}, a batch of {count} must take positions {start}..{start + count - 1}, "
        f"not {view.positions}"
    )
    _expect_placed(view, command, start)
    assert view.next_position == start + count, (
        f"the head must allocate {start + count} next, not {view.next_position}"
    )


@OCCUPIED
@pytest.mark.parametrize("head", ["absent", "present"])
def test_an_append_onto_an_occupied_position_fails_and_changes_nothing(
    driver: StorageDriver, partition: str, head: str
) -> None:
    """A head that points at a position some record already holds is corrupt: the batch must not land.

    Core's own fallback (a head read and conditional creates) can never
    overwrite that record, so a native append that upserts its records would
    make the two paths disagree about the same stream.
    """
    start = 1
    if head == "present":
        start = 3
        _set_head(driver, partition, start)
    (stray,) = materialize_storage_append(batch(partition, "stray", 1), start).records
    driver.transaction(lambda tx: tx.create(stray))
    before = read_stream(driver, partition)
    with refused(
        StorageError,
        what=f"with the head {'absent' if head == 'absent' else 'at 3'} and a record already stored at "
        f"position {start}, the check appended a batch of {SHORT.of(driver)} records",
        rule=OCCUPIED,
    ):
        _append(driver, batch(partition, "onto", SHORT.of(driver)))
    after = read_stream(driver, partition)
    assert after == before, (
        f"a refused append must change nothing: before it the stream held positions {before.positions} "
        f"(head {before.head}), after it {after.positions} (head {after.head})"
    )


@CONCURRENT
@pytest.mark.parametrize("reads_first", [False, True], ids=["append-only", "after-a-read"])
def test_concurrent_appends_get_disjoint_contiguous_ranges(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, partition: str, reads_first: bool
) -> None:
    """Two batches racing from two instances; each as long as the attempt allows beside the head and,
    in ``after-a-read``, the key it read (at core's floor that is one value each, still two ranges
    that must not overlap)."""
    competitor: list[Competitor[Any]] = []
    context = 1 if reads_first else 0
    sizes = {"mine": values(3, beside=context).of(driver), "rival": values(2, beside=context).of(driver)}

    def rival() -> None:
        def callback(tx: StorageTransaction) -> None:
            if reads_first:
                tx.get([leases.key("rival-context")])
            tx.append(batch(partition, "rival", sizes["rival"]))

        other_driver.transaction(callback)

    def callback(tx: StorageTransaction) -> None:
        if reads_first:
            tx.get([leases.key("context")])
        tx.append(batch(partition, "mine", sizes["mine"]))
        if not competitor:
            competitor.append(compete(rival))

    driver.transaction(callback)
    competitor[0].settle()
    view = read_stream(driver, partition)
    _expect_contiguous(view, sum(sizes.values()))
    for tag, count in sizes.items():
        where = [i for i, source in enumerate(view.sources) if source.startswith(f"{tag}-")]
        assert len(where) == count, f"batch {tag} must appear exactly once, found {view.sources}"
        assert where == list(range(where[0], where[0] + count)), f"batch {tag} must be contiguous"
        assert [view.sources[i] for i in where] == [f"{tag}-{i}" for i in range(count)], (
            f"batch {tag} must keep its records in the order they were appended"
        )


@limit_gated("append-records")
@LIMITS
@pytest.mark.parametrize("with_point_write", [False, True], ids=["append-alone", "with-a-create"])
def test_appended_records_count_toward_the_record_limit(
    driver: StorageDriver, leases: Leases, partition: str, with_point_write: bool
) -> None:
    limit = driver.profile.limits.max_transaction_records
    point = 1 if with_point_write else 0
    fits = limit - 1 - point  # values + head + point writes == limit

    def run(count: int) -> None:
        def callback(tx: StorageTransaction) -> None:
            if point:
                tx.create(leases.unique(f"w{count}"))
            tx.append(batch(partition, f"n{count}", count))

        driver.transaction(callback)

    if fits >= 1:
        run(fits)
        assert len(read_stream(driver, partition).records) == fits, (
            f"an append of {fits} records, exactly what fits in max_transaction_records, must store "
            "all of them"
        )
    before = read_stream(driver, partition)
    with refused(
        StorageLimitError,
        what=f"the check appended {fits + 1} records{' beside one create' if point else ''}, which with the "
        f"stream head is one record past max_transaction_records={limit}",
        rule=LIMITS,
    ) as refusal:
        run(fits + 1)
    assert refusal.value.limit is StorageLimitName.TRANSACTION_RECORDS, (
        "an append one record past max_transaction_records must be refused naming max_transaction_records"
    )
    assert read_stream(driver, partition) == before, "an oversized append must commit nothing"


@limit_gated("append-transaction-bytes")
@LIMITS
@pytest.mark.parametrize("over", [0, 1], ids=["exactly-the-limit", "one-byte-past"])
def test_appended_bytes_count_toward_the_transaction_byte_limit(
    driver: StorageDriver, leases: Leases, partition: str, over: int
) -> None:
    """An append measured on its own (measure_storage_append refuses a batch too big by itself) but
    not added to the attempt's point writes, or added at the width of the position it gets rather than
    the widest, lets a transaction past max_transaction_bytes commit: the head and every record count,
    at their widest, together with the creates beside them."""
    limits = driver.profile.limits
    command = batch(partition, "bytes", 1)
    appended = measure_storage_append(command, limits).bytes
    creates = append_byte_plan(leases, limits, appended, over)
    assert creates is not None, "the check's limit gate let it run where its work cannot be built"
    staged = appended + sum(record.document.size for record in creates)
    assert staged == limits.max_transaction_bytes + over, "the check planned the wrong number of bytes"

    def callback(tx: StorageTransaction) -> None:
        for record in creates:
            tx.create(record)
        tx.append(command)

    if not over:
        driver.transaction(callback)
        assert len(read_stream(driver, partition).records) == 1, (
            f"creates and an append of exactly max_transaction_bytes={limits.max_transaction_bytes} at the "
            "widest position must commit"
        )
        return
    with refused(
        StorageLimitError,
        what=f"the check staged {len(creates)} creates and an append of one record, {staged} bytes with the "
        f"head and record measured at the widest position: one byte past max_transaction_bytes="
        f"{limits.max_transaction_bytes}",
        rule=LIMITS,
    ) as refusal:
        driver.transaction(callback)
    assert refusal.value.limit is StorageLimitName.TRANSACTION_BYTES, (
        f"the limit error names {refusal.value.limit!r}; the exceeded limit is max_transaction_bytes"
    )
    _expect_untouched(driver, partition)
    keys = [record.key for record in creates][: limits.max_point_reads]
    stored = driver.transaction(lambda tx: tx.get(keys))
    assert all(record is None for record in stored), "an oversized transaction committed some of its creates"


@limit_gated("append-record-bytes")
@LIMITS
def test_an_oversized_appended_record_is_refused(driver: StorageDriver, partition: str) -> None:
    limits = driver.profile.limits
    oversized = batch(partition, "big", 1, padding=limits.max_record_bytes)
    with refused(
        StorageLimitError,
        what=f"the check appended one record padded to more than max_record_bytes={limits.max_record_bytes}",
        rule=LIMITS,
    ) as refusal:
        _append(driver, oversized)
    assert refusal.value.limit in (StorageLimitName.RECORD_BYTES, StorageLimitName.TRANSACTION_BYTES), (
        "an append of a record past max_record_bytes must be refused naming max_record_bytes or "
        "max_transaction_bytes"
    )
    _expect_untouched(driver, partition)


@COPIES
def test_changing_the_callers_values_after_append_changes_nothing(
    driver: StorageDriver, partition: str
) -> None:
    expected = batch(partition, "orig", 2)
    handed: list[list[dict[str, Any]]] = []

    def callback(tx: StorageTransaction) -> None:
        # Fresh values for every attempt: a driver may replay the callback, and a replay must see the
        # caller's input as it was, not as the previous attempt left it.
        values = observation_values("orig", 2)
        handed.append(values)
        tx.append({"stream": OBSERVATIONS.value, "partition": partition, "values": values})  # type: ignore[arg-type]
        values[0]["source"]["id"] = "changed-inside"
        values[1]["data"]["i"] = 99
        values.append({"source": {"kind": "x", "id": "extra"}, "data": {}})

    driver.transaction(callback)
    handed[-1][0]["data"]["i"] = -1
    view = read_stream(driver, partition)
    _expect_contiguous(view, 2)
    _expect_placed(view, expected, 1)


def _expect_append_refused(kept: StorageTransaction, partition: str, when: str) -> None:
    with refused(
        StorageAttemptEndedError,
        what=f"the check called append() on a transaction whose attempt {when}",
        rule=ENDED,
    ):
        kept.append(batch(partition, "late", 1))


@ENDED
def test_append_after_the_attempt_ended_is_refused(driver: StorageDriver, partition: str) -> None:
    kept: list[StorageTransaction] = []
    driver.transaction(lambda tx: kept.append(tx))
    _expect_append_refused(kept[0], partition, "had already committed")
    _expect_untouched(driver, partition)


@ENDED
@pytest.mark.parametrize("raised", [_Raised, _Halted], ids=["exception", "base-exception"])
def test_append_after_a_rolled_back_attempt_is_refused(
    driver: StorageDriver, partition: str, raised: type[BaseException]
) -> None:
    """A driver that refuses only once an attempt committed, and quietly drops (or queues for its next
    commit) an append on an attempt that rolled back, is what this catches."""
    kept: list[StorageTransaction] = []

    def aborted(tx: StorageTransaction) -> None:
        kept.append(tx)
        raise raised

    with propagated(raised, what=f"the callback raised {raised.__name__} without staging anything"):
        driver.transaction(aborted)
    _expect_append_refused(kept[0], partition, f"was rolled back by {raised.__name__}")
    _append(driver, batch(partition, "next", 1))
    view = read_stream(driver, partition)
    assert view.sources == ["next-0"], (
        f"after a refused late append and one committed batch the stream must hold that batch alone at "
        f"position 1, got {view.sources}: the late append reached storage"
    )


@ENDED
def test_append_on_a_replayed_attempt_is_refused(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, partition: str
) -> None:
    driver.transaction(lambda tx: tx.create(leases.unique("fence")))
    attempts: list[StorageTransaction] = []
    competitor: list[Competitor[Any]] = []
    late: list[BaseException | None] = []

    def callback(tx: StorageTransaction) -> None:
        attempts.append(tx)
        if len(attempts) > 1 and not late:
            try:
                attempts[0].append(batch(partition, "late", 1))
                late.append(None)
            except StorageAttemptEndedError as error:
                late.append(error)
        (fence,) = tx.get([leases.key("fence")])
        assert fence is not None, missing(
            "the fence record", written="the check created it before this attempt"
        )
        if not competitor:
            competitor.append(compete(lambda: _bump_fence(other_driver, leases)))
        tx.replace(fence, leases.unique("fence"))

    transact_with_retries(driver, callback, competitor)
    competitor[0].settle()
    assert not late or late[0] is not None, (
        "append() on the transaction object of an attempt that had been replayed was accepted while the "
        f"next attempt ran; it must raise StorageAttemptEndedError ({ENDED.id})"
    )
    # Whether or not the driver replayed (a locking driver makes the competitor wait instead),
    # the first attempt has ended by now.
    _expect_append_refused(attempts[0], partition, "was replayed or committed")
    _expect_untouched(driver, partition)


def _widest_batch(partition: str, tag: str, widest: int) -> AppendRecordsCommand:
    """A one-value batch whose record is exactly ``widest`` bytes at the widest position it could get."""
    base = batch(partition, tag, 1).widest_sizes[0]
    assert widest >= base, (
        "the check's limit gate let it run with max_record_bytes below the smallest observation record "
        "(a fault in the check, not the driver)"
    )
    command = batch(partition, tag, 1, padding=widest - base)
    assert command.widest_sizes[0] == widest, (
        "the check built a batch of the wrong width (a fault in the check, not the driver)"
    )
    return command


@limit_gated("append-widest-batches")
@LIMITS
def test_a_batch_is_measured_at_the_widest_position_not_the_one_it_gets(
    driver: StorageDriver, partition: str
) -> None:
    # Positions are decimal strings: a record at position 1 is 19 bytes shorter than the same record at
    # 2**64-2. Whether a batch fits may not depend on where the head happens to be, so it is measured
    # as if it landed at the widest position, even on an empty stream.
    limits = driver.profile.limits
    over = _widest_batch(partition, "over", limits.max_record_bytes + 1)
    narrow = materialize_storage_append(over, 1).records[0].document.size
    refused: StorageLimitError | None = None
    try:
        _append(driver, over)
    except StorageLimitError as error:
        refused = error
    assert refused is not None, (
        f"a batch whose record is {limits.max_record_bytes + 1} bytes at the widest position ({narrow} bytes "
        f"at position 1) was accepted with max_record_bytes = {limits.max_record_bytes}: the batch was "
        "measured at the position it got, not the widest one"
    )
    assert refused.limit in (StorageLimitName.RECORD_BYTES, StorageLimitName.TRANSACTION_BYTES), (
        f"the limit error names {refused.limit!r}; the exceeded limit is max_record_bytes or "
        "max_transaction_bytes"
    )
    _expect_untouched(driver, partition)
    exact = _widest_batch(partition, "exact", limits.max_record_bytes)
    _set_head(driver, partition, U64_MAX - 1)
    _append(driver, exact)
    view = read_stream(driver, partition)
    assert view.positions == [U64_MAX - 1], (
        f"a batch of exactly max_record_bytes at the widest position was not stored there "
        f"({view.positions}); "
        f"the {limits.max_record_bytes + 1}-byte batch (only {narrow} bytes at position 1) was refused above"
    )
    _expect_placed(view, exact, U64_MAX - 1)


# -- across processes --------------------------------------------------------------------------------


def _expect_batches(view: StreamView, committed: list[tuple[str, int]], *, ordered: bool) -> None:
    """Exactly the ``committed`` (tag, count) batches, each once, contiguous and in its own order."""
    total = sum(count for _, count in committed)
    _expect_contiguous(view, total)
    expected = [f"{tag}-{i}" for tag, count in committed for i in range(count)]
    if ordered:
        assert view.sources == expected, (
            f"batches appended one after another from different processes must sit in commit order: "
            f"expected {expected}, stored {view.sources}; a position was reused or a batch lost"
        )
        return
    assert sorted(view.sources) == sorted(expected), (
        f"the committed batches {committed} do not match what is stored ({view.sources}): a batch was lost, "
        "stored twice, or stored although it was reported as not committed"
    )
    for tag, count in committed:
        where = [i for i, source in enumerate(view.sources) if source.rpartition("-")[0] == tag]
        assert where == list(range(where[0], where[0] + count)), (
            f"batch {tag} from another process is not contiguous: it sits at {[i + 1 for i in where]}"
        )
        assert [view.sources[i] for i in where] == [f"{tag}-{i}" for i in range(count)], (
            f"batch {tag} must keep its records in the order they were appended"
        )


@ACROSS_PROCESSES
def test_processes_taking_turns_append_after_each_other(
    driver: StorageDriver, partition: str, runlane_workers: Any
) -> None:
    """Three processes append in turn (each batch committed before the next starts): two with native
    append where offered, one with the point writer, so an allocator that trusts what its own process last
    saw reuses positions at once."""
    native = driver.profile.append
    workers = runlane_workers(3)
    longest = LONG.of(driver)
    committed: list[tuple[str, int]] = []
    for turn in range(2):
        for worker in workers:
            tag, count = f"w{worker.index}t{turn}", 1 + (worker.index + turn) % longest
            use_native = native and worker.index % 2 == 0  # processes 0 and 2 native, 1 point writes
            [(done_tag, done)] = worker.call(w_append_batches, partition, [(tag, count, use_native)], 1)
            assert (done_tag, done) == (tag, True), (
                f"an append from worker process {worker.index} with no competitor running conflicted: the "
                "head it read must already have been wrong"
            )
            committed.append((tag, count))
            _expect_batches(read_stream(driver, partition), committed, ordered=True)
    own = batch(partition, "check", SHORT.of(driver))
    driver.transaction(lambda tx: point_append(tx, own))
    committed.append(("check", len(own.values)))
    _expect_batches(read_stream(driver, partition), committed, ordered=True)


@ACROSS_PROCESSES
def test_concurrent_appends_from_three_processes_keep_every_batch(
    driver: StorageDriver, partition: str, runlane_workers: Any
) -> None:
    """Three processes append four batches each at the same time, mixing native and point appends."""
    native = driver.profile.append
    workers = runlane_workers(3)
    longest = LONG.of(driver)
    plans = {
        worker.index: [
            (f"w{worker.index}b{n}", 1 + (worker.index + n) % longest, native and (worker.index + n) % 2 == 0)
            for n in range(4)
        ]
        for worker in workers
    }
    # A correct driver conflicts only because some other batch committed: more tries than batches suffice.
    retries = 1 + sum(len(plan) for plan in plans.values())
    for worker in workers:
        worker.start(w_append_batches, partition, plans[worker.index], retries)
    committed: list[tuple[str, int]] = []
    for worker in workers:
        counts = {tag: count for tag, count, _ in plans[worker.index]}
        for tag, done in worker.result():
            assert done, (
                f"batch {tag} from worker process {worker.index} conflicted {retries} times although fewer "
                "batches than that were committed by others: its conflicts are not caused by other commits"
            )
            committed.append((tag, counts[tag]))
    _expect_batches(read_stream(driver, partition), committed, ordered=False)
