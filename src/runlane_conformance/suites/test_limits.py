"""Limits: every advertised limit holds exactly at its value and refuses one unit past it, atomically.

Core splits combined work after a limit error, which is only safe if the
driver (a) accepts everything up to what it advertises, (b) refuses the
first unit past it with ``StorageLimitError`` naming that limit, and (c)
commits nothing of a refused attempt. Work sizes are derived from the
driver's advertised profile, never from the reference driver's defaults;
the counting rules are those of ``runlane_conformance.contract.limits``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue.limits import (
    ALL_OR_NOTHING,
    POINT_READS,
    QUERY_RESULTS,
    RECORD_BYTES,
    TRANSACTION_BYTES,
    TRANSACTION_RECORDS,
)
from runlane_conformance.contract.catalog import StorageCandidateMode
from runlane_conformance.contract.errors import StorageLimitError, StorageLimitName
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import (
    NewStorageRecord,
    StorageIndexConsistency,
    StorageLimits,
    StorageRecordKey,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import settle_indexes
from runlane_conformance.fixtures.evidence import record_limit
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import dependency_mix, limit_gated, replaced_count
from runlane_conformance.fixtures.limit_plans import (
    KeyPlan,
    lease_floor,
    plan_distinct_keys,
    sized_leases,
    split_sizes,
)
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.suites._conflicts_support import Attempts
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import missing
from runlane_conformance.suites._mutations_support import create_all, query_candidates_pairs, read, read_one
from runlane_conformance.suites._retries_support import RACING, transact_with_retries


def _limits(driver: StorageDriver) -> StorageLimits:
    return driver.profile.limits


def _refused(
    limit: StorageLimitName, run: Callable[[], object], *also: StorageLimitName
) -> StorageLimitError:
    """Run ``run``; it must raise StorageLimitError naming ``limit`` (or one of ``also``)."""
    names = {limit, *also}
    try:
        run()
    except StorageLimitError as error:
        assert error.limit in names, (
            f"the limit error names {error.limit!r}; the exceeded limit is {' or '.join(sorted(names))}"
        )
        return error
    raise AssertionError(
        f"work one unit past {' or '.join(sorted(names))} was accepted: it must be refused with "
        "StorageLimitError naming that limit"
    )


def _refused_first(run: Callable[[], object], exceeded: str, rule: str) -> None:
    """Run work past a limit that the check needs refused before it can look at what was committed.

    A driver that accepts the work fails the boundary rule ``rule`` (its own
    check says so); here the message says that this check could not judge its
    own rule for that reason, instead of a bare "DID NOT RAISE".
    """
    try:
        run()
    except StorageLimitError:
        return
    raise AssertionError(
        f"work past {exceeded} was accepted, so there is no refused attempt whose writes this check could "
        f"inspect: accepting it breaks {rule}, and this check fails because of it"
    )


def _all_absent(driver: StorageDriver, keys: Sequence[StorageRecordKey], what: str) -> None:
    present = [key for key, record in zip(keys, read(driver, keys), strict=True) if record is not None]
    assert not present, (
        f"{what}: {len(present)} of {len(keys)} writes of the refused attempt were committed; the limit "
        "error was raised, but a refused attempt must commit none of its writes "
        "(limits.oversized-work-never-split)"
    )


def _create_callback(records: Sequence[NewStorageRecord]) -> Callable[[StorageTransaction], None]:
    def create(tx: StorageTransaction) -> None:
        for record in records:
            tx.create(record)

    return create


GATE_FAULT = (
    "the check's limit gate let it run at limits where its work cannot be built (a fault in the check, "
    "not the driver)"
)


# -- point reads -------------------------------------------------------------------------------------


def _positions(leases: Leases, count: int, limits: StorageLimits) -> list[StorageRecordKey]:
    """``count`` key positions over few enough distinct keys to stay inside the record limit."""
    distinct = max(1, min(count, limits.max_transaction_records))
    keys = [leases.key(f"p{i}") for i in range(distinct)]
    return [keys[i % distinct] for i in range(count)]


@limit_gated("point-reads")
@POINT_READS
def test_exactly_max_point_reads_positions_are_read(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    create_all(driver, [leases.unique("p0")])
    positions = _positions(leases, limits.max_point_reads, limits)
    results = driver.transaction(lambda tx: tx.get(positions))
    assert len(results) == limits.max_point_reads, "every requested position must be answered"
    assert results[0] is not None and results[0].key == leases.key("p0"), (
        "the first position must hold the record written under p0 (a read at the limit is served, not "
        "cut short)"
    )
    record_limit("max_point_reads", accepted=limits.max_point_reads)


@limit_gated("point-reads")
@POINT_READS
def test_one_point_read_past_the_limit_is_refused(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    positions = _positions(leases, limits.max_point_reads + 1, limits)
    _refused(StorageLimitName.POINT_READS, lambda: driver.transaction(lambda tx: tx.get(positions)))
    record_limit("max_point_reads", rejected=limits.max_point_reads + 1)


@limit_gated("point-reads")
@POINT_READS
def test_point_reads_add_up_across_calls_of_one_attempt(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    total = limits.max_point_reads
    first = _positions(leases, (total + 1) // 2, limits)
    rest = _positions(leases, total - len(first), limits)

    def exactly(tx: StorageTransaction) -> int:
        return len(tx.get(first)) + (len(tx.get(rest)) if rest else 0)

    assert driver.transaction(exactly) == total, (
        f"{total} point reads split over two get() calls of "
        "one attempt, exactly max_point_reads, must be served"
    )

    def one_more(tx: StorageTransaction) -> None:
        tx.get(first)
        if rest:
            tx.get(rest)
        tx.get(_positions(leases, 1, limits))

    _refused(StorageLimitName.POINT_READS, lambda: driver.transaction(one_more))


@limit_gated("point-reads")
@POINT_READS
def test_duplicate_positions_count_against_the_point_read_limit(
    driver: StorageDriver, leases: Leases
) -> None:
    limits = _limits(driver)
    same = [leases.key("dup")] * (limits.max_point_reads + 1)
    _refused(StorageLimitName.POINT_READS, lambda: driver.transaction(lambda tx: tx.get(same)))


@limit_gated("point-reads")
@POINT_READS
@with_plain_hypothesis_errors("this property")
@given(data=st.data())
def test_any_split_of_the_point_read_budget_is_accepted_and_one_more_refused(
    driver: StorageDriver, data: st.DataObject
) -> None:
    limits = _limits(driver)
    leases = Leases(environment=f"env-{uuid.uuid4().hex[:12]}")
    total = limits.max_point_reads
    cuts = sorted(data.draw(st.lists(st.integers(0, total), max_size=6), label="cuts"))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True) if b > a]
    calls = [_positions(leases, size, limits) for size in sizes]

    def exactly(tx: StorageTransaction) -> int:
        return sum(len(tx.get(call)) for call in calls)

    assert driver.transaction(exactly) == total, f"reads split as {sizes} were not all answered"

    def one_more(tx: StorageTransaction) -> None:
        for call in calls:
            tx.get(call)
        tx.get(_positions(leases, 1, limits))

    _refused(StorageLimitName.POINT_READS, lambda: driver.transaction(one_more))


# -- query results -----------------------------------------------------------------------------------


@limit_gated("query-results")
@QUERY_RESULTS
def test_a_page_of_exactly_max_query_results_is_served_in_full(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    count = limits.max_query_results
    create_all(driver, [leases.record(f"q{i:07d}", at=i) for i in range(count + 1)])
    command = leases.query(limit=count)
    pages = {
        "driver.query": driver.query(command),
        "query_candidates": driver.transaction(lambda tx: tx.query_candidates(command)),
    }
    strong = driver.profile.index_consistency is StorageIndexConsistency.STRONG
    for path, page in pages.items():
        assert len(page.items) <= count, f"{path} served {len(page.items)} items for a page limit of {count}"
        if strong:  # an eventual index may still be catching up; a strong one must fill the page
            assert len(page.items) == count, f"{path} served {len(page.items)} of a full page of {count}"
    if strong:
        paged = len(query_candidates_pairs(driver, command))
        assert paged == count + 1, (
            f"every page held at most {count} entries, as it should, but following the cursors over "
            f"{count + 1} entries yielded {paged}: the page limit is kept and paging loses or repeats "
            "entries (cursors.pages-join-to-one-scan); this check fails because of that"
        )
        record_limit("max_query_results", accepted=count)


@QUERY_RESULTS
def test_a_page_limit_past_max_query_results_is_refused(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    create_all(driver, [leases.unique("q")])
    command = leases.query(limit=limits.max_query_results + 1)
    _refused(StorageLimitName.QUERY_RESULTS, lambda: driver.query(command))
    _refused(
        StorageLimitName.QUERY_RESULTS, lambda: driver.transaction(lambda tx: tx.query_candidates(command))
    )
    if driver.profile.exclusive_candidates:
        # Exclusive selection is often a query of its own (SKIP LOCKED, a claim script): same limit.
        _refused(
            StorageLimitName.QUERY_RESULTS,
            lambda: driver.transaction(
                lambda tx: tx.query_candidates(command, mode=StorageCandidateMode.EXCLUSIVE)
            ),
        )
    record_limit("max_query_results", rejected=limits.max_query_results + 1)


@QUERY_RESULTS
def test_a_continued_page_past_max_query_results_is_refused(driver: StorageDriver, leases: Leases) -> None:
    """The page limit is checked on every page, not only on a scan's first one (a cursor is no exemption)."""
    limits = _limits(driver)
    create_all(driver, [leases.unique("q1", at=1), leases.unique("q2", at=2)])
    settle_indexes(driver)
    first = driver.query(leases.query(limit=1))
    assert first.cursor is not None, (
        "a full page of 1 out of 2 entries must carry a cursor (cursors.pages-join-to-one-scan); this check "
        "needs one to continue with and fails because of that"
    )
    continued = leases.query(limit=limits.max_query_results + 1).with_cursor(first.cursor)
    _refused(StorageLimitName.QUERY_RESULTS, lambda: driver.query(continued))
    _refused(
        StorageLimitName.QUERY_RESULTS, lambda: driver.transaction(lambda tx: tx.query_candidates(continued))
    )


# -- record bytes ------------------------------------------------------------------------------------


@limit_gated("record-bytes")
@RECORD_BYTES
def test_a_record_of_exactly_max_record_bytes_commits(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    (record,) = sized_leases(leases, [limits.max_record_bytes])
    assert record.document.size == limits.max_record_bytes, (
        "the check built a record of the wrong size (a fault in the check, not the driver)"
    )
    driver.transaction(lambda tx: tx.create(record))
    stored = read_one(driver, record.key)
    assert stored is not None and stored.document == record.document, (
        "a record of exactly max_record_bytes must be stored as written"
    )
    record_limit("max_record_bytes", accepted=limits.max_record_bytes)


@limit_gated("record-bytes")
@RECORD_BYTES
def test_a_record_one_byte_past_max_record_bytes_is_refused(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    (record,) = sized_leases(leases, [limits.max_record_bytes + 1])
    also = (
        (StorageLimitName.TRANSACTION_BYTES,)
        if limits.max_transaction_bytes == limits.max_record_bytes
        else ()
    )
    _refused(StorageLimitName.RECORD_BYTES, lambda: driver.transaction(lambda tx: tx.create(record)), *also)
    assert read_one(driver, record.key) is None, "an oversized record was committed"
    record_limit("max_record_bytes", rejected=limits.max_record_bytes + 1)


@limit_gated("record-bytes")
@RECORD_BYTES
def test_a_replacement_one_byte_past_max_record_bytes_is_refused(
    driver: StorageDriver, leases: Leases
) -> None:
    limits = _limits(driver)
    (original,) = sized_leases(leases, [lease_floor(leases)])
    create_all(driver, [original])
    before = read_one(driver, original.key)
    (bigger,) = sized_leases(leases, [limits.max_record_bytes + 1])
    assert bigger.key == original.key, (
        "the check built its oversized replacement under another key (a fault in the check, not the driver)"
    )
    also = (
        (StorageLimitName.TRANSACTION_BYTES,)
        if limits.max_transaction_bytes == limits.max_record_bytes
        else ()
    )
    _refused(
        StorageLimitName.RECORD_BYTES,
        lambda: driver.transaction(lambda tx: tx.replace(tx.get([original.key])[0], bigger)),  # type: ignore[arg-type]
        *also,
    )
    assert read_one(driver, original.key) == before, "an oversized replacement was committed"


@limit_gated("record-bytes-search")
@RECORD_BYTES
@with_plain_hypothesis_errors("this property")
@given(data=st.data())
def test_record_size_is_accepted_exactly_up_to_the_limit(driver: StorageDriver, data: st.DataObject) -> None:
    limits = _limits(driver)
    leases = Leases(environment=f"env-{uuid.uuid4().hex[:12]}")
    floor, top = lease_floor(leases), limits.max_record_bytes
    size = data.draw(
        st.one_of(st.integers(floor, top + 2), st.sampled_from([floor, top - 1, top, top + 1])).filter(
            lambda n: n >= floor
        ),
        label="size",
    )
    (record,) = sized_leases(leases, [size])
    if size <= top:
        driver.transaction(lambda tx: tx.create(record))
        stored = read_one(driver, record.key)
        assert stored is not None and stored.document.size == size, f"a {size}-byte record did not commit"
    else:
        also = (StorageLimitName.TRANSACTION_BYTES,) if limits.max_transaction_bytes == top else ()
        _refused(
            StorageLimitName.RECORD_BYTES, lambda: driver.transaction(lambda tx: tx.create(record)), *also
        )
        assert read_one(driver, record.key) is None, f"a {size}-byte record was committed"


# -- transaction records -----------------------------------------------------------------------------


def _key_plan(leases: Leases, count: int, limits: StorageLimits) -> KeyPlan:
    plan = plan_distinct_keys(leases, count, limits)
    assert plan is not None, GATE_FAULT
    return plan


def _run_plan(plan: KeyPlan) -> Callable[[StorageTransaction], None]:
    def touch(tx: StorageTransaction) -> None:
        if plan.reads:
            tx.get(list(plan.reads))
        for record in plan.creates:
            tx.create(record)

    return touch


@limit_gated("keys-at-limit")
@TRANSACTION_RECORDS
def test_exactly_max_transaction_records_keys_commit(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    plan = _key_plan(leases, limits.max_transaction_records, limits)
    assert plan.distinct_keys == limits.max_transaction_records, (
        "the check planned the wrong number of keys (a fault in the check, not the driver)"
    )
    driver.transaction(_run_plan(plan))
    stored = read(driver, [record.key for record in plan.creates])
    assert all(record is not None for record in stored), "a transaction of exactly the limit did not commit"
    record_limit("max_transaction_records", accepted=limits.max_transaction_records)


@limit_gated("keys-past-limit")
@TRANSACTION_RECORDS
def test_one_key_past_max_transaction_records_is_refused(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    plan = _key_plan(leases, limits.max_transaction_records + 1, limits)
    _refused(StorageLimitName.TRANSACTION_RECORDS, lambda: driver.transaction(_run_plan(plan)))
    _all_absent(driver, [record.key for record in plan.creates], "max_transaction_records + 1")
    record_limit("max_transaction_records", rejected=limits.max_transaction_records + 1)


@limit_gated("read-and-write-once")
@TRANSACTION_RECORDS
def test_reads_and_writes_of_one_key_count_once(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    plan = _key_plan(leases, limits.max_transaction_records, limits)

    def read_then_write(tx: StorageTransaction) -> None:
        tx.get([*plan.reads, plan.creates[0].key])
        for record in plan.creates:
            tx.create(record)

    driver.transaction(read_then_write)
    assert read_one(driver, plan.creates[0].key) is not None, (
        "work of exactly max_transaction_records keys, read and written, must commit"
    )


# -- transaction bytes -------------------------------------------------------------------------------


def _byte_plan(leases: Leases, total: int, limits: StorageLimits) -> list[NewStorageRecord]:
    sizes = split_sizes(total, lease_floor(leases), limits.max_record_bytes, limits.max_transaction_records)
    assert sizes is not None, GATE_FAULT
    return sized_leases(leases, sizes)


@limit_gated("bytes-at-limit")
@TRANSACTION_BYTES
def test_exactly_max_transaction_bytes_commit(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    records = _byte_plan(leases, limits.max_transaction_bytes, limits)
    assert sum(record.document.size for record in records) == limits.max_transaction_bytes, (
        "the check planned the wrong number of bytes (a fault in the check, not the driver)"
    )
    driver.transaction(_create_callback(records))
    stored = read(driver, [record.key for record in records])
    assert [s.document if s else None for s in stored] == [r.document for r in records], (
        "a transaction of exactly max_transaction_bytes did not commit every record"
    )
    record_limit("max_transaction_bytes", accepted=limits.max_transaction_bytes)


@limit_gated("one-byte-past")
@TRANSACTION_BYTES
def test_one_byte_past_max_transaction_bytes_is_refused(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    total = limits.max_transaction_bytes + 1
    if total > limits.max_transaction_records * limits.max_record_bytes:
        # The byte limit is exactly what the record limits allow: one byte more needs one record more.
        records = _byte_plan(leases, limits.max_transaction_bytes, limits)
        records.append(leases.sized("zzzzzzzz", lease_floor(leases)))
        also: tuple[StorageLimitName, ...] = (StorageLimitName.TRANSACTION_RECORDS,)
    else:
        records = _byte_plan(leases, total, limits)
        also = ()
    _refused(StorageLimitName.TRANSACTION_BYTES, lambda: driver.transaction(_create_callback(records)), *also)
    _all_absent(driver, [record.key for record in records], "max_transaction_bytes + 1")
    record_limit("max_transaction_bytes", rejected=limits.max_transaction_bytes + 1)


@limit_gated("delete-beside-full-bytes")
@TRANSACTION_BYTES
def test_deletes_add_no_bytes(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    records = _byte_plan(leases, limits.max_transaction_bytes, limits)
    victim = leases.unique("victim")
    create_all(driver, [victim])

    def delete_and_fill(tx: StorageTransaction) -> None:
        (current,) = tx.get([victim.key])
        assert current is not None, missing(
            ("the victim record"), written="the check created it before this attempt"
        )
        tx.delete(current)
        for record in records:
            tx.create(record)

    driver.transaction(delete_and_fill)
    assert read_one(driver, victim.key) is None, (
        "the delete committed with work of exactly the limit must be stored (the victim must be gone)"
    )


# -- all or nothing ----------------------------------------------------------------------------------


@limit_gated("keys-past-limit")
@ALL_OR_NOTHING
def test_writes_staged_before_the_record_limit_was_crossed_are_not_committed(
    driver: StorageDriver, leases: Leases
) -> None:
    limits = _limits(driver)
    plan = _key_plan(leases, limits.max_transaction_records + 1, limits)
    _refused_first(
        lambda: driver.transaction(_run_plan(plan)),
        "max_transaction_records",
        "limits.transaction-records-boundary",
    )
    _all_absent(driver, [record.key for record in plan.creates], "oversized by one record")
    # Core's reaction to the error is to split the work; the halves must then commit.
    half = len(plan.creates) // 2
    for part in (plan.creates[:half], plan.creates[half:]):
        if part:
            create_all(driver, list(part))
    assert all(read(driver, [record.key for record in plan.creates])), "split work did not commit"


@limit_gated("bytes-at-limit")
@ALL_OR_NOTHING
def test_writes_staged_before_the_byte_limit_was_crossed_are_not_committed(
    driver: StorageDriver, leases: Leases
) -> None:
    limits = _limits(driver)
    records = _byte_plan(leases, limits.max_transaction_bytes, limits)
    records.append(leases.sized("zzzzzzzz", lease_floor(leases)))
    _refused_first(
        lambda: driver.transaction(_create_callback(records)),
        "max_transaction_bytes",
        "limits.transaction-bytes-boundary",
    )
    _all_absent(driver, [record.key for record in records], "oversized by a few bytes")


@limit_gated("record-bytes")
@ALL_OR_NOTHING
def test_a_refused_attempt_leaves_earlier_commits_and_later_work_intact(
    driver: StorageDriver, leases: Leases
) -> None:
    limits = _limits(driver)
    kept = leases.unique("kept", at=1)
    create_all(driver, [kept])
    before = read_one(driver, kept.key)
    (oversized,) = sized_leases(leases, [limits.max_record_bytes + 1], prefix="o")

    def replace_then_oversize(tx: StorageTransaction) -> None:
        (current,) = tx.get([kept.key])
        assert current is not None, missing(
            "the kept record", written="the check created it before this attempt"
        )
        tx.replace(current, leases.unique("kept", at=2))
        tx.create(oversized)

    _refused_first(
        lambda: driver.transaction(replace_then_oversize), "max_record_bytes", "limits.record-bytes-boundary"
    )
    assert read_one(driver, kept.key) == before, (
        "the replacement staged before the oversized record committed"
    )
    assert read_one(driver, oversized.key) is None, (
        "the oversized record of the refused attempt must not be stored"
    )
    after = leases.unique("after")
    driver.transaction(lambda tx: tx.create(after))
    assert read_one(driver, after.key) is not None, "the store refused ordinary work after a limit error"


# -- every unit and every kind of work that counts -----------------------------------------------

#: Characters of each UTF-8 width above one byte (2, 3 and 4, the last beyond the BMP): a document made
#: of them has far fewer characters (and UTF-16 units) than bytes, so any other unit shows.
_WIDE = "é€😀"
_WIDE_BYTES = len(_WIDE.encode())


def _wide_lease(leases: Leases, name: str, size: int, *, at: int = 0) -> NewStorageRecord:
    """A lease whose document is exactly ``size`` UTF-8 bytes, its holder mostly multi-byte characters."""
    base = leases.record(name, at=at, holder="")
    padding = size - base.document.size
    if padding < 0:
        raise ValueError(f"a lease document cannot be smaller than {base.document.size} bytes")
    record = leases.record(
        name, at=at, holder=_WIDE * (padding // _WIDE_BYTES) + "x" * (padding % _WIDE_BYTES)
    )
    assert record.document.size == size, (
        "the check built a record of the wrong size (a fault in the check, not the driver)"
    )
    return record


def _characters(record: NewStorageRecord) -> int:
    return len(record.document.text)


@limit_gated("record-bytes")
@RECORD_BYTES
@pytest.mark.parametrize("write", ["create", "replace"])
def test_a_multibyte_document_is_measured_in_utf8_bytes(
    driver: StorageDriver, leases: Leases, write: str
) -> None:
    limits = _limits(driver)
    exact = _wide_lease(leases, "wide", limits.max_record_bytes, at=1)
    over = _wide_lease(leases, "wide", limits.max_record_bytes + 1, at=2)
    if write == "replace":
        create_all(driver, [leases.record("wide", holder="")])

    def write_record(record: NewStorageRecord) -> Callable[[StorageTransaction], None]:
        def run(tx: StorageTransaction) -> None:
            if write == "create":
                tx.create(record)
            else:
                (current,) = tx.get([record.key])
                assert current is not None, missing(
                    (f"the record {record.key}"), written="the check created it before this attempt"
                )
                tx.replace(current, record)

        return run

    also = (
        (StorageLimitName.TRANSACTION_BYTES,)
        if limits.max_transaction_bytes == limits.max_record_bytes
        else ()
    )
    before = read_one(driver, over.key)
    error = None
    try:
        driver.transaction(write_record(over))
    except StorageLimitError as caught:
        error = caught
    assert error is not None, (
        f"a {write} of {over.document.size} UTF-8 bytes ({_characters(over)} characters) was accepted with "
        f"max_record_bytes = {limits.max_record_bytes}: the document was measured in characters, not bytes"
    )
    assert error.limit in {StorageLimitName.RECORD_BYTES, *also}, (
        f"the limit error names {error.limit!r}; the exceeded limit is max_record_bytes"
    )
    assert read_one(driver, over.key) == before, "the oversized multi-byte document was committed"
    driver.transaction(write_record(exact))
    stored = read_one(driver, exact.key)
    assert stored is not None and stored.document == exact.document, (
        f"a {write} of exactly max_record_bytes ({limits.max_record_bytes}) UTF-8 bytes did not commit"
    )


def _wide_byte_plan(leases: Leases, total: int, limits: StorageLimits) -> list[NewStorageRecord]:
    sizes = split_sizes(total, lease_floor(leases), limits.max_record_bytes, limits.max_transaction_records)
    assert sizes is not None, GATE_FAULT
    return [_wide_lease(leases, f"w{i:07d}", size) for i, size in enumerate(sizes)]


@limit_gated("bytes-past-in-records")
@TRANSACTION_BYTES
def test_transaction_bytes_are_utf8_bytes_of_multibyte_documents(
    driver: StorageDriver, leases: Leases
) -> None:
    limits = _limits(driver)
    total = limits.max_transaction_bytes + 1
    records = _wide_byte_plan(leases, total, limits)
    characters = sum(_characters(record) for record in records)
    error = None
    try:
        driver.transaction(_create_callback(records))
    except StorageLimitError as caught:
        error = caught
    assert error is not None, (
        f"{len(records)} documents of {total} UTF-8 bytes in all ({characters} characters) committed with "
        f"max_transaction_bytes = {limits.max_transaction_bytes}: the total was not counted in bytes"
    )
    assert error.limit is StorageLimitName.TRANSACTION_BYTES, (
        f"the limit error names {error.limit!r}; the exceeded limit is max_transaction_bytes"
    )
    _all_absent(driver, [record.key for record in records], "multi-byte, max_transaction_bytes + 1")


def _replacement_plan(
    driver: StorageDriver, leases: Leases, total: int, replaced_share: float
) -> tuple[list[NewStorageRecord], list[NewStorageRecord]]:
    """(replacements, creates) writing ``total`` bytes, the replaced records already stored small."""
    limits = _limits(driver)
    records = _byte_plan(leases, total, limits)
    replaced = replaced_count(len(records), replaced_share)
    small = [leases.record(record.key.id[1], holder="") for record in records[:replaced]]
    for start in range(0, len(small), max(1, limits.max_transaction_bytes // lease_floor(leases))):
        create_all(driver, small[start : start + max(1, limits.max_transaction_bytes // lease_floor(leases))])
    return records[:replaced], records[replaced:]


def _replace_and_create(
    replacements: Sequence[NewStorageRecord], creates: Sequence[NewStorageRecord]
) -> Callable[[StorageTransaction], None]:
    def run(tx: StorageTransaction) -> None:
        currents = tx.get([record.key for record in replacements])
        for current, record in zip(currents, replacements, strict=True):
            assert current is not None, missing(
                (f"the record {record.key}"), written="the check created it before this attempt"
            )
            tx.replace(current, record)
        for record in creates:
            tx.create(record)

    return run


@TRANSACTION_BYTES
@pytest.mark.parametrize(
    "replaced_share",
    [
        pytest.param(1.0, id="replacements-only", marks=limit_gated("replacements-past-all")),
        pytest.param(0.5, id="replacements-and-creates", marks=limit_gated("replacements-past-half")),
    ],
)
def test_replacement_documents_count_toward_transaction_bytes(
    driver: StorageDriver, leases: Leases, replaced_share: float
) -> None:
    limits = _limits(driver)
    total = limits.max_transaction_bytes + 1
    replacements, creates = _replacement_plan(driver, leases, total, replaced_share)
    before = read(driver, [record.key for record in replacements])
    error = None
    try:
        driver.transaction(_replace_and_create(replacements, creates))
    except StorageLimitError as caught:
        error = caught
    replaced_bytes = sum(record.document.size for record in replacements)
    assert error is not None, (
        f"an attempt writing {total} bytes ({replaced_bytes} of them in {len(replacements)} replacement "
        f"documents) committed with max_transaction_bytes = {limits.max_transaction_bytes}: replacement "
        "documents were left out of the transaction byte total"
    )
    assert error.limit is StorageLimitName.TRANSACTION_BYTES, (
        f"the limit error names {error.limit!r}; the exceeded limit is max_transaction_bytes"
    )
    assert read(driver, [record.key for record in replacements]) == before, "a refused replacement committed"
    _all_absent(driver, [record.key for record in creates], "replacements past max_transaction_bytes")


@limit_gated("replacements-at-limit")
@TRANSACTION_BYTES
def test_replacements_of_exactly_max_transaction_bytes_commit(driver: StorageDriver, leases: Leases) -> None:
    limits = _limits(driver)
    replacements, creates = _replacement_plan(driver, leases, limits.max_transaction_bytes, 1.0)
    driver.transaction(_replace_and_create(replacements, creates))
    stored = read(driver, [record.key for record in replacements])
    assert [s.document if s else None for s in stored] == [r.document for r in replacements], (
        "replacements of exactly max_transaction_bytes did not commit"
    )


def _dependency_plan(
    driver: StorageDriver, leases: Leases, count: int
) -> tuple[list[StorageRecordKey], list[StoredRecord], list[NewStorageRecord]]:
    """(absent keys to read, present records to read and delete, creates) touching ``count`` keys.

    As many keys as the point-read limit allows are only read or deleted, never created, so a driver
    that counts only the keys it creates or replaces sees far fewer than ``count``.
    """
    limits = _limits(driver)
    reads, creates = dependency_mix(limits, count)
    floor = lease_floor(leases)
    present = reads // 2
    stored = [leases.record(f"d{i:07d}", holder="") for i in range(present)]
    step = max(1, min(limits.max_transaction_records, limits.max_transaction_bytes // floor))
    for start in range(0, present, step):
        create_all(driver, stored[start : start + step])
    currents = [record for record in read(driver, [record.key for record in stored]) if record is not None]
    absent = [leases.key(f"r{i:07d}") for i in range(reads - present)]
    return absent, currents, [leases.record(f"c{i:07d}", holder="") for i in range(creates)]


def _read_delete_create(
    absent: Sequence[StorageRecordKey],
    present: Sequence[StoredRecord],
    creates: Sequence[NewStorageRecord],
    delete: bool,
) -> Callable[[StorageTransaction], None]:
    def run(tx: StorageTransaction) -> None:
        found = tx.get([*absent, *(record.key for record in present)])
        if delete:
            for current in found[len(absent) :]:
                assert current is not None, missing(
                    ("a record to delete"), written="the check created it before this attempt"
                )
                tx.delete(current)
        for record in creates:
            tx.create(record)

    return run


@limit_gated("dependencies")
@TRANSACTION_RECORDS
@pytest.mark.parametrize("delete", [False, True], ids=["reads-and-creates", "reads-deletes-and-creates"])
def test_point_dependencies_and_deletes_count_toward_transaction_records(
    driver: StorageDriver, leases: Leases, delete: bool
) -> None:
    limits = _limits(driver)
    absent, present, creates = _dependency_plan(driver, leases, limits.max_transaction_records + 1)
    error = None
    try:
        driver.transaction(_read_delete_create(absent, present, creates, delete))
    except StorageLimitError as caught:
        error = caught
    what = "deleted" if delete else "read as present"
    touched = len(absent) + len(present) + len(creates)
    uncounted = "point dependencies and deletes" if delete else "point dependencies"
    assert error is not None, (
        f"an attempt touching {touched} distinct keys ({len(absent)} read as absent, {len(present)} {what}, "
        f"{len(creates)} created) committed with max_transaction_records = {limits.max_transaction_records}: "
        f"{uncounted} were not counted"
    )
    assert error.limit is StorageLimitName.TRANSACTION_RECORDS, (
        f"the limit error names {error.limit!r}; the exceeded limit is max_transaction_records"
    )
    _all_absent(driver, [record.key for record in creates], "dependencies past max_transaction_records")
    still = read(driver, [record.key for record in present])
    assert all(record is not None for record in still), "a delete of the refused attempt committed"
    # Exactly the limit: one create fewer.
    driver.transaction(_read_delete_create(absent, present, creates[:-1], delete))
    if creates[:-1]:
        assert read_one(driver, creates[0].key) is not None, (
            "exactly max_transaction_records keys did not commit"
        )


# -- budgets start over with every attempt -------------------------------------------------------------


@limit_gated("point-reads")
@POINT_READS
def test_a_replayed_attempt_gets_the_whole_point_read_budget_again(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    """An attempt that read exactly max_point_reads positions and lost a race replays with a fresh budget.

    A meter kept per transaction() call instead of per attempt refuses the replay at the limit,
    although each attempt on its own stays inside it.
    """
    limits = _limits(driver)
    create_all(driver, [leases.unique("p0")])
    positions = _positions(leases, limits.max_point_reads, limits)
    attempts = Attempts()
    competitor: list[Competitor[None]] = []

    def bump(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("p0")])
        assert current is not None, missing("lease p0")
        tx.replace(current, leases.unique("p0"))

    def t1(tx: StorageTransaction) -> int:
        number = attempts.begin(tx)
        (current, *_rest) = tx.get(positions)
        assert current is not None, missing("lease p0")
        if number == 1:
            competitor.append(compete(lambda: transact_with_retries(other_driver, bump, RACING)))
        tx.replace(current, leases.unique("p0"))
        return number

    try:
        transact_with_retries(driver, t1, competitor)
    except StorageLimitError as error:
        raise AssertionError(
            f"every attempt read exactly max_point_reads = {limits.max_point_reads} positions, yet attempt "
            f"{attempts.count} was refused with {error!r}: the point-read budget belongs to one attempt and "
            f"starts over when the callback is replayed ({POINT_READS.id})"
        ) from error
    finally:
        if competitor:
            competitor[0].settle()
