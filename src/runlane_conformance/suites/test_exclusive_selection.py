"""Exclusive candidates: a row handed to one open attempt is handed to no other until that attempt ends.

Only drivers whose profile offers ``exclusive_candidates`` are checked. The
second selector always runs on an independent instance, started from inside
the first attempt's callback on another thread (``compete``), so a driver
that makes it wait is not mistaken for a deadlock. When the second selector
finishes while the first attempt is still open, its rows must be disjoint
from the first's; when a driver makes it wait, it runs after the first
attempt ended and the holds are gone, which is also correct.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from runlane_conformance.catalogue.exclusive_selection import (
    ADVISORY,
    DISJOINT,
    DISJOINT_PROCESSES,
    FULL_PAGE,
    NO_LOOKAHEAD,
    RELEASED_AT_COMMIT,
    RELEASED_AT_ROLLBACK,
    RELEASED_PROCESSES,
    SAME_SCAN,
)
from runlane_conformance.contract.catalog import StorageCandidateMode, StorageIndexName, StorageQueryDirection
from runlane_conformance.contract.cursors import parse_query_records_result
from runlane_conformance.contract.errors import StorageCursorError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.table_definitions import RunStatus
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageQueryRange,
    StorageRangeBound,
)
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import page, reads
from runlane_conformance.fixtures.processes import STEP_TIMEOUT, Worker, gather_signals
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.suites._cursors_support import (
    Via,
    in_transaction_scan,
    read_page,
    scan_all,
    write_records,
)
from runlane_conformance.suites._messages import missing, propagated, refused
from runlane_conformance.suites._operator_support import fresh_environment, run_record
from runlane_conformance.suites._processes_support import (
    GRACE,
    LATER_GRACE,
    end_all,
    w_hold_exclusive,
    w_select_once,
)
from runlane_conformance.suites._retries_support import transact_with_retries

EXCLUSIVE = StorageCandidateMode.EXCLUSIVE
#: Rows one exclusive page holds, as many as the driver's pages allow: two (or three) show order and
#: disjointness within a page; at pages of one the rules are still judged row by row.
HELD = page(2)
SELECTED = page(3)
DIRECTIONS = pytest.mark.parametrize(
    "direction", list(StorageQueryDirection), ids=[d.value for d in StorageQueryDirection]
)


def _rows(driver: StorageDriver, leases: Leases, count: int) -> list[str]:
    """``count`` held leases at distinct expiries; returns their encoded keys in ascending order."""
    records = [leases.unique(f"r{i}", at=10 * (i + 1)) for i in range(count)]
    write_records(driver, records, batch=max(1, min(20, driver.profile.limits.max_transaction_records)))
    return [record.key.encoded for record in records]


def _batch(driver: StorageDriver) -> int:
    return max(1, min(20, driver.profile.limits.max_transaction_records))


def _ordered(rows: list[str], direction: StorageQueryDirection) -> list[str]:
    return rows if direction is StorageQueryDirection.ASCENDING else list(reversed(rows))


def _keys(result: QueryRecordsResult) -> list[str]:
    return [item.key.encoded for item in result.items]


def _select(
    tx: StorageTransaction,
    command: QueryRecordsCommand,
    mode: StorageCandidateMode = EXCLUSIVE,
) -> QueryRecordsResult:
    return in_transaction_scan(tx, command, mode=mode)


def _selector(
    driver: StorageDriver, command: QueryRecordsCommand, mode: StorageCandidateMode = EXCLUSIVE
) -> Any:
    """A whole transaction that selects one page and commits; returns the page's keys."""
    return lambda: driver.transaction(lambda tx: _keys(_select(tx, command, mode)))


def _while_open(
    driver: StorageDriver,
    first: QueryRecordsCommand,
    competitor: Any,
    *,
    first_mode: StorageCandidateMode = EXCLUSIVE,
    phase: str = "open",
    unrelated: NewStorageRecord | None = None,
) -> tuple[list[str], Competitor[Any]]:
    """Run ``first`` in an attempt on ``driver``; start ``competitor`` from inside its first attempt.

    ``phase`` is how far that attempt has gone when the competitor starts, in
    the order core goes: ``open`` (just selected), ``after-get`` (point-read
    what it selected), ``after-now`` (then sealed its reads) or
    ``after-write`` (then staged ``unrelated``). Holds last until the attempt ends,
    so every phase must keep the selected rows from the competitor.
    """
    started: list[Competitor[Any]] = []

    def callback(tx: StorageTransaction) -> list[str]:
        page = _select(tx, first, first_mode)
        mine = _keys(page)
        if phase in ("after-get", "after-now", "after-write"):
            tx.get([item.key for item in page.items])
        if phase in ("after-now", "after-write"):
            tx.now()
        if phase == "after-write" and unrelated is not None:
            tx.create(unrelated)
        if not started:
            started.append(compete(competitor))
        return mine

    selected = driver.transaction(callback)
    return selected, started[0]


@DISJOINT
@DIRECTIONS
@pytest.mark.parametrize("phase", ["open", "after-get", "after-now", "after-write"])
def test_two_open_attempts_get_disjoint_rows(
    driver: StorageDriver,
    other_driver: StorageDriver,
    leases: Leases,
    direction: StorageQueryDirection,
    phase: str,
) -> None:
    # The first attempt point-reads the page it holds, and after-write creates a record beside it.
    held = min(SELECTED.of(driver), reads(3, beside=1 if phase == "after-write" else 0).of(driver))
    rows = _ordered(_rows(driver, leases, 2 * held), direction)
    command = leases.query(limit=held, direction=direction)

    def second() -> list[str]:
        return _selector(other_driver, command)()  # type: ignore[no-any-return]

    unrelated = leases.unique("unrelated", at=999) if phase == "after-write" else None
    first_rows, competitor = _while_open(driver, command, second, phase=phase, unrelated=unrelated)
    assert first_rows == rows[:held], "a free index hands the first selector the first rows in order"
    finished_while_open = competitor.finished_while_open
    second_rows = competitor.settle()
    if finished_while_open:
        overlap = set(first_rows) & set(second_rows)
        done = {
            "open": "only selected them",
            "after-get": "selected and point-read them",
            "after-now": "selected and point-read them, then called now()",
            "after-write": "selected and point-read them, called now() and staged a write",
        }[phase]
        assert not overlap, (
            f"rows {sorted(overlap)} were handed to two open attempts at once (the first attempt had {done}, "
            "and holds last until it commits or rolls back)"
        )
        assert second_rows == rows[held:], "the second selector must get the free rows, in order"


def _selected_after(driver: StorageDriver, command: QueryRecordsCommand) -> list[str]:
    return _selector(driver, command)()  # type: ignore[no-any-return]


@RELEASED_AT_COMMIT
@pytest.mark.parametrize("writes", [False, True], ids=["read-only", "writing"])
def test_rows_are_released_at_commit(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, writes: bool
) -> None:
    held = HELD.of(driver)
    rows = _rows(driver, leases, 2 * held)
    command = leases.query(limit=held)

    def callback(tx: StorageTransaction) -> list[str]:
        mine = _keys(_select(tx, command))
        if writes:
            tx.create(leases.unique("unrelated", at=999))
        return mine

    assert driver.transaction(callback) == rows[:held], (
        f"the first exclusive selector on a free index must get the first {held} rows, in index order"
    )
    for instance in (other_driver, driver):
        assert _selected_after(instance, command) == rows[:held], (
            "rows an attempt selected must be free again once it committed"
        )


class _Raised(Exception):
    pass


class _Halted(BaseException):
    """Not an Exception (like KeyboardInterrupt or SystemExit): cleanup written for Exception misses it."""


@RELEASED_AT_ROLLBACK
@pytest.mark.parametrize("raised", [_Raised, _Halted], ids=["exception", "base-exception"])
def test_rows_are_released_when_the_callback_raises(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, raised: type[BaseException]
) -> None:
    held = HELD.of(driver)
    rows = _rows(driver, leases, 2 * held)
    command = leases.query(limit=held)

    def callback(tx: StorageTransaction) -> None:
        assert _keys(_select(tx, command)) == rows[:held], (
            f"an exclusive selection must return the first {held} free rows, in index order"
        )
        raise raised

    with propagated(
        raised, what=f"the callback selected {held} rows exclusively and then raised {raised.__name__}"
    ):
        driver.transaction(callback)
    for instance in (other_driver, driver):
        assert _selected_after(instance, command) == rows[:held], (
            "rows held by a rolled-back attempt must be free again"
        )


@RELEASED_AT_ROLLBACK
def test_a_replayed_attempt_gets_back_the_rows_its_aborted_attempt_held(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    held = HELD.of(driver)
    rows = _rows(driver, leases, 2 * held)
    command = leases.query(limit=held)
    driver.transaction(lambda tx: tx.create(leases.unique("fence", at=999)))
    attempts: list[list[str]] = []
    competitor: list[Competitor[Any]] = []

    def bump() -> None:
        def replace(tx: StorageTransaction) -> None:
            (current,) = tx.get([leases.key("fence")])
            assert current is not None, missing(
                "the fence record", written="the check created it before this attempt"
            )
            tx.replace(current, leases.unique("fence", at=999))

        other_driver.transaction(replace)

    def callback(tx: StorageTransaction) -> None:
        (fence,) = tx.get([leases.key("fence")])
        assert fence is not None, missing(
            "the fence record", written="the check created it before this attempt"
        )
        attempts.append(_keys(_select(tx, command)))
        if not competitor:
            competitor.append(compete(bump))
        tx.replace(fence, leases.unique("fence", at=999))

    transact_with_retries(driver, callback, competitor)
    competitor[0].settle()
    assert attempts[-1] == rows[:held], (
        f"the committed attempt selected {attempts[-1]}: rows held by an earlier, aborted attempt of the "
        "same transaction were not released before the replay"
    )
    assert _selected_after(other_driver, command) == rows[:held], (
        "once the replayed attempt committed, the next selector must get the first rows again "
        "(exclusive_selection.released-at-commit)"
    )


@ADVISORY
@pytest.mark.parametrize("how", ["default", "advisory", "driver-query"])
def test_advisory_reads_ignore_exclusive_holds(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, how: str
) -> None:
    # Four rows, two of them held; with a smaller page allowed, as many rows as one page holds.
    rows = _rows(driver, leases, min(4, driver.profile.limits.max_query_results))
    everything = leases.query(limit=len(rows))
    holds = min(2, len(rows))

    def advisory() -> list[str]:
        if how == "driver-query":
            return _keys(read_page(other_driver, everything, Via.QUERY))
        if how == "default":
            return other_driver.transaction(
                lambda tx: _keys(parse_query_records_result(everything, tx.query_candidates(everything)))
            )
        return _selector(other_driver, everything, StorageCandidateMode.ADVISORY)()  # type: ignore[no-any-return]

    held, competitor = _while_open(driver, leases.query(limit=holds), advisory)
    assert held == rows[:holds], f"the exclusive page must hold the first {holds} rows in index order"
    assert competitor.settle() == rows, "an advisory read must return rows another attempt holds"


@ADVISORY
@pytest.mark.parametrize("mode", [None, StorageCandidateMode.ADVISORY], ids=["default", "advisory"])
@page(2, least=2).mark
def test_advisory_selection_holds_nothing(
    driver: StorageDriver,
    other_driver: StorageDriver,
    leases: Leases,
    mode: StorageCandidateMode | None,
) -> None:
    rows = _rows(driver, leases, 4)
    command = leases.query(limit=2)
    started: list[Competitor[Any]] = []

    def callback(tx: StorageTransaction) -> list[str]:
        if mode is None:
            mine = _keys(parse_query_records_result(command, tx.query_candidates(command)))
        else:
            mine = _keys(_select(tx, command, mode))
        if not started:
            started.append(compete(_selector(other_driver, command)))
        return mine

    assert driver.transaction(callback) == rows[:2], (
        "an advisory selector must get the first two rows even while another attempt holds them"
    )
    assert started[0].settle() == rows[:2], "an advisory selection must not hold the rows it returned"


@ADVISORY
@page(4, least=4).mark
@pytest.mark.parametrize("mode", [None, StorageCandidateMode.ADVISORY], ids=["default", "advisory"])
def test_an_advisory_read_after_an_exclusive_selection_holds_nothing_more(
    driver: StorageDriver,
    other_driver: StorageDriver,
    leases: Leases,
    mode: StorageCandidateMode | None,
) -> None:
    """Modes belong to calls, not attempts: a driver that turns every later scan of an attempt into a
    locking one once it selected exclusively holds rows the attempt only looked at."""
    rows = _rows(driver, leases, 4)
    everything = leases.query(limit=len(rows))
    started: list[Competitor[Any]] = []

    def callback(tx: StorageTransaction) -> tuple[list[str], list[str]]:
        mine = _keys(_select(tx, leases.query(limit=1)))
        if mode is None:
            seen = _keys(parse_query_records_result(everything, tx.query_candidates(everything)))
        else:
            seen = _keys(_select(tx, everything, mode))
        if not started:
            started.append(compete(_selector(other_driver, everything)))
        return mine, seen

    mine, seen = driver.transaction(callback)
    assert mine == rows[:1], "an exclusive page of one must select the first row in index order"
    assert seen == rows, "an advisory read must return every row, the attempt's own held row included"
    finished_while_open = started[0].finished_while_open
    others = started[0].settle()
    if finished_while_open:
        # It ran beside the open attempt: only the one row selected exclusively was held.
        assert others == rows[1:], (
            f"while an attempt held the first row exclusively and had read all four rows advisorily, "
            f"another attempt's exclusive selection got {others}, expected the other three {rows[1:]}"
            + (": rows only read advisorily were held" if set(others) < set(rows[1:]) else "")
        )
    else:
        # The driver made it wait until the first attempt ended (or replayed that attempt after it):
        # no attempt was open any more, so nothing was held and every row is free.
        assert others == rows, (
            f"another attempt's exclusive selection, which the driver let run only once the first attempt "
            f"had ended, got {others}; with no attempt open every row is free: expected {rows}"
        )


@FULL_PAGE
@DIRECTIONS
@page(3, least=3).mark
def test_a_full_exclusive_page_continues_with_its_cursor(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, direction: StorageQueryDirection
) -> None:
    rows = _ordered(_rows(driver, leases, 6), direction)
    command = leases.query(limit=3, direction=direction)
    started: list[Competitor[Any]] = []

    def callback(tx: StorageTransaction) -> list[list[str]]:
        first = _select(tx, command)
        assert first.cursor is not None, "a full exclusive page with more rows after it must return a cursor"
        second = _select(tx, command.with_cursor(first.cursor))
        pages = [_keys(first), _keys(second)]
        if second.cursor is not None:
            third = _select(tx, command.with_cursor(second.cursor))
            assert third.items == () and third.cursor is None, "a cursor after the last row leads to nothing"
        if not started:
            # Every row is held, so the competitor's page finds none of them however large it may be.
            rival = leases.query(limit=min(6, leases.page_limit), direction=direction)
            started.append(compete(_selector(other_driver, rival)))
        return pages

    pages = driver.transaction(callback)
    assert pages == [rows[:3], rows[3:]], "following the cursor must select the next rows in order"
    others = started[0].settle()
    if started[0].finished_while_open:
        assert not set(others) & set(rows), "rows selected through a cursor are held like the first page"


@NO_LOOKAHEAD
@DIRECTIONS
@pytest.mark.parametrize("page", [1, pytest.param(3, marks=page(3, least=3).mark)])
def test_no_row_beyond_the_page_is_held(
    driver: StorageDriver,
    other_driver: StorageDriver,
    leases: Leases,
    direction: StorageQueryDirection,
    page: int,
) -> None:
    rows = _ordered(_rows(driver, leases, page + 1), direction)
    command = leases.query(limit=page, direction=direction)
    first_rows, competitor = _while_open(driver, command, _selector(other_driver, command))
    assert first_rows == rows[:page], (
        f"the first exclusive page of {page} must be the first {page} rows in index order"
    )
    finished_while_open = competitor.finished_while_open
    second_rows = competitor.settle()
    if finished_while_open:
        assert second_rows == rows[page:], (
            f"with {page + 1} free rows and a page of {page} taken, the next selector must get the last row; "
            f"got {second_rows}: the first attempt held a row it did not return"
        )


# -- across processes --------------------------------------------------------------------------------


@DISJOINT_PROCESSES
def test_open_attempts_in_three_processes_get_disjoint_rows(
    driver: StorageDriver, leases: Leases, runlane_workers: Any
) -> None:
    """Three processes each hold an exclusive page of 2 from 6 rows until the check lets them end.

    Every attempt that selected while the others that selected with it were
    still open (none of them has been told to end yet) must have rows
    disjoint from theirs. A locking driver that makes a selector wait lets it
    in later, once the holders ended: it is judged with whoever selects with it.
    """
    # The full grace only for the first round, when all three start together; later rounds are selectors
    # a locking driver kept waiting and released at once, so they arrive within moments of each other.
    rows = _rows(driver, leases, 6)
    workers: list[Worker] = runlane_workers(3)
    for worker in workers:
        worker.start(w_hold_exclusive, leases.environment, 2, "commit")
    remaining = {worker.index: worker for worker in workers}
    grace = GRACE
    try:
        while remaining:
            selected = cast(
                dict[int, list[str]],
                gather_signals(list(remaining.values()), "selected", first=STEP_TIMEOUT, grace=grace),
            )
            grace = LATER_GRACE  # selectors a lock released together signal together
            assert selected, (
                f"no exclusive selector got a page within {STEP_TIMEOUT:g}s though every earlier holder ended"
            )
            together = sorted(selected.items())
            for position, (index, keys) in enumerate(together):
                assert set(keys) <= set(rows), (
                    f"an exclusive page returned rows {keys} that are not in the index"
                )
                for other, theirs in together[position + 1 :]:
                    overlap = sorted(set(keys) & set(theirs))
                    assert not overlap, (
                        f"rows {overlap} were handed to the open attempts of worker processes {index} and "
                        f"{other} at once: an exclusive hold must be seen by every process, not one"
                    )
            for index in selected:
                remaining.pop(index).send("end")
        for worker in workers:
            worker.result()
    finally:
        end_all(workers, "end")


@RELEASED_PROCESSES
def test_rows_held_in_one_process_are_free_in_others_once_its_attempt_ended(
    driver: StorageDriver, leases: Leases, runlane_workers: Any
) -> None:
    """A worker holds the first two rows, then commits (read-only, writing) or rolls back; every other
    process, a second worker and this check's own, then gets those rows from a fresh exclusive selection."""
    rows = _rows(driver, leases, 4)
    holder, other = cast(list[Worker], runlane_workers(2))
    command = leases.query(limit=2)
    for outcome in ("commit", "commit-writing", "rollback"):
        holder.start(w_hold_exclusive, leases.environment, 2, outcome)
        held = holder.expect("selected")
        assert held == rows[:2], (
            f"the first exclusive selector on a free index must get the first two rows in order, got {held}"
        )
        holder.send("end")
        ended = holder.result()
        assert ended == (None if outcome == "rollback" else rows[:2]), (
            f"the holder's transaction ({outcome}) returned {ended}"
        )
        ending = "rolled back" if outcome == "rollback" else "committed"
        again = other.call(w_select_once, leases.environment, 2)
        assert again == rows[:2], (
            f"after the holder's attempt {ending}, another process selected {again} instead of the released "
            f"rows {rows[:2]}: the holds outlived the attempt for processes other than the holder's"
        )
        assert _selected_after(driver, command) == rows[:2], (
            f"after the holder's attempt {ending}, this check's process could not select the released rows"
        )


@DISJOINT
def test_a_record_held_through_one_index_is_not_handed_out_through_another(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """Holds belong to records, not to index entries: runs are listed by RunsByStatus and RunsByCreatedAt."""
    env = fresh_environment("exclusive")
    # A page of held runs and a page of free ones (two each where pages allow).
    held = free = HELD.of(driver)
    runs = [run_record(env, f"run-{n}", created=n) for n in range(held + free)]
    write_records(driver, runs, batch=_batch(driver))
    keys = [run.key.encoded for run in runs]
    by_status = QueryRecordsCommand(
        StorageIndexName.RUNS_BY_STATUS, env, held, StorageQueryRange.prefix((RunStatus.RUNNING.value,))
    )
    by_created = QueryRecordsCommand(StorageIndexName.RUNS_BY_CREATED_AT, env, free)
    first_rows, competitor = _while_open(driver, by_status, _selector(other_driver, by_created))
    assert first_rows == keys[:held], (
        f"RunsByStatus must hand the first selector the {held} oldest running runs"
    )
    finished_while_open = competitor.finished_while_open
    second_rows = competitor.settle()
    if finished_while_open:
        overlap = set(first_rows) & set(second_rows)
        assert not overlap, (
            f"runs {sorted(overlap)} held through RunsByStatus were handed out through RunsByCreatedAt while "
            "their holder was still open"
        )
        assert second_rows == keys[held:], (
            "the RunsByCreatedAt selector must get the runs nobody holds, in order"
        )


# -- exclusive selection scans like advisory selection -----------------------------------------------

#: Seven rows with ties at 10 and 30, so tie order by record key shows, and pages of two cross the ties.
PLACEMENT = [("t-b", 10), ("t-a", 10), ("c", 20), ("d-2", 30), ("d-1", 30), ("f", 40), ("g", 50)]


def _bound(leases: Leases, at: int, inclusive: bool) -> StorageRangeBound:
    return StorageRangeBound(leases.sort(at), inclusive)


def _ranges(leases: Leases) -> dict[str, StorageQueryRange]:
    return {
        "open": StorageQueryRange(),
        "lower-inclusive": StorageQueryRange(_bound(leases, 20, True), None),
        "lower-exclusive": StorageQueryRange(_bound(leases, 20, False), None),
        "upper-inclusive": StorageQueryRange(None, _bound(leases, 40, True)),
        "upper-exclusive": StorageQueryRange(None, _bound(leases, 40, False)),
        "both": StorageQueryRange(_bound(leases, 10, False), _bound(leases, 40, True)),
    }


def _scan_in_pages(
    driver: StorageDriver, command: QueryRecordsCommand, mode: StorageCandidateMode
) -> list[str]:
    """Every page of ``command`` through ``query_candidates`` in ``mode``, one committed attempt per page."""
    items, pages = scan_all(
        lambda current: read_page(driver, current, Via.CANDIDATES, mode=mode),
        command,
        max_pages=len(PLACEMENT) + 2,
    )
    assert all(len(page.items) <= command.limit for page in pages), "a page holds more rows than its limit"
    return [key for _sort, key in items]


@SAME_SCAN
@DIRECTIONS
@pytest.mark.parametrize(
    "bounds", ["open", "lower-inclusive", "lower-exclusive", "upper-inclusive", "upper-exclusive", "both"]
)
def test_exclusive_pages_select_what_advisory_pages_select(
    driver: StorageDriver, leases: Leases, direction: StorageQueryDirection, bounds: str
) -> None:
    write_records(driver, [leases.unique(name, at=at) for name, at in PLACEMENT], batch=_batch(driver))
    # A neighbouring partition whose name extends this one, with rows inside every range.
    neighbour = [
        leases.record(name, at=at, environment=f"{leases.environment}x") for name, at in PLACEMENT[:3]
    ]
    write_records(driver, neighbour, batch=_batch(driver))
    page = min(2, leases.page_limit)
    command = leases.query(limit=page, range=_ranges(leases)[bounds], direction=direction)
    advisory = _scan_in_pages(driver, command, StorageCandidateMode.ADVISORY)
    exclusive = _scan_in_pages(driver, command, EXCLUSIVE)
    assert exclusive == advisory, (
        f"paging {bounds} {direction.value} in pages of {command.limit}, exclusive selection returned "
        f"{exclusive} where advisory selection returned {advisory} (no row was held by anyone else)"
    )
    wide = leases.query(limit=len(PLACEMENT), range=command.range, direction=direction)
    if leases.page_limit >= len(PLACEMENT):
        whole = _keys(read_page(driver, wide, Via.CANDIDATES, mode=EXCLUSIVE))
        shape = "one exclusive page"
    else:  # the widest page allowed, followed to the end
        whole = _scan_in_pages(driver, dataclasses.replace(wide, limit=leases.page_limit), EXCLUSIVE)
        shape = f"exclusive pages of {leases.page_limit}"
    assert whole == advisory, f"{shape} of the whole {bounds} range returned {whole}"


@SAME_SCAN
@pytest.mark.parametrize(
    "again",
    [
        pytest.param("same-page", marks=page(2, least=2).mark),
        pytest.param("next-page", marks=page(4, least=4).mark),
    ],
)
def test_an_attempt_is_not_kept_from_rows_it_holds_itself(
    driver: StorageDriver, leases: Leases, again: str
) -> None:
    rows = _rows(driver, leases, 4)
    command = leases.query(limit=2)

    def callback(tx: StorageTransaction) -> tuple[list[str], list[str]]:
        first = _select(tx, command)
        if again == "same-page":
            return _keys(first), _keys(_select(tx, command))
        assert first.cursor is not None, "a full exclusive page with more rows after it must return a cursor"
        second = _select(tx, command.with_cursor(first.cursor))
        return _keys(first), _keys(_select(tx, leases.query(limit=4)))[: len(_keys(second)) + 2]

    first, later = driver.transaction(callback)
    assert first == rows[:2], "the first exclusive page of a free index must be its first two rows"
    if again == "same-page":
        assert later == rows[:2], (
            f"selecting the same page again in the attempt that holds it returned {later}: only rows held by "
            "another attempt are skipped"
        )
    else:
        assert later == rows, (
            f"a whole-index exclusive scan in the attempt that holds every row returned {later}"
        )


@SAME_SCAN
@pytest.mark.parametrize("change", ["index", "partition", "range", "direction"])
def test_an_exclusive_cursor_is_refused_under_a_changed_scope(
    driver: StorageDriver, leases: Leases, change: str
) -> None:
    _rows(driver, leases, 3)
    base = leases.query(limit=1)
    changed = {
        "index": QueryRecordsCommand(StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, leases.environment, 1),
        "partition": leases.query(limit=1, environment=f"{leases.environment}-other"),
        "range": leases.query(limit=1, range=StorageQueryRange(_bound(leases, 0, True), None)),
        "direction": leases.query(limit=1, direction=StorageQueryDirection.DESCENDING),
    }[change]
    cursor = read_page(driver, base, Via.CANDIDATES, mode=EXCLUSIVE).cursor
    assert cursor is not None, "a full exclusive page with more rows after it must return a cursor"
    read_page(driver, base.with_cursor(cursor), Via.CANDIDATES, mode=EXCLUSIVE)  # continues its own scope
    with refused(
        StorageCursorError,
        what=f"the check reused an exclusive page's cursor in exclusive mode with a changed {change} (the "
        "same cursor had just continued its own scope)",
        rule=SAME_SCAN,
    ):
        driver.transaction(lambda tx: tx.query_candidates(changed.with_cursor(cursor), mode=EXCLUSIVE))


@FULL_PAGE
@DIRECTIONS
def test_a_full_middle_page_continues_too(
    driver: StorageDriver, leases: Leases, direction: StorageQueryDirection
) -> None:
    """Two full pages and one more row (pages of three where allowed): the second page, reached through a
    cursor, is full and rows follow."""
    size = SELECTED.of(driver)
    rows = _ordered(_rows(driver, leases, 2 * size + 1), direction)
    command = leases.query(limit=size, direction=direction)

    def callback(tx: StorageTransaction) -> list[list[str]]:
        pages: list[list[str]] = []
        current = command
        for number in range(1, 4):
            page = _select(tx, current)
            pages.append(_keys(page))
            if number < 3:
                assert page.cursor is not None, (
                    f"exclusive page {number} of three is full and rows follow it, yet it returned no cursor"
                )
                current = command.with_cursor(page.cursor)
        return pages

    assert driver.transaction(callback) == [rows[:size], rows[size : 2 * size], rows[2 * size :]], (
        "following exclusive cursors must select the rows page after page, in order"
    )


@NO_LOOKAHEAD
@DIRECTIONS
def test_no_row_beyond_a_continued_page_is_held(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, direction: StorageQueryDirection
) -> None:
    """Two pages through a cursor (of two rows where allowed), out of one row more: the last row stays
    free for another attempt."""
    size = HELD.of(driver)
    rows = _ordered(_rows(driver, leases, 2 * size + 1), direction)
    command = leases.query(limit=size, direction=direction)
    started: list[Competitor[Any]] = []

    def callback(tx: StorageTransaction) -> list[str]:
        first = _select(tx, command)
        assert first.cursor is not None, "a full exclusive page with more rows after it must return a cursor"
        second = _select(tx, command.with_cursor(first.cursor))
        if not started:
            started.append(compete(_selector(other_driver, command)))
        return _keys(first) + _keys(second)

    mine = driver.transaction(callback)
    assert mine == rows[: 2 * size], "two exclusive pages must be the first rows in index order"
    finished_while_open = started[0].finished_while_open
    theirs = started[0].settle()
    if finished_while_open:
        assert theirs == rows[2 * size :], (
            f"with all rows but the last held through two pages, the next selector must get the last; got "
            f"{theirs}: the continued page held a row it did not return"
        )
