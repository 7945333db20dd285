"""Wait tokens: one token per idempotency key, counted links, one resolution, exact index mappings.

Core drives tokens through ``runlane_conformance.core.wait_tokens``: create
with a reciprocal owner, link runs (counted on both sides), resolve once by
completion or timeout, and prune only when resolved and unlinked, together
with the exact owner. The driver's part: conditional creates with one
winner, fenced replacements so racing resolutions and links serialize, the
five token index mappings (plus ``TombstonesByPruneAfter`` for the runs
that hold links) moving with every transition, and nothing deleted or
"repaired" behind core's back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from runlane_conformance.catalogue.wait_tokens import (
    BROKEN,
    CREATED,
    LINKS,
    MAPPINGS,
    MODEL,
    ONCE,
    PRUNED,
    RACE,
    TIMEOUT,
    TIMEOUT_BOUNDARY,
)
from runlane_conformance.contract.catalog import StorageIndexName, StorageTableName
from runlane_conformance.contract.errors import StorageConflictError
from runlane_conformance.contract.json_boundary import thaw_json
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.table_definitions import (
    OwnerScope,
    WaitTokenStatus,
    check_reciprocal_idempotency,
    owner_record_key,
    run_record_key,
    tombstone_record_key,
    wait_token_link_record_key,
    wait_token_record_key,
)
from runlane_conformance.contract.values import (
    QueryRecordsResult,
    StorageClockAuthority,
    StorageRecordKey,
    StoredRecord,
)
from runlane_conformance.core.pruning import tombstone_run
from runlane_conformance.core.runs import ChildKind, CoreInvariantError, child_counts, create_run, finish_run
from runlane_conformance.core.wait_tokens import (
    LinkOutcome,
    ResolveOutcome,
    TokenPruneOutcome,
    complete_wait_token,
    create_wait_token,
    due_wait_tokens,
    link_run,
    prune_wait_token,
    time_out_wait_token,
)
from runlane_conformance.fixtures.convergence import (
    forget_instance,
    indexes_are_eventual,
    register_instance,
    until_indexed,
    until_store_indexed,
)
from runlane_conformance.fixtures.hypothesis_profiles import machine_settings
from runlane_conformance.fixtures.interleave import Competitor
from runlane_conformance.harness import DriverHarness
from runlane_conformance.suites._hypothesis_support import (
    CountedMachine,
    SearchBudget,
    plain_hypothesis_errors,
    record_machine,
    searches,
)
from runlane_conformance.suites._lifecycle_support import (
    fresh_environment,
    index_scan,
    make_token,
    owner_key_of,
    prune_fully,
    read_all,
    start_rival,
    stored_entries,
    token_spec,
)
from runlane_conformance.suites._messages import missing, refused
from runlane_conformance.suites._retries_support import transact_with_retries


def _now(driver: StorageDriver) -> datetime:
    return driver.transaction(lambda tx: tx.now())


def _token(driver: StorageDriver, env: str, token: str) -> dict[str, Any] | None:
    [record] = read_all(driver, [wait_token_record_key(env, token)])
    return None if record is None else dict(record.document.to_json()["value"])  # type: ignore[arg-type]


def _runs(driver: StorageDriver, env: str, *run_ids: str) -> None:
    for run_id in run_ids:
        driver.transaction(lambda tx, run_id=run_id: create_run(tx, env, run_id))  # type: ignore[misc]


@CREATED
def test_a_token_and_its_owner_commit_together_and_name_each_other(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    spec = token_spec(env, "tok", "creator")
    assert make_token(driver, spec) == "tok", "creating a wait token on a fresh key must return its id 'tok'"
    token, owner = read_all(other_driver, [spec.key, spec.owner_key])
    assert token is not None and owner is not None, "the token or its owner is missing on another instance"
    check_reciprocal_idempotency(token.document.value, owner.document.value)
    assert token.document.value["status"] == WaitTokenStatus.PENDING.value, (
        "a freshly created wait token must be stored as pending"
    )


@CREATED
def test_two_creations_with_one_key_racing_on_two_instances_leave_one_token(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    mine_spec = token_spec(env, "mine", "creator")
    theirs_spec = type(mine_spec)(env, "theirs", "creator", mine_spec.idempotency_key)

    started: list[Competitor[str]] = []

    def callback(tx: StorageTransaction) -> str:
        owner, token = tx.get([mine_spec.owner_key, mine_spec.key])
        if not started:
            started.append(start_rival(other_driver, lambda t: create_wait_token(t, theirs_spec)))
        if owner is not None:
            return str(owner.document.value["targetId"])
        assert token is None, (
            "the owner record was absent but the token record exists: a token and its owner are "
            "created together, in one commit (wait_tokens.created-with-reciprocal-owner)"
        )
        return _create_after_reads(tx, mine_spec)

    first = transact_with_retries(driver, callback, started)
    second = started[0].settle()
    assert first == second, f"the racing creators were told {first!r} and {second!r}: one key, one token"
    tokens = read_all(other_driver, [mine_spec.key, theirs_spec.key])
    assert sum(record is not None for record in tokens) == 1, "racing creations with one key left two tokens"
    [owner] = read_all(other_driver, [mine_spec.owner_key])
    assert owner is not None and owner.document.value["targetId"] == first, "the owner names another token"


def _create_after_reads(tx: StorageTransaction, spec: Any) -> str:
    """The write half of ``create_wait_token`` for an attempt that already read the owner and token keys."""
    at = tx.now()
    tx.create(build_storage_record("wait_tokens", spec.token_value(at)))
    tx.create(build_storage_record("owners", spec.owner_value(at)))
    return str(spec.token_id)


@LINKS
def test_links_are_counted_on_the_token_and_on_each_run(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    _runs(driver, env, "creator", "w1", "w2")
    make_token(driver, token_spec(env, "t1", "creator"))
    make_token(driver, token_spec(env, "t2", "creator"))
    for token, run in (("t1", "w1"), ("t1", "w2"), ("t2", "w1")):
        outcome = other_driver.transaction(lambda tx, t=token, r=run: link_run(tx, env, t, r))  # type: ignore[misc]
        assert outcome is LinkOutcome.LINKED, f"linking {run} to {token} returned {outcome}"
    assert driver.transaction(lambda tx: link_run(tx, env, "t1", "w1")) is LinkOutcome.ALREADY_LINKED, (
        "linking a run already linked to the token (by another instance) must report ALREADY_LINKED, "
        "not link it twice"
    )
    _assert_link_counts(other_driver, env, {"t1": 2, "t2": 1}, {"w1": 2, "w2": 1, "creator": 0})


@LINKS
def test_two_runs_linking_one_token_from_two_instances_are_both_counted(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    _runs(driver, env, "creator", "w1", "w2")
    make_token(driver, token_spec(env, "t", "creator"))

    def mine(tx: StorageTransaction) -> LinkOutcome:
        return link_run(tx, env, "t", "w1")

    def theirs(tx: StorageTransaction) -> LinkOutcome:
        return link_run(tx, env, "t", "w2")

    results = _race_after_read(driver, mine, other_driver, theirs)
    for result in results:
        assert result is LinkOutcome.LINKED or isinstance(result, StorageConflictError), (
            f"a link returned {result!r}"
        )
    linked = [
        run for run in ("w1", "w2") if read_all(other_driver, [wait_token_link_record_key(env, "t", run)])[0]
    ]
    assert len(linked) == sum(result is LinkOutcome.LINKED for result in results), f"links stored: {linked}"
    _assert_link_counts(
        other_driver, env, {"t": len(linked)}, {run: 1 if run in linked else 0 for run in ("w1", "w2")}
    )


def _assert_link_counts(
    driver: StorageDriver, env: str, tokens: dict[str, int], runs: dict[str, int]
) -> None:
    for token, expected in tokens.items():
        value = _token(driver, env, token)
        assert value is not None, f"token {token} is missing"
        assert value["linkCount"] == str(expected), (
            f"token {token} counts {value['linkCount']} links, not {expected}"
        )
    for run_id, expected in runs.items():
        [run] = read_all(driver, [run_record_key(env, run_id)])
        assert run is not None, missing(
            f"run {run_id}", written="the check created it and nothing in this check deletes runs"
        )
        counted = child_counts(run)[ChildKind.WAIT_TOKEN_LINKS]
        assert counted == expected, f"run {run_id} counts {counted} token links, not {expected}"


@ONCE
def test_a_second_completion_or_timeout_is_told_it_lost(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    now = _now(driver)
    make_token(driver, token_spec(env, "t", "creator", timeout_at=now - timedelta(minutes=1)))
    _token(other_driver, env, "t")  # both instances have seen it pending
    assert (
        driver.transaction(lambda tx: complete_wait_token(tx, env, "t", {"v": 1})) is ResolveOutcome.RESOLVED
    ), "completing a pending, due token must report RESOLVED"
    [before] = read_all(driver, [wait_token_record_key(env, "t")])
    for label, attempt in (
        ("completion", lambda tx: complete_wait_token(tx, env, "t", {"v": 2})),
        ("timeout", lambda tx: time_out_wait_token(tx, env, "t")),
    ):
        outcome = other_driver.transaction(attempt)
        assert outcome is ResolveOutcome.ALREADY_RESOLVED, (
            f"a second {label} on another instance returned {outcome}"
        )
    [after] = read_all(driver, [wait_token_record_key(env, "t")])
    assert before is not None and after is not None, missing(
        "the wait token", written="the check created it and only resolves it (a resolved token stays stored)"
    )
    assert (after.version, after.document) == (before.version, before.document), (
        "a losing resolution changed it"
    )


@RACE
@pytest.mark.parametrize("first", ["completion", "timeout"])
def test_completion_and_timeout_racing_on_two_instances_have_one_winner(
    driver: StorageDriver, other_driver: StorageDriver, first: str
) -> None:
    env = fresh_environment("tokens")
    make_token(driver, token_spec(env, "t", "creator", timeout_at=_now(driver) - timedelta(minutes=1)))

    def complete(tx: StorageTransaction) -> ResolveOutcome:
        return complete_wait_token(tx, env, "t", {"by": "completion"})

    def time_out(tx: StorageTransaction) -> ResolveOutcome:
        return time_out_wait_token(tx, env, "t")

    mine, theirs = (complete, time_out) if first == "completion" else (time_out, complete)

    results = _race_after_read(driver, mine, other_driver, theirs)
    outcomes = [result for result in results if not isinstance(result, StorageConflictError)]
    for result in outcomes:
        assert not isinstance(result, BaseException), f"a racing resolution raised {result!r}"
    winners = [index for index, result in enumerate(results) if result is ResolveOutcome.RESOLVED]
    assert len(winners) == 1, f"racing resolutions returned {results}: exactly one must win"
    value = _token(other_driver, env, "t")
    assert value is not None and value["status"] == WaitTokenStatus.RESOLVED.value, (
        "the token after one winning resolution must be stored as resolved, seen from another instance"
    )
    winner = first if winners[0] == 0 else ("timeout" if first == "completion" else "completion")
    expected = "completed" if winner == "completion" else "timed_out"
    assert value["resolution"]["outcome"] == expected, (
        f"{winner} won, but the token says {value['resolution']}"
    )


def _race_after_read(
    driver: StorageDriver,
    mine: Callable[[StorageTransaction], Any],
    other: StorageDriver,
    theirs: Callable[[StorageTransaction], Any],
) -> list[Any]:
    """``mine`` on ``driver`` with ``theirs`` started on ``other`` right after ``mine``'s first read."""
    started: list[Competitor[Any]] = []

    class ReadThenRace:
        def __init__(self, tx: StorageTransaction) -> None:
            self._tx = tx

        def __getattr__(self, name: str) -> Any:
            return getattr(self._tx, name)

        def get(self, keys: Any) -> Any:
            found = self._tx.get(keys)
            if not started:
                started.append(start_rival(other, theirs))
            return found

    result: Any
    try:
        result = driver.transaction(lambda tx: mine(ReadThenRace(tx)))
    except StorageConflictError as error:
        result = error
    return [result, started[0].outcome()]


@TIMEOUT
def test_a_token_times_out_only_once_due_and_is_found_through_the_timeout_index(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    now = _now(driver)
    make_token(driver, token_spec(env, "late", "c", timeout_at=now + timedelta(days=1)))
    make_token(driver, token_spec(env, "due", "c", timeout_at=now - timedelta(seconds=1)))
    make_token(driver, token_spec(env, "never", "c"))
    assert (
        other_driver.transaction(lambda tx: time_out_wait_token(tx, env, "late")) is ResolveOutcome.NOT_DUE
    ), "a token whose timeoutAt is a day away is not due: timing it out must report NOT_DUE"
    assert (
        other_driver.transaction(lambda tx: time_out_wait_token(tx, env, "never")) is ResolveOutcome.NOT_DUE
    ), "a token without a timeoutAt never times out: timing it out must report NOT_DUE"

    def due_listed() -> None:
        as_of = _now(other_driver)
        limit = min(10, other_driver.profile.limits.max_query_results)
        page = other_driver.transaction(lambda tx: due_wait_tokens(tx, env, as_of=as_of, limit=limit))
        found = [item.key.id[1] for item in page.items]
        assert found == ["due"], f"WaitTokensByTimeout offers {found} as due, expected only 'due'"

    until_indexed(other_driver, due_listed)
    assert (
        other_driver.transaction(lambda tx: time_out_wait_token(tx, env, "due")) is ResolveOutcome.RESOLVED
    ), "a token whose timeoutAt has passed must time out: RESOLVED"
    for token, status in (("late", "pending"), ("never", "pending"), ("due", "resolved")):
        value = _token(driver, env, token)
        assert value is not None and value["status"] == status, (
            f"token {token} must be {status} after only 'due' was timed out; it is "
            f"{value and value['status']}"
        )


@TIMEOUT_BOUNDARY
def test_with_an_injected_clock_the_timeout_boundary_is_exact(
    driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    # Only a client clock can be steered to the boundary; the plan gates the check off for the others.
    env = fresh_environment("tokens")
    due = _now(driver) + timedelta(hours=1)
    make_token(driver, token_spec(env, "t", "c", timeout_at=due))
    moment = {"now": due - timedelta(microseconds=1)}
    clocked = connect(clock=lambda: moment["now"])
    assert clocked.transaction(lambda tx: time_out_wait_token(tx, env, "t")) is ResolveOutcome.NOT_DUE, (
        "one microsecond before timeoutAt (by the injected clock) the token is not due: NOT_DUE"
    )
    moment["now"] = due

    def due_now_listed() -> None:
        limit = min(10, clocked.profile.limits.max_query_results)
        page = clocked.transaction(lambda tx: due_wait_tokens(tx, env, as_of=due, limit=limit))
        found = [item.key.id[1] for item in page.items]
        assert found == ["t"], (
            f"WaitTokensByTimeout up to and including the token's own timeoutAt offers {found}: a token is "
            "due at its timeoutAt, so the due scan's bound is inclusive"
        )

    until_indexed(clocked, due_now_listed)
    assert clocked.transaction(lambda tx: time_out_wait_token(tx, env, "t")) is ResolveOutcome.RESOLVED, (
        "exactly at timeoutAt (by the injected clock) the token is due: RESOLVED"
    )
    value = _token(driver, env, "t")
    assert value is not None and value["resolvedAt"] == value["timeoutAt"], (
        "a token timed out exactly at its due time must record resolvedAt equal to timeoutAt (the "
        "injected clock's now)"
    )


_MAPPINGS = (
    StorageIndexName.WAIT_TOKENS_BY_TIMEOUT,
    StorageIndexName.WAIT_TOKENS_BY_RUN,
    StorageIndexName.WAIT_TOKENS_BY_STATUS,
    StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN,
    StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN,
    StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER,
)


def _assert_mappings(reader: StorageDriver, env: str, keys: list[StorageRecordKey], step: str) -> None:
    """Every mapping's scan equals the entries the stored records among ``keys`` must carry."""

    def check() -> None:
        records: list[StoredRecord | None] = read_all(reader, keys)
        for index in _MAPPINGS:
            expected = stored_entries(records, index)
            for path, items in index_scan(reader, index, env).items():
                assert items == expected, (
                    f"after {step}: {index.value} via {path} holds {items}, expected {expected}"
                )

    until_indexed(reader, check)


@MAPPINGS
def test_every_token_index_mapping_follows_each_transition(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    _runs(driver, env, "c", "w1", "w2")
    keys = [
        wait_token_record_key(env, "t0"),
        wait_token_record_key(env, "t1"),
        wait_token_record_key(env, "t2"),
        wait_token_link_record_key(env, "t1", "w1"),
        wait_token_link_record_key(env, "t1", "w2"),
        wait_token_link_record_key(env, "t2", "w1"),
        tombstone_record_key(env, "w1"),
    ]
    # A neighbour environment (its name extends this one) with the same token, run and link ids: every
    # mapping of this environment must leave its entries out.
    neighbour = f"{env}x"
    _runs(driver, neighbour, "c", "w1")
    make_token(driver, token_spec(neighbour, "t1", "c", timeout_at=_now(driver) + timedelta(hours=1)))
    driver.transaction(lambda tx: link_run(tx, neighbour, "t1", "w1"))
    make_token(driver, token_spec(env, "t1", "c", timeout_at=_now(driver) + timedelta(hours=1)))
    make_token(driver, token_spec(env, "t2", "w1"))
    # c's second token sorts before t1 by key but after it by creation time: WaitTokensByRun orders a
    # run's tokens by createdAt, so a plan ordering them by run and key shows.
    make_token(driver, token_spec(env, "t0", "c"))
    _assert_mappings(other_driver, env, keys, "creating three tokens")
    for token, run in (("t1", "w1"), ("t1", "w2"), ("t2", "w1")):
        driver.transaction(lambda tx, t=token, r=run: link_run(tx, env, t, r))  # type: ignore[misc]
    _assert_mappings(other_driver, env, keys, "linking three runs")
    assert (
        driver.transaction(lambda tx: complete_wait_token(tx, env, "t1", "ok")) is ResolveOutcome.RESOLVED
    ), "completing pending token t1 must report RESOLVED"
    t1 = _token(other_driver, env, "t1")
    assert t1 is not None and t1["status"] == "resolved", (
        "t1, completed on one instance, must read as resolved on another"
    )
    _assert_mappings(other_driver, env, keys, "completing t1")
    driver.transaction(lambda tx: finish_run(tx, env, "w1"))
    driver.transaction(lambda tx: tombstone_run(tx, env, "w1"))
    _assert_mappings(other_driver, env, keys, "tombstoning w1")
    prune_fully(other_driver, env, "w1")
    assert read_all(driver, [tombstone_record_key(env, "w1")]) == [None], (
        "pruning w1 fully must remove its tombstone"
    )
    _assert_mappings(other_driver, env, keys, "pruning w1 (its links go)")
    assert (
        driver.transaction(lambda tx: complete_wait_token(tx, env, "t2", None)) is ResolveOutcome.RESOLVED
    ), "completing pending token t2 must report RESOLVED"
    assert driver.transaction(lambda tx: prune_wait_token(tx, env, "t2")) is TokenPruneOutcome.PRUNED, (
        "a resolved token whose only linked run was pruned has no links left and must be PRUNED"
    )
    _assert_mappings(other_driver, env, keys, "pruning t2")


@PRUNED
def test_a_token_is_kept_while_pending_or_linked_and_then_goes_with_its_owner(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment("tokens")
    _runs(driver, env, "c", "w")
    spec = token_spec(env, "t", "c")
    make_token(driver, spec)
    # The same idempotency key claimed for a run: a different owner (another scope), which pruning the
    # token must leave alone; only the token's exact owner goes with it.
    run_owner = build_storage_record(
        StorageTableName.OWNERS,
        {
            "environment": env,
            "scope": OwnerScope.RUN.value,
            "idempotencyKey": spec.idempotency_key,
            "targetId": "c",
            "target": {"table": StorageTableName.RUNS.value, "id": [env, "c"]},
            "createdAt": "2030-01-01T00:00:00.000000Z",
        },
    )
    driver.transaction(lambda tx: tx.create(run_owner))
    driver.transaction(lambda tx: link_run(tx, env, "t", "w"))
    assert (
        other_driver.transaction(lambda tx: prune_wait_token(tx, env, "t")) is TokenPruneOutcome.KEPT_PENDING
    ), "a pending token is kept when pruned: KEPT_PENDING"
    driver.transaction(lambda tx: complete_wait_token(tx, env, "t", 1))
    assert (
        other_driver.transaction(lambda tx: prune_wait_token(tx, env, "t")) is TokenPruneOutcome.KEPT_LINKED
    ), "a resolved token that still has a linked run is kept when pruned: KEPT_LINKED"
    driver.transaction(lambda tx: finish_run(tx, env, "w"))
    driver.transaction(lambda tx: tombstone_run(tx, env, "w"))
    prune_fully(driver, env, "w")
    token = _token(other_driver, env, "t")
    assert token is not None and token["linkCount"] == "0", (
        "pruning the last linked run must bring the token's linkCount to 0 "
        "(wait_tokens.links-counted-on-both-sides)"
    )
    assert other_driver.transaction(lambda tx: prune_wait_token(tx, env, "t")) is TokenPruneOutcome.PRUNED, (
        "a resolved token with no links must be PRUNED"
    )
    assert read_all(driver, [spec.key, spec.owner_key]) == [None, None], (
        "the token or its owner survived pruning"
    )
    [kept] = read_all(other_driver, [run_owner.key])
    assert kept is not None and kept.document == run_owner.document, (
        f"pruning token t deleted {run_owner.key}, the run owner of the same idempotency key: only the "
        "token's exact owner (its scope, environment and key) may go with it"
    )
    assert driver.transaction(lambda tx: prune_wait_token(tx, env, "t")) is TokenPruneOutcome.GONE, (
        "pruning a token that is already gone must report GONE"
    )


@PRUNED
def test_a_linked_token_resolved_long_ago_is_still_kept(
    driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    """No time to live on resolved tokens: only core's prune deletes them, once no run links them.

    With a client clock the token is created, linked and completed by an instance whose clock reads 2001
    and pruned from an instance on the current time; other drivers do all of it at their own time.
    """
    env = fresh_environment("tokens")
    client = driver.profile.clock_authority is StorageClockAuthority.CLIENT
    past = connect(clock=lambda: datetime(2001, 1, 1, tzinfo=UTC)) if client else driver
    _runs(past, env, "c", "w")
    spec = token_spec(env, "t", "c")
    make_token(past, spec)
    past.transaction(lambda tx: link_run(tx, env, "t", "w"))
    assert past.transaction(lambda tx: complete_wait_token(tx, env, "t", 1)) is ResolveOutcome.RESOLVED, (
        "completing a pending token must report RESOLVED"
    )
    now = connect()
    token, owner = read_all(now, [spec.key, spec.owner_key])
    assert token is not None and owner is not None, (
        "a resolved token that a run still links (or its owner) vanished without being pruned"
    )
    assert now.transaction(lambda tx: prune_wait_token(tx, env, "t")) is TokenPruneOutcome.KEPT_LINKED, (
        "a resolved token that a run still links is kept when pruned, however long ago it resolved"
    )
    now.transaction(lambda tx: finish_run(tx, env, "w"))
    now.transaction(lambda tx: tombstone_run(tx, env, "w"))
    prune_fully(now, env, "w")
    assert now.transaction(lambda tx: prune_wait_token(tx, env, "t")) is TokenPruneOutcome.PRUNED, (
        "a resolved token with no links left must be PRUNED"
    )
    assert read_all(driver, [spec.key, spec.owner_key]) == [None, None], (
        "the token or its owner survived pruning"
    )


@BROKEN
@pytest.mark.parametrize("damage", ["missing-owner", "foreign-owner"])
def test_a_token_with_a_broken_owner_is_reported_and_left_in_place(
    driver: StorageDriver, other_driver: StorageDriver, damage: str
) -> None:
    env = fresh_environment("tokens")
    spec = token_spec(env, "t", "c")
    make_token(driver, spec)
    driver.transaction(lambda tx: complete_wait_token(tx, env, "t", None))
    if damage == "missing-owner":
        driver.transaction(lambda tx: tx.delete(tx.get([spec.owner_key])[0]))  # type: ignore[arg-type]
    else:
        other = token_spec(env, "other", "c")
        make_token(driver, other)

        def swap(tx: StorageTransaction) -> None:
            [owner] = tx.get([spec.owner_key])
            assert owner is not None, missing(
                "the token's owner record", written="the check created the token and its owner just before"
            )
            value = dict(owner.document.to_json()["value"])  # type: ignore[arg-type]
            value.update(targetId="other", target={"table": "wait_tokens", "id": [env, "other"]})
            tx.replace(owner, build_storage_record("owners", value))

        driver.transaction(swap)
    before = read_all(other_driver, [spec.key, spec.owner_key, owner_key_of(env, "other")])
    with refused(
        CoreInvariantError,
        what=f"the check pruned a completed token whose owner record is broken ({damage})",
        accepted="the prune went ahead without an invariant failure (the driver showed core a consistent "
        "token and owner, or core's error never reached the caller)",
        rule=BROKEN,
    ) as caught:
        other_driver.transaction(lambda tx: prune_wait_token(tx, env, "t"))
    assert caught.value.rule == "reciprocal-owner", (
        "a broken owner must be reported with the rule 'reciprocal-owner' (and left alone, not repaired)"
    )
    after = read_all(driver, [spec.key, spec.owner_key, owner_key_of(env, "other")])
    assert after == before, f"a failed prune changed the records: before {before}, after {after}"


# -- random histories --------------------------------------------------------------------------------


MAX_HISTORIES, MAX_RUNS, MAX_TOKENS, MAX_STEPS = 150, 3, 4, 16


@dataclass
class _ModelToken:
    key: str
    timeout: str | None  # "past", "future" or None
    status: str = "pending"  # pending | completed | timed_out
    links: set[str] = field(default_factory=set)
    exists: bool = True


class WaitTokenMachine(CountedMachine):
    """Core's wait-token flow on a fresh store per example, compared with a small model after every step."""

    harness: DriverHarness

    def __init__(self) -> None:
        super().__init__()
        self.store = self.harness.open_store()
        self.drivers = (self.store.connect(), self.store.connect())
        for instance in self.drivers:
            register_instance(instance, self.store)
        self.env = "tokens-model"
        self.now = _now(self.drivers[0])
        self.runs: dict[str, bool] = {}  # run id -> still visible
        self.tokens: dict[str, _ModelToken] = {}

    def teardown(self) -> None:
        for instance in self.drivers:
            forget_instance(instance)
            instance.close()
        self.store.close()

    def _live(self) -> list[str]:
        return sorted(token for token, model in self.tokens.items() if model.exists)

    def _visible_runs(self) -> list[str]:
        return sorted(run for run, visible in self.runs.items() if visible)

    @precondition(lambda self: len(self.runs) < MAX_RUNS)
    @rule()
    def new_run(self) -> None:
        run_id = f"r{len(self.runs)}"
        self.drivers[0].transaction(lambda tx: create_run(tx, self.env, run_id))
        self.runs[run_id] = True

    @precondition(lambda self: len(self.tokens) < MAX_TOKENS)
    @rule(data=st.data(), timeout=st.sampled_from([None, "past", "future"]), instance=st.integers(0, 1))
    def create_token(self, data: st.DataObject, timeout: str | None, instance: int) -> None:
        token_id = f"t{len(self.tokens)}"
        keys = sorted({model.key for model in self.tokens.values()})
        key = data.draw(st.sampled_from([*keys, f"k{len(self.tokens)}"]), label="idempotency key")
        holder = next((t for t, m in self.tokens.items() if m.key == key and m.exists), None)
        at = {None: None, "past": self.now - timedelta(hours=1), "future": self.now + timedelta(days=1)}[
            timeout
        ]
        spec = type(token_spec(self.env, token_id, "c"))(self.env, token_id, "c", key, at)
        returned = self.drivers[instance].transaction(lambda tx: create_wait_token(tx, spec))
        if holder is not None:
            assert returned == holder, (
                f"key {key} is held by {holder}, but creating {token_id} returned {returned}"
            )
            self.tokens[token_id] = _ModelToken(key, timeout, exists=False)  # never created
        else:
            assert returned == token_id, f"a fresh key created {returned}, not {token_id}"
            self.tokens[token_id] = _ModelToken(key, timeout)

    @precondition(lambda self: any(m.exists for m in self.tokens.values()) and any(self.runs.values()))
    @rule(data=st.data())
    def link(self, data: st.DataObject) -> None:
        token = data.draw(st.sampled_from(self._live()), label="token")
        run = data.draw(st.sampled_from(self._visible_runs()), label="run")
        outcome = self.drivers[1].transaction(lambda tx: link_run(tx, self.env, token, run))
        expected = LinkOutcome.ALREADY_LINKED if run in self.tokens[token].links else LinkOutcome.LINKED
        assert outcome is expected, f"linking {run} to {token} returned {outcome}, expected {expected}"
        self.tokens[token].links.add(run)

    @precondition(lambda self: any(m.exists for m in self.tokens.values()))
    @rule(data=st.data(), instance=st.integers(0, 1), how=st.sampled_from(["completion", "timeout"]))
    def resolve(self, data: st.DataObject, instance: int, how: str) -> None:
        token = data.draw(st.sampled_from(self._live()), label="token")
        model = self.tokens[token]
        if how == "completion":
            outcome = self.drivers[instance].transaction(
                lambda tx: complete_wait_token(tx, self.env, token, token)
            )
        else:
            outcome = self.drivers[instance].transaction(lambda tx: time_out_wait_token(tx, self.env, token))
        if model.status != "pending":
            expected = ResolveOutcome.ALREADY_RESOLVED
        elif how == "timeout" and model.timeout != "past":
            expected = ResolveOutcome.NOT_DUE
        else:
            expected = ResolveOutcome.RESOLVED
            model.status = "completed" if how == "completion" else "timed_out"
        assert outcome is expected, f"{how} of {token} returned {outcome}, expected {expected}"

    @precondition(lambda self: any(m.exists and m.status == "pending" for m in self.tokens.values()))
    @rule(data=st.data())
    def racing_resolutions(self, data: st.DataObject) -> None:
        pending = sorted(t for t, m in self.tokens.items() if m.exists and m.status == "pending")
        token = data.draw(st.sampled_from(pending), label="token")
        model = self.tokens[token]
        results = _race_after_read(
            self.drivers[0],
            lambda tx: complete_wait_token(tx, self.env, token, token),
            self.drivers[1],
            lambda tx: time_out_wait_token(tx, self.env, token),
        )
        won = [index for index, result in enumerate(results) if result is ResolveOutcome.RESOLVED]
        if model.timeout != "past":
            assert won == [0], f"completion against an undue timeout of {token} returned {results}"
        else:
            assert len(won) == 1, f"racing resolutions of {token} returned {results}: exactly one must win"
        model.status = "completed" if won[0] == 0 else "timed_out"

    @precondition(lambda self: any(m.exists for m in self.tokens.values()))
    @rule(data=st.data(), instance=st.integers(0, 1))
    def prune_token(self, data: st.DataObject, instance: int) -> None:
        token = data.draw(st.sampled_from(self._live()), label="token")
        model = self.tokens[token]
        outcome = self.drivers[instance].transaction(lambda tx: prune_wait_token(tx, self.env, token))
        if model.status == "pending":
            expected = TokenPruneOutcome.KEPT_PENDING
        elif model.links:
            expected = TokenPruneOutcome.KEPT_LINKED
        else:
            expected = TokenPruneOutcome.PRUNED
            model.exists = False
        assert outcome is expected, f"pruning {token} returned {outcome}, expected {expected}"

    @precondition(lambda self: any(self.runs.values()))
    @rule(data=st.data())
    def prune_a_run(self, data: st.DataObject) -> None:
        run = data.draw(st.sampled_from(self._visible_runs()), label="run")
        self.drivers[0].transaction(lambda tx: finish_run(tx, self.env, run))
        self.drivers[1].transaction(lambda tx: tombstone_run(tx, self.env, run))
        prune_fully(self.drivers[0], self.env, run)
        self.runs[run] = False
        for model in self.tokens.values():
            model.links.discard(run)

    @rule()
    def reconnect(self) -> None:
        """Replace the second instance with a fresh one: everything must look the same from it."""
        forget_instance(self.drivers[1])
        self.drivers[1].close()
        fresh = self.store.connect()
        register_instance(fresh, self.store)
        self.drivers = (self.drivers[0], fresh)

    def _keys(self) -> list[StorageRecordKey]:
        keys = []
        for token, model in sorted(self.tokens.items()):
            keys += [wait_token_record_key(self.env, token), owner_key_of_key(self.env, model.key)]
            keys += [wait_token_link_record_key(self.env, token, run) for run in sorted(self.runs)]
        keys += [tombstone_record_key(self.env, run) for run in sorted(self.runs)]
        return keys

    @invariant()
    def records_match_the_model(self) -> None:
        reader = self.drivers[1]
        owners_of: dict[str, StoredRecord | None] = {}
        for token, model in sorted(self.tokens.items()):
            record, owner = read_all(
                reader, [wait_token_record_key(self.env, token), owner_key_of_key(self.env, model.key)]
            )
            owners_of[model.key] = owner if owner is not None else owners_of.get(model.key)
            if not model.exists:
                assert record is None, f"token {token} should not exist"
                continue
            assert record is not None, f"token {token} is missing"
            value = record.document.value
            resolution = value["resolution"]
            status = str(value["status"]) if resolution is None else str(thaw_json(resolution)["outcome"])  # type: ignore[index,call-overload]
            assert status == model.status, f"token {token} is {status}, the model says {model.status}"
            assert value["linkCount"] == str(len(model.links)), (
                f"token {token} counts {value['linkCount']} links, the model has {sorted(model.links)}"
            )
            assert owner is not None, f"token {token} has no owner"
            check_reciprocal_idempotency(record.document.value, owner.document.value)
            links = read_all(
                reader, [wait_token_link_record_key(self.env, token, run) for run in sorted(self.runs)]
            )
            present = {run for run, link in zip(sorted(self.runs), links, strict=True) if link is not None}
            assert present == model.links, (
                f"token {token} has links {sorted(present)}, model {sorted(model.links)}"
            )

    @invariant()
    def index_mappings_match_the_records(self) -> None:
        reader = self.drivers[0]
        keys = self._keys()

        def check() -> None:
            records = read_all(reader, keys)
            for index in _MAPPINGS:
                expected = stored_entries(records, index)
                items = index_scan(reader, index, self.env)["query"]
                assert items == expected, f"{index.value} holds {items}, the records carry {expected}"

        until_store_indexed(self.store, check, eventual=indexes_are_eventual(reader))


def owner_key_of_key(environment: str, idempotency_key: str) -> StorageRecordKey:
    return owner_record_key(environment, "wait_token", idempotency_key)


@MODEL
@searches
def test_random_wait_token_histories_match_a_model(runlane_harness: DriverHarness) -> None:
    tally = SearchBudget(seconds=None)
    machine = type(
        "RunlaneWaitTokenMachine", (WaitTokenMachine,), {"harness": runlane_harness, "tally": tally}
    )
    run_machine: Any = run_state_machine_as_test  # typed only in newer Hypothesis releases
    # Histories and steps come from the profile and the seed; the check's deadline only guards hangs.
    try:
        with plain_hypothesis_errors("random wait-token histories"):
            run_machine(machine, settings=machine_settings(MAX_HISTORIES, MAX_STEPS))
    finally:
        record_machine(tally)


def _due_page(
    env: str, instant: datetime, limit: int, cursor: str | None, tx: StorageTransaction
) -> QueryRecordsResult:
    return due_wait_tokens(tx, env, as_of=instant, limit=limit, cursor=cursor)


@TIMEOUT
def test_the_timeout_index_lists_a_token_due_exactly_at_the_instant_asked(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """ "Due at or before" is an inclusive bound, to the microsecond, on ``WaitTokensByTimeout``."""
    env = fresh_environment("tokens")
    instant = _now(driver) + timedelta(days=1)
    for name, offset in (("after", 1), ("exact", 0), ("before", -1)):
        make_token(driver, token_spec(env, name, "c", timeout_at=instant + timedelta(microseconds=offset)))

    def due_listed() -> None:
        # Page through the whole scan: a driver may advertise pages of one result.
        limit = min(10, other_driver.profile.limits.max_query_results)
        found: list[object] = []
        cursor: str | None = None
        for _ in range(4):
            page = other_driver.transaction(functools.partial(_due_page, env, instant, limit, cursor))
            found.extend(item.key.id[1] for item in page.items)
            cursor = page.cursor
            if cursor is None:
                break
        assert found == ["before", "exact"], (
            f"WaitTokensByTimeout offers {found} as due at {instant.isoformat()}; expected the tokens due "
            "one microsecond before and exactly then, in timeout order, and not the one a microsecond later"
        )

    until_indexed(other_driver, due_listed)
