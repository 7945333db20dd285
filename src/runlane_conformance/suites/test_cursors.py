"""Index scans: order, ranges, ties, paging and cursors that only work where they were issued.

Both ways of reading an index are checked, advisory ``driver.query`` and
``tx.query_candidates``, because core uses both and a driver may implement
them separately. Every page is validated with ``parse_query_records_result``
and compared with ``expected_scan``, the contract's order computed from the
records the check wrote: by encoded sort value, then by encoded record key,
and the exact reverse of that when descending.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue.cursors import (
    ASCENDING,
    DESCENDING,
    EVERY_INDEX,
    EXCLUSIVE_PAGES,
    GARBLED,
    PAGES,
    PARTITIONS,
    RANGE_BOUNDS,
    SCOPE,
    TIES,
    TUPLE_PREFIX,
)
from runlane_conformance.contract.catalog import (
    StorageCandidateMode,
    StorageIndexName,
    StorageQueryDirection,
    StorageTableName,
)
from runlane_conformance.contract.encodings import (
    encode_storage_tuple_prefix_upper_bound,
    iso_date_codec,
    storage_tuple_codec,
)
from runlane_conformance.contract.errors import StorageCursorError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.table_definitions import RunStatus, tombstone_for_run
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageQueryRange,
    StorageRangeBound,
)
from runlane_conformance.fixtures.convergence import settle_indexes
from runlane_conformance.fixtures.records import Leases, expiry, leases_for
from runlane_conformance.suites._cursors_support import (
    ScanItem,
    Via,
    catalog_records,
    crossed_catalog_records,
    expected_scan,
    index_entries,
    read_page,
    scan_all,
    write_records,
)
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import refused
from runlane_conformance.suites._operator_support import run_value

VIAS = pytest.mark.parametrize("via", list(Via), ids=[via.value for via in Via])
DIRECTIONS = list(StorageQueryDirection)
ASC, DESC = StorageQueryDirection.ASCENDING, StorageQueryDirection.DESCENDING

#: Names whose encoded key order differs from insertion order and from naive orders (case, non-ASCII,
#: prefixes of each other, astral characters).
TIE_NAMES = ["m", "b", "ab", "a", "B", "é", "z", "Ω", "a b", "\U0001f600", "aa", "0"]


def _max_page(driver: StorageDriver) -> int:
    return driver.profile.limits.max_query_results


def _batch(driver: StorageDriver) -> int:
    return max(1, min(20, driver.profile.limits.max_transaction_records))


def _reader(driver: StorageDriver, via: Via) -> Callable[[QueryRecordsCommand], QueryRecordsResult]:
    return lambda command: read_page(driver, command, via)


def _scan(
    driver: StorageDriver, via: Via, command: QueryRecordsCommand, *, expected_len: int
) -> list[ScanItem]:
    items, _pages = scan_all(_reader(driver, via), command, max_pages=expected_len + 2)
    return items


def _unpaged(
    driver: StorageDriver, via: Via, leases: Leases, *, expected_len: int, **kwargs: Any
) -> list[ScanItem]:
    """One scan with the largest page the driver allows (one page whenever the data fits)."""
    return _scan(driver, via, leases.query(limit=_max_page(driver), **kwargs), expected_len=expected_len)


def _paged(
    driver: StorageDriver, via: Via, leases: Leases, *, limit: int, expected_len: int, **kwargs: Any
) -> list[ScanItem]:
    return _scan(
        driver, via, leases.query(limit=min(limit, _max_page(driver)), **kwargs), expected_len=expected_len
    )


def _layout(leases: Leases, placement: list[tuple[str, int]]) -> list[NewStorageRecord]:
    return [leases.unique(name, at=at) for name, at in placement]


def _names(items: list[ScanItem], records: list[NewStorageRecord]) -> list[str]:
    """Readable form of a scan for assertion messages: lease names in scan order."""
    by_key = {record.key.encoded: record.key.id[-1] for record in records}
    return [by_key.get(key, key) for _sort, key in items]


def _paging_blame(expected: list[ScanItem], got: list[ScanItem], whole: Callable[[], list[ScanItem]]) -> str:
    """Say so when a paged scan fails only because entries were lost or repeated between its pages.

    Order, range and partition checks read their scans in small pages too, so a
    cursor that skips or repeats an entry fails them as well. When the paged
    scan holds no entry the rule excludes (so nothing is out of range or out of
    partition), is not just the right entries in another order, and the same
    scan read in one page (``whole``) is right, the cause is paging, and the
    message points there instead of at the order or bound this check is about.
    """
    wanted = set(expected)
    if sorted(got) == sorted(expected) or any(item not in wanted for item in got):
        return ""
    try:
        right_in_one_page = whole() == expected
    except Exception:  # the one-page read failing is its own story; this check reports what it saw
        return ""
    if not right_in_one_page:
        return ""
    return (
        ". The same scan read in one page is right: entries were only lost or repeated between pages, "
        "which is a paging fault (cursors.pages-join-to-one-scan); this check fails because of it, not "
        "because of its own rule"
    )


def _whole(driver: StorageDriver, via: Via, command: QueryRecordsCommand, count: int) -> list[ScanItem]:
    """``command`` read again with the largest page the driver allows (one page whenever it fits)."""
    widest = QueryRecordsCommand(
        command.index, command.partition, _max_page(driver), command.range, command.direction
    )
    return _scan(driver, via, widest, expected_len=count)


# Sort order disagrees with key order on purpose: "d" expires first, "a" last.
ORDER_PLACEMENT = [("a", 50), ("b", 30), ("c", 40), ("d", 0), ("e", 30), ("f", 10), ("g", 20)]


@ASCENDING
@VIAS
def test_ascending_scan_orders_by_sort_then_key(driver: StorageDriver, leases: Leases, via: Via) -> None:
    records = _layout(leases, ORDER_PLACEMENT)
    write_records(driver, records, batch=_batch(driver))
    expected = expected_scan(index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment))
    got = _unpaged(driver, via, leases, expected_len=len(records))
    assert got == expected, (
        f"ascending scan must order by encoded sort, then encoded key: expected "
        f"{_names(expected, records)}, got {_names(got, records)}"
    )


@DESCENDING
@VIAS
@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_descending_scan_reverses_the_whole_order(
    driver: StorageDriver, leases: Leases, via: Via, limit: int
) -> None:
    records = _layout(leases, ORDER_PLACEMENT)
    write_records(driver, records, batch=_batch(driver))
    entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment)
    expected = expected_scan(entries, direction=DESC)
    assert expected == list(reversed(expected_scan(entries))), (
        "the check's own expected descending scan is not the reverse of its ascending one (a fault in "
        "the check, not the driver)"
    )
    got = _paged(driver, via, leases, limit=limit, expected_len=len(records), direction=DESC)
    assert got == expected, (
        f"descending pages of {limit} must join to the reverse of the ascending order: expected "
        f"{_names(expected, records)}, got {_names(got, records)}"
        + _paging_blame(
            expected, got, lambda: _unpaged(driver, via, leases, expected_len=len(records), direction=DESC)
        )
    )


@TIES
@VIAS
@pytest.mark.parametrize("direction", DIRECTIONS, ids=[d.value for d in DIRECTIONS])
@pytest.mark.parametrize("limit", [2, 5, 100])
def test_equal_sorts_are_ordered_by_encoded_key(
    driver: StorageDriver, leases: Leases, via: Via, direction: StorageQueryDirection, limit: int
) -> None:
    # Most names share one expiry; a few sit before and after it so ties are in the middle of a scan.
    placement = [(name, 10) for name in TIE_NAMES] + [("before", 0), ("after", 20)]
    records = _layout(leases, placement)
    write_records(driver, records, batch=_batch(driver))
    entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment)
    expected = expected_scan(entries, direction=direction)
    got = _paged(driver, via, leases, limit=limit, expected_len=len(records), direction=direction)
    assert got == expected, (
        f"equal sort values must be ordered by encoded record key ({direction.value}): expected "
        f"{_names(expected, records)}, got {_names(got, records)}"
        + _paging_blame(
            expected,
            got,
            lambda: _unpaged(driver, via, leases, expected_len=len(records), direction=direction),
        )
    )


def _bound(at: int | None, inclusive: bool) -> StorageRangeBound | None:
    if at is None:
        return None
    return StorageRangeBound(storage_tuple_codec.encode((expiry(at),)), inclusive)


# Records at 0, 10, ..., 50, two per sort value; bounds on present values (20, 40) and absent ones (15, 45).
RANGE_PLACEMENT = [(f"{side}{at}", at) for at in range(0, 60, 10) for side in ("x", "y")]
BOUNDS: list[tuple[int | None, bool]] = [(None, True), (20, True), (20, False), (15, True), (15, False)]
UPPERS: list[tuple[int | None, bool]] = [(None, True), (40, True), (40, False), (45, True), (45, False)]


def _bound_id(bound: tuple[int | None, bool]) -> str:
    at, inclusive = bound
    return "open" if at is None else f"{'incl' if inclusive else 'excl'}{at}"


@RANGE_BOUNDS
@VIAS
@pytest.mark.parametrize("lower", BOUNDS, ids=[_bound_id(b) for b in BOUNDS])
@pytest.mark.parametrize("upper", UPPERS, ids=[_bound_id(b) for b in UPPERS])
def test_range_bounds_select_exactly_their_entries(
    driver: StorageDriver,
    leases: Leases,
    via: Via,
    lower: tuple[int | None, bool],
    upper: tuple[int | None, bool],
) -> None:
    records = _layout(leases, RANGE_PLACEMENT)
    write_records(driver, records, batch=_batch(driver))
    entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment)
    scope = StorageQueryRange(_bound(*lower), _bound(*upper))
    for direction in DIRECTIONS:
        expected = expected_scan(entries, query_range=scope, direction=direction)
        for limit in (_max_page(driver), 3):
            got = _paged(
                driver, via, leases, limit=limit, expected_len=len(records), range=scope, direction=direction
            )
            assert got == expected, (
                f"range lower={_bound_id(lower)} upper={_bound_id(upper)} ({direction.value}, pages of "
                f"{limit}) must return {_names(expected, records)}, got {_names(got, records)}"
                + _paging_blame(
                    expected,
                    got,
                    functools.partial(
                        _unpaged,
                        driver,
                        via,
                        leases,
                        expected_len=len(records),
                        range=scope,
                        direction=direction,
                    ),
                )
            )


def _link(environment: str, run: str, token: str) -> NewStorageRecord:
    return build_storage_record(
        StorageTableName.WAIT_TOKEN_LINKS,
        {"environment": environment, "tokenId": token, "runId": run, "createdAt": expiry(0)},
    )


# Runs whose ids are prefixes of each other, and tokens starting with the highest code point, which a
# sentinel-based upper bound would cut off.
# High BMP characters (U+E000..U+FFFF) sort after every supplementary-plane character in UTF-16 code
# units but before them in code points (and UTF-8 bytes, the contract's order).
PREFIX_RUNS = ["r", "r1", "r10", "r1 ", "r2", "r1\U0010ffff", "\ue000", "\U00010000"]
PREFIX_TOKENS = ["t1", "t2", "\U0010ffff", "\U0010ffffz", "t1/x", "\ue000", "\uffff", "\U00010000"]
PREFIXES = {
    "r1": ("r1",),
    "r": ("r",),
    "r1-t1": ("r1", "t1"),
    "r1-max": ("r1", "\U0010ffff"),
    "high-bmp": ("\ue000",),
    "supplementary": ("\U00010000",),
    "r1-fffe": ("r1", "\uffff"),
}


#: Microseconds inside one millisecond: an index kept at millisecond precision cannot tell them apart.
_MICROS = (100, 500, 900)


def _due_tombstone(environment: str, run_id: str, prune_after: datetime) -> NewStorageRecord:
    run = run_value(environment, run_id, status=RunStatus.SUCCEEDED)
    value = tombstone_for_run(run, tombstoned_at=prune_after, prune_after=prune_after)
    return build_storage_record(StorageTableName.TOMBSTONES, value)


@RANGE_BOUNDS
@VIAS
@pytest.mark.parametrize("inclusive", [True, False], ids=["incl", "excl"])
def test_time_sorted_ranges_keep_microseconds(driver: StorageDriver, via: Via, inclusive: bool) -> None:
    """A bound between two instants of one millisecond splits them: the index keeps its sort values whole."""
    environment = f"micros-{uuid.uuid4().hex[:12]}"
    base = datetime(2031, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)
    moments = {micros: base + timedelta(microseconds=micros) for micros in _MICROS}
    records = [_due_tombstone(environment, f"run-{micros}", at) for micros, at in moments.items()]
    write_records(driver, records, batch=_batch(driver))
    middle = StorageRangeBound(storage_tuple_codec.encode((iso_date_codec.encode(moments[500]),)), inclusive)
    entries = index_entries(records, StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER, environment)
    for scope in (StorageQueryRange(None, middle), StorageQueryRange(middle, None)):
        command = QueryRecordsCommand(
            StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER, environment, _max_page(driver), scope
        )
        expected = expected_scan(entries, query_range=scope)
        got = _scan(driver, via, command, expected_len=len(records))
        assert got == expected, (
            f"TombstonesByPruneAfter with {'lower' if scope.lower else 'upper'} bound "
            f"{iso_date_codec.encode(moments[500])} ({'inclusive' if inclusive else 'exclusive'}) returned "
            f"{_names(got, records)} instead of {_names(expected, records)}: instants 100, 500 and 900 "
            "microseconds into one millisecond are three different sort values"
        )


@TUPLE_PREFIX
@VIAS
@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
def test_tuple_prefix_range_returns_exactly_the_prefixed_entries(
    driver: StorageDriver, via: Via, prefix: tuple[str, ...]
) -> None:
    environment = f"env-{uuid.uuid4().hex[:8]}"
    records = [_link(environment, run, token) for run in PREFIX_RUNS for token in PREFIX_TOKENS]
    write_records(driver, records, batch=_batch(driver))
    scope = StorageQueryRange(
        StorageRangeBound(storage_tuple_codec.encode(prefix), True),
        StorageRangeBound(encode_storage_tuple_prefix_upper_bound(prefix), False),
    )
    assert scope == StorageQueryRange.prefix(prefix), (
        "the check's own prefix range differs from StorageQueryRange.prefix (a fault in the check, not "
        "the driver)"
    )
    index = StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN
    entries = index_entries(records, index, environment)
    wanted = {
        (entry.sort, record.key.encoded)
        for record in records
        for entry in record.indexes
        if entry.index is index and storage_tuple_codec.decode(entry.sort)[: len(prefix)] == prefix
    }
    for direction in DIRECTIONS:
        expected = expected_scan(entries, query_range=scope, direction=direction)
        assert set(expected) == wanted, (
            "the check's own expected scan is not the prefixed entries (a fault in the check, not the driver)"
        )  # the bound itself is right; what follows checks the driver
        for limit in (_max_page(driver), 2):
            command = QueryRecordsCommand(index, environment, min(limit, _max_page(driver)), scope, direction)
            got = _scan(driver, via, command, expected_len=len(records))
            assert got == expected, (
                f"prefix {prefix!r} ({direction.value}, pages of {limit}) must return exactly the "
                f"{len(expected)} entries starting with it, in order; got {len(got)}: "
                f"{[storage_tuple_codec.decode(sort) for sort, _ in got]}"
                + _paging_blame(expected, got, functools.partial(_whole, driver, via, command, len(records)))
            )


PLACEMENT_NAMES = [f"n{i}" for i in range(12)] + ["é", "\U0001f600"]


@PAGES
@VIAS
@with_plain_hypothesis_errors("this property")
@given(data=st.data())
def test_cursor_pages_join_to_one_unpaged_scan(driver: StorageDriver, via: Via, data: st.DataObject) -> None:
    leases = leases_for(driver)
    cap = min(len(PLACEMENT_NAMES), _max_page(driver))
    # At least three records (when the page cap allows): with fewer, no page size leaves a cursor with
    # an entry after it, and Hypothesis, left alone, draws mostly such tiny layouts.
    names = data.draw(
        st.lists(st.sampled_from(PLACEMENT_NAMES), unique=True, min_size=min(3, cap), max_size=cap),
        label="names",
    )
    placement = [(name, data.draw(st.integers(0, 3), label=f"at[{name}]")) for name in names]
    bound = st.one_of(st.none(), st.tuples(st.integers(-1, 4), st.booleans()))
    lower, upper = data.draw(bound, label="lower"), data.draw(bound, label="upper")
    scope = StorageQueryRange(
        None if lower is None else _bound(*lower), None if upper is None else _bound(*upper)
    )
    direction = data.draw(st.sampled_from(DIRECTIONS), label="direction")
    records = _layout(leases, placement)
    write_records(driver, records, batch=_batch(driver))
    entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment)
    expected = expected_scan(entries, query_range=scope, direction=direction)
    # The page size is drawn against what the scope holds, not against every name written: a page
    # smaller than the result is what makes a cursor carry the scan on (a page that holds it all is
    # the unpaged scan above), and a page exactly as large as the result leaves a cursor to an end.
    limit = data.draw(st.integers(1, max(1, min(len(expected), _max_page(driver)))), label="limit")
    whole = _unpaged(driver, via, leases, expected_len=len(records), range=scope, direction=direction)
    assert whole == expected, f"one unpaged scan returned {_names(whole, records)}"
    joined = _paged(
        driver, via, leases, limit=limit, expected_len=len(records), range=scope, direction=direction
    )
    assert joined == whole, (
        f"pages of {limit} joined to {_names(joined, records)}, but one scan returns {_names(whole, records)}"
    )


@PAGES
@VIAS
@pytest.mark.parametrize("direction", DIRECTIONS, ids=[d.value for d in DIRECTIONS])
def test_a_cursor_continues_from_its_position_after_its_last_entry_is_deleted(
    driver: StorageDriver, leases: Leases, via: Via, direction: StorageQueryDirection
) -> None:
    records = _layout(leases, [("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)])
    write_records(driver, records, batch=_batch(driver))
    limit = min(2, _max_page(driver))
    command = leases.query(limit=limit, direction=direction)
    first = read_page(driver, command, via)
    assert first.cursor is not None, "a full first page with more entries after it must return a cursor"
    last = first.items[-1].key

    def delete_last(tx: StorageTransaction) -> None:
        [current] = tx.get([last])
        assert current is not None, f"the check could not read back {last}, which the first page listed"
        tx.delete(current)

    driver.transaction(delete_last)
    settle_indexes(driver)
    entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment)
    expected = expected_scan(entries, direction=direction)[limit:]
    rest, _pages = scan_all(
        _reader(driver, via), command.with_cursor(first.cursor), max_pages=len(records) + 2
    )
    assert rest == expected, (
        f"after the entry a {direction.value} cursor ended on ({last.id[-1]}) was deleted, continuing "
        f"from it returned {_names(rest, records)} instead of {_names(expected, records)}: a cursor is a "
        "position (last sort and record key), not a reference to an entry that must still exist"
    )


def _first_cursor(driver: StorageDriver, via: Via, command: QueryRecordsCommand) -> str:
    page = read_page(driver, command, via)
    assert page.cursor is not None, "a full first page with more entries after it must return a cursor"
    return page.cursor


def _unvalidated_read(driver: StorageDriver, command: QueryRecordsCommand, via: Via) -> object:
    """Ask the driver itself, without the page validator (which would refuse a bad cursor on its own)."""
    if via is Via.QUERY:
        return driver.query(command)
    return driver.transaction(lambda tx: tx.query_candidates(command))


def _links(environment: str) -> list[NewStorageRecord]:
    """Three links of one token: entries in both sibling indexes of the links table."""
    return [
        build_storage_record(
            StorageTableName.WAIT_TOKEN_LINKS,
            {"environment": environment, "tokenId": "token", "runId": run, "createdAt": expiry(0)},
        )
        for run in ("run-a", "run-b", "run-c")
    ]


def _scope_changes(leases: Leases) -> dict[str, tuple[QueryRecordsCommand, QueryRecordsCommand]]:
    """Per scope component: (a command that issues a cursor, that command with the component changed)."""
    base = leases.query(limit=1)
    environment = leases.environment

    def bounded(lower_inclusive: bool, upper_inclusive: bool) -> QueryRecordsCommand:
        return leases.query(
            limit=1, range=StorageQueryRange(_bound(0, lower_inclusive), _bound(100, upper_inclusive))
        )

    by_token = QueryRecordsCommand(StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN, environment, 1)
    return {
        "index": (base, QueryRecordsCommand(StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, environment, 1)),
        # Two indexes of one table: a cursor naming only the table (or the record kind) is not enough.
        "sibling-index": (
            by_token,
            QueryRecordsCommand(StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, environment, 1),
        ),
        "partition": (base, leases.query(limit=1, environment=f"{environment}-other")),
        "range-lower": (base, leases.query(limit=1, range=StorageQueryRange(_bound(0, True), None))),
        "range-upper": (base, leases.query(limit=1, range=StorageQueryRange(None, _bound(100, True)))),
        "range-inclusivity": (base, leases.query(limit=1, range=StorageQueryRange(_bound(0, False), None))),
        # The same bound values, only one end's inclusivity flipped: the flags are part of the scope too.
        "lower-inclusivity": (bounded(True, True), bounded(False, True)),
        "upper-inclusivity": (bounded(True, True), bounded(True, False)),
        "direction": (base, leases.query(limit=1, direction=DESC)),
    }


SCOPE_CHANGES = [
    "index",
    "sibling-index",
    "partition",
    "range-lower",
    "range-upper",
    "range-inclusivity",
    "lower-inclusivity",
    "upper-inclusivity",
    "direction",
]


@SCOPE
@VIAS
@pytest.mark.parametrize("change", SCOPE_CHANGES)
def test_cursor_is_refused_under_a_changed_scope(
    driver: StorageDriver, leases: Leases, via: Via, change: str
) -> None:
    records = _layout(leases, [("a", 10), ("b", 20), ("c", 30)]) + _links(leases.environment)
    write_records(driver, records, batch=_batch(driver))
    issuer, changed = _scope_changes(leases)[change]
    cursor = _first_cursor(driver, via, issuer)
    # The same cursor continues its own scope: the refusal below is about the changed component only.
    read_page(driver, issuer.with_cursor(cursor), via)
    with refused(
        StorageCursorError,
        what=f"the check reused a cursor through {via}() with a changed {change} (the same cursor had just "
        "continued its own scope)",
        rule=SCOPE,
    ):
        _unvalidated_read(driver, changed.with_cursor(cursor), via)


def _garblings(cursor: str) -> dict[str, str]:
    middle = len(cursor) // 2
    flipped = cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]
    head, _, _tail = cursor.rpartition(".")
    return {
        "truncated": cursor[:-1],
        "extended": cursor + "A",
        "flipped": flipped,
        "no-checksum": head,
        "empty": "",
        "not-a-cursor": "not-a-cursor",
        "doubled": cursor + cursor,
    }


@GARBLED
@VIAS
@pytest.mark.parametrize(
    "garbling", ["truncated", "extended", "flipped", "no-checksum", "empty", "not-a-cursor", "doubled"]
)
def test_garbled_cursor_is_refused(driver: StorageDriver, leases: Leases, via: Via, garbling: str) -> None:
    write_records(driver, _layout(leases, [("a", 10), ("b", 20), ("c", 30)]), batch=_batch(driver))
    command = leases.query(limit=1)
    cursor = _first_cursor(driver, via, command)
    garbled = _garblings(cursor)[garbling]
    assert garbled != cursor, (
        f"the check's {garbling} cursor equals the real one (a fault in the check, not the driver)"
    )
    with refused(
        StorageCursorError,
        what=f"the check passed a {garbling} cursor to {via}() (a real cursor of that query, altered)",
        accepted="the driver read a page with it (nothing was raised)",
        rule=GARBLED,
    ):
        _unvalidated_read(driver, command.with_cursor(garbled), via)


def _partition_mismatch(
    partition: str, expected: list[ScanItem], got: list[ScanItem], records: list[NewStorageRecord], limit: int
) -> str:
    """Say what went wrong in terms of partitions: foreign entries, or only paging trouble."""
    own = set(expected)
    foreign = [item for item in got if item not in own]
    if foreign:
        return (
            f"partition {partition!r} (pages of {limit}) returned {len(foreign)} entries of other partitions "
            f"or indexes: {_names(foreign, records)}"
        )
    missing = [item for item in expected if item not in got]
    repeated = sorted({item for item in got if got.count(item) > 1})
    return (
        f"partition {partition!r} (pages of {limit}) returned only its own entries, so partitions are "
        f"isolated, but {len(got)} of them instead of {len(expected)} (missing {_names(missing, records)}, "
        f"repeated {_names(repeated, records)}, or out of order): that is a paging or ordering fault "
        "(see cursors.pages-join-to-one-scan and cursors.ascending-order), and this check fails because of it"
    )


@PARTITIONS
@VIAS
@pytest.mark.parametrize("direction", DIRECTIONS, ids=[d.value for d in DIRECTIONS])
def test_scan_sees_only_its_own_index_partition(
    driver: StorageDriver, leases: Leases, via: Via, direction: StorageQueryDirection
) -> None:
    home = leases.environment
    neighbours = [f"{home}-x", f"{home}/", home[:-1], f"{home}0"]
    records = _layout(leases, [("a", 10), ("b", 20), ("c", 10)])
    for neighbour in neighbours:
        records += [leases.record(name, at=at, environment=neighbour) for name, at in [("a", 15), ("z", 0)]]
    # Another index in the same partition must not leak in either.
    records.append(_link(home, "a", "t"))
    write_records(driver, records, batch=_batch(driver))
    for partition in [home, *neighbours]:
        entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, partition)
        expected = expected_scan(entries, direction=direction)
        for limit in (_max_page(driver), 1):
            got = _paged(
                driver,
                via,
                leases,
                limit=limit,
                expected_len=len(records),
                environment=partition,
                direction=direction,
            )
            assert got == expected, _partition_mismatch(partition, expected, got, records, limit)


# -- order over the whole of Unicode ----------------------------------------------------------------

#: Strings where UTF-16 code-unit order and code-point order disagree: high BMP characters
#: (U+E000..U+FFFF) against supplementary-plane ones (whose surrogates sort lower in UTF-16), mixed
#: with ASCII, with each other and with the edges of the planes.
UNICODE_NAMES = [
    "\ue000",
    "\ue000a",
    "\ufffd",
    "\uffff",
    "\ud7ff",
    "\U00010000",
    "\U0001f600",
    "\U0010ffff",
    "\U00010000\ue000",
    "\ue000\U00010000",
    "a\uffff",
    "a\U00010000",
    "z",
]


@TIES
@VIAS
@pytest.mark.parametrize("direction", DIRECTIONS, ids=[d.value for d in DIRECTIONS])
@pytest.mark.parametrize("limit", [1, 3, 100])
def test_ties_follow_code_point_order_across_the_whole_of_unicode(
    driver: StorageDriver, leases: Leases, via: Via, direction: StorageQueryDirection, limit: int
) -> None:
    placement = [(name, 10) for name in UNICODE_NAMES] + [("before", 0), ("after", 20)]
    records = _layout(leases, placement)
    write_records(driver, records, batch=_batch(driver))
    entries = index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment)
    expected = expected_scan(entries, direction=direction)
    got = _paged(driver, via, leases, limit=limit, expected_len=len(records), direction=direction)
    assert got == expected, (
        f"equal sorts must follow the UTF-8 byte (code point) order of the record keys ({direction.value}, "
        f"pages of {limit}), which differs from UTF-16 order for these names: expected "
        f"{[ascii(n) for n in _names(expected, records)]}, got {[ascii(n) for n in _names(got, records)]}"
        + _paging_blame(
            expected,
            got,
            lambda: _unpaged(driver, via, leases, expected_len=len(records), direction=direction),
        )
    )


def _unicode_sort_scan(driver: StorageDriver, via: Via, direction: StorageQueryDirection, limit: int) -> None:
    environment = f"env-{uuid.uuid4().hex[:8]}"
    records = [_link(environment, run, "t") for run in UNICODE_NAMES]
    write_records(driver, records, batch=_batch(driver))
    index = StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN
    expected = expected_scan(index_entries(records, index, environment), direction=direction)
    command = QueryRecordsCommand(index, environment, min(limit, _max_page(driver)), direction=direction)
    got = _scan(driver, via, command, expected_len=len(records))

    def runs(items: list[ScanItem]) -> list[str]:
        return [ascii(storage_tuple_codec.decode(sort)[0]) for sort, _ in items]

    assert got == expected, (
        f"sort components must follow UTF-8 byte (code point) order ({direction.value}, pages of {limit}), "
        f"which differs from UTF-16 order for these values: expected {runs(expected)}, got {runs(got)}"
        + _paging_blame(expected, got, lambda: _whole(driver, via, command, len(records)))
    )


@ASCENDING
@VIAS
@pytest.mark.parametrize("limit", [1, 100])
def test_sort_components_follow_code_point_order_across_the_whole_of_unicode(
    driver: StorageDriver, via: Via, limit: int
) -> None:
    _unicode_sort_scan(driver, via, ASC, limit)


@DESCENDING
@VIAS
@pytest.mark.parametrize("limit", [1, 100])
def test_descending_sort_components_follow_reverse_code_point_order(
    driver: StorageDriver, via: Via, limit: int
) -> None:
    _unicode_sort_scan(driver, via, DESC, limit)


# -- every index of the closed catalogue -------------------------------------------------------------


@EVERY_INDEX
@VIAS
def test_every_catalogued_index_returns_exactly_its_entries(driver: StorageDriver, via: Via) -> None:
    records = catalog_records()
    carried = {entry.index for record in records for entry in record.indexes}
    assert carried == set(StorageIndexName), (
        f"the check's own records miss indexes {sorted(set(StorageIndexName) - carried)} (a fault in the "
        "check's vectors, not the driver)"
    )
    write_records(driver, records, batch=1)
    scopes = sorted({(entry.index, entry.partition) for record in records for entry in record.indexes})
    for index, partition in scopes:
        expected = expected_scan(index_entries(records, index, partition))
        command = QueryRecordsCommand(index, partition, _max_page(driver))
        got = _scan(driver, via, command, expected_len=len(expected))
        assert got == expected, (
            f"{via.value} of index {index.value} in partition {partition!r} returned {got!r}; the records "
            f"written carry exactly {expected!r} there. Every index of the catalogue needs its own query "
            "plan that returns the entries the records were written with"
        )


# -- the exclusive path keeps the same order, ranges and cursors ---------------------------------------


#: (lower, upper) bounds the exclusive path must apply like the advisory one.
EXCLUSIVE_SCOPES: dict[str, tuple[tuple[int | None, bool], tuple[int | None, bool]]] = {
    "open": ((None, True), (None, True)),
    "incl20-excl40": ((20, True), (40, False)),
    "excl15-incl45": ((15, False), (45, True)),
}


@EXCLUSIVE_PAGES
@pytest.mark.parametrize("scope_name", list(EXCLUSIVE_SCOPES))
@pytest.mark.parametrize("direction", DIRECTIONS, ids=[d.value for d in DIRECTIONS])
def test_exclusive_pages_follow_the_contract_order(
    driver: StorageDriver, leases: Leases, scope_name: str, direction: StorageQueryDirection
) -> None:
    """A driver often writes its exclusive selection (SKIP LOCKED, a claim script) as a second query; it
    must keep every rule of the first: each page here is read in its own attempt, so nothing is held
    when the next one starts."""
    records = _layout(leases, RANGE_PLACEMENT + [(name, 30) for name in TIE_NAMES[:6]])
    write_records(driver, records, batch=_batch(driver))
    lower, upper = EXCLUSIVE_SCOPES[scope_name]
    scope = StorageQueryRange(_bound(*lower), _bound(*upper))
    expected = expected_scan(
        index_entries(records, StorageIndexName.LEASES_BY_EXPIRY, leases.environment),
        query_range=scope,
        direction=direction,
    )
    for limit in (_max_page(driver), 3):
        command = leases.query(limit=min(limit, _max_page(driver)), range=scope, direction=direction)
        got, _pages = scan_all(
            lambda page: read_page(driver, page, Via.CANDIDATES, mode=StorageCandidateMode.EXCLUSIVE),
            command,
            max_pages=len(records) + 2,
        )
        assert got == expected, (
            f"exclusive query_candidates ({direction.value}, range {scope_name}, pages of {limit}) "
            f"returned {_names(got, records)}; an advisory scan of the same scope returns "
            f"{_names(expected, records)}. "
            f"{EXCLUSIVE_PAGES.id}: {EXCLUSIVE_PAGES.summary}"
        )


# -- every index, crossed with the value shapes one column type gets wrong --------------------------------


def _crossed_scopes(
    driver: StorageDriver,
) -> tuple[list[NewStorageRecord], list[tuple[StorageIndexName, str]]]:
    records = list(crossed_catalog_records("crossed"))  # every check has a fresh store of its own
    write_records(driver, records, batch=_batch(driver))
    scopes = sorted({(entry.index, entry.partition) for record in records for entry in record.indexes})
    return records, scopes


def _crossed_scan(
    driver: StorageDriver,
    via: Via,
    records: list[NewStorageRecord],
    index: StorageIndexName,
    partition: str,
    direction: StorageQueryDirection,
    scope: StorageQueryRange | None = None,
) -> tuple[list[ScanItem], list[ScanItem]]:
    expected = expected_scan(index_entries(records, index, partition), query_range=scope, direction=direction)
    limit = min(3, _max_page(driver))
    command = QueryRecordsCommand(index, partition, limit, scope or StorageQueryRange(), direction)
    return expected, _scan(driver, via, command, expected_len=len(expected))


def _crossed_message(index: StorageIndexName, expected: list[ScanItem], got: list[ScanItem]) -> str:
    def shown(items: list[ScanItem]) -> list[str]:
        return [ascii(_decoded_sort(sort)) for sort, _key in items]

    first = next(
        (n for n, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
        min(len(expected), len(got)),
    )
    return (
        f"{index.value}: sorts that cross 1970 and 2038, differ by fractions of a second, hold astral and "
        f"high-BMP characters, sequences past 2^31 and ties written in descending key order; first "
        f"difference at position {first}: expected {shown(expected)}, got {shown(got)}"
    )


def _decoded_sort(sort: str) -> object:
    try:
        return storage_tuple_codec.decode(sort)
    except Exception:
        return sort


@ASCENDING
@VIAS
def test_every_index_orders_crossed_value_shapes_ascending(driver: StorageDriver, via: Via) -> None:
    """Every index of the catalogue at once, with the sorts a column type per index gets wrong: an
    unsigned epoch (before 1970), DATETIME(0) (sub-seconds), INT (sequences past 2^31), a UTF-16 collation
    (astral beside high-BMP characters) and insertion-ordered ties."""
    records, scopes = _crossed_scopes(driver)
    for index, partition in scopes:
        expected, got = _crossed_scan(driver, via, records, index, partition, ASC)
        assert got == expected, _crossed_message(index, expected, got)


@DESCENDING
@VIAS
def test_every_index_orders_crossed_value_shapes_descending(driver: StorageDriver, via: Via) -> None:
    records, scopes = _crossed_scopes(driver)
    for index, partition in scopes:
        expected, got = _crossed_scan(driver, via, records, index, partition, DESC)
        assert got == expected, _crossed_message(index, expected, got)


@RANGE_BOUNDS
@VIAS
def test_every_index_bounds_crossed_value_shapes_exactly(driver: StorageDriver, via: Via) -> None:
    """Ranges bounded at the sorts of the crossed records themselves (a bound a fraction of a second, or a
    code unit, away from its neighbours), inclusive and exclusive, in both directions."""
    records, scopes = _crossed_scopes(driver)
    for number, (index, partition) in enumerate(scopes):
        sorts = sorted({sort for sort, _key in index_entries(records, index, partition)})
        if len(sorts) < 3:
            continue
        low, high = sorts[len(sorts) // 4], sorts[(3 * len(sorts)) // 4]
        inclusive = number % 2 == 0
        scope = StorageQueryRange(StorageRangeBound(low, inclusive), StorageRangeBound(high, not inclusive))
        for direction in (ASC, DESC):
            expected, got = _crossed_scan(driver, via, records, index, partition, direction, scope)
            assert got == expected, f"range {'[' if inclusive else '('}{_decoded_sort(low)}, " + (
                f"{_decoded_sort(high)}{')' if inclusive else ']'} {direction.value}: "
                + _crossed_message(index, expected, got)
            )
