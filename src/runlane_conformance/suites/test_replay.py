"""Replay: every run of a transaction callback is a new attempt, and only the one that commits counts.

A driver may run the callback several times when a dependency changes under
it. Each run gets its own transaction object and sees the store afresh; what
an abandoned run read, staged or returned leaves no trace; the number of runs
is bounded, ending in ``StorageConflictError``; and an error raised by the
callback itself rolls its attempt back and reaches the caller unchanged.

Replays are forced the only way a driver-neutral check can: a second
instance commits a change to something the first attempt read, from inside
that attempt. A locking driver may instead make the second instance wait
until the first commits; then there is no replay, and the checks accept that
serial outcome too.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runlane_conformance.catalogue.replay import (
    BOUNDED,
    CALLBACK_ERROR,
    COMMITTED_VALUE,
    FRESH_ATTEMPT,
    NO_TRACE,
)
from runlane_conformance.contract.errors import StorageConflictError, StorageDuplicateMutationError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import StoredRecord
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.records import Leases
from runlane_conformance.suites._callback_errors import BASE_ERRORS
from runlane_conformance.suites._conflicts_support import Attempts, holder, lease_views, write_leases
from runlane_conformance.suites._messages import differs, missing, refused
from runlane_conformance.suites._retries_support import RACING, transact_with_retries

#: More attempts than this is treated as "replays without bound" (the reference driver stops at 16).
ATTEMPT_CEILING = 1000
#: How long a follow-up transaction may take before the store counts as wedged.
FOLLOW_UP_TIMEOUT = 10.0


def _replace_holder(driver: StorageDriver, leases: Leases, name: str, new_holder: str) -> str | None:
    """Replace lease ``name`` with ``new_holder``; return the holder it replaced."""

    def swap(tx: StorageTransaction) -> str | None:
        (current,) = tx.get([leases.key(name)])
        assert current is not None, missing(
            f"lease {name}", written="the check created it before and nothing deletes it"
        )
        tx.replace(current, leases.record(name, holder=new_holder))
        return holder(current)

    return transact_with_retries(driver, swap, RACING)


def _expect_replay_or_wait(competitor: Competitor[Any], attempts: Attempts, rule: str) -> None:
    """A single attempt is only right if the other instance waited for it; otherwise name the real cause.

    When the other instance committed a change to what this attempt read while the attempt was still
    open, the attempt must be replayed. Committing it once anyway is a stale read that was never
    validated: the rule broken is ``rule``, and the replay checks cannot judge anything after it.
    """
    if attempts.count == 1 and competitor.finished_while_open:
        raise AssertionError(
            "the other instance committed a change to a record this attempt had read, while the attempt "
            "was still open, and the attempt then committed without being replayed: its read was never "
            f"validated ({rule}). This replay check fails as a consequence of that rule, not on its own"
        )


# -- each attempt starts fresh -----------------------------------------------------------------


@FRESH_ATTEMPT
def test_a_replayed_attempt_gets_a_new_transaction_and_reads_current_data(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    observed: list[str | None] = []
    competitor: list[Competitor[str | None]] = []

    def t1(tx: StorageTransaction) -> str | None:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        observed.append(holder(current))
        if number == 1:
            competitor.append(compete(lambda: _replace_holder(other_driver, leases, "k", "h1")))
        assert current is not None, missing(
            "lease k", written="the check created it before T1 began and the other instance only replaces it"
        )
        tx.replace(current, leases.record("k", holder=f"t1-from-{holder(current)}"))
        return holder(current)

    result = transact_with_retries(driver, t1, competitor)
    t2_saw = competitor[0].settle()
    _expect_replay_or_wait(
        competitor[0], attempts, "conflicts.lost-update and conflicts.present-read-then-replace-elsewhere"
    )
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, missing("lease k", written="both transactions only replace it")
    if attempts.count == 1:
        # The second instance waited for the first: it must have replaced what the first committed.
        assert observed == ["h0"] and result == "h0", (
            f"T1 committed in one attempt, so the other instance must have waited for it: T1 read "
            f"{observed!r} and returned {result!r}, expected ['h0'] and 'h0' (the value before either "
            "commit); a single attempt that did not read the original value was not the first to commit"
        )
        assert t2_saw == "t1-from-h0", "the waiting instance must see the first transaction's commit"
        assert final[0] == "h1", differs(
            "k after both commits (the other instance waited for T1)",
            "h1",
            final[0],
            "the later commit, made after reading T1's, must be what is stored",
        )
    else:
        transactions = attempts.transactions
        assert len({id(tx) for tx in transactions}) == len(transactions), (
            "every attempt must receive a new transaction object"
        )
        assert observed[-1] == "h1", (
            f"the replayed attempt read {observed[-1]!r}: it must see the commit that caused the replay "
            "(h1), not data from the abandoned attempt"
        )
        assert result == "h1" and t2_saw == "h0", (
            f"T1 was replayed after the other instance replaced k: T1 must return the value of its replayed "
            f"attempt, 'h1', and the other instance must have read the original 'h0'; got T1 -> {result!r}, "
            f"the other instance read {t2_saw!r}"
        )
        assert final[0] == "t1-from-h1", differs(
            "k after the replayed T1 committed",
            "t1-from-h1",
            final[0],
            "the stored record must be the write of the attempt that committed, made from what that "
            "attempt read",
        )


@FRESH_ATTEMPT
def test_read_set_and_staged_keys_of_an_abandoned_attempt_do_not_carry_over(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # Attempt 1 reads k as present and stages a create of "note"; another instance then deletes k.
    # A replay must be free to create k (now absent) and to stage "note" again.
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[None]] = []

    def delete_k(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing("lease k", written="the check created it before T1 began")
        tx.delete(current)

    def t1(tx: StorageTransaction) -> str:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        if number == 1:
            competitor.append(compete(lambda: transact_with_retries(other_driver, delete_k, RACING)))
        tx.create(leases.record("note", holder=f"note-{number}"))
        if current is None:
            tx.create(leases.record("k", holder="t1"))
            return "absent"
        return "present"

    result = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    _expect_replay_or_wait(competitor[0], attempts, "conflicts.read-only-dependency")
    final = lease_views(driver, leases, ["k", "note"])
    assert final["note"] is not None and final["note"][0] == f"note-{attempts.count}", differs(
        "the note T1 writes on every attempt",
        f"note-{attempts.count}",
        final["note"],
        "only the write of the committing (last) attempt may be stored",
    )
    if attempts.count == 1:
        assert result == "present" and final["k"] is None, (
            f"T1 committed in one attempt, so the other instance's delete must have waited: T1 must return "
            f"'present' and k must be gone afterwards; got T1 -> {result!r}, k = {final['k']!r}"
        )
    else:
        assert result == "absent", "the replay must read k as absent after the other instance deleted it"
        assert final["k"] is not None and final["k"][0] == "t1", differs(
            "k after the replayed T1 re-created it",
            "t1",
            final["k"],
            "the replayed attempt's create must be what is stored",
        )


# -- only the committed value escapes ----------------------------------------------------------


@COMMITTED_VALUE
def test_transaction_returns_the_value_of_the_attempt_that_committed(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    returned: list[tuple[int, str]] = []
    competitor: list[Competitor[str | None]] = []

    def t1(tx: StorageTransaction) -> tuple[int, str]:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        if number == 1:
            competitor.append(compete(lambda: _replace_holder(other_driver, leases, "k", "h1")))
        assert current is not None, missing(
            "lease k", written="the check created it before T1 began and the other instance only replaces it"
        )
        written = f"t1-attempt{number}-from-{holder(current)}"
        tx.replace(current, leases.record("k", holder=written))
        returned.append((number, written))
        return (number, written)

    result = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    _expect_replay_or_wait(
        competitor[0], attempts, "conflicts.lost-update and conflicts.present-read-then-replace-elsewhere"
    )
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, missing("lease k", written="both transactions only replace it")
    assert result == returned[-1], (
        f"transaction() returned {result!r} but the last (committing) attempt returned {returned[-1]!r}"
    )
    if attempts.count == 1:
        assert final[0] == "h1", "the second instance replaced the first's commit afterwards"
    else:
        assert final[0] == result[1], "the returned value must come from the attempt whose writes are stored"


@COMMITTED_VALUE
def test_returned_value_matches_a_decision_written_elsewhere(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # The callback only reads k and records what it saw in another record; the value it returns must be
    # the one whose record was committed.
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    returned: list[str | None] = []
    competitor: list[Competitor[str | None]] = []

    def t1(tx: StorageTransaction) -> str | None:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        if number == 1:
            competitor.append(compete(lambda: _replace_holder(other_driver, leases, "k", "h1")))
        tx.create(leases.record(f"log-{number}", holder=f"saw-{holder(current)}"))
        returned.append(holder(current))
        return holder(current)

    result = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    _expect_replay_or_wait(competitor[0], attempts, "conflicts.read-only-dependency")
    assert result == returned[-1], (
        f"transaction() returned {result!r} but the last (committing) attempt returned {returned[-1]!r}"
    )
    log = lease_views(driver, leases, [f"log-{attempts.count}"])[f"log-{attempts.count}"]
    assert log is not None and log[0] == f"saw-{result}", differs(
        f"log-{attempts.count}, written by the committing attempt",
        f"saw-{result}",
        log,
        "the committing attempt's writes and its returned value must belong together",
    )


# -- abandoned attempts leave no trace ---------------------------------------------------------


@NO_TRACE
def test_writes_staged_by_an_abandoned_attempt_are_never_stored_or_seen(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[tuple[str | None, str | None]]] = []

    def t2(tx: StorageTransaction) -> tuple[str | None, str | None]:
        scratch, current = tx.get([leases.key("scratch-1"), leases.key("k")])
        assert current is not None, missing(
            "lease k", written="the check created it before the transactions began and nothing deletes it"
        )
        tx.replace(current, leases.record("k", holder="t2"))
        return (None if scratch is None else holder(scratch), holder(current))

    def t1(tx: StorageTransaction) -> int:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing(
            "lease k", written="the check created it before T1 began and nothing deletes it"
        )
        tx.create(leases.record(f"scratch-{number}", holder=f"t1-{number}"))
        tx.replace(current, leases.record("k", holder=f"t1-{number}"))
        if number == 1:
            # Attempt 1 has staged two writes; the other instance reads while they are pending.
            competitor.append(compete(lambda: transact_with_retries(other_driver, t2, RACING)))
        return number

    committed = transact_with_retries(driver, t1, competitor)
    t2_saw = competitor[0].settle()
    _expect_replay_or_wait(
        competitor[0], attempts, "conflicts.lost-update and conflicts.present-read-then-replace-elsewhere"
    )
    names = [f"scratch-{n}" for n in range(1, attempts.count + 1)]
    final = lease_views(driver, leases, [*names, "k"])
    assert committed == attempts.count, (
        f"transaction() returned {committed}, the number of the attempt that returned it, but "
        f"{attempts.count} "
        "attempts ran: the value returned must be the last (committing) attempt's "
        "(replay.only-committed-value-escapes)"
    )
    if attempts.count == 1:
        assert t2_saw == ("t1-1", "t1-1"), (
            "an instance that waited for the first transaction must see all of its commit at once"
        )
        assert final["scratch-1"] is not None and final["k"] is not None and final["k"][0] == "t2", (
            f"T1 committed in one attempt and the other instance waited for it and then replaced k: "
            f"expected scratch-1 stored and k = 't2', got scratch-1 = {final['scratch-1']!r}, k = "
            f"{final['k']!r}"
        )
    else:
        assert t2_saw == (None, "h0"), (
            f"another instance saw {t2_saw!r}: writes staged by an uncommitted attempt leaked"
        )
        for name in names[:-1]:
            assert final[name] is None, f"{name} was staged by an abandoned attempt and must not be stored"
        last = final[names[-1]]
        assert last is not None and last[0] == f"t1-{committed}", differs(
            f"{names[-1]}, staged by the committing attempt",
            f"t1-{committed}",
            last,
            "the committing attempt's writes must be stored",
        )
        assert final["k"] is not None and final["k"][0] == f"t1-{committed}", differs(
            "k, replaced by the committing attempt",
            f"t1-{committed}",
            final["k"],
            "the committing attempt's writes must be stored",
        )


@NO_TRACE
def test_a_delete_staged_by_an_abandoned_attempt_is_never_applied(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    """Deletes are staged like every write: a store without transactions that deletes at once, or a
    delete sent ahead of the commit, removes a record the committing attempt decided to keep."""
    write_leases(driver, leases.record("k", holder="h0"), leases.record("victim", holder="h0"))
    (victim_before,) = driver.transaction(lambda tx: tx.get([leases.key("victim")]))
    attempts = Attempts()
    competitor: list[Competitor[str | None]] = []

    def t1(tx: StorageTransaction) -> int:
        number = attempts.begin(tx)
        current, victim = tx.get([leases.key("k"), leases.key("victim")])
        assert current is not None, missing("lease k", written="the check created it before T1 began")
        if number == 1:
            assert victim is not None, missing("lease victim", written="the check created it before T1")
            tx.delete(victim)  # only the first attempt decides to delete it
        tx.replace(current, leases.record("k", holder=f"t1-{number}"))
        if number == 1:
            competitor.append(compete(lambda: _replace_holder(other_driver, leases, "k", "other")))
        return number

    committed = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    _expect_replay_or_wait(
        competitor[0], attempts, "conflicts.lost-update and conflicts.present-read-then-replace-elsewhere"
    )
    (victim_after,) = driver.transaction(lambda tx: tx.get([leases.key("victim")]))
    if committed == 1:
        assert victim_after is None, (
            "T1 committed its first attempt, which deleted the victim, yet it is stored"
        )
    else:
        assert victim_after is not None and victim_before is not None, (
            f"the victim was deleted only by attempt 1 of {attempts.count}, which was abandoned, yet it is "
            f"gone: writes of an attempt that did not commit must never be applied ({NO_TRACE.id})"
        )
        assert victim_after.version == victim_before.version, (
            f"the victim changed version ({victim_before.version} -> {victim_after.version}) although only "
            "an abandoned attempt touched it"
        )


# -- attempts are bounded ----------------------------------------------------------------------


@BOUNDED
def test_a_callback_that_always_loses_gives_up_with_a_conflict_error(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    competitors: list[Competitor[str | None]] = []

    read: list[str | None] = []

    def t1(tx: StorageTransaction) -> str:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing(
            "lease k", written="the check created it before T1 began and the other instance only replaces it"
        )
        read.append(holder(current))
        if number <= ATTEMPT_CEILING:
            # Every attempt loses: another instance changes k after this attempt read it.
            competitors.append(compete(lambda: _replace_holder(other_driver, leases, "k", f"t2-{number}")))
        tx.create(leases.record("t1-scratch", holder=f"t1-{number}"))
        tx.replace(current, leases.record("k", holder=f"t1-{number}"))
        return f"t1-{number}"

    try:
        result: str | StorageConflictError = driver.transaction(t1)
    except StorageConflictError as error:
        result = error
    replaced = [competitor.settle() for competitor in competitors]
    assert attempts.count <= ATTEMPT_CEILING, (
        f"the driver ran the callback {attempts.count} times without giving up: attempts are not bounded"
    )
    final = lease_views(driver, leases, ["k", "t1-scratch"])
    if isinstance(result, StorageConflictError):
        assert final["t1-scratch"] is None, "a transaction that gave up must have committed nothing"
        assert final["k"] is not None and final["k"][0] == f"t2-{attempts.count}", differs(
            "k after T1 gave up",
            f"t2-{attempts.count}",
            final["k"],
            "the other instance's last commit must be stored, untouched by T1's abandoned attempts",
        )
    else:
        # Only a driver that made the other instance wait can commit here. A locking driver may first
        # replay T1 as a deadlock victim, each time after that attempt's competitor committed; the
        # committing attempt n then read the n-1st competitor's write, and the nth competitor waited
        # for T1 and replaced T1's write: competitors 1..n-1, T1, competitor n is the serial order.
        n = attempts.count
        assert final["t1-scratch"] is not None and final["t1-scratch"][0] == result == f"t1-{n}", (
            f"transaction() returned {result!r} without committing that attempt's writes (the last "
            f"attempt, {n}, wrote t1-{n}; t1-scratch is {final['t1-scratch']!r})"
        )
        before = "h0" if n == 1 else f"t2-{n - 1}"
        waited = replaced[n - 1] if len(replaced) >= n else None
        assert (
            read[-1] == before
            and waited == result
            and final["k"] is not None
            and final["k"][0] == (f"t2-{n}")
        ), (
            f"T1 committed in attempt {n} while the other instance kept changing k: that is only possible "
            f"if the other instance's change started in that attempt waited for T1. Expected T1's last "
            f"attempt to read {before!r} (the commit before it), the other instance to replace "
            f"{result!r} (T1's write) and k to end as 't2-{n}'; got read {read[-1]!r}, replaced "
            f"{waited!r}, k = {final['k']!r}"
        )


@BOUNDED
def test_a_callback_that_can_never_commit_gives_up_within_the_ceiling(
    driver: StorageDriver, leases: Leases
) -> None:
    # A blind create of a key that exists can never commit, however often it is replayed. A driver must
    # give up (StorageConflictError, or refuse the create at once); one that keeps replaying would run
    # forever, so the callback itself stops it at the ceiling and the check fails within seconds.
    write_leases(driver, leases.record("taken", holder="first"))
    attempts = Attempts()

    def blind_create(tx: StorageTransaction) -> None:
        number = attempts.begin(tx)
        if number > ATTEMPT_CEILING:
            raise _ReplayedPastCeiling(number)
        tx.create(leases.record("taken", holder=f"blind-{number}"))

    try:
        driver.transaction(blind_create)
    except (StorageConflictError, StorageDuplicateMutationError):
        pass
    except _ReplayedPastCeiling as stopped:
        pytest.fail(
            f"a callback that can never commit (a blind create of an existing key) was run {stopped.args[0]} "
            f"times without the driver giving up (ceiling {ATTEMPT_CEILING}): attempts are not bounded"
        )
    else:
        pytest.fail("a blind create of an existing key committed; the transaction should have given up")
    final = lease_views(driver, leases, ["taken"])["taken"]
    assert final is not None and final[0] == "first", f"the existing record was overwritten: {final!r}"


class _ReplayedPastCeiling(Exception):
    """Raised by a callback that has been run more than ``ATTEMPT_CEILING`` times in one transaction."""


# -- errors raised by the callback -------------------------------------------------------------


class CallbackFailure(Exception):
    """Raised on purpose by a callback; a driver must hand this exact object back."""


def _follow_up_commits(driver: StorageDriver, leases: Leases, name: str) -> None:
    """A fresh transaction on ``driver`` commits within a bounded time (the store is not wedged)."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            write_leases(driver, leases.record(name, holder="after"))
        except BaseException as error:
            failure.append(error)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(FOLLOW_UP_TIMEOUT), f"a transaction after the callback error did not finish ({name})"
    assert not failure, f"a transaction after the callback error failed: {failure[0]!r}"


@CALLBACK_ERROR
def test_an_error_raised_by_the_callback_reaches_the_caller_unchanged(
    driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    before = driver.transaction(lambda tx: tx.get([leases.key("k")]))[0]
    attempts = Attempts()
    raised = CallbackFailure("the callback decided to fail")

    def t1(tx: StorageTransaction) -> None:
        attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing("lease k", written="the check created it before T1 began")
        tx.create(leases.record("scratch", holder="t1"))
        tx.replace(current, leases.record("k", holder="t1"))
        raise raised

    with refused(
        CallbackFailure,
        what="T1's callback created a record, replaced lease k and then raised",
        accepted="driver.transaction() returned normally (the callback's exception never reached the caller)",
        rule=CALLBACK_ERROR,
    ) as caught:
        driver.transaction(t1)
    assert caught.value is raised, "the caller must receive the callback's own exception object"
    assert attempts.count == 1, "an error raised by the callback is not a conflict and must not be replayed"
    after = driver.transaction(lambda tx: tx.get([leases.key("k"), leases.key("scratch")]))
    assert after[1] is None, "a create staged before the callback raised was committed"
    assert isinstance(after[0], StoredRecord) and before is not None, missing(
        "lease k", written="the check created it before T1 began; T1 raised instead of committing"
    )
    assert holder(after[0]) == "h0" and after[0].version == before.version, (
        "a replace staged before the callback raised was committed"
    )


@CALLBACK_ERROR
def test_the_store_stays_usable_after_a_callback_error(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))

    def t1(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing("lease k", written="the check created it before T1 began")
        tx.replace(current, leases.record("k", holder="t1"))
        raise CallbackFailure("fail after staging")

    with refused(
        CallbackFailure,
        what="T1's callback replaced lease k and then raised",
        accepted="driver.transaction() returned normally (the callback's exception never reached the caller)",
        rule=CALLBACK_ERROR,
    ):
        driver.transaction(t1)
    _follow_up_commits(other_driver, leases, "from-other-instance")
    _follow_up_commits(driver, leases, "from-same-instance")
    final = lease_views(other_driver, leases, ["k", "from-other-instance", "from-same-instance"])
    assert final["k"] is not None and final["k"][0] == "h0", differs(
        "k after a callback raised",
        "h0",
        final["k"],
        "a raising callback commits nothing, so k keeps the value written before",
    )
    assert final["from-other-instance"] is not None and final["from-same-instance"] is not None, (
        f"after a callback raised, ordinary follow-up transactions must commit on both instances; got "
        f"from-other-instance = {final['from-other-instance']!r}, from-same-instance = "
        f"{final['from-same-instance']!r} (the store must stay usable)"
    )


@CALLBACK_ERROR
def test_an_error_raised_in_a_replayed_attempt_discards_every_attempt(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[str | None]] = []
    raised = CallbackFailure("second attempt fails")

    def t1(tx: StorageTransaction) -> str:
        number = attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing("lease k", written="the check created it before T1 began")
        if number == 1:
            competitor.append(compete(lambda: _replace_holder(other_driver, leases, "k", "h1")))
        tx.create(leases.record(f"scratch-{number}", holder="t1"))
        if number > 1:
            raise raised
        tx.replace(current, leases.record("k", holder="t1"))
        return "committed"

    try:
        outcome: object = transact_with_retries(driver, t1, competitor)
    except CallbackFailure as error:
        outcome = error
    competitor[0].settle()
    final = lease_views(driver, leases, ["k", "scratch-1", "scratch-2"])
    if attempts.count == 1:
        assert outcome == "committed" and final["scratch-1"] is not None, (
            f"T1 was not replayed, so its one attempt must have committed: got {outcome!r}, scratch-1 = "
            f"{final['scratch-1']!r}"
        )
        assert final["k"] is not None and final["k"][0] == "h1", differs(
            "k after T1 and the other instance committed",
            "h1",
            final["k"],
            "the other instance's replace is the last commit",
        )
    else:
        assert outcome is raised, "the error from the replayed attempt must reach the caller unchanged"
        assert attempts.count == 2, "an error raised by the callback must not be replayed"
        assert final["scratch-1"] is None and final["scratch-2"] is None, (
            f"the replayed attempt raised, so nothing of T1 may be stored: got scratch-1 = "
            f"{final['scratch-1']!r}, scratch-2 = {final['scratch-2']!r}"
        )
        assert final["k"] is not None and final["k"][0] == "h1", differs(
            "k after the other instance's commit and T1's raising replay",
            "h1",
            final["k"],
            "the raising attempt commits nothing",
        )


# -- callback errors that are not Exceptions ---------------------------------------------------------


@CALLBACK_ERROR
@pytest.mark.parametrize("kind", list(BASE_ERRORS), ids=list(BASE_ERRORS))
def test_a_base_exception_from_the_callback_rolls_back_and_propagates(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, kind: str
) -> None:
    """KeyboardInterrupt, SystemExit, GeneratorExit and custom BaseExceptions roll back like any error.

    A driver that rolls back in ``except Exception`` leaves these attempts open: their writes commit
    at once, or ride along with the instance's next transaction. Both are caught here: nothing of the
    attempt is visible from another instance, not even after this instance committed again.
    """
    write_leases(driver, leases.record("k", holder="h0"))
    (before,) = driver.transaction(lambda tx: tx.get([leases.key("k")]))
    attempts = Attempts()
    raised = BASE_ERRORS[kind](f"raised by the check's callback ({kind})")

    def t1(tx: StorageTransaction) -> None:
        attempts.begin(tx)
        (current,) = tx.get([leases.key("k")])
        assert current is not None, missing("lease k", written="the check created it before T1 began")
        tx.create(leases.record("scratch", holder="t1"))
        tx.replace(current, leases.record("k", holder="t1"))
        raise raised

    caught: BaseException | None = None
    try:
        driver.transaction(t1)
    except BaseException as error:  # every kind is caught here, so none escapes into the test runner
        caught = error
    assert caught is raised, (
        f"the callback raised {kind} after staging a create and a replace; transaction() "
        + ("returned normally" if caught is None else f"raised {caught!r} instead")
        + f". {CALLBACK_ERROR.id}: {CALLBACK_ERROR.summary}"
    )
    assert attempts.count == 1, (
        f"a callback that raised {kind} was run {attempts.count} times; it is no conflict"
    )
    _follow_up_commits(driver, leases, "after")
    final = lease_views(other_driver, leases, ["k", "scratch", "after"])
    assert final["scratch"] is None, (
        f"a create staged before the callback raised {kind} is stored (seen after this instance's next "
        "commit): the interrupted attempt was committed instead of rolled back"
    )
    assert final["k"] is not None and final["k"][0] == "h0", differs(
        f"lease k after its replace was interrupted by {kind}",
        "h0",
        final["k"],
        "a callback that raised commits nothing",
    )
    (after,) = driver.transaction(lambda tx: tx.get([leases.key("k")]))
    assert before is not None and after is not None and after.version == before.version, (
        f"lease k changed version ({before!r} -> {after!r}) although its replace was interrupted by {kind}"
    )
