"""Operator reads: the optional read model shows exactly what is committed, no more and no later.

Only drivers offering ``OperatorReadDriver`` (callable ``get_run``,
``list_runs`` and ``list_run_events``) are checked. Runs and events are
written through ordinary transactions on one instance and read through the
operator model on another, so a view that trails the commit, keeps
tombstoned runs, shuffles a history or shares mutable results fails here.

Not checked: that an opaque raw document which does not decode as a
canonical run stays out of the projection. The table codecs refuse to build
such a ``runs`` record (``NewStorageRecord`` validates its document against
the run schema on construction), so no portable check can write one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runlane_conformance.catalogue.operator_reads import (
    CURSOR_SCOPE,
    DEFENSIVE_COPIES,
    HISTORY_ORDER,
    LISTED_ONCE,
    PAGE_LIMIT,
    TOMBSTONE_HIDES,
    VISIBLE_AT_ONCE,
)
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.errors import StorageCursorError, StorageLimitError, StorageLimitName
from runlane_conformance.contract.protocols import StorageDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.table_definitions import (
    OwnerScope,
    RunStatus,
    owner_record_key,
    run_record_key,
)
from runlane_conformance.contract.values import NewStorageRecord
from runlane_conformance.fixtures.interleave import Competitor, compete
from runlane_conformance.fixtures.limit_gates import limit_gated
from runlane_conformance.suites._messages import missing, propagated
from runlane_conformance.suites._operator_support import (
    collect_pages,
    document_of,
    event_record,
    event_value,
    fresh_environment,
    page_of,
    read_keys,
    run_record,
    run_value,
    scribble,
    tombstoned,
    write,
)
from runlane_conformance.suites._retries_support import transact_with_retries

LIMITS = pytest.mark.parametrize("limit", [1, 2, 50], ids=lambda limit: f"limit-{limit}")


def _ops(driver: StorageDriver) -> Any:
    """The driver as an operator read model (the capability gate already proved the methods exist)."""
    return driver


def _get(driver: StorageDriver, environment: str, run_id: str) -> dict[str, Any] | None:
    found = _ops(driver).get_run(environment, run_id)
    return None if found is None else document_of(found)


def _runs(driver: StorageDriver, environment: str, *, limit: int = 50) -> list[dict[str, Any]]:
    limit = min(limit, driver.profile.limits.max_query_results)
    items = collect_pages(
        lambda cursor: _ops(driver).list_runs(environment, limit=limit, cursor=cursor), limit=limit
    )
    return [document_of(item) for item in items]


def _events(driver: StorageDriver, environment: str, run_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
    limit = min(limit, driver.profile.limits.max_query_results)
    items = collect_pages(
        lambda cursor: _ops(driver).list_run_events(environment, run_id, limit=limit, cursor=cursor),
        limit=limit,
    )
    return [document_of(item) for item in items]


def _by_id(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(run["runId"]): run for run in runs}


def _replace(driver: StorageDriver, record: NewStorageRecord, *also: NewStorageRecord) -> None:
    """Replace the record at ``record.key`` and create ``also``, in one commit."""

    def callback(tx: StorageTransaction) -> None:
        [current] = tx.get([record.key])
        assert current is not None, f"{record.key} vanished"
        tx.replace(current, record)
        for extra in also:
            tx.create(extra)

    driver.transaction(callback)


@VISIBLE_AT_ONCE
def test_a_committed_run_and_its_history_are_visible_at_once_on_another_instance(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment()
    assert _get(other_driver, env, "run-1") is None, "a run nobody wrote is visible"
    run = run_value(env, "run-1", note="first", events=3)
    write(
        driver,
        run_record(env, "run-1", note="first", events=3),
        *[event_record(env, "run-1", s) for s in (1, 2, 3)],
    )

    assert _get(other_driver, env, "run-1") == run, "get_run does not show the committed summary at once"
    [stored] = read_keys(other_driver, [run_record_key(env, "run-1")])
    assert stored is not None and _get(other_driver, env, "run-1") == document_of(stored), (
        "get_run and a point read of the canonical record disagree"
    )
    assert _by_id(_runs(other_driver, env)) == {"run-1": run}, "list_runs does not show the committed run"
    assert _events(other_driver, env, "run-1") == [event_value(env, "run-1", s) for s in (1, 2, 3)], (
        "list_run_events on another instance must show the three committed events at once, in order"
    )


@VISIBLE_AT_ONCE
def test_a_run_is_found_only_in_its_own_environment(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """The environment is part of a run's identity: the same run id elsewhere is another run."""
    env, elsewhere = fresh_environment(), fresh_environment()
    write(driver, run_record(env, "run-1", note="here", events=0))
    assert _get(other_driver, elsewhere, "run-1") is None, (
        f"get_run({elsewhere!r}, 'run-1') returned the run-1 of environment {env!r}: a run must be looked "
        "up by its environment and id together"
    )
    write(driver, run_record(elsewhere, "run-1", note="there", events=0))
    assert _get(other_driver, env, "run-1") == run_value(env, "run-1", note="here", events=0), (
        f"with run-1 in two environments, get_run({env!r}, 'run-1') must return that environment's run"
    )
    assert _get(other_driver, elsewhere, "run-1") == run_value(elsewhere, "run-1", note="there", events=0), (
        f"with run-1 in two environments, get_run({elsewhere!r}, 'run-1') must return that environment's run"
    )


@VISIBLE_AT_ONCE
def test_a_committed_change_replaces_the_summary_at_once(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment()
    write(driver, run_record(env, "run-1", note="before", events=1), event_record(env, "run-1", 1))
    assert _get(other_driver, env, "run-1") == run_value(env, "run-1", note="before", events=1), (
        "get_run on another instance must show the committed run at once"
    )

    finished = run_value(env, "run-1", status=RunStatus.SUCCEEDED, note="after", events=2)
    _replace(
        driver,
        run_record(env, "run-1", status=RunStatus.SUCCEEDED, note="after", events=2),
        event_record(env, "run-1", 2),
    )

    assert _get(other_driver, env, "run-1") == finished, "get_run still shows the summary before the commit"
    assert _by_id(_runs(other_driver, env)) == {"run-1": finished}, "list_runs shows a stale summary"
    assert _events(other_driver, env, "run-1") == [event_value(env, "run-1", s) for s in (1, 2)], (
        "list_run_events on another instance must show the two committed events, in order"
    )


class _Abandoned(Exception):
    pass


class _Halted(BaseException):
    """Not an Exception: a rollback written for Exception alone misses it."""


@VISIBLE_AT_ONCE
@pytest.mark.parametrize("path", ["exception", "base-exception", "replayed-attempt"])
def test_work_that_never_committed_never_shows(
    driver: StorageDriver, other_driver: StorageDriver, path: str
) -> None:
    """The projection moves in the commit: an attempt that rolled back or was replayed leaves no trace.

    On the ``replayed-attempt`` path another instance overwrites the fence the first attempt has just
    read. Three outcomes are serializable, and each is judged by what the reads then show:

    * the competitor commits while the first attempt is open (an optimistic driver): the first attempt
      must be replayed, and the run only it staged (``ghost``) must never show;
    * the driver makes the competitor wait until the first attempt has ended (a lock on the fence or
      on the whole store): the first attempt may commit, and then its ghost run is committed and must
      show with its event like any other;
    * the driver rolls the first attempt back and replays it after the competitor: the ghost must
      never show.

    The check never waits inside the open attempt for a competitor the driver may rightly block: it
    gives the competitor a bounded chance to finish there, and collects it once the attempt has ended.
    """
    env = fresh_environment()
    write(driver, run_record(env, "fence", note="v0"))
    attempts: list[int] = []
    started: list[Competitor[None]] = []

    def bump() -> None:
        _replace(other_driver, run_record(env, "fence", note="theirs"))

    def callback(tx: StorageTransaction) -> None:
        attempts.append(len(attempts) + 1)
        [fence] = tx.get([run_record_key(env, "fence")])
        assert fence is not None, missing("the fence run", written="the check created it before this attempt")
        if path == "replayed-attempt" and not started:
            started.append(compete(bump))
        if len(attempts) == 1:
            tx.create(run_record(env, "ghost", note="uncommitted", events=1))
            tx.create(event_record(env, "ghost", 1))
        tx.replace(fence, run_record(env, "fence", note=f"attempt-{len(attempts)}"))
        if path == "exception":
            raise _Abandoned
        if path == "base-exception":
            raise _Halted

    ghost_committed = False
    seen = ""
    if path == "replayed-attempt":
        transact_with_retries(driver, callback, started)
        ran_inside = started[0].finished_while_open
        started[0].settle()  # a competitor the driver made wait commits now that the attempt has ended
        ghost_committed = len(attempts) == 1
        competitor = (
            "finished while the first attempt was open"
            if ran_inside
            else "was still waiting when the first attempt ended"
        )
        ran = f"{len(attempts)} attempt{'s' if len(attempts) > 1 else ''} ran"
        seen = f" (seen: the competing commit {competitor}; {ran})"
        assert not (ran_inside and ghost_committed), (
            "another instance committed a change to the fence after the first attempt read it and before "
            "that attempt committed, yet the attempt committed on its stale read instead of being replayed"
            + seen
        )
    else:
        raised: type[BaseException] = _Abandoned if path == "exception" else _Halted
        with propagated(
            raised, what=f"the callback staged a run and its event, then raised {raised.__name__}"
        ):
            driver.transaction(callback)
    [fence, ghost] = read_keys(other_driver, [run_record_key(env, "fence"), run_record_key(env, "ghost")])
    assert fence is not None, missing("the fence run", written="the check created it and never deleted it")
    expected = {"fence": document_of(fence)}
    if ghost_committed:
        # The first attempt committed (the competitor waited for it): its ghost run is committed work.
        assert ghost is not None, missing(
            "the run the committed first attempt created", written="that attempt committed" + seen
        )
        expected["ghost"] = document_of(ghost)
    for reader in (other_driver, driver):
        if ghost_committed:
            assert _get(reader, env, "ghost") == expected["ghost"], (
                "get_run does not show the run of the attempt that committed" + seen
            )
            assert _events(reader, env, "ghost") == [event_value(env, "ghost", 1)], (
                "list_run_events does not show the event of the attempt that committed" + seen
            )
        else:
            assert _get(reader, env, "ghost") is None, (
                f"get_run shows a run only an attempt that {path.replace('-', ' ')} wrote" + seen
            )
            assert _events(reader, env, "ghost") == [], (
                "list_run_events shows events no attempt committed" + seen
            )
        assert _get(reader, env, "fence") == expected["fence"], (
            "get_run of the fence run is not its committed summary" + seen
        )
        listed = _by_id(_runs(reader, env))
        assert listed == expected, (
            f"list_runs shows {sorted(listed)}, expected exactly the committed runs {sorted(expected)}"
            + ("" if listed.keys() != expected.keys() else " with their committed summaries")
            + seen
        )


@VISIBLE_AT_ONCE
def test_summaries_and_histories_keep_every_value_exactly(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """Microsecond instants, astral and combining characters and wide numbers come back unchanged."""
    env = fresh_environment()
    value = run_value(env, "exact", events=1)
    instant = "2031-03-04T05:06:07.123456Z"
    value.update(createdAt=instant, updatedAt="2031-03-04T05:06:07.999999Z")
    value["input"] = {"text": "\U0001f600 e\u0301 \u4e2d \U0010fffd", "numbers": [2**70, 0.1, 1e-300, -7]}
    run = build_storage_record(StorageTableName.RUNS, value)
    event = event_value(env, "exact", 1)
    event["occurredAt"] = "2031-03-04T05:06:08.000001Z"
    write(driver, run, build_storage_record(StorageTableName.EVENTS, event))
    stored_run, stored_event = read_keys(other_driver, [run.key, event_record(env, "exact", 1).key])
    assert stored_run is not None and stored_event is not None, missing(
        "the run or its event", written="the check wrote both in one commit just before"
    )
    assert _get(other_driver, env, "exact") == document_of(stored_run), (
        "get_run does not return the committed summary value for value (instants to the microsecond, "
        "every character, every number)"
    )
    assert _runs(other_driver, env) == [document_of(stored_run)], (
        "list_runs does not return the committed summary value for value"
    )
    assert _events(other_driver, env, "exact") == [document_of(stored_event)], (
        "list_run_events does not return the committed event value for value"
    )


@LISTED_ONCE
@LIMITS
def test_listing_runs_pages_through_every_visible_run_once(
    driver: StorageDriver, other_driver: StorageDriver, limit: int
) -> None:
    env = fresh_environment()
    elsewhere = f"{env}x"  # a neighbour whose name extends this one: a prefix match would list its runs
    # Every status (a waiting run waits on a source), so a projection of only active or only finished
    # runs shows as missing rows.
    statuses = list(RunStatus)

    def fields(i: int) -> dict[str, Any]:
        status = statuses[i % len(statuses)]
        waiting = "source" if status is RunStatus.WAITING else None
        return {"status": status, "waiting_for": waiting, "created": i % 3, "note": str(i)}

    expected = {f"run-{i}": run_value(env, f"run-{i}", **fields(i)) for i in range(7)}
    write(driver, *[run_record(env, f"run-{i}", **fields(i)) for i in range(7)])
    write(driver, *[run_record(elsewhere, f"run-{i}", created=i) for i in range(3)])

    listed = _runs(other_driver, env, limit=limit)
    ids = [str(run["runId"]) for run in listed]
    assert sorted(ids) == sorted(expected), (
        f"list_runs({limit=}) yielded {ids}, expected each of {sorted(expected)} once"
    )
    assert _by_id(listed) == expected, "a listed run does not carry its committed summary"


@LISTED_ONCE
def test_documents_that_only_look_like_runs_are_never_listed(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """A wait token carries a runId, a status and a createdAt, yet it is not a run: the read model lists
    canonical runs only, never records it guessed from their fields."""
    env = fresh_environment()
    run = run_value(env, "run-1")
    owner = owner_record_key(env, OwnerScope.WAIT_TOKEN, "lookalike")
    token = {
        "environment": env,
        "tokenId": "token-1",
        "runId": "run-1",
        "status": "pending",
        "createdAt": run["createdAt"],
        "timeoutAt": None,
        "resolution": None,
        "resolvedAt": None,
        "idempotencyKey": "lookalike",
        "idempotencyOwner": {"table": owner.table.value, "id": list(owner.id)},
        "linkCount": "0",
    }
    write(
        driver,
        build_storage_record(StorageTableName.RUNS, run),
        build_storage_record(StorageTableName.WAIT_TOKENS, token),
    )
    listed = _runs(other_driver, env)
    assert listed == [run], (
        f"list_runs yielded {[item.get('tokenId', item.get('runId')) for item in listed]} for an environment "
        "holding one run and one wait token of that run: only canonical run records are listed"
    )


@LISTED_ONCE
def test_a_run_list_continues_past_a_run_tombstoned_under_its_cursor(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    """A cursor is a position in the listing: the run it ended on may vanish, the runs after it may not."""
    env = fresh_environment()
    runs = {f"run-{i}": run_value(env, f"run-{i}", status=RunStatus.SUCCEEDED, created=i) for i in range(5)}
    write(driver, *[build_storage_record(StorageTableName.RUNS, value) for value in runs.values()])
    limit = min(2, other_driver.profile.limits.max_query_results)
    ops = _ops(other_driver)
    first, cursor = page_of(ops.list_runs(env, limit=limit))
    assert cursor is not None, "a full page of list_runs with more runs after it returned no cursor"
    shown = [str(document_of(item)["runId"]) for item in first]
    hidden, stone = tombstoned(runs[shown[-1]])
    _replace(driver, hidden, stone)
    rest = collect_pages(
        lambda c: ops.list_runs(env, limit=limit, cursor=cursor if c is None else c), limit=limit
    )
    ids = [str(document_of(item)["runId"]) for item in rest]
    expected = sorted(set(runs) - set(shown))
    assert sorted(ids) == expected, (
        f"after {shown[-1]}, the last run of the first page, was tombstoned, continuing list_runs from that "
        f"page's cursor yielded {ids} instead of {expected}: a cursor is a position, not a run that must "
        "still be listed"
    )


@HISTORY_ORDER
@LIMITS
def test_a_history_reads_back_in_sequence_order(
    driver: StorageDriver, other_driver: StorageDriver, limit: int
) -> None:
    env = fresh_environment()
    sequences = [3, 11, 1, 10, 2, 9, 12]
    # run-ab's id extends run-a's: a history filtered by prefix would show its events too.
    write(driver, run_record(env, "run-a", events=len(sequences)), run_record(env, "run-ab", events=2))
    for batch in ([3, 11], [1], [10, 2, 9], [12]):
        write(driver, *[event_record(env, "run-a", s) for s in batch])
    write(driver, event_record(env, "run-ab", 4), event_record(env, "run-ab", 5))

    history = _events(other_driver, env, "run-a", limit=limit)
    assert [int(event["sequence"]) for event in history] == sorted(sequences), (
        f"list_run_events({limit=}) is not the run's history in sequence order"
    )
    assert history == [event_value(env, "run-a", s) for s in sorted(sequences)], "an event changed"


def _observe(driver: StorageDriver, env: str, run: dict[str, Any], events: list[dict[str, Any]]) -> None:
    """Every operator read shows the run whole, or not at all."""
    seen = _get(driver, env, str(run["runId"]))
    assert seen in (None, run), f"get_run showed a partial tombstoning: {seen}"
    history = _events(driver, env, str(run["runId"]))
    assert history in ([], events), f"list_run_events showed part of a history: {history}"
    listed = _by_id(_runs(driver, env)).get(str(run["runId"]))
    assert listed in (None, run), f"list_runs showed a partial tombstoning: {listed}"


@HISTORY_ORDER
def test_a_history_is_listed_only_in_its_own_environment(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env, elsewhere = fresh_environment(), fresh_environment()
    write(driver, run_record(env, "run-1", events=2), *[event_record(env, "run-1", s) for s in (1, 2)])
    assert _events(other_driver, elsewhere, "run-1") == [], (
        f"list_run_events({elsewhere!r}, 'run-1') listed the history of run-1 in environment {env!r}: a "
        "history belongs to one environment's run"
    )
    write(driver, run_record(elsewhere, "run-1", events=1), event_record(elsewhere, "run-1", 1))
    assert _events(other_driver, env, "run-1") == [event_value(env, "run-1", s) for s in (1, 2)], (
        f"with run-1 in two environments, list_run_events({env!r}, 'run-1') must list only that run's events"
    )
    assert _events(other_driver, elsewhere, "run-1") == [event_value(elsewhere, "run-1", 1)], (
        f"with run-1 in two environments, list_run_events({elsewhere!r}, 'run-1') must list only that run's "
        "events"
    )


@TOMBSTONE_HIDES
def test_the_tombstoning_commit_hides_the_run_and_its_history_at_once(
    driver: StorageDriver, other_driver: StorageDriver, connect: Callable[..., StorageDriver]
) -> None:
    env = fresh_environment()
    run = run_value(env, "gone", status=RunStatus.SUCCEEDED, events=3)
    events = [event_value(env, "gone", s) for s in (1, 2, 3)]
    survivor = run_value(env, "kept", status=RunStatus.SUCCEEDED, events=1)
    write(
        driver,
        run_record(env, "gone", status=RunStatus.SUCCEEDED, events=3),
        run_record(env, "kept", status=RunStatus.SUCCEEDED, events=1),
        *[event_record(env, "gone", s) for s in (1, 2, 3)],
        event_record(env, "kept", 1),
    )
    _observe(other_driver, env, run, events)
    assert _get(other_driver, env, "gone") == run, "the run is not visible before it is tombstoned"

    started: list[Competitor[None]] = []
    hidden, stone = tombstoned(run)

    def callback(tx: StorageTransaction) -> None:
        [current] = tx.get([hidden.key])
        assert current is not None, missing(
            "the hidden run", written="the check created it before this attempt"
        )
        tx.replace(current, hidden)
        tx.create(stone)
        if not started:
            started.append(compete(lambda: _observe(other_driver, env, run, events)))

    driver.transaction(callback)
    started[0].settle()

    for reader in (other_driver, connect()):
        assert _get(reader, env, "gone") is None, "get_run still shows a tombstoned run"
        assert _events(reader, env, "gone") == [], "list_run_events still shows a tombstoned run's history"
        assert _by_id(_runs(reader, env)) == {"kept": survivor}, "list_runs does not reflect the tombstone"
        assert _events(reader, env, "kept") == [event_value(env, "kept", 1)], (
            "another run's history was hidden"
        )


def _refused_or_restarted(
    fetch: Callable[[str | None], object],
    foreign: str,
    limit: int,
    where: str = "a cursor from another listing",
) -> None:
    """Continuing with ``foreign`` must fail with StorageCursorError, or behave as if no cursor was given."""
    fresh = collect_pages(fetch, limit=limit)
    try:
        first = fetch(foreign)
    except StorageCursorError:
        return
    items, cursor = page_of(first)
    rest = (
        [] if cursor is None else collect_pages(lambda c: fetch(c if c is not None else cursor), limit=limit)
    )
    continued = [document_of(item) for item in [*items, *rest]]
    assert continued == [document_of(item) for item in fresh], (
        f"{where} was accepted by another listing and skipped or leaked rows: refuse it"
    )


@CURSOR_SCOPE
def test_a_run_list_cursor_is_bound_to_its_environment(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    two = min(2, driver.profile.limits.max_query_results)  # pages of two where allowed
    env_a, env_b = fresh_environment(), fresh_environment()
    for env in (env_a, env_b):
        write(driver, *[run_record(env, f"run-{i}", created=i, note=env) for i in range(5)])
    _items, cursor = page_of(_ops(other_driver).list_runs(env_a, limit=two))
    assert cursor is not None, "a full page of list_runs with more runs after it returned no cursor"

    _refused_or_restarted(lambda c: _ops(other_driver).list_runs(env_b, limit=two, cursor=c), cursor, two)


@CURSOR_SCOPE
def test_a_history_cursor_is_bound_to_its_run_and_list(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    two = min(2, driver.profile.limits.max_query_results)  # pages of two where allowed
    env = fresh_environment()
    for run_id in ("run-x", "run-y"):
        write(driver, run_record(env, run_id, events=5), *[event_record(env, run_id, s) for s in range(1, 6)])
    _items, cursor = page_of(_ops(other_driver).list_run_events(env, "run-x", limit=two))
    assert cursor is not None, "a full page of list_run_events with more events after it returned no cursor"

    _refused_or_restarted(
        lambda c: _ops(other_driver).list_run_events(env, "run-y", limit=two, cursor=c), cursor, two
    )
    _refused_or_restarted(lambda c: _ops(other_driver).list_runs(env, limit=two, cursor=c), cursor, two)
    _runs_items, runs_cursor = page_of(_ops(other_driver).list_runs(env, limit=1))
    assert runs_cursor is not None, "a full page of list_runs with more runs after it must return a cursor"
    _refused_or_restarted(
        lambda c: _ops(other_driver).list_run_events(env, "run-x", limit=two, cursor=c), runs_cursor, two
    )


@DEFENSIVE_COPIES
def test_changing_returned_runs_events_and_pages_changes_nothing(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    env = fresh_environment()
    write(
        driver,
        run_record(env, "run-1", status=RunStatus.SUCCEEDED, note="orig", events=2),
        *[event_record(env, "run-1", s) for s in (1, 2)],
    )
    ops = _ops(other_driver)
    # compared with what the same reads showed before (their exactness is the other rules' business)
    run, runs, events = (
        _get(other_driver, env, "run-1"),
        _runs(other_driver, env),
        _events(other_driver, env, "run-1"),
    )
    assert run is not None, "the committed run is not visible"

    scribble(ops.get_run(env, "run-1"))
    assert _get(other_driver, env, "run-1") == run, "changing a returned run changed the next get_run"
    page = min(10, driver.profile.limits.max_query_results)
    scribble(ops.list_runs(env, limit=page))
    assert _runs(other_driver, env) == runs, "changing a returned page changed the next list_runs"
    assert _get(other_driver, env, "run-1") == run, "changing a listed run changed get_run"
    scribble(ops.list_run_events(env, "run-1", limit=page))
    assert _events(other_driver, env, "run-1") == events, "changing returned events changed the history"
    assert _get(driver, env, "run-1") == run, "changing returned values leaked into another instance"


def _page_cursors(fetch: Callable[[str | None], object], limit: int) -> list[str]:
    """The cursor of every page of a listing (the last page's is None and left out)."""
    cursors: list[str] = []
    cursor: str | None = None
    for _ in range(1000):
        items, cursor = page_of(fetch(cursor))
        assert len(items) <= limit, f"a page of limit {limit} returned {len(items)} items"
        if cursor is None:
            return cursors
        cursors.append(cursor)
    raise AssertionError("a listing did not end within 1000 pages")


@CURSOR_SCOPE
def test_every_page_cursor_is_bound_to_every_filter(
    driver: StorageDriver, other_driver: StorageDriver
) -> None:
    two = min(2, driver.profile.limits.max_query_results)  # pages of two where allowed
    # Two environments with the same run ids, each run with the same event sequences: a cursor that
    # forgot any filter (environment, run, which list) would continue the wrong listing plausibly.
    env_a, env_b = fresh_environment(), fresh_environment()
    for env in (env_a, env_b):
        write(driver, *[run_record(env, f"run-{i}", created=i, note=env, events=5) for i in range(5)])
        for run_id in ("run-1", "run-2"):
            write(driver, *[event_record(env, run_id, s) for s in range(1, 6)])
    ops = _ops(other_driver)
    run_cursors = _page_cursors(lambda c: ops.list_runs(env_a, limit=two, cursor=c), two)
    event_cursors = _page_cursors(lambda c: ops.list_run_events(env_a, "run-1", limit=two, cursor=c), two)
    assert len(run_cursors) >= 2 and len(event_cursors) >= 2, (
        "listings of five runs and five events in pages of two must hand out a cursor on every full page"
    )
    for page, cursor in enumerate(run_cursors, 1):
        where = f"the list_runs cursor of page {page}"
        _refused_or_restarted(lambda c: ops.list_runs(env_b, limit=two, cursor=c), cursor, two, where)
        _refused_or_restarted(
            lambda c: ops.list_run_events(env_a, "run-1", limit=two, cursor=c), cursor, two, where
        )
    for page, cursor in enumerate(event_cursors, 1):
        where = f"the list_run_events cursor of page {page}"
        _refused_or_restarted(
            lambda c: ops.list_run_events(env_a, "run-2", limit=two, cursor=c), cursor, two, where
        )
        _refused_or_restarted(
            lambda c: ops.list_run_events(env_b, "run-1", limit=two, cursor=c), cursor, two, where
        )
        _refused_or_restarted(lambda c: ops.list_runs(env_a, limit=two, cursor=c), cursor, two, where)


@TOMBSTONE_HIDES
@pytest.mark.parametrize("page", [1, 2])
def test_a_cursor_taken_before_the_tombstone_shows_nothing_of_the_run_after_it(
    driver: StorageDriver, other_driver: StorageDriver, page: int
) -> None:
    two = min(2, driver.profile.limits.max_query_results)  # pages of two where allowed
    env = fresh_environment()
    run = run_value(env, "gone", status=RunStatus.SUCCEEDED, events=6, created=0)
    write(
        driver,
        run_record(env, "gone", status=RunStatus.SUCCEEDED, events=6, created=0),
        *[run_record(env, f"kept-{i}", status=RunStatus.SUCCEEDED, created=10 + i) for i in range(3)],
        *[event_record(env, "gone", s) for s in range(1, 7)],
    )
    ops = _ops(other_driver)
    history_cursor: str | None = None
    for _ in range(page):
        _items, history_cursor = page_of(ops.list_run_events(env, "gone", limit=two, cursor=history_cursor))
    runs_cursor: str | None = None
    for _ in range(page):  # runs are listed newest first, so "gone" (created first) comes last
        _items, runs_cursor = page_of(ops.list_runs(env, limit=1, cursor=runs_cursor))
    assert history_cursor is not None and runs_cursor is not None, "full pages must come with a cursor"
    hidden, stone = tombstoned(run)
    _replace(driver, hidden, stone)

    try:
        rest = collect_pages(
            lambda c: ops.list_run_events(env, "gone", limit=two, cursor=history_cursor if c is None else c),
            limit=two,
        )
    except StorageCursorError:
        rest = []
    assert rest == [], (
        f"continuing a tombstoned run's history from the cursor of page {page} still listed "
        f"{len(rest)} events: the tombstone must hide every page of the history, not only the first"
    )
    try:
        listed = collect_pages(
            lambda c: ops.list_runs(env, limit=1, cursor=runs_cursor if c is None else c), limit=1
        )
    except StorageCursorError:
        listed = []
    ids = [str(document_of(item)["runId"]) for item in listed]
    assert "gone" not in ids, (
        f"continuing list_runs from the cursor of page {page} still listed the tombstoned run ({ids})"
    )


@limit_gated("operator-page")
@PAGE_LIMIT
@pytest.mark.parametrize("listing", ["list_runs", "list_run_events"])
def test_operator_pages_never_exceed_max_query_results(
    driver: StorageDriver, other_driver: StorageDriver, listing: str
) -> None:
    maximum = driver.profile.limits.max_query_results
    env = fresh_environment()
    count = maximum + 2
    batch = max(1, min(50, driver.profile.limits.max_transaction_records))
    if listing == "list_runs":
        records = [run_record(env, f"run-{i:05d}", created=i) for i in range(count)]
    else:
        records = [
            run_record(env, "long", events=count),
            *[event_record(env, "long", s) for s in range(1, count + 1)],
        ]
    for start in range(0, len(records), batch):
        write(driver, *records[start : start + batch])
    ops = _ops(other_driver)

    def fetch(limit: int) -> Callable[[str | None], object]:
        if listing == "list_runs":
            return lambda cursor: ops.list_runs(env, limit=limit, cursor=cursor)
        return lambda cursor: ops.list_run_events(env, "long", limit=limit, cursor=cursor)

    try:
        items, _cursor = page_of(fetch(maximum + 1)(None))
    except StorageLimitError as error:
        assert error.limit is StorageLimitName.QUERY_RESULTS, (
            f"the limit error names {error.limit!r}; the exceeded limit is max_query_results"
        )
    else:
        assert len(items) <= maximum, (
            f"{listing}(limit={maximum + 1}) returned a page of {len(items)} items with max_query_results = "
            f"{maximum}: an operator page must stay within the advertised limit"
        )
    items, cursor = page_of(fetch(maximum)(None))
    assert len(items) == maximum and cursor is not None, (
        f"{listing}(limit={maximum}) over {count} entries returned {len(items)} items "
        f"({'with' if cursor else 'without'} a cursor): a full page of exactly the limit is expected"
    )
    everything = collect_pages(fetch(maximum), limit=maximum)
    assert len(everything) == count, f"{listing} in pages of {maximum} yielded {len(everything)} of {count}"
