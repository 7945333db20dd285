"""Mutations: conditional create, exact replace and delete, one write per key, atomic index movement.

A create is an insert that only succeeds while the key is absent; replace and
delete act on exactly the record and version this attempt read; an attempt
writes each key at most once and never moves a record to another key; index
entries follow their record in the same commit; and an attempt whose
callback raises leaves no trace at all.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runlane_conformance.catalogue.mutations import (
    CREATE_READ_ABSENT,
    CREATE_READ_PRESENT,
    CREATE_UNREAD,
    EXACT_DELETE,
    EXACT_REPLACE,
    INDEX_MOVED,
    INDEX_REMOVED,
    NO_KEY_CHANGE,
    NO_PARTIAL_BATCH,
    ONE_PER_KEY,
    ROLLBACK,
)
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.errors import (
    StorageConflictError,
    StorageDuplicateMutationError,
    StorageKeyChangeError,
)
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageIndexConsistency,
    StoredRecord,
)
from runlane_conformance.fixtures.convergence import until_indexed
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import records
from runlane_conformance.fixtures.records import Leases, expiry, leases_for
from runlane_conformance.suites._conflicts_support import Attempts, holder
from runlane_conformance.suites._cursors_support import catalog_records
from runlane_conformance.suites._hypothesis_support import with_plain_hypothesis_errors
from runlane_conformance.suites._messages import differs, missing, refused
from runlane_conformance.suites._mutations_support import (
    batches,
    create_all,
    query_candidates_pairs,
    query_pairs,
    read,
    read_one,
)


class Boom(Exception):
    """The error a check's callback raises on purpose."""


def _strong(driver: StorageDriver) -> bool:
    """Whether queries must reflect a commit at once (an eventual index may lag, but not lie forever)."""
    return driver.profile.index_consistency is StorageIndexConsistency.STRONG


def _only(driver: StorageDriver, leases: Leases, name: str, at: int) -> None:
    """The lease ``name`` carries exactly its entry at ``at``; with a strong index, both query paths agree."""
    stored = read_one(driver, leases.key(name))
    assert stored is not None and [entry.sort for entry in stored.indexes] == [leases.sort(at)], (
        f"the committed record carries index entries {stored and stored.indexes}, expected one at {at}"
    )
    expected = [(leases.key(name), leases.sort(at))]

    def listed() -> None:
        for label, pairs in (
            ("driver.query", query_pairs(driver, leases.query())),
            ("query_candidates", query_candidates_pairs(driver, leases.query())),
        ):
            mine = [pair for pair in pairs if pair[0] == leases.key(name)]
            assert mine == expected, f"{label} after the commit lists {mine}, expected {expected}"

    until_indexed(driver, listed)  # at once on a strong index; once settled on an eventual one


# -- conditional create ----------------------------------------------------------------------------


@CREATE_UNREAD
def test_create_of_an_unread_absent_key_commits(driver: StorageDriver, leases: Leases) -> None:
    written = leases.unique("blind", at=5)
    driver.transaction(lambda tx: tx.create(written))
    stored = read_one(driver, written.key)
    assert stored is not None, "a blind create of an absent key must commit"
    assert stored.document == written.document, differs(
        ("the document of a blindly created record"),
        written.document,
        stored.document,
        "a committed create stores exactly the document it was given",
    )


@CREATE_UNREAD
def test_create_of_an_unread_key_that_exists_never_overwrites(driver: StorageDriver, leases: Leases) -> None:
    original = leases.unique("taken", at=1)
    create_all(driver, [original])
    before = read_one(driver, original.key)
    intruder = leases.unique("taken", at=2)
    bystander = leases.unique("bystander")

    def create_both(tx: StorageTransaction) -> None:
        tx.create(bystander)
        tx.create(intruder)

    with refused(
        (StorageConflictError, StorageDuplicateMutationError),
        what="the check created a key its attempt never read while a record already existed at that key",
        rule=CREATE_UNREAD,
    ):
        driver.transaction(create_both)
    after = read_one(driver, original.key)
    assert after == before, "a create of an existing key overwrote it"
    assert read_one(driver, bystander.key) is None, "the failed attempt committed another of its writes"


@CREATE_READ_ABSENT
def test_create_of_a_key_read_as_absent_commits(driver: StorageDriver, leases: Leases) -> None:
    written = leases.unique("fresh", at=3)

    def create(tx: StorageTransaction) -> None:
        assert tx.get([written.key]) == [None], (
            "a key this check never wrote must read as absent "
            "(point_reads.absent-keys-read-as-none); this check needs that to test a create after an "
            "absent read, and fails because of it"
        )
        tx.create(written)

    driver.transaction(create)
    stored = read_one(driver, written.key)
    assert stored is not None and stored.document == written.document, differs(
        ("the record created after reading its key as absent"),
        written.document,
        None if stored is None else stored.document,
        "a create of a key read as absent in the same attempt must commit",
    )


@CREATE_READ_ABSENT
def test_create_after_reading_a_deleted_key_as_absent_commits(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("reborn")])
    driver.transaction(lambda tx: tx.delete(tx.get([leases.key("reborn")])[0]))  # type: ignore[arg-type]
    again = leases.unique("reborn", at=9)

    def create(tx: StorageTransaction) -> None:
        assert tx.get([again.key]) == [None], (
            "a key deleted by a committed transaction must read as "
            "absent (point_reads.absent-keys-read-as-none); this check needs that to test a create "
            "after an absent read, and fails because of it"
        )
        tx.create(again)

    driver.transaction(create)
    stored = read_one(driver, again.key)
    assert stored is not None and stored.document == again.document, differs(
        ("the record re-created after reading its deleted key as absent"),
        again.document,
        None if stored is None else stored.document,
        "a create of a key read as absent in the same attempt must commit",
    )


@CREATE_READ_PRESENT
def test_create_of_a_key_read_as_present_is_refused(driver: StorageDriver, leases: Leases) -> None:
    original = leases.unique("present")
    create_all(driver, [original])
    before = read_one(driver, original.key)
    other = leases.unique("other")

    def create(tx: StorageTransaction) -> None:
        (current,) = tx.get([original.key])
        assert current is not None, missing(
            ("the original record"), written="the check created it before this attempt"
        )
        tx.create(other)
        tx.create(leases.unique("present", at=4))

    with refused(
        StorageDuplicateMutationError,
        what="the check created a key its attempt had just read as present",
        rule=CREATE_READ_PRESENT,
    ):
        driver.transaction(create)
    assert read_one(driver, original.key) == before, "the record read as present was overwritten"
    assert read_one(driver, other.key) is None, "the refused attempt committed another of its writes"


# -- exact replace and delete ------------------------------------------------------------------------


@EXACT_REPLACE
def test_replace_of_the_record_read_in_this_attempt_commits(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("subject", at=1)])
    before = read_one(driver, leases.key("subject"))
    assert before is not None, missing("the subject record", written="the check created it just before")
    replacement = leases.unique("subject", at=2)
    driver.transaction(lambda tx: tx.replace(tx.get([replacement.key])[0], replacement))  # type: ignore[arg-type]
    after = read_one(driver, replacement.key)
    assert after is not None and after.document == replacement.document, "the replacement did not commit"
    assert after.version != before.version, "a committed replacement must carry a new version"


@EXACT_REPLACE
def test_replace_of_a_record_not_read_in_this_attempt_is_refused(
    driver: StorageDriver, leases: Leases
) -> None:
    create_all(driver, [leases.unique("fenced", at=1)])
    earlier = read_one(driver, leases.key("fenced"))
    assert earlier is not None, missing("the fenced record", written="the check created it just before")
    with refused(
        StorageKeyChangeError,
        what="the check replaced a record read in an earlier attempt, not in the replacing one",
        rule=EXACT_REPLACE,
    ):
        driver.transaction(lambda tx: tx.replace(earlier, leases.unique("fenced", at=2)))
    assert read_one(driver, earlier.key) == earlier, "a replace of an unread record committed"


@EXACT_REPLACE
def test_replace_of_a_stale_version_is_refused(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("stale", at=1)])
    old = read_one(driver, leases.key("stale"))
    assert old is not None, missing("the stale record", written="the check created it just before")
    driver.transaction(lambda tx: tx.replace(tx.get([old.key])[0], leases.unique("stale", at=2)))  # type: ignore[arg-type]
    current = read_one(driver, old.key)

    def replace_stale(tx: StorageTransaction) -> None:
        (fresh,) = tx.get([old.key])
        assert fresh is not None and fresh.version != old.version, (
            "the record was replaced before this attempt, so it must read the new version, not "
            f"{old.version.value} "
            f"again; read {fresh!r}"
        )
        tx.replace(old, leases.unique("stale", at=3))

    with refused(
        StorageKeyChangeError,
        what="the check replaced an old version of a record after its attempt had read the newer one",
        rule=EXACT_REPLACE,
    ):
        driver.transaction(replace_stale)
    assert read_one(driver, old.key) == current, "a replace of a stale version committed"


@EXACT_DELETE
def test_delete_of_the_record_read_in_this_attempt_removes_it(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("doomed")])
    driver.transaction(lambda tx: tx.delete(tx.get([leases.key("doomed")])[0]))  # type: ignore[arg-type]
    assert read_one(driver, leases.key("doomed")) is None, "the delete did not commit"


@EXACT_DELETE
def test_delete_of_a_record_not_read_in_this_attempt_is_refused(
    driver: StorageDriver, leases: Leases
) -> None:
    create_all(driver, [leases.unique("kept")])
    earlier = read_one(driver, leases.key("kept"))
    assert earlier is not None, missing("the kept record", written="the check created it just before")
    with refused(
        StorageKeyChangeError,
        what="the check deleted a record read in an earlier attempt, not in the deleting one",
        rule=EXACT_DELETE,
    ):
        driver.transaction(lambda tx: tx.delete(earlier))
    assert read_one(driver, earlier.key) == earlier, "a delete of an unread record committed"


@EXACT_DELETE
def test_delete_of_a_stale_version_is_refused(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("moving", at=1)])
    old = read_one(driver, leases.key("moving"))
    assert old is not None, missing("the moving record", written="the check created it just before")
    driver.transaction(lambda tx: tx.replace(tx.get([old.key])[0], leases.unique("moving", at=2)))  # type: ignore[arg-type]
    current = read_one(driver, old.key)

    def delete_stale(tx: StorageTransaction) -> None:
        tx.get([old.key])
        tx.delete(old)

    with refused(
        StorageKeyChangeError,
        what="the check deleted an old version of a record after its attempt had read the newer one",
        rule=EXACT_DELETE,
    ):
        driver.transaction(delete_stale)
    assert read_one(driver, old.key) == current, "a delete of a stale version committed"


# -- one mutation per key, no key change ---------------------------------------------------------------


def _second_mutations(leases: Leases) -> dict[str, object]:
    def replace_then_delete(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("twice")])
        assert current is not None, missing(
            ("the record twice"), written="the check created it before this attempt"
        )
        tx.replace(current, leases.unique("twice", at=2))
        tx.delete(current)

    def delete_then_replace(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("twice")])
        assert current is not None, missing(
            ("the record twice"), written="the check created it before this attempt"
        )
        tx.delete(current)
        tx.replace(current, leases.unique("twice", at=3))

    def replace_twice(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("twice")])
        assert current is not None, missing(
            ("the record twice"), written="the check created it before this attempt"
        )
        tx.replace(current, leases.unique("twice", at=4))
        tx.replace(current, leases.unique("twice", at=5))

    def delete_then_create(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("twice")])
        assert current is not None, missing(
            ("the record twice"), written="the check created it before this attempt"
        )
        tx.delete(current)
        tx.create(leases.unique("twice", at=6))

    def replace_then_create(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("twice")])
        assert current is not None, missing(
            ("the record twice"), written="the check created it before this attempt"
        )
        tx.replace(current, leases.unique("twice", at=7))
        tx.create(leases.unique("twice", at=8))

    def create_twice(tx: StorageTransaction) -> None:
        tx.create(leases.unique("new-twice", at=1))
        tx.create(leases.unique("new-twice", at=2))

    def read_absent_create_twice(tx: StorageTransaction) -> None:
        assert tx.get([leases.key("new-twice")]) == [None], (
            "a key this check never wrote must read as absent (point_reads.absent-keys-read-as-none); "
            "this check needs that to test a create after an absent read, and fails because of it"
        )
        tx.create(leases.unique("new-twice", at=1))
        tx.create(leases.unique("new-twice", at=2))

    return {
        "replace-then-delete": replace_then_delete,
        "delete-then-replace": delete_then_replace,
        "replace-twice": replace_twice,
        "delete-then-create": delete_then_create,
        "replace-then-create": replace_then_create,
        "create-twice": create_twice,
        "read-absent-create-twice": read_absent_create_twice,
    }


@ONE_PER_KEY
@pytest.mark.parametrize(
    "shape",
    [
        "replace-then-delete",
        "delete-then-replace",
        "replace-twice",
        "delete-then-create",
        "replace-then-create",
        "create-twice",
        "read-absent-create-twice",
    ],
)
def test_a_second_mutation_of_one_key_is_refused(driver: StorageDriver, leases: Leases, shape: str) -> None:
    create_all(driver, [leases.unique("twice", at=1)])
    before = read_one(driver, leases.key("twice"))
    callback = _second_mutations(leases)[shape]
    with refused(
        StorageDuplicateMutationError,
        what=f"the check mutated one key twice in one attempt ({shape})",
        rule=ONE_PER_KEY,
    ):
        driver.transaction(callback)  # type: ignore[arg-type]
    assert read_one(driver, leases.key("twice")) == before, f"{shape}: the refused attempt changed the record"
    assert read_one(driver, leases.key("new-twice")) is None, f"{shape}: the refused attempt created a record"


def _elsewhere(leases: Leases, change: str) -> NewStorageRecord:
    """A record whose key differs from the lease home's only in ``change``: its name, its environment (the
    partition), or its table. The last is a completion-wait marker for a run named home, which has the
    same id components as the lease: a driver matching the row to update by id alone accepts it."""
    if change == "name":
        return leases.unique("elsewhere", at=1)
    if change == "partition":
        return leases.record("home", at=1, environment=f"{leases.environment}-other")
    other = build_storage_record(
        StorageTableName.RUN_COMPLETION_WAIT_PRESENCE,
        {"environment": leases.environment, "sourceRunId": "home", "createdAt": expiry(0)},
    )
    assert other.key.id == leases.key("home").id and other.key.table is not StorageTableName.LEASES, (
        "the check built its other-table record under another id (a fault in the check, not the driver)"
    )
    return other


@NO_KEY_CHANGE
@pytest.mark.parametrize("change", ["name", "partition", "table"])
def test_a_replacement_cannot_change_the_key(driver: StorageDriver, leases: Leases, change: str) -> None:
    create_all(driver, [leases.unique("home", at=1)])
    before = read_one(driver, leases.key("home"))
    other = _elsewhere(leases, change)

    def move(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("home")])
        assert current is not None, missing(
            ("the record home"), written="the check created it before this attempt"
        )
        tx.replace(current, other)

    with refused(
        StorageKeyChangeError,
        what=f"the check replaced the record home with a record of another {change} (another key)",
        rule=NO_KEY_CHANGE,
    ):
        driver.transaction(move)
    assert read_one(driver, leases.key("home")) == before, differs(
        f"the record home after a replace that tried to change its {change} was refused",
        before,
        read_one(driver, leases.key("home")),
        "a refused replace must leave the record unchanged",
    )
    assert read_one(driver, other.key) is None, (
        f"a replace that tried to move home to another {change} was refused, yet a record exists at the "
        "new key: a refused attempt must commit nothing"
    )


# -- index movement ----------------------------------------------------------------------------------


@INDEX_MOVED
def test_replace_moves_the_index_entry_in_the_same_commit(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("mover", at=10), leases.unique("neighbour", at=15)])
    _only(driver, leases, "mover", 10)
    driver.transaction(lambda tx: tx.replace(tx.get([leases.key("mover")])[0], leases.unique("mover", at=20)))  # type: ignore[arg-type]
    _only(driver, leases, "mover", 20)
    _only(driver, leases, "neighbour", 15)
    stored = read_one(driver, leases.key("mover"))
    assert stored is not None and {entry.sort for entry in stored.indexes} == {leases.sort(20)}, differs(
        ("the index sorts of the replaced record"),
        {leases.sort(20)},
        None if stored is None else {entry.sort for entry in stored.indexes},
        "a replace stores the new record's index entries and drops the old ones",
    )


@INDEX_MOVED
def test_replace_that_leaves_an_index_removes_the_entry(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("released", at=10)])
    driver.transaction(
        lambda tx: tx.replace(
            tx.get([leases.key("released")])[0],  # type: ignore[arg-type]
            leases.record("released", at=10, holder=None),
        )
    )

    def left() -> None:
        for label, pairs in (
            ("driver.query", query_pairs(driver, leases.query())),
            ("query_candidates", query_candidates_pairs(driver, leases.query())),
        ):
            assert pairs == [], f"{label} still lists a record whose replacement left the index: {pairs}"

    until_indexed(driver, left)  # an eventual index may show the removal late, but must show it
    driver.transaction(
        lambda tx: tx.replace(tx.get([leases.key("released")])[0], leases.unique("released", at=30))  # type: ignore[arg-type]
    )
    _only(driver, leases, "released", 30)


def _waiting_run(environment: str, **changes: object) -> NewStorageRecord:
    """A waiting child run, listed by all four run indexes (status, creation, parent, awaited source)."""
    value: dict[str, object] = {
        "environment": environment,
        "runId": "run-2",
        "workflow": "billing",
        "status": "waiting",
        "input": {"amount": 10},
        "output": None,
        "error": None,
        "parentRunId": "run-1",
        "waitingForRunId": "run-3",
        "createdAt": expiry(5),
        "updatedAt": expiry(9),
        "completedAt": None,
        "tombstonedAt": None,
        "counts": {"events": "0", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"},
    }
    value.update(changes)
    return build_storage_record(StorageTableName.RUNS, value)


@INDEX_MOVED
def test_replace_moves_the_entries_of_every_index(driver: StorageDriver, leases: Leases) -> None:
    """A run listed by four indexes changes every sort value and leaves one index: each index shows exactly
    the new entries right after the commit (a driver updating only the main index fails this)."""
    before = _waiting_run(leases.environment)
    after = _waiting_run(
        leases.environment,
        status="running",
        waitingForRunId=None,
        parentRunId="run-9",
        createdAt=expiry(86_405),
        updatedAt=expiry(86_409),
    )
    create_all(driver, [before])

    def move(tx: StorageTransaction) -> None:
        (current,) = tx.get([before.key])
        assert current is not None, missing("the waiting run", written="the check created it")
        tx.replace(current, after)

    driver.transaction(move)
    indexes = sorted({entry.index for entry in (*before.indexes, *after.indexes)})
    expected = {
        index: [(after.key, entry.sort) for entry in after.indexes if entry.index is index]
        for index in indexes
    }

    def moved() -> None:
        for index in indexes:
            command = QueryRecordsCommand(index, leases.environment, driver.profile.limits.max_query_results)
            got = query_pairs(driver, command)
            assert got == expected[index], differs(
                f"index {index.value} after the run was replaced",
                expected[index],
                got,
                f"{INDEX_MOVED.id}: {INDEX_MOVED.summary}",
            )

    until_indexed(driver, moved)


@INDEX_MOVED
@with_plain_hypothesis_errors("this property")
@given(moves=st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=6))
def test_index_follows_every_replacement(driver: StorageDriver, moves: list[int]) -> None:
    leases = leases_for(driver, "env", 12)
    create_all(driver, [leases.unique("walker", at=moves[0])])
    _only(driver, leases, "walker", moves[0])
    for at in moves[1:]:
        driver.transaction(
            lambda tx, at=at: tx.replace(tx.get([leases.key("walker")])[0], leases.unique("walker", at=at))  # type: ignore[misc]
        )
        _only(driver, leases, "walker", at)


@INDEX_REMOVED
def test_delete_removes_the_index_entry_in_the_same_commit(driver: StorageDriver, leases: Leases) -> None:
    create_all(driver, [leases.unique("gone", at=10), leases.unique("stays", at=11)])
    driver.transaction(lambda tx: tx.delete(tx.get([leases.key("gone")])[0]))  # type: ignore[arg-type]
    expected = [(leases.key("stays"), leases.sort(11))]

    def removed() -> None:
        assert query_pairs(driver, leases.query()) == expected, "driver.query still lists the deleted record"
        assert query_candidates_pairs(driver, leases.query()) == expected, (
            "query_candidates still lists the deleted record"
        )

    until_indexed(driver, removed)  # an eventual index may show the removal late, but must show it


@INDEX_REMOVED
def test_delete_removes_the_entries_of_every_index_a_record_has(driver: StorageDriver) -> None:
    """Records of every table (runs carry up to four indexes): each delete drops every entry, not only
    the record's first or main index."""
    records = catalog_records()
    create_all(driver, records)
    limits = driver.profile.limits
    # Each delete point-reads its record first, so a group is bounded by max_point_reads too.
    reads = max(1, limits.max_point_reads)
    groups = [batch[i : i + reads] for batch in batches(records, limits) for i in range(0, len(batch), reads)]
    for group in groups:

        def delete_group(tx: StorageTransaction, group: list[NewStorageRecord] = group) -> None:
            for record, found in zip(group, tx.get([record.key for record in group]), strict=True):
                assert found is not None, missing(f"record {record.key.id!r}", written="the check created it")
                tx.delete(found)

        driver.transaction(delete_group)
    scopes = sorted({(entry.index, entry.partition) for record in records for entry in record.indexes})

    def removed() -> None:
        for index, partition in scopes:
            command = QueryRecordsCommand(index, partition, driver.profile.limits.max_query_results)
            left = [(item.key.id, item.sort) for item in driver.query(command).items]
            assert not left, (
                f"every record was deleted, yet index {index.value} in partition {partition!r} still lists "
                f"{left}: {INDEX_REMOVED.id}: {INDEX_REMOVED.summary}"
            )

    until_indexed(driver, removed)


# -- rollback ------------------------------------------------------------------------------------------


#: Creates staged beside a replace and a delete: one before them and, where the attempt has room, one after.
CREATES_BESIDE_TWO = records(2, beside=2)


@ROLLBACK
@CREATES_BESIDE_TWO.mark
def test_a_raising_callback_leaves_no_staged_write_visible(driver: StorageDriver, leases: Leases) -> None:
    second = CREATES_BESIDE_TWO.of(driver) > 1
    create_all(driver, [leases.unique("replaced", at=1), leases.unique("deleted", at=2)])
    before = read(driver, [leases.key("replaced"), leases.key("deleted")])
    index_before = query_pairs(driver, leases.query())
    raised = Boom("callback failed after staging writes")

    def stage_then_raise(tx: StorageTransaction) -> None:
        replaced, deleted = tx.get([leases.key("replaced"), leases.key("deleted")])
        assert replaced is not None and deleted is not None, missing(
            ("the records replaced and deleted"), written="the check created both before this attempt"
        )
        tx.create(leases.unique("created-a", at=3))
        tx.replace(replaced, leases.unique("replaced", at=4))
        tx.delete(deleted)
        if second:
            tx.create(leases.unique("created-b", at=5))
        raise raised

    with refused(
        Boom,
        what=f"the callback staged a create, a replace, a delete{' and another create' if second else ''}, "
        "then raised",
        accepted="driver.transaction() returned normally (the callback's exception never reached the caller)",
        rule=ROLLBACK,
    ) as caught:
        driver.transaction(stage_then_raise)
    assert caught.value is raised, "the callback's own exception must propagate unchanged"
    after = read(driver, [leases.key(n) for n in ("replaced", "deleted", "created-a", "created-b")])
    assert after[:2] == before, "a replace or delete of the raising attempt became visible"
    assert after[2:] == [None, None], "a create of the raising attempt became visible"
    if _strong(driver):
        assert query_pairs(driver, leases.query()) == index_before, "the raising attempt changed the index"


@ROLLBACK
@with_plain_hypothesis_errors("this property")
@given(
    plan=st.lists(st.sampled_from(["create", "replace", "delete"]), min_size=1, max_size=8),
)
def test_no_subset_of_staged_writes_survives_a_raising_callback(
    driver: StorageDriver, plan: list[str]
) -> None:
    # The attempt reads every key it writes: no more keys than one attempt may read and touch.
    limits = driver.profile.limits
    plan = plan[: min(limits.max_point_reads, limits.max_transaction_records)]
    leases = leases_for(driver, "env", 12)
    names = [f"r{i}" for i in range(len(plan))]
    create_all(
        driver,
        [
            leases.unique(name, at=i)
            for i, (name, op) in enumerate(zip(names, plan, strict=True))
            if op != "create"
        ],
    )
    keys = [leases.key(name) for name in names]
    before = read(driver, keys)

    def stage_then_raise(tx: StorageTransaction) -> None:
        current: list[StoredRecord | None] = tx.get(keys)
        for i, (name, op) in enumerate(zip(names, plan, strict=True)):
            record = current[i]
            if op == "create":
                tx.create(leases.unique(name, at=100 + i))
            elif op == "replace":
                assert record is not None, missing(
                    (f"the record {name}"), written="the check created it before this attempt"
                )
                tx.replace(record, leases.unique(name, at=200 + i))
            else:
                assert record is not None, missing(
                    (f"the record {name}"), written="the check created it before this attempt"
                )
                tx.delete(record)
        raise Boom("after staging")

    with refused(
        Boom,
        what=f"the callback staged {', '.join(plan)} (in that order), then raised",
        accepted="driver.transaction() returned normally (the callback's exception never reached the caller)",
        rule=ROLLBACK,
    ):
        driver.transaction(stage_then_raise)
    assert read(driver, keys) == before, f"a staged write of the raising attempt became visible (plan {plan})"


# -- no partially applied batch ------------------------------------------------------------------------


#: The batch's blind creates beside its replace and delete: b2, the key another instance takes, and
#: around it b1 and b3 where the attempt has room for them.
RACED_CREATES = records(3, beside=2)


@NO_PARTIAL_BATCH
@RACED_CREATES.mark
def test_a_create_that_loses_its_race_takes_the_whole_batch_with_it(
    driver: StorageDriver, other_driver: StorageDriver, leases: Leases
) -> None:
    """Blind creates (three where the attempt has room), a replace and a delete; another instance takes
    the key of one of the creates (b2).

    A driver that groups the writes into bulk statements must still apply all of them or none: an
    insert that skips existing keys, or groups committed one after another, leave part of the batch.
    Every serializable outcome is accepted: the other instance waits and loses, or this attempt is
    replayed (it then reads the taken key and leaves it alone), or the transaction fails with nothing
    of it stored.
    """
    create_all(driver, [leases.record("r", holder="h0"), leases.record("d", holder="h0")])
    before_r = read_one(driver, leases.key("r"))
    names = {1: ["b2"], 2: ["b1", "b2"]}.get(RACED_CREATES.of(driver), ["b1", "b2", "b3"])
    attempts = Attempts()
    competitor: list[Competitor[None]] = []

    def take_b2(tx: StorageTransaction) -> None:
        (current,) = tx.get([leases.key("b2")])
        if current is None:
            tx.create(leases.record("b2", holder="other"))

    def batch(tx: StorageTransaction) -> int:
        number = attempts.begin(tx)
        keys = [leases.key("r"), leases.key("d")] + ([leases.key("b2")] if number > 1 else [])
        found = tx.get(keys)
        r, d = found[0], found[1]
        assert r is not None and d is not None, missing("leases r and d", written="the check created both")
        for name in names:
            if name == "b2" and number > 1 and found[2] is not None:
                continue  # a replay sees the key taken and leaves it to its owner
            tx.create(leases.record(name, holder=f"t1-{number}"))
        tx.replace(r, leases.record("r", holder=f"t1-{number}"))
        tx.delete(d)
        if number == 1:
            competitor.append(compete(lambda: other_driver.transaction(take_b2)))
        return number

    try:
        outcome: object = driver.transaction(batch)
    except StorageConflictError as error:
        outcome = error
    competitor[0].settle()
    final = {name: read_one(driver, leases.key(name)) for name in [*names, "r", "d"]}
    seen = {name: None if record is None else holder(record) for name, record in final.items()}
    if isinstance(outcome, StorageConflictError):
        untouched = {name: "other" if name == "b2" else None for name in names} | {"r": "h0", "d": "h0"}
        assert seen == untouched, differs(
            "the store after the batch transaction failed with StorageConflictError",
            "the other creates absent, b2 the other instance's, r and d untouched",
            seen,
            f"a failed transaction commits none of its writes ({NO_PARTIAL_BATCH.id})",
        )
        assert final["r"] == before_r, "lease r changed although the batch transaction failed"
        return
    assert isinstance(outcome, int), f"the batch transaction returned {outcome!r}, not an attempt number"
    if outcome == 1 and competitor[0].finished_while_open:
        raise AssertionError(
            "another instance created b2 while the batch attempt was open, and the batch attempt still "
            f"committed in one attempt, reported as done; the store now holds {seen!r}. Its create of b2 "
            "could not have succeeded, so the transaction was reported successful with part of its batch "
            f"missing. This breaks {NO_PARTIAL_BATCH.id}: {NO_PARTIAL_BATCH.summary}"
        )
    mine = f"t1-{outcome}"
    expected_b2 = mine if outcome == 1 else "other"
    expected = {name: expected_b2 if name == "b2" else mine for name in names} | {"r": mine, "d": None}
    assert seen == expected, differs(
        f"the store after the batch committed in attempt {outcome}",
        expected,
        seen,
        "the committing attempt's creates, replace and delete all apply, and nothing of an earlier attempt "
        f"({NO_PARTIAL_BATCH.id})",
    )


def _one_run_of_every_table(environment: str) -> list[NewStorageRecord]:
    """A record of every table in ``environment``, every one that names a run naming the same run: a run
    together with its events, steps, outbox messages, links, tombstone and completion-wait marker."""
    from runlane_conformance.contract.errors import StorageError
    from runlane_conformance.contract.json_boundary import thaw_json
    from runlane_conformance.contract.table_definitions import step_token

    made: dict[str, NewStorageRecord] = {}
    for template in catalog_records():
        value: Any = thaw_json(template.document.value)
        if not isinstance(value, dict) or not isinstance(value.get("environment"), str):
            continue
        value["environment"] = environment
        for field in ("runId", "sourceRunId"):
            if isinstance(value.get(field), str):
                value[field] = "run"
        if template.key.table is StorageTableName.STEPS:
            value["token"] = step_token(environment, "run", value["stepName"], int(value["sequence"]))
        try:
            record = build_storage_record(template.key.table, value)
        except (StorageError, ValueError, KeyError, TypeError):
            continue
        made.setdefault(record.key.encoded, record)
    return list(made.values())


@EXACT_DELETE
def test_a_delete_removes_its_record_and_no_record_of_another_table(
    driver: StorageDriver, leases: Leases
) -> None:
    """A delete removes exactly the record it names. A schema with foreign keys (ON DELETE CASCADE from a
    run to its events, steps or markers) or a cleanup trigger removes more: each record here is deleted in
    turn, parents first, and every other one must still read back unchanged."""
    written = _one_run_of_every_table(f"{leases.environment}-cascade")
    assert len({record.key.table for record in written}) >= 8, (
        "too few tables (a fault in the check's vectors)"
    )
    create_all(driver, written)
    parents = (StorageTableName.RUNS, StorageTableName.WAIT_TOKENS, StorageTableName.SCHEDULES)
    order = sorted(written, key=lambda record: (record.key.table not in parents, record.key.encoded))
    remaining = list(order)
    for doomed in order:
        driver.transaction(lambda tx, doomed=doomed: tx.delete(tx.get([doomed.key])[0]))  # type: ignore[misc]
        remaining.remove(doomed)
        found = read(driver, [record.key for record in [doomed, *remaining]])
        assert found[0] is None, f"deleting {doomed.key.table.value} {doomed.key.id!r} did not commit"
        for record, stored in zip(remaining, found[1:], strict=True):
            assert stored is not None and stored.document == record.document, (
                f"deleting {doomed.key.table.value} record {doomed.key.id!r} also "
                f"{'removed' if stored is None else 'changed'} {record.key.table.value} record "
                f"{record.key.id!r}: a delete removes exactly the record it names, whatever other tables "
                f"refer to it ({EXACT_DELETE.id})"
            )
