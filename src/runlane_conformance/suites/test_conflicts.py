"""Conflicts: two instances racing on the same data end as if their transactions ran one after another.

Every check here sets up one interleaving. The first transaction (T1, on
``driver``) reads, and at the marked point a second instance (T2, on
``other_driver``) runs a whole transaction on another thread; then T1 decides
and writes from what it read. An optimistic driver lets T2 commit at once and
must then make T1 conflict and replay; a locking driver may make T2 wait
until T1 has committed, or pick T1 as a deadlock victim and replay it after
T2. All of these are correct. Each check lists the outcomes of the serial
orders (T1 then T2, T2 then T1, and where T2 is several commits, T1 between
any two of them, as a replayed T1 may land there) and accepts exactly those:
anything else means a dependency was not protected.

The transactions are built so that the anomaly each check hunts for shows in
the final state or in the values the transactions returned, never in timing.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from runlane_conformance.catalogue.conflicts import (
    ABSENT_READ,
    ACROSS_PROCESSES,
    ATTEMPT_WIDE,
    BLIND_CREATE,
    INDEX_MOVE,
    INDEX_PHANTOM,
    LOST_UPDATE,
    PRESENT_READ,
    READ_ONLY_ANOMALY,
    READ_ONLY_DEPENDENCY,
    READ_SKEW,
    READ_THEN_SCAN,
    REPEATABLE_READS,
    SCAN_ATTEMPT_WIDE,
    SERIALIZABLE,
    VERSIONS_NEVER_REUSED,
)
from runlane_conformance.contract.catalog import StorageQueryDirection
from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.values import (
    StorageIndexConsistency,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordVersion,
)
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import page, positions, records
from runlane_conformance.fixtures.records import Leases, leases_for
from runlane_conformance.suites._conflicts_support import (
    CONFLICT,
    Attempts,
    Plan,
    PlanRead,
    PlanWrite,
    conflict_or,
    holder,
    lease_views,
    run_plan,
    serial_outcomes,
    write_leases,
)
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import missing
from runlane_conformance.suites._processes_support import GRACE, committed, w_create_if_absent, w_increment
from runlane_conformance.suites._retries_support import RACING, transact_with_retries


def _t2(fn: Callable[[], object]) -> Competitor[object]:
    """Start T2 (a whole transaction on the other instance) at this point of T1."""
    return compete(fn)


def _read_modify_write(
    driver: StorageDriver, leases: Leases, name: str, change: Callable[[str | None], str | None]
) -> str | None:
    """Replace lease ``name`` with ``change(holder)``; return the holder read."""

    def swap(tx: StorageTransaction) -> str | None:
        (current,) = tx.get([leases.key(name)])
        assert current is not None, missing(
            f"lease {name}", written="the check created it before this transaction"
        )
        tx.replace(current, leases.record(name, holder=change(holder(current))))
        return holder(current)

    return transact_with_retries(driver, swap, RACING)


# -- absent reads ------------------------------------------------------------------------------


@ABSENT_READ
def test_decisions_based_on_absence_cannot_both_commit(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # T1: "if a is absent, create b". T2: "if b is absent, create a". In any serial order exactly one of
    # a and b ends up existing; both existing means T1 committed on an absence that no longer held.
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> str:
        (b,) = tx.get([leases.key("b")])
        if b is None:
            tx.create(leases.record("a", holder="t2"))
            return "created-a"
        return "saw-b"

    def t1(tx: StorageTransaction) -> str:
        number = attempts.begin(tx)
        (a,) = tx.get([leases.key("a")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        if a is None:
            tx.create(leases.record("b", holder="t1"))
            return "created-b"
        return "saw-a"

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["a", "b"])
    t1_first = (r1, r2, final["a"] is None, final["b"] is None) == ("created-b", "saw-b", True, False)
    t2_first = (r1, r2, final["a"] is None, final["b"] is None) == ("saw-a", "created-a", False, True)
    assert t1_first or t2_first, (
        f"T1 returned {r1!r}, T2 returned {r2!r}, a exists: {final['a'] is not None}, b exists: "
        f"{final['b'] is not None}: no serial order gives this (an absent read was not protected)"
    )


@ABSENT_READ
def test_create_after_reading_absent_commits_only_while_the_key_stays_absent(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def claim(label: str) -> Callable[[StorageTransaction], str]:
        def run(tx: StorageTransaction) -> str:
            (k,) = tx.get([leases.key("k")])
            if label == "t1" and attempts.begin(tx) == 1:
                competitor.append(_t2(lambda: transact_with_retries(other_driver, claim("t2"), RACING)))
            if k is None:
                tx.create(leases.record("k", holder=label))
                return "created"
            return f"saw-{holder(k)}"

        return run

    r1 = transact_with_retries(driver, claim("t1"), competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, missing("lease k")
    outcomes = {("created", "saw-t1", "t1"), ("saw-t2", "created", "t2")}
    assert (r1, r2, final[0]) in outcomes, (
        f"T1 returned {r1!r}, T2 returned {r2!r}, k is held by {final[0]!r}: exactly one claim may win "
        "and the other must see the winner"
    )


# -- present reads -----------------------------------------------------------------------------


@PRESENT_READ
def test_replace_from_a_stale_read_never_commits(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t1(tx: StorageTransaction) -> str | None:
        number = attempts.begin(tx)
        (k,) = tx.get([leases.key("k")])
        if number == 1:
            competitor.append(_t2(lambda: _read_modify_write(other_driver, leases, "k", lambda _: "t2")))
        assert k is not None, missing(
            "lease k", written="the check created it before T1 began and no transaction of it deletes k"
        )
        tx.replace(k, leases.record("k", holder=f"t1<-{holder(k)}"))
        return holder(k)

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, missing("lease k")
    outcomes = {("h0", "t1<-h0", "t2"), ("t2", "h0", "t1<-t2")}
    assert (r1, r2, final[0]) in outcomes, (
        f"T1 read {r1!r}, T2 read {r2!r}, k is now {final[0]!r}: a replace staged from a stale read "
        "committed over another instance's change"
    )


@PRESENT_READ
def test_delete_from_a_stale_read_never_commits(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> str | None:
        (k,) = tx.get([leases.key("k")])
        if k is None:
            return None
        tx.replace(k, leases.record("k", holder="t2"))
        return holder(k)

    def t1(tx: StorageTransaction) -> str | None:
        number = attempts.begin(tx)
        (k,) = tx.get([leases.key("k")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        assert k is not None, missing(
            "lease k", written="the check created it before T1 began and no transaction of it deletes k"
        )
        tx.delete(k)
        return holder(k)

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["k"])["k"]
    # T1 first: T1 deleted h0 and T2 found nothing. T2 first: T2 replaced h0, T1 deleted t2.
    assert (r1, r2, final) in {("h0", None, None), ("t2", "h0", None)}, (
        f"T1 deleted the version holding {r1!r}, T2 replaced {r2!r}, k is now {final!r}: both acted on "
        "the same version, so a delete from a stale read committed"
    )


# -- read-only dependencies (write skew) -------------------------------------------------------


@READ_ONLY_DEPENDENCY
def test_write_skew_between_two_instances_is_prevented(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # T1 reads a and b, writes b from a; T2 reads a and b, writes a from b. Each only reads what the
    # other writes. Serially, one of them sees the other's write; write skew has both see the originals.
    write_leases(driver, leases.record("a", holder="a0"), leases.record("b", holder="b0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> None:
        a, b = tx.get([leases.key("a"), leases.key("b")])
        assert a is not None and b is not None, missing(
            "lease a or b", written="the check created both before T2 began and nothing deletes them"
        )
        tx.replace(a, leases.record("a", holder=f"t2:{holder(b)}"))

    def t1(tx: StorageTransaction) -> None:
        number = attempts.begin(tx)
        a, b = tx.get([leases.key("a"), leases.key("b")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        assert a is not None and b is not None, missing(
            "lease a or b", written="the check created both before T1 began and nothing deletes them"
        )
        tx.replace(b, leases.record("b", holder=f"t1:{holder(a)}"))

    transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    final = lease_views(driver, leases, ["a", "b"])
    assert final["a"] is not None and final["b"] is not None, missing("lease a or b")
    state = (final["a"][0], final["b"][0])
    serial = {("t2:t1:a0", "t1:a0"), ("t2:b0", "t1:t2:b0")}
    assert state in serial, (
        f"a={state[0]!r}, b={state[1]!r}: both transactions acted on the original values (write skew); "
        "a record an attempt only read must be validated at commit"
    )


@READ_ONLY_DEPENDENCY
def test_a_decision_recorded_elsewhere_depends_on_every_record_read(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # T1 copies a into a new record "copy"; T2 changes a and then checks whether "copy" exists. If T1
    # commits a copy of the old a after T2 committed (and T2 saw no copy), no serial order explains it.
    write_leases(driver, leases.record("a", holder="a0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> str:
        a, copy = tx.get([leases.key("a"), leases.key("copy")])
        assert a is not None, missing(
            "lease a", written="the check created it before T2 began and nothing deletes it"
        )
        tx.replace(a, leases.record("a", holder="a1"))
        return "saw-copy" if copy is not None else "no-copy"

    def t1(tx: StorageTransaction) -> str | None:
        number = attempts.begin(tx)
        (a,) = tx.get([leases.key("a")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        tx.create(leases.record("copy", holder=f"copy-of-{holder(a)}"))
        return holder(a)

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["copy"])["copy"]
    assert final is not None, missing(
        "lease copy", written="the check created it before the transactions began and nothing deletes it"
    )
    assert (r1, r2, final[0]) in {("a0", "saw-copy", "copy-of-a0"), ("a1", "no-copy", "copy-of-a1")}, (
        f"T1 copied {r1!r}, T2 reported {r2!r}: T1 committed a copy of a value another instance had "
        "already replaced"
    )


@READ_ONLY_DEPENDENCY
@with_plain_hypothesis_errors("a write skew raced on a late attempt")
@given(race=st.integers(2, 5))
def test_a_decision_on_a_late_attempt_still_depends_on_every_record_read(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, race: int
) -> None:
    """The write skew above, raced on the ``race``-th attempt: each earlier attempt loses to a competitor
    that moves a fence it read, so the skew meets an attempt that has been replayed several times (a driver
    may change strategy after a few replays, and must keep every read a dependency when it does)."""
    tag = uuid.uuid4().hex[:6]
    a, fence, copy = f"a-{tag}", f"fence-{tag}", f"copy-{tag}"
    write_leases(driver, leases.record(a, holder="a0"), leases.record(fence, holder="0"))
    attempts = Attempts()
    bumps: list[Competitor[object]] = []
    skew: list[Competitor[object]] = []

    def bump(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key(fence)])
        assert current is not None, missing("the fence", written="the check created it before T1 began")
        tx.replace(current, leases.record(fence, holder=str(int(holder(current) or "0") + 1)))

    def t2(tx: StorageTransaction) -> str:
        seen, copied = tx.get([leases.key(a), leases.key(copy)])
        assert seen is not None, missing(f"lease {a}", written="the check created it before T2 began")
        tx.replace(seen, leases.record(a, holder="a1"))
        return "saw-copy" if copied is not None else "no-copy"

    def t1(tx: StorageTransaction) -> str | None:
        number = attempts.begin(tx)
        seen, _fence = tx.get([leases.key(a), leases.key(fence)])
        if number < race:
            bumps.append(_t2(lambda: transact_with_retries(other_driver, bump, RACING)))
        elif number == race and not skew:
            skew.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        tx.create(leases.record(copy, holder=f"copy-of-{holder(seen)}"))
        return holder(seen)

    r1 = transact_with_retries(driver, t1, bumps)
    for competitor in bumps:
        competitor.settle()
    if not skew:
        return  # the earlier attempts were not replayed (a competitor waited for T1): no late race to judge
    r2 = skew[0].settle()
    final = lease_views(driver, leases, [copy])[copy]
    assert final is not None, missing(f"lease {copy}", written="T1 created it and nothing deletes it")
    assert (r1, r2, final[0]) in {("a0", "saw-copy", "copy-of-a0"), ("a1", "no-copy", "copy-of-a1")}, (
        f"on attempt {race} of T1 (after {race - 1} replays), T1 copied {r1!r} and T2 reported {r2!r}: T1 "
        "committed a copy of a value another instance had already replaced. Every record an attempt read "
        "stays a dependency, however many times the transaction was replayed"
    )


# -- lost update -------------------------------------------------------------------------------


@LOST_UPDATE
def test_two_increments_of_one_record_both_survive(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("counter", holder="0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def increment(tx: StorageTransaction) -> int:
        (counter,) = tx.get([leases.key("counter")])
        value = int(holder(counter) or "0") + 1
        assert counter is not None, missing(
            "the counter", written="the check created it before the increments began and nothing deletes it"
        )
        tx.replace(counter, leases.record("counter", holder=str(value)))
        return value

    def t1(tx: StorageTransaction) -> int:
        if attempts.begin(tx) == 1:
            (counter,) = tx.get([leases.key("counter")])
            competitor.append(_t2(lambda: transact_with_retries(other_driver, increment, RACING)))
            value = int(holder(counter) or "0") + 1
            assert counter is not None, missing(
                "the counter", written="the check created it before T1 began and nothing deletes it"
            )
            tx.replace(counter, leases.record("counter", holder=str(value)))
            return value
        return increment(tx)

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["counter"])["counter"]
    assert final is not None, missing("the counter")
    assert final[0] == "2", f"two committed increments left the counter at {final[0]}: an update was lost"
    assert {r1, r2} == {1, 2}, f"the increments returned {r1} and {r2}; they must have seen 0 and 1"


@LOST_UPDATE
def test_concurrent_increments_from_several_instances_all_survive(
    connect: Callable[..., StorageDriver], leases: Leases
) -> None:
    instances = [connect() for _ in range(4)]
    write_leases(instances[0], leases.record("counter", holder="0"))
    rounds = 5
    start = threading.Barrier(len(instances))
    committed: list[int] = []
    gave_up: list[int] = []
    failures: list[BaseException] = []
    guard = threading.Lock()

    def increment(tx: StorageTransaction) -> int:
        (counter,) = tx.get([leases.key("counter")])
        assert counter is not None, missing(
            "the counter", written="the check created it before the increments began and nothing deletes it"
        )
        value = int(holder(counter) or "0") + 1
        tx.replace(counter, leases.record("counter", holder=str(value)))
        return value

    def worker(instance: StorageDriver) -> None:
        try:
            start.wait(timeout=10)
            for _ in range(rounds):
                try:
                    value = instance.transaction(increment)
                except StorageConflictError:
                    with guard:
                        gave_up.append(1)
                    continue
                with guard:
                    committed.append(value)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(instance,), daemon=True) for instance in instances]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "concurrent increments did not finish in 60s"
    assert not failures, f"an increment failed with {failures[0]!r}"
    final = lease_views(instances[0], leases, ["counter"])["counter"]
    assert final is not None, missing("the counter")
    assert int(final[0] or "0") == len(committed), (
        f"{len(committed)} increments committed but the counter is {final[0]}: updates were lost"
    )
    assert sorted(committed) == list(range(1, len(committed) + 1)), (
        f"committed increments returned {sorted(committed)}: two of them read the same value"
    )
    assert committed, "no increment committed at all"


# -- versions are never reused -----------------------------------------------------------------


@VERSIONS_NEVER_REUSED
def test_versions_of_a_key_never_repeat_across_delete_and_recreate(
    driver: StorageDriver, leases: Leases
) -> None:
    original = leases.record("k", holder="same")
    seen: list[StorageRecordVersion] = []

    def version() -> StorageRecordVersion:
        (record,) = driver.transaction(lambda tx: tx.get([leases.key("k")]))
        assert record is not None, missing(
            "lease k", written="the check (re-)created it just before this read"
        )
        return record.version

    def delete(tx: StorageTransaction) -> None:
        (record,) = tx.get([leases.key("k")])
        assert record is not None, missing(
            "lease k", written="the check (re-)created it just before this delete"
        )
        tx.delete(record)

    def replace_same(tx: StorageTransaction) -> None:
        (record,) = tx.get([leases.key("k")])
        assert record is not None, missing(
            "lease k", written="the check (re-)created it just before this replace"
        )
        tx.replace(record, original)

    for _ in range(3):
        write_leases(driver, original)
        seen.append(version())
        driver.transaction(replace_same)
        seen.append(version())
        driver.transaction(delete)
    assert len(set(seen)) == len(seen), (
        f"versions {[v.value for v in seen]} repeat: identical content re-written or re-created must "
        "still get a new version"
    )


@VERSIONS_NEVER_REUSED
def test_replace_from_a_version_read_before_delete_and_recreate_conflicts(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    original = leases.record("k", holder="same")
    write_leases(driver, original)
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    recreated: list[StorageRecordVersion] = []

    def delete_then_recreate() -> None:
        def delete(tx: StorageTransaction) -> None:
            (record,) = tx.get([leases.key("k")])
            assert record is not None, missing(
                "lease k", written="the check created it before the other instance deletes it here"
            )
            tx.delete(record)

        transact_with_retries(other_driver, delete, RACING)
        write_leases(other_driver, original)
        (again,) = other_driver.transaction(lambda tx: tx.get([leases.key("k")]))
        if again is not None and again.document == original.document:
            recreated.append(again.version)

    def t1(tx: StorageTransaction) -> StorageRecordVersion | None:
        number = attempts.begin(tx)
        (k,) = tx.get([leases.key("k")])
        if k is None and number > 1:
            # A replay may run between the other instance's delete and its re-create (two separate
            # commits): a locking driver makes the delete wait for T1, picks T1 as the deadlock victim,
            # and the replay finds k absent. That is the serial order delete, T1, re-create; T1 then has
            # nothing to replace.
            return None
        assert k is not None, missing(
            "lease k",
            written=(
                "the check created it before T1 began and the other instance only starts deleting it "
                "after this first read"
            ),
        )
        if number == 1:
            competitor.append(_t2(delete_then_recreate))
        tx.replace(k, leases.record("k", holder="t1"))
        return k.version

    first_version = driver.transaction(lambda tx: tx.get([leases.key("k")]))[0]
    assert first_version is not None, missing("lease k", written="the check created it just before")
    read_version = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, missing(
        "lease k", written="it was re-created by the other instance or replaced by T1"
    )
    if read_version is None:
        # T1's committed attempt found k deleted and wrote nothing: delete, T1, re-create.
        assert final[0] == "same", (
            f"T1's committed attempt found k absent (after the other instance's delete) and wrote "
            f"nothing, yet k now holds {final!r}: only the other instance's re-create of the original "
            "content can follow that delete"
        )
        assert not recreated or recreated[0] != first_version.version, (
            f"k was re-created with the content it had before the delete and got version "
            f"{first_version.version.value} again: a version was handed out twice"
        )
        return
    if final[0] == "t1":
        # T1 committed after the re-create, so its committing attempt must have read the new record.
        if read_version == first_version.version and recreated and recreated[0] != read_version:
            raise AssertionError(
                f"T1 replaced k from version {read_version.value}, read before another instance deleted k "
                f"and re-created it as version {recreated[0].value}: versions were not reused, but the "
                "replace committed over a record that was no longer the one it read (an update was lost: "
                "conflicts.present-read-then-replace-elsewhere). This check fails as a consequence"
            )
        assert read_version != first_version.version, (
            f"T1 replaced k from version {read_version.value}, read before another instance deleted and "
            "re-created k with the same content, and the re-created record had that same version: a "
            "version was handed out twice"
        )
    else:
        assert final[0] == "same" and read_version == first_version.version, (
            f"k holds {final!r} after T1 committed a replace made from version {read_version.value} (k was "
            f"first at version {first_version.version.value}): without T1's write on top, the only serial "
            "outcome is T1 committing first, from the original version, and the other instance deleting "
            "and re-creating k afterwards; anything else means T1's committed replace was lost or T1 read "
            "a version that was never stored"
        )


# -- blind creates -----------------------------------------------------------------------------


@BLIND_CREATE
@pytest.mark.parametrize("staged_first", [True, False], ids=["staged-before-t2", "staged-after-t2"])
def test_blind_creates_of_one_key_have_exactly_one_winner(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, staged_first: bool
) -> None:
    # Neither transaction reads k before creating it. If an attempt is replayed, the replay reads k first
    # (as core would after a conflict) and reports what it found.
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def claim(label: str, counter: Attempts) -> Callable[[StorageTransaction], str]:
        def run(tx: StorageTransaction) -> str:
            number = counter.begin(tx)
            if number > 1:
                (k,) = tx.get([leases.key("k")])
                if k is not None:
                    return f"saw-{holder(k)}"
            start_t2 = label == "t1" and number == 1
            if start_t2 and not staged_first:
                competitor.append(_t2(lambda: conflict_or(lambda: other_driver.transaction(claim("t2", t2)))))
            tx.create(leases.record("k", holder=label))
            if start_t2 and staged_first:
                competitor.append(_t2(lambda: conflict_or(lambda: other_driver.transaction(claim("t2", t2)))))
            return "created"

        return run

    t2 = Attempts()
    r1 = conflict_or(lambda: driver.transaction(claim("t1", attempts)))
    r2 = (
        competitor[0].settle()
        if competitor
        else conflict_or(lambda: other_driver.transaction(claim("t2", t2)))
    )
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, "one of the two creates must have committed"
    winners = [label for label, result in (("t1", r1), ("t2", r2)) if result == "created"]
    assert len(winners) == 1, f"T1 returned {r1!r} and T2 {r2!r}: exactly one blind create may win"
    assert final[0] == winners[0], (
        f"{winners[0]} won but k is held by {final[0]!r}: the losing create overwrote the record"
    )
    loser = r2 if winners[0] == "t1" else r1
    assert loser in (CONFLICT, f"saw-{winners[0]}"), (
        f"the losing create returned {loser!r}; it must conflict or (replayed) see the winner's record"
    )


# -- read skew ---------------------------------------------------------------------------------


@READ_SKEW
def test_a_read_only_attempt_sees_both_records_before_or_both_after(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("a", holder="a0"), leases.record("b", holder="b0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> None:
        a, b = tx.get([leases.key("a"), leases.key("b")])
        assert a is not None and b is not None, missing(
            "lease a or b", written="the check created both before T2 began and nothing deletes them"
        )
        tx.replace(a, leases.record("a", holder="a1"))
        tx.replace(b, leases.record("b", holder="b1"))

    def t1(tx: StorageTransaction) -> tuple[str | None, str | None]:
        number = attempts.begin(tx)
        (a,) = tx.get([leases.key("a")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        (b,) = tx.get([leases.key("b")])
        return (holder(a), holder(b))

    seen = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    assert seen in {("a0", "b0"), ("a1", "b1")}, (
        f"a read-only attempt returned a={seen[0]!r}, b={seen[1]!r}: half of another instance's commit"
    )


def _mover(leases: Leases) -> Callable[[StorageTransaction], None]:
    """T2 of the move checks: moves lease ``old`` to ``new`` in one commit (delete one, create the other)."""

    def move(tx: StorageTransaction) -> None:
        (old,) = tx.get([leases.key("old")])
        assert old is not None, missing("lease old", written="the check created it before the move began")
        tx.delete(old)
        tx.create(leases.record("new", holder="h"))

    return move


@READ_SKEW
def test_a_read_only_attempt_never_sees_a_deleted_record_beside_its_replacement(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # T2 moves a lease from "old" to "new" atomically (delete one, create the other). T1 reads old, then
    # new: it may find exactly one of them, never both and never neither.
    write_leases(driver, leases.record("old", holder="h"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t1(tx: StorageTransaction) -> tuple[bool, bool]:
        number = attempts.begin(tx)
        (old,) = tx.get([leases.key("old")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, _mover(leases), RACING)))
        (new,) = tx.get([leases.key("new")])
        return (old is not None, new is not None)

    seen = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    assert seen in {(True, False), (False, True)}, (
        f"a read-only attempt found old={seen[0]}, new={seen[1]}: it saw a mix of before and after a move"
    )


class _TornView(Exception):
    """What core raises when two records it read in one attempt contradict each other."""


@READ_SKEW
def test_an_error_raised_on_a_torn_view_never_reaches_the_caller(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    """Core checks invariants across the records it reads (a tombstone and its run, a token and its
    owner) and raises when they disagree. Records that disagree only because the attempt read across
    another instance's commit come from an attempt that could never commit, so its error must not
    escape either: the driver gives each attempt one consistent view, or it validates the reads of an
    attempt whose callback raised and replays it when they went stale."""
    write_leases(driver, leases.record("old", holder="h"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t1(tx: StorageTransaction) -> bool:
        number = attempts.begin(tx)
        (old,) = tx.get([leases.key("old")])
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, _mover(leases), RACING)))
        (new,) = tx.get([leases.key("new")])
        if (old is None) == (new is None):
            raise _TornView(f"attempt {number} found old={old is not None} and new={new is not None}")
        return new is not None

    try:
        transact_with_retries(driver, t1, competitor)
    except _TornView as torn:
        raise AssertionError(
            f"the callback raised because it saw half of another instance's commit ({torn}), and that error "
            "reached the caller: an attempt whose reads were already stale can never commit, so neither "
            "its value nor its error may escape (give each attempt a consistent view, or validate the "
            "reads of an attempt that raised and replay it when they went stale)"
        ) from torn
    finally:
        if competitor:
            competitor[0].settle()


# -- index phantoms ----------------------------------------------------------------------------


def _window(leases: Leases) -> StorageQueryRange:
    """The index range the phantom checks scan: leases expiring 0..100 seconds after the base time."""
    return StorageQueryRange(StorageRangeBound(leases.sort(0)), StorageRangeBound(leases.sort(100)))


@INDEX_PHANTOM
def test_an_empty_candidate_page_is_a_dependency(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # Rule both transactions keep: "take a lease in the window only if the window is empty".
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def take(label: str, at: int) -> Callable[[StorageTransaction], str]:
        def run(tx: StorageTransaction) -> str:
            page = tx.query_candidates(leases.query(range=_window(leases)))
            if label == "t1" and attempts.begin(tx) == 1:
                competitor.append(_t2(lambda: transact_with_retries(other_driver, take("t2", 60), RACING)))
            if page.items:
                return f"saw-{page.items[0].key.id[1]}"
            tx.create(leases.record(label, at=at, holder=label))
            return "took"

        return run

    r1 = transact_with_retries(driver, take("t1", 50), competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["t1", "t2"])
    taken = tuple(sorted(name for name, lease in final.items() if lease is not None))
    assert (r1, r2, taken) in {("took", "saw-t1", ("t1",)), ("saw-t2", "took", ("t2",))}, (
        f"T1 returned {r1!r}, T2 {r2!r}, leases in the window: {taken}: a record appeared in a range "
        "T1 had scanned as empty, and T1 still committed"
    )


@INDEX_PHANTOM
@page(2, least=2).mark
def test_a_partial_candidate_page_protects_the_rest_of_the_range(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    # Capacity two: a lease may be taken while fewer than two are held in the window.
    write_leases(driver, leases.record("existing", at=10, holder="someone"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def take(label: str, at: int) -> Callable[[StorageTransaction], str]:
        def run(tx: StorageTransaction) -> str:
            page = tx.query_candidates(leases.query(range=_window(leases)))
            if label == "t1" and attempts.begin(tx) == 1:
                competitor.append(_t2(lambda: transact_with_retries(other_driver, take("t2", 70), RACING)))
            if len(page.items) >= 2:
                return "full"
            tx.create(leases.record(label, at=at, holder=label))
            return "took"

        return run

    r1 = transact_with_retries(driver, take("t1", 40), competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["t1", "t2"])
    taken = tuple(sorted(name for name, lease in final.items() if lease is not None))
    assert (r1, r2, taken) in {("took", "full", ("t1",)), ("full", "took", ("t2",))}, (
        f"T1 returned {r1!r}, T2 {r2!r}, new leases in the window: {taken}: capacity two was exceeded "
        "because a scanned range gained an entry before commit"
    )


# -- a row leaving the index -------------------------------------------------------------------


def _release(tx: StorageTransaction, leases: Leases) -> str | None:
    """Release lease k (it leaves the index); return the holder released."""
    (k,) = tx.get([leases.key("k")])
    assert k is not None, missing(
        "lease k", written="the check created it before the transactions began; releasing keeps the record"
    )
    tx.replace(k, leases.record("k", at=10, holder=None))
    return holder(k)


@INDEX_MOVE
def test_a_candidate_and_its_point_read_agree(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", at=10, holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t1(tx: StorageTransaction) -> tuple[str, ...]:
        number = attempts.begin(tx)
        page = tx.query_candidates(leases.query())
        if number == 1:
            competitor.append(
                _t2(lambda: transact_with_retries(other_driver, lambda t: _release(t, leases), RACING))
            )
        if not page.items:
            return ("no-candidate",)
        (k,) = tx.get([page.items[0].key])
        return ("candidate", str(holder(k)))

    seen = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    allowed = {("candidate", "h0"), ("no-candidate",)}
    if driver.profile.index_consistency is StorageIndexConsistency.EVENTUAL:
        allowed.add(("candidate", "None"))  # an eventual index may hand out a stale candidate
    assert seen in allowed, (
        f"T1 got k as a candidate but its point read found it released ({seen!r}): the index scan and "
        "the point read of one attempt saw different committed states"
    )


@READ_THEN_SCAN
def test_a_record_read_before_the_query_is_still_a_candidate(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", at=10, holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t1(tx: StorageTransaction) -> tuple[str | None, bool]:
        number = attempts.begin(tx)
        (k,) = tx.get([leases.key("k")])
        if number == 1:
            competitor.append(
                _t2(lambda: transact_with_retries(other_driver, lambda t: _release(t, leases), RACING))
            )
        page = tx.query_candidates(leases.query())
        return (holder(k), any(ref.key == leases.key("k") for ref in page.items))

    seen = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    assert seen in {("h0", True), (None, False)}, (
        f"T1 point-read k as held by {seen[0]!r} but its index scan {'did' if seen[1] else 'did not'} "
        "list it: one attempt saw two different committed states"
    )


@INDEX_MOVE
def test_taking_over_a_candidate_that_left_the_index_never_commits(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    write_leases(driver, leases.record("k", at=10, holder="h0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t1(tx: StorageTransaction) -> str:
        number = attempts.begin(tx)
        page = tx.query_candidates(leases.query())
        if number == 1:
            competitor.append(
                _t2(lambda: transact_with_retries(other_driver, lambda t: _release(t, leases), RACING))
            )
        if not page.items:
            return "nothing"
        (k,) = tx.get([page.items[0].key])
        assert k is not None, missing(
            f"the candidate {page.items[0].key}",
            written="the index scan in this attempt just listed it, and releasing keeps the record",
        )
        if holder(k) is None:
            return "skipped-released"
        tx.replace(k, leases.record("k", at=20, holder="t1"))
        return "took"

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    final = lease_views(driver, leases, ["k"])["k"]
    assert final is not None, missing("lease k", written="releasing keeps the record")
    serial = {("took", "t1", None), ("nothing", "h0", None), ("skipped-released", "h0", None)}
    assert (r1, r2, final[0]) in serial, (
        f"T1 returned {r1!r}, T2 released {r2!r}, k is held by {final[0]!r}: T1 took over a lease that "
        "another instance had released after T1's query"
    )


# -- random interleavings ----------------------------------------------------------------------

NAMES = ("a", "b", "c")
#: Shorter than the default grace: a locking driver makes each example wait this long.
PLAN_GRACE = 0.2


def _names_first(draw: st.DrawFn, preferred: Sequence[str]) -> list[str]:
    """A random subset of NAMES in random order, usually including the ``preferred`` names."""
    chosen = [name for name in preferred if not draw(st.booleans()) or draw(st.booleans())]
    extra = [name for name in NAMES if name not in chosen and draw(st.booleans())]
    return list(draw(st.permutations(chosen + extra)))


@st.composite
def plans(
    draw: st.DrawFn,
    label: str,
    queries: bool,
    read_first: Sequence[str] = (),
    write_first: Sequence[str] = (),
) -> Plan:
    """A small transaction over a, b, c: point reads in one to three steps (each key at most once),
    an optional index scan between them, then writes decided from what was read.

    ``read_first`` and ``write_first`` bias the choice of keys, so a second plan tends to read what the
    first writes and write what the first reads: the overlaps where anomalies live.
    """
    to_read = _names_first(draw, read_first)
    reads: list[PlanRead] = []
    while to_read:
        take = draw(st.integers(1, len(to_read)))
        reads.append(PlanRead(tuple(to_read[:take])))
        to_read = to_read[take:]
    if queries and draw(st.booleans()):
        reads.insert(draw(st.integers(0, len(reads))), PlanRead())
    read_only = label == "t1" and draw(st.integers(0, 3)) == 0
    writes = tuple(
        PlanWrite(name, draw(st.sampled_from(["hold", "hold", "release", "delete"])), draw(st.integers(0, 2)))
        for name in ([] if read_only else _names_first(draw, write_first))
    )
    return Plan(label, tuple(reads), writes)


@dataclass(frozen=True)
class Scenario:
    """Initial leases ``(name, at, held)``, two plans, and the T1 step before which T2 runs."""

    initial: tuple[tuple[str, int, bool], ...]
    first: Plan
    second: Plan
    point: int

    def without_queries(self) -> Scenario:
        """The same scenario with index scans removed (for drivers whose index is only eventually current)."""

        def strip(plan: Plan) -> Plan:
            return replace(plan, reads=tuple(read for read in plan.reads if not read.is_query))

        removed = sum(1 for read in self.first.reads[: self.point] if read.is_query)
        return Scenario(self.initial, strip(self.first), strip(self.second), self.point - removed)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    initial = tuple(
        (name, draw(st.integers(0, 2)), draw(st.booleans())) for name in NAMES if draw(st.booleans())
    )
    first = draw(plans("t1", True))
    # T2 leans towards writing what T1 read (or scanned) and reading what T1 writes.
    read1 = [name for read in first.reads for name in read.names]
    if any(read.is_query for read in first.reads):
        read1 += [name for name in NAMES if name not in read1]
    second = draw(plans("t2", True, [write.name for write in first.writes], read1))
    # T2 starts after at least one of T1's reads (starting before them all is just a serial run),
    # counted back from "after T1's last read", where most anomalies are exposed.
    back = draw(st.integers(-1, max(len(first.reads) - 1, 0)))
    return Scenario(initial, first, second, len(first.reads) - back)


def _get(*names: str) -> PlanRead:
    return PlanRead(names)


def _hold(name: str, at: int = 0) -> PlanWrite:
    return PlanWrite(name, "hold", at)


#: The classic anomalies, always tried first: each is what one broken kind of validation lets through.
CLASSICS = {
    "write-skew": Scenario(
        (("a", 0, True), ("b", 0, True)),
        Plan("t1", (_get("a", "b"),), (_hold("b"),)),
        Plan("t2", (_get("a", "b"),), (_hold("a"),)),
        1,
    ),
    "lost-update": Scenario(
        (("a", 0, True),), Plan("t1", (_get("a"),), (_hold("a"),)), Plan("t2", (_get("a"),), (_hold("a"),)), 1
    ),
    "absent-read": Scenario(
        (), Plan("t1", (_get("a"),), (_hold("b"),)), Plan("t2", (_get("b"),), (_hold("a"),)), 1
    ),
    "phantom": Scenario(
        (), Plan("t1", (PlanRead(),), (_hold("b"),)), Plan("t2", (_get("b"),), (_hold("c"),)), 1
    ),
    "read-skew": Scenario(
        (("a", 0, True), ("b", 0, True)),
        Plan("t1", (_get("a"), _get("b")), ()),
        Plan("t2", (_get("a", "b"),), (_hold("a"), _hold("b"))),
        1,
    ),
    "earlier-read-call": Scenario(
        (("a", 0, True), ("b", 0, True)),
        Plan("t1", (_get("a"), _get("b")), (_hold("c"),)),
        Plan("t2", (_get("c", "a"),), (_hold("a"),)),
        2,
    ),
    "index-move": Scenario(
        (("a", 0, True),),
        Plan("t1", (_get("a"), PlanRead()), ()),
        Plan("t2", (_get("a"),), (PlanWrite("a", "release"),)),
        1,
    ),
}


def _with_classics(test: Callable[..., None]) -> Callable[..., None]:
    for scenario in CLASSICS.values():
        test = example(scenario=scenario)(test)
    return test


@SERIALIZABLE
@with_plain_hypothesis_errors("random interleavings of two transactions")
@given(scenario=scenarios())
@_with_classics
def test_random_interleaved_transactions_are_serializable(
    driver: StorageDriver, other_driver: StorageDriver, scenario: Scenario
) -> None:
    if driver.profile.index_consistency is not StorageIndexConsistency.STRONG:
        scenario = scenario.without_queries()  # an eventual index may legitimately return stale pages
    plan1, plan2, point = scenario.first, scenario.second, scenario.point
    leases = leases_for(driver)
    initial = [
        leases.record(name, at=at, holder=f"init-{name}" if held else None)
        for name, at, held in scenario.initial
    ]
    if initial:
        write_leases(driver, *initial)

    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def run_t2() -> object:
        return conflict_or(lambda: other_driver.transaction(lambda tx: run_plan(tx, leases, plan2)))

    def t1(tx: StorageTransaction) -> object:
        first = attempts.begin(tx) == 1

        def hook(step: int) -> None:
            if first and step == point:
                competitor.append(compete(run_t2, grace=PLAN_GRACE))

        return run_plan(tx, leases, plan1, hook)

    r1 = conflict_or(lambda: driver.transaction(t1))
    r2 = competitor[0].settle() if competitor else run_t2()
    final = tuple(lease_views(driver, leases, NAMES).items())
    allowed = serial_outcomes(leases, NAMES, initial, [plan1, plan2])
    assert (final, (r1, r2)) in allowed, (
        f"no serial order of T1 and T2 produces this outcome (T2 ran after T1's step {point}); the "
        "conflicts.* checks that test one anomaly each (lost update, write skew, phantom, read skew) name "
        "the rule when one of them fails too\n"
        f"  final state: {final}\n  T1 returned: {r1}\n"
        f"  T2 returned: {r2}\n  serial outcomes: {sorted(map(repr, allowed))}"
    )


# -- every read call of an attempt is a dependency ---------------------------------------------


#: Read shapes for the attempt-wide dependency check: each call in order, and what the rival changes.
#: ``get:NAME`` point-reads a lease, ``scan:LO-HI`` scans leases expiring LO..HI seconds after the base.
#: The rival either replaces lease ``a`` (``change-a``) or creates a lease at 30 s (``insert-30``).
READ_SHAPES = {
    "get-then-get": (("get:a", "get:b"), "change-a"),
    "get-then-two-gets": (("get:a", "get:b", "get:absent"), "change-a"),
    "get-then-scan": (("get:a", "scan:60-90"), "change-a"),
    "scan-then-get": (("scan:0-50", "get:b"), "insert-30"),
    "scan-then-scan": (("scan:0-50", "scan:60-90"), "insert-30"),
    "scan-then-get-then-scan": (("scan:0-50", "get:b", "scan:60-90"), "insert-30"),
}


def _scan_window(leases: Leases, spec: str) -> StorageQueryRange:
    low, high = (int(part) for part in spec.split("-"))
    return StorageQueryRange(StorageRangeBound(leases.sort(low)), StorageRangeBound(leases.sort(high)))


@ATTEMPT_WIDE
@pytest.mark.parametrize(
    "shape",
    [
        # get-then-two-gets reads three keys and writes a fourth
        pytest.param(shape, marks=records(4, least=4).mark) if shape == "get-then-two-gets" else shape
        for shape in READ_SHAPES
        if shape.startswith("get-")
    ],
)
def test_a_read_made_by_an_earlier_call_is_still_protected_at_commit(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, shape: str
) -> None:
    _earlier_call_protected(driver, other_driver, leases, shape)


@SCAN_ATTEMPT_WIDE
@pytest.mark.parametrize("shape", [shape for shape in READ_SHAPES if shape.startswith("scan-")])
def test_a_range_scanned_by_an_earlier_call_is_still_protected_at_commit(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, shape: str
) -> None:
    # A scan's range is a dependency only where the index is current at once (strong consistency).
    _earlier_call_protected(driver, other_driver, leases, shape)


def _earlier_call_protected(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, shape: str
) -> None:
    # T1 reads in several calls, then records what it saw in a decision record "d". T2 checks "d" and,
    # only if it is absent, changes what T1's FIRST call read. Serially either T1 saw no change and T2
    # saw d, or T2 acted and T1 saw the change. T1 committing a decision from the old state after T2
    # acted means the first call's dependency was dropped when a later call was made.
    calls, change = READ_SHAPES[shape]
    write_leases(driver, leases.record("a", at=200, holder="a0"), leases.record("b", at=200, holder="b0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> str:
        if change == "change-a":
            a, d = tx.get([leases.key("a"), leases.key("d")])
            if d is not None:
                return "saw-d"
            assert a is not None, missing(
                "lease a", written="the check created it before the transactions began and nothing deletes it"
            )
            tx.replace(a, leases.record("a", at=200, holder="a1"))
            return "acted"
        (d,) = tx.get([leases.key("d")])
        if d is not None:
            return "saw-d"
        tx.create(leases.record("phantom", at=30, holder="t2"))
        return "acted"

    def t1(tx: StorageTransaction) -> bool:
        number = attempts.begin(tx)
        saw_change = False
        for call in calls:
            kind, _, arg = call.partition(":")
            if kind == "get":
                (record,) = tx.get([leases.key(arg)])
                saw_change = saw_change or (record is not None and holder(record) == "a1")
            else:
                page = tx.query_candidates(leases.query(range=_scan_window(leases, arg)))
                saw_change = saw_change or any(ref.key == leases.key("phantom") for ref in page.items)
        if number == 1:
            competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
        tx.create(leases.record("d", at=300, holder=f"t1-saw-change={saw_change}"))
        return saw_change

    r1 = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    assert (r1, r2) in {(False, "saw-d"), (True, "acted")}, (
        f"reads made in calls {list(calls)}; the other instance {r2} on what the first call read "
        f"({change}) while T1 was open, yet T1 committed a decision from the old state (saw the change: "
        f"{r1}): the first call's read was not protected at commit. Either the driver dropped that "
        "call's dependency when a later call was made (this rule), or it does not validate what an "
        "attempt only read at all; in the second case conflicts.read-only-dependency (a point read) or "
        "conflicts.index-phantom (a scan) fails too, and that is the cause"
    )


#: Positions of the duplicate call, after the attempt's first read of k.
DUPLICATE_CALL = positions(3, least=2, beside=1)


@REPEATABLE_READS
@pytest.mark.parametrize("writes", [False, True], ids=["read-only", "then-writes"])
@pytest.mark.parametrize(
    "reread",
    ["same-key", "in-a-batch", "duplicate-in-one-call"],
)
def test_a_key_read_twice_in_one_attempt_reads_the_same_version(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, writes: bool, reread: str
) -> None:
    write_leases(driver, leases.record("k", holder="k0"), leases.record("other", holder="o0"))
    attempts = Attempts()
    competitor: list[Competitor[object]] = []
    # The duplicate call reads k twice, beside another key where the attempt may read four positions.
    duplicate = ["other", "k", "k"] if DUPLICATE_CALL.of(driver) > 2 else ["k", "k"]

    def t2(tx: StorageTransaction) -> None:
        (k,) = tx.get([leases.key("k")])
        assert k is not None, missing(
            "lease k", written="the check created it before T2 began and nothing deletes it"
        )
        tx.replace(k, leases.record("k", holder="k1"))

    def t1(tx: StorageTransaction) -> list[tuple[str, str | None]]:
        number = attempts.begin(tx)
        if reread == "duplicate-in-one-call":
            (first,) = tx.get([leases.key("k")])
            if number == 1:
                competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
            records = tx.get([leases.key(name) for name in duplicate])
            seen = [first, records[-2], records[-1]]
        else:
            (first,) = tx.get([leases.key("k")])
            if number == 1:
                competitor.append(_t2(lambda: transact_with_retries(other_driver, t2, RACING)))
            keys = [leases.key("k")] if reread == "same-key" else [leases.key("other"), leases.key("k")]
            seen = [first, tx.get(keys)[-1]]
        if writes:
            tx.create(leases.record("marker", holder=f"t1-{number}"))
        return [("", None) if record is None else (record.version.value, holder(record)) for record in seen]

    observed = transact_with_retries(driver, t1, competitor)
    competitor[0].settle()
    assert len(set(observed)) == 1, (
        f"one attempt read k {len(observed)} times and got {observed} (version, holder): another instance "
        "committed between the reads and the re-read saw it; a re-read must return what the attempt "
        "already read"
    )


@READ_ONLY_ANOMALY
def test_a_read_only_observer_cannot_see_an_order_no_serial_history_has(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    # The read-only transaction anomaly of snapshot isolation. "withdraw" reads x and y and writes x;
    # while it is open, "deposit" writes y and commits, then "observer" reads x and y and commits. Each
    # pair alone has a serial order, but if withdraw still commits from its old read of y, the three
    # form a cycle: withdraw before deposit (it missed y), deposit before observer (it saw y), observer
    # before withdraw (it missed x). Written values embed what each transaction read, so the final
    # state and the returned reads pin down the order.
    observer_driver = connect()
    leases = leases_for(driver)
    initial = [leases.record("x", holder="x0"), leases.record("y", holder="y0")]
    write_leases(driver, *initial)
    withdraw = Plan("withdraw", (_get("x", "y"),), (_hold("x"),))
    deposit = Plan("deposit", (_get("y"),), (_hold("y"),))
    observer = Plan("observer", (_get("x", "y"),), ())
    attempts = Attempts()
    rivals: list[Competitor[object]] = []

    def run(on: StorageDriver, plan: Plan) -> Callable[[], object]:
        return lambda: conflict_or(lambda: on.transaction(lambda tx: run_plan(tx, leases, plan)))

    def main(tx: StorageTransaction) -> object:
        first = attempts.begin(tx) == 1

        def hook(step: int) -> None:
            if first and step == len(withdraw.reads):
                rivals.append(compete(run(other_driver, deposit), grace=PLAN_GRACE))
                rivals.append(compete(run(observer_driver, observer), grace=PLAN_GRACE))

        return run_plan(tx, leases, withdraw, hook)

    r_withdraw = conflict_or(lambda: driver.transaction(main))
    r_deposit, r_observer = (rival.settle() for rival in rivals)
    final = tuple(lease_views(driver, leases, ("x", "y")).items())
    allowed = serial_outcomes(leases, ("x", "y"), initial, [withdraw, deposit, observer])
    assert (final, (r_withdraw, r_deposit, r_observer)) in allowed, (
        "no serial order of the three transactions explains this outcome (the read-only transaction "
        f"anomaly)\n  final state: {final}\n  withdraw read: {r_withdraw}\n  deposit read: {r_deposit}\n"
        f"  observer read: {r_observer}"
    )


# -- phantoms wherever a scan looked, in both directions ---------------------------------------

#: Leases already in the window for the directional phantom checks: (name, seconds after the base).
_SCANNED = (("e10", 10), ("e20", 20), ("e30", 30), ("e40", 40), ("e50", 50))


@dataclass(frozen=True)
class PhantomCase:
    """Where T1 scans (direction, page shape, bound kind) and at which end of that scan T2 inserts.

    ``page``: ``full`` (one page with a cursor left over), ``partial`` (one page that reaches the end
    of the range) or ``after-cursor`` (a full page of two, then the partial rest from its cursor).
    ``end``: ``first`` puts the phantom where the last scanned page started (the range bound or the
    cursor), ``last`` where it stopped (just inside the page's last entry, on the same sort, or at the
    far bound).
    """

    direction: StorageQueryDirection
    page: str
    end: str
    inclusive: bool

    @property
    def id(self) -> str:
        bounds = "inclusive" if self.inclusive else "exclusive"
        return f"{self.direction.value}-{self.page}-{self.end}-end-{bounds}"


PHANTOM_CASES = [
    PhantomCase(direction, page, end, inclusive)
    for direction in StorageQueryDirection
    for page in ("full", "partial", "after-cursor")
    for end in ("first", "last")
    for inclusive in (True, False)
]


def _phantom_range(inclusive: bool, leases: Leases) -> StorageQueryRange:
    # Inclusive bounds sit exactly on e10 and e50; exclusive bounds one second outside them.
    if inclusive:
        return StorageQueryRange(StorageRangeBound(leases.sort(10)), StorageRangeBound(leases.sort(50)))
    return StorageQueryRange(
        StorageRangeBound(leases.sort(9), inclusive=False),
        StorageRangeBound(leases.sort(51), inclusive=False),
    )


def _phantom_spot(case: PhantomCase) -> tuple[str, int]:
    """The phantom's (name, seconds): inside what T1's last page scanned, at the requested end.

    Ascending scans start low: the first end is the lower bound (or just past the cursor, which
    follows e20), the last end is just below where a full page stopped (e30, on its sort, with a
    smaller key) or the upper bound. Descending scans mirror this.
    """
    ascending = case.direction is StorageQueryDirection.ASCENDING
    low_edge, high_edge = 10, 50  # the lowest and highest sorts inside the range, whatever the bounds
    if case.page == "full":  # a page of three: e10..e30 ascending, e50..e30 descending
        if case.end == "first":
            return ("p-edge", low_edge if ascending else high_edge)
        return ("a-tie", 30) if ascending else ("z-tie", 30)
    if case.page == "partial":  # the whole range in one page
        if case.end == "first":
            return ("p-edge", low_edge if ascending else high_edge)
        return ("p-edge", high_edge if ascending else low_edge)
    # after-cursor: page one holds two entries, the cursor sits on e20 (ascending) or e40 (descending)
    if case.end == "first":
        return ("z-tie", 20) if ascending else ("a-tie", 40)
    return ("p-edge", high_edge if ascending else low_edge)


#: The page a phantom case's scan needs: three for a full page, all five scanned entries and one more
#: for a partial page, and a first page of two and the remaining three plus one after the cursor.
_PHANTOM_PAGES = {"full": page(3, least=3), "partial": page(6, least=6), "after-cursor": page(4, least=4)}


@INDEX_PHANTOM
@pytest.mark.parametrize(
    "case",
    [pytest.param(case, id=case.id, marks=_PHANTOM_PAGES[case.page].mark) for case in PHANTOM_CASES],
)
def test_a_phantom_where_a_scan_looked_is_detected_in_both_directions(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases, case: PhantomCase
) -> None:
    # T1 scans the window and records what it saw in "d"; T2 inserts a lease inside the part of the
    # index T1's last page covered, unless it already sees "d". Serially T1 either saw no phantom and
    # T2 saw d, or T2 inserted and T1's pages show the phantom (on a full page it sorts before the
    # page's last entry, so it would have been returned).
    write_leases(driver, *(leases.record(name, at=at, holder=name) for name, at in _SCANNED))
    name, at = _phantom_spot(case)
    window = _phantom_range(case.inclusive, leases)
    attempts = Attempts()
    competitor: list[Competitor[object]] = []

    def t2(tx: StorageTransaction) -> str:
        (d,) = tx.get([leases.key("d")])
        if d is not None:
            return "saw-d"
        # The partition name as an equal but separate string: a Python driver comparing partitions by
        # identity (``is``) rather than equality would otherwise see its own object and still match.
        environment = leases.environment.encode().decode()
        tx.create(leases.record(name, at=at, holder="phantom", environment=environment))
        return "inserted"

    def t1(tx: StorageTransaction) -> tuple[str, ...]:
        number = attempts.begin(tx)
        limit = {"full": 3, "partial": leases.page_limit, "after-cursor": 2}[case.page]
        command = leases.query(range=window, direction=case.direction, limit=limit)
        page = tx.query_candidates(command)
        seen = [str(ref.key.id[1]) for ref in page.items]
        if case.page == "after-cursor":
            assert page.cursor is not None, "a full first page must come with a cursor"
            page = tx.query_candidates(replace(command, limit=leases.page_limit, cursor=page.cursor))
            seen += [str(ref.key.id[1]) for ref in page.items]
        if number == 1:
            competitor.append(
                compete(lambda: transact_with_retries(other_driver, t2, RACING), grace=PLAN_GRACE)
            )
        tx.create(leases.record("d", at=300, holder="t1"))
        return tuple(seen)

    seen = transact_with_retries(driver, t1, competitor)
    r2 = competitor[0].settle()
    saw_phantom = name in seen
    bounds = "inclusive" if case.inclusive else "exclusive"
    assert (saw_phantom, r2) in {(False, "saw-d"), (True, "inserted")}, (
        f"T1 scanned {case.direction.value} ({case.page} page, {bounds} bounds) and saw {list(seen)}; "
        f"T2 inserted {name} at {at} s, inside what T1's scan covered "
        f"(its {case.end} end), while T1 was open, and T1 still committed: the scanned range was not "
        "protected where the scan actually looked"
    )


# -- across processes --------------------------------------------------------------------------------


def _committed_reads(outcome: object) -> list[int | None]:
    return cast(list[int | None], outcome)


def _counter_value(driver: StorageDriver, leases: Leases) -> int:
    (record,) = driver.transaction(lambda tx: tx.get([leases.key("counter")]))
    return 0 if record is None else int(str(record.document.value["holder"]).rpartition("-")[2])


@ACROSS_PROCESSES
def test_a_read_then_replace_raced_by_another_process_loses_no_update(
    driver: StorageDriver, leases: Leases, runlane_workers: Any
) -> None:
    """One process reads the counter and waits inside its attempt; another increments it meanwhile (or is
    made to wait); then the first increments what it read. Two committed increments must leave 2."""
    driver.transaction(lambda tx: tx.create(leases.record("counter", holder="count-0")))
    first, second = runlane_workers(2)
    first.start(w_increment, leases.environment, 1, True, 3)
    assert first.expect("read") == 0, "the first increment must read the counter at 0"
    second.start(w_increment, leases.environment, 1, False, 3)
    while_open = second.done(GRACE)
    first.send("go")
    mine, theirs = first.outcome(), second.outcome()
    reads = [
        value
        for outcome in (mine, theirs)
        if committed(outcome)
        for value in _committed_reads(outcome)
        if value is not None
    ]
    final = _counter_value(driver, leases)
    assert final == len(reads), (
        f"{len(reads)} increments from two processes committed (they read {reads}) but the counter is "
        f"{final}: an increment was lost; the competing process's commit was not detected"
        + (" while the first attempt was open" if while_open else "")
    )
    assert sorted(reads) == list(range(len(reads))), (
        f"committed increments read {sorted(reads)}: two committed attempts built on the same version"
    )


@ACROSS_PROCESSES
def test_an_absent_read_then_create_raced_by_another_process_has_one_winner(
    driver: StorageDriver, leases: Leases, runlane_workers: Any
) -> None:
    """One process reads the claim as absent and waits; another creates it meanwhile (or is made to wait);
    then the first creates it too. At most one may have committed a create, and the record is the winner's."""
    first, second = runlane_workers(2)
    first.start(w_create_if_absent, leases.environment, "first", True)
    assert first.expect("read") is True, "the claim must read as absent before anyone created it"
    second.start(w_create_if_absent, leases.environment, "second", False)
    second.done(GRACE)
    first.send("go")
    outcomes = {"first": first.outcome(), "second": second.outcome()}
    creators = [name for name, outcome in outcomes.items() if committed(outcome) and outcome == "created"]
    assert len(creators) == 1, (
        f"outcomes {outcomes}: exactly one process must have committed the create of a claim both read as "
        "absent (the other conflicts, or replays and reads it as present)"
    )
    (stored,) = driver.transaction(lambda tx: tx.get([leases.key("claim")]))
    assert stored is not None and stored.document.value["holder"] == creators[0], (
        f"the claim holds {None if stored is None else stored.document.value['holder']!r}, but "
        f"{creators[0]!r} is the only process whose create committed"
    )


@ACROSS_PROCESSES
def test_concurrent_increments_from_three_processes_are_all_counted(
    driver: StorageDriver, leases: Leases, runlane_workers: Any
) -> None:
    """Three processes increment one counter five times each, at the same time."""
    workers = runlane_workers(3)
    times = 5
    retries = 1 + times * len(workers)  # every conflict of a correct driver is some other committed increment
    for worker in workers:
        worker.start(w_increment, leases.environment, times, False, retries)
    reads: list[int] = []
    for worker in workers:
        seen = _committed_reads(worker.result())
        assert None not in seen, (
            f"an increment in worker process {worker.index} conflicted {retries} times although fewer other "
            "increments than that committed"
        )
        reads.extend(value for value in seen if value is not None)
    final = _counter_value(driver, leases)
    assert final == len(reads) and sorted(reads) == list(range(len(reads))), (
        f"{len(reads)} increments committed, reading {sorted(reads)}, and the counter is {final}: some "
        "committed increments built on the same version, so updates were lost between processes"
    )
