"""Sealing: one frozen time per attempt, no reads after the read set is sealed, no use after the attempt.

The first ``now()`` or the first mutation closes the attempt's read phase, so
every decision the callback makes rests on reads taken before its time was
fixed. ``now()`` answers the same instant for the whole attempt, and a
transaction object that outlives its attempt refuses every call.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue.sealing import (
    ENDED,
    FROZEN_NOW,
    INJECTED_CLOCK,
    OVERLAP,
    SEALED_BY_MUTATION,
    SEALED_BY_NOW,
    WRITES_AFTER_SEAL,
)
from runlane_conformance.contract.errors import (
    StorageAttemptEndedError,
    StorageSealedError,
    StorageUsageError,
)
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import StorageRecordVersion, StoredRecord
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import records
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.suites._callback_errors import BASE_ERRORS
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import CALLBACK_ERROR_RULE, missing, propagated, refused
from runlane_conformance.suites._mutations_support import create_all, read_one
from runlane_conformance.suites._retries_support import RACING, transact_with_retries


class SteppingClock:
    """A clock that moves one second forward on every reading, and remembers what it returned."""

    def __init__(self, start: datetime) -> None:
        self._ticks = itertools.count()
        self.start = start
        self.returned: list[datetime] = []

    def __call__(self) -> datetime:
        value = self.start + timedelta(seconds=next(self._ticks))
        self.returned.append(value)
        return value


# -- frozen time -----------------------------------------------------------------------------------


@FROZEN_NOW
def test_now_returns_one_instant_per_attempt(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("x")])

    def sample(tx: StorageTransaction) -> list[datetime]:
        tx.get([leases.key("x")])
        first = tx.now()
        second = tx.now()
        tx.create(leases.unique("y"))
        third = tx.now()
        return [first, second, third]

    times = driver.transaction(sample)
    assert all(isinstance(t, datetime) and t.utcoffset() is not None for t in times), (
        f"now() must return timezone-aware datetimes, got {times!r}"
    )
    assert times[0] == times[1] == times[2], f"now() moved within one attempt: {times}"


@FROZEN_NOW
def test_now_is_frozen_even_when_the_injected_clock_moves(connect: Callable[..., StorageDriver]) -> None:
    clock = SteppingClock(datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC))
    driver = connect(clock=clock)
    times = driver.transaction(lambda tx: [tx.now() for _ in range(5)])
    assert len(set(times)) == 1, f"now() moved within one attempt: {times}"


@FROZEN_NOW
@with_plain_hypothesis_errors("this property")
@given(calls=st.integers(min_value=2, max_value=20))
def test_any_number_of_now_calls_agree(driver: StorageDriver, calls: int) -> None:
    times = driver.transaction(lambda tx: [tx.now() for _ in range(calls)])
    assert len(set(times)) == 1, f"now() moved within one attempt: {times}"


# -- injected clock --------------------------------------------------------------------------------


@INJECTED_CLOCK
@pytest.mark.parametrize(
    "instant",
    [
        datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC),
        datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2030, 6, 1, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ],
    ids=["past", "future", "last-microsecond", "one-microsecond-offset-zone"],
)
def test_now_is_the_injected_clock_time(connect: Callable[..., StorageDriver], instant: datetime) -> None:
    driver = connect(clock=lambda: instant)
    got = driver.transaction(lambda tx: tx.now())
    assert got == instant, f"now() returned {got!r}; the injected clock says {instant!r}"


@INJECTED_CLOCK
def test_a_replayed_attempt_reads_the_injected_clock_again(
    connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    """A replay is a new attempt with a time of its own. Handing it the abandoned attempt's time would
    have it judge data changed after that time (the change that forced the replay) by a time from
    before the change. A driver that makes the other instance wait instead of replaying is not judged
    here: without a replay there is no second time to look at."""
    clock = SteppingClock(datetime(2041, 3, 4, 5, 6, 7, tzinfo=UTC))
    driver = connect(clock=clock)
    other = connect()
    create_all(driver, [leases.unique("x", at=1)])
    times: list[datetime] = []
    competitor: list[Competitor[None]] = []

    def bump(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("x")])
        assert current is not None, missing("the record x", written="the check created it before")
        tx.replace(current, leases.unique("x", at=2))

    def attempt(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("x")])
        times.append(tx.now())
        if not competitor:
            competitor.append(compete(lambda: transact_with_retries(other, bump, RACING)))
        assert current is not None, missing("the record x", written="the check created it before")
        tx.replace(current, leases.unique("x", at=100 + len(times)))

    transact_with_retries(driver, attempt, competitor)
    competitor[0].settle()
    if len(times) > 1:
        first, last = times[0], times[-1]
        assert last in clock.returned, f"the replay's now() returned {last!r}, which the clock never returned"
        assert clock.returned.index(last) > clock.returned.index(first), (
            f"the replayed attempt's now() returned {last!r}, the time the abandoned first attempt had "
            f"sampled ({first!r}); each attempt must read the injected clock for itself"
        )


@INJECTED_CLOCK
def test_now_comes_from_a_value_the_injected_clock_returned(connect: Callable[..., StorageDriver]) -> None:
    clock = SteppingClock(datetime(2040, 1, 1, tzinfo=UTC))
    driver = connect(clock=clock)
    got = driver.transaction(lambda tx: tx.now())
    assert got in clock.returned, f"now() returned {got!r}, which the injected clock never returned"


# -- sealed read set -------------------------------------------------------------------------------

ReadCall = Callable[[StorageTransaction, Leases], object]
READS: dict[str, ReadCall] = {
    "get": lambda tx, leases: tx.get([leases.key("x")]),
    "query_candidates": lambda tx, leases: tx.query_candidates(leases.query(limit=10)),
}


@SEALED_BY_NOW
@pytest.mark.parametrize("read_call", list(READS), ids=list(READS))
def test_a_read_after_now_is_refused(driver: StorageDriver, leases: Leases, read_call: str) -> None:
    create_all(driver, [leases.unique("x")])

    def read_after_now(tx: StorageTransaction) -> None:
        tx.get([leases.key("x")])
        tx.now()
        READS[read_call](tx, leases)

    with refused(
        StorageSealedError,
        what=f"the callback read, called now(), then called {read_call}()",
        rule=SEALED_BY_NOW,
    ):
        driver.transaction(read_after_now)


@SEALED_BY_NOW
def test_a_read_after_now_is_refused_even_as_the_first_read(driver: StorageDriver, leases: Leases) -> None:
    with refused(
        StorageSealedError,
        what="the callback called now() and then get(), its first read",
        rule=SEALED_BY_NOW,
    ):
        driver.transaction(lambda tx: (tx.now(), tx.get([leases.key("x")])))


def _mutate(tx: StorageTransaction, leases: Leases, mutation: str) -> None:
    if mutation == "create":
        tx.create(leases.unique("new"))
        return
    (current,) = tx.get([leases.key("x")])
    assert current is not None, missing("the record x", written="the check created it before this attempt")
    if mutation == "replace":
        tx.replace(current, leases.unique("x", at=5))
    else:
        tx.delete(current)


@SEALED_BY_MUTATION
@pytest.mark.parametrize("mutation", ["create", "replace", "delete"])
@pytest.mark.parametrize("read_call", list(READS), ids=list(READS))
def test_a_read_after_the_first_mutation_is_refused(
    driver: StorageDriver, leases: Leases, mutation: str, read_call: str
) -> None:
    create_all(driver, [leases.unique("x")])
    before = read_one(driver, leases.key("x"))

    def read_after_mutation(tx: StorageTransaction) -> None:
        _mutate(tx, leases, mutation)
        READS[read_call](tx, leases)

    with refused(
        StorageSealedError,
        what=f"the callback staged a {mutation}, then called {read_call}()",
        rule=SEALED_BY_MUTATION,
    ):
        driver.transaction(read_after_mutation)
    assert read_one(driver, leases.key("x")) == before, "the refused attempt changed what is stored"
    assert read_one(driver, leases.key("new")) is None, "the refused attempt committed its create"


# -- use after the attempt -------------------------------------------------------------------------


def _every_call(
    tx: StorageTransaction, leases: Leases, record: StoredRecord
) -> dict[str, Callable[[], object]]:
    return {
        "get": lambda: tx.get([leases.key("x")]),
        "query_candidates": lambda: tx.query_candidates(leases.query(limit=10)),
        "now": lambda: tx.now(),
        "create": lambda: tx.create(leases.unique("late")),
        "replace": lambda: tx.replace(record, leases.unique("x", at=9)),
        "delete": lambda: tx.delete(record),
    }


def _assert_all_refused(tx: StorageTransaction, leases: Leases, record: StoredRecord, when: str) -> None:
    for name, call in _every_call(tx, leases, record).items():
        with refused(
            StorageAttemptEndedError, what=f"the check called {name}() on a transaction {when}", rule=ENDED
        ):
            call()


@ENDED
def test_a_committed_attempt_refuses_every_call(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("x")])
    kept: list[StorageTransaction] = []

    def keep(tx: StorageTransaction) -> StoredRecord | None:
        kept.append(tx)
        return tx.get([leases.key("x")])[0]

    record = driver.transaction(keep)
    assert record is not None, missing("the record x", written="the attempt that read it committed")
    _assert_all_refused(kept[0], leases, record, "whose attempt committed")
    assert read_one(driver, leases.key("late")) is None, (
        "a create refused because the attempt had ended must not be stored"
    )
    assert read_one(driver, leases.key("x")) == record, (
        "the record x must be unchanged by calls refused after the attempt ended"
    )


@ENDED
@pytest.mark.parametrize("ending", ["committed", "rolled-back"])
def test_what_an_attempt_already_answered_is_refused_after_it_ends(
    driver: StorageDriver, leases: Leases, ending: str
) -> None:
    """The cheapest way to break this rule is an answer kept for the attempt (its frozen time, a read
    or a page it already served) and returned before the attempt's state is looked at; so here the
    attempt reads x, scans, and samples its time before it ends, and then asks the same again."""
    create_all(driver, [leases.unique("x")])
    kept: list[StorageTransaction] = []

    def answered(tx: StorageTransaction) -> StoredRecord | None:
        kept.append(tx)
        (found,) = tx.get([leases.key("x")])
        tx.query_candidates(leases.query(limit=max(1, min(10, driver.profile.limits.max_query_results))))
        tx.now()
        if ending == "rolled-back":
            raise _RolledBack("roll back")
        return found

    if ending == "committed":
        driver.transaction(answered)
    else:
        with propagated(_RolledBack, what="the callback read, scanned, called now() and then raised"):
            driver.transaction(answered)
    record = read_one(driver, leases.key("x"))
    assert record is not None, missing("the record x", written="the check created it before")
    _assert_all_refused(kept[0], leases, record, f"whose attempt had answered these calls and then {ending}")


class _RolledBack(Exception):
    """Raised by a check's callback to roll its attempt back."""


@ENDED
def test_a_read_only_attempt_refuses_every_call_after_it_ends(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("x")])
    kept: list[StorageTransaction] = []
    driver.transaction(lambda tx: kept.append(tx))
    record = read_one(driver, leases.key("x"))
    assert record is not None, missing("the record x", written="the check created it before")
    _assert_all_refused(kept[0], leases, record, "whose (empty) attempt ended")


@ENDED
def test_a_rolled_back_attempt_refuses_every_call(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("x")])
    kept: list[StorageTransaction] = []

    def fail(tx: StorageTransaction) -> None:
        kept.append(tx)
        tx.get([leases.key("x")])
        raise RuntimeError("roll back")

    with propagated(RuntimeError, what="the callback read the record x and then raised"):
        driver.transaction(fail)
    record = read_one(driver, leases.key("x"))
    assert record is not None, missing(
        "the record x", written="the check created it before; the attempt that read it rolled back"
    )
    _assert_all_refused(kept[0], leases, record, "whose attempt rolled back")
    assert read_one(driver, leases.key("late")) is None, (
        "a create refused because the attempt had ended must not be stored"
    )


@ENDED
@pytest.mark.parametrize("kind", list(BASE_ERRORS), ids=list(BASE_ERRORS))
def test_an_attempt_ended_by_a_base_exception_refuses_every_call(
    driver: StorageDriver, leases: Leases, kind: str
) -> None:
    """An attempt whose callback raised KeyboardInterrupt, SystemExit, GeneratorExit or another
    BaseException has ended like any rolled-back one: a driver that ends attempts in ``except
    Exception`` leaves this one open for later calls."""
    create_all(driver, [leases.unique("x")])
    kept: list[StorageTransaction] = []
    raised = BASE_ERRORS[kind](f"raised by the check ({kind})")

    def fail(tx: StorageTransaction) -> None:
        kept.append(tx)
        tx.get([leases.key("x")])
        raise raised

    caught: BaseException | None = None
    try:
        driver.transaction(fail)
    except BaseException as error:  # every kind is caught here, so none escapes into the test runner
        caught = error
    assert caught is raised, (
        f"the callback raised {kind}; transaction() "
        + ("returned normally" if caught is None else f"raised {caught!r}")
        + f" instead of that exception ({CALLBACK_ERROR_RULE}); this check cannot judge its own rule "
        "without it and fails because of that"
    )
    record = read_one(driver, leases.key("x"))
    assert record is not None, missing("the record x", written="the check created it before")
    _assert_all_refused(kept[0], leases, record, f"whose attempt was ended by {kind}")
    assert read_one(driver, leases.key("late")) is None, (
        "a create refused because the attempt had ended must not be stored"
    )


@ENDED
def test_a_replayed_attempt_is_refused_inside_the_next_attempt(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    create_all(driver, [leases.unique("x", at=1)])
    stand_in = StoredRecord.committed(leases.unique("x"), StorageRecordVersion("1"))
    attempts: list[StorageTransaction] = []
    accepted: list[str] = []
    competitors = []

    def bump(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("x")])
        assert current is not None, missing(
            "the record x", written="the check created it before this attempt"
        )
        tx.replace(current, leases.unique("x", at=2))

    def callback(tx: StorageTransaction) -> None:
        attempts.append(tx)
        if len(attempts) > 1:
            # Replayed: the first attempt's object must refuse everything, even while a new attempt runs.
            for name, call in _every_call(attempts[0], leases, stand_in).items():
                try:
                    call()
                except StorageAttemptEndedError:
                    continue
                accepted.append(name)
        (current,) = tx.get([leases.key("x")])
        assert current is not None, missing(
            "the record x", written="the check created it before this attempt"
        )
        if len(attempts) == 1:
            competitors.append(compete(lambda: transact_with_retries(other_driver, bump, RACING)))
        tx.replace(current, leases.unique("x", at=3))

    transact_with_retries(driver, callback, competitors)
    competitors[0].settle()
    assert not accepted, f"a replayed attempt's transaction object was still usable for {accepted}"
    # Whether or not the driver replayed (a locking driver makes the competitor wait instead),
    # the first attempt's object has ended by now.
    _assert_all_refused(attempts[0], leases, stand_in, "whose attempt was replayed or committed")


# -- overlapping calls -------------------------------------------------------------------------------


#: How long the check holds now() inside the clock while the overlapping read runs. A driver that makes
#: the read wait for now() instead of refusing it at once uses up this time, then the read must be
#: refused as sealed; the verdict is the same however long it is.
OVERLAP_HOLD = 0.5
#: Upper bound for any one step of the check, so a driver that never returns fails instead of hanging.
OVERLAP_BOUND = 10.0


def _capture(call: Callable[[], object]) -> object:
    try:
        return call()
    except BaseException as error:  # the outcome is judged by the check, whatever it is
        return error


@OVERLAP
@pytest.mark.parametrize("read_call", list(READS), ids=list(READS))
def test_a_read_overlapping_a_running_call_is_refused(
    connect: Callable[..., StorageDriver], leases: Leases, read_call: str
) -> None:
    """A read issued from a second thread while now() is inside the clock must not be served.

    Whichever way the driver keeps the rule, the read is refused: at once, because the attempt is
    busy (StorageConcurrentUseError), or after waiting for now() to finish, because the read set is
    then sealed (StorageSealedError). Serving it means two calls of one attempt ran interleaved.
    """
    entered, release = threading.Event(), threading.Event()
    instant = datetime(2033, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)

    def clock() -> datetime:
        entered.set()
        release.wait(OVERLAP_BOUND)
        return instant

    driver = connect(clock=clock)
    outcome: dict[str, object] = {}

    def callback(tx: StorageTransaction) -> None:
        timer = threading.Thread(target=lambda: outcome.__setitem__("now", _capture(tx.now)), daemon=True)
        timer.start()
        try:
            assert entered.wait(OVERLAP_BOUND), (
                "now() never consulted the injected clock; with client clock authority it must "
                f"({INJECTED_CLOCK.id}), and this check needs now() to be inside the clock"
            )
            reader = threading.Thread(
                target=lambda: outcome.__setitem__("read", _capture(lambda: READS[read_call](tx, leases))),
                daemon=True,
            )
            reader.start()
            reader.join(OVERLAP_HOLD)
        finally:
            release.set()
            timer.join(OVERLAP_BOUND)
        reader.join(OVERLAP_BOUND)

    driver.transaction(callback)
    assert "read" in outcome and "now" in outcome, (
        f"the overlapping {read_call}() or now() did not return within {OVERLAP_BOUND}s of the clock "
        f"being released: got {outcome!r}"
    )
    assert isinstance(outcome["read"], StorageUsageError), (
        f"{read_call}() was called from a second thread while now() of the same attempt was still "
        f"inside the clock, and it returned {outcome['read']!r}; expected a StorageUsageError "
        "(StorageConcurrentUseError while the attempt is busy, or StorageSealedError once now() sealed it). "
        f"This breaks {OVERLAP.id}: {OVERLAP.summary}"
    )


# -- sealing closes reads, not writes --------------------------------------------------------------------


@WRITES_AFTER_SEAL
@pytest.mark.parametrize("sealed_by", ["now", pytest.param("mutation", marks=records(4, least=4).mark)])
def test_every_kind_of_write_after_the_seal_commits(
    driver: StorageDriver, leases: Leases, sealed_by: str
) -> None:
    """Core reads, asks for the time, then writes what it decided: a driver that seals the whole attempt
    at now() (or at the first write) breaks every such transaction."""
    create_all(driver, [leases.unique("r"), leases.unique("d")])

    def decide(tx: StorageTransaction) -> datetime | None:
        r, d = tx.get([leases.key("r"), leases.key("d")])
        assert r is not None and d is not None, missing("leases r and d")
        at = tx.now() if sealed_by == "now" else None
        if sealed_by == "mutation":
            tx.create(leases.record("first", holder="first"))
        tx.create(leases.record("made", holder="after-seal"))
        tx.replace(r, leases.record("r", holder="after-seal"))
        tx.delete(d)
        return at

    try:
        driver.transaction(decide)
    except StorageUsageError as error:
        raise AssertionError(
            f"after {sealed_by} sealed the read set, a create, a replace and a delete of records read "
            f"before were refused with {error!r}: {WRITES_AFTER_SEAL.id}: {WRITES_AFTER_SEAL.summary}"
        ) from error
    made, r, d = (read_one(driver, leases.key(name)) for name in ("made", "r", "d"))
    assert made is not None and r is not None and d is None, (
        f"the writes staged after {sealed_by} did not all commit: made = {made!r}, r = {r!r}, d = {d!r}"
    )
    assert r.document.value["holder"] == "after-seal", f"the replacement of r did not commit: {r!r}"
