"""Each blind driver the suites let through really breaks its rule: a scenario shows it.

A survivor of the batch is only evidence of a gap if its bug is live (not an
equivalent mutant). Each scenario here drives one blind driver through the
public API until the rule it was written against visibly breaks, and drives
the bug-free control through the same steps to show the rule holding there.
They are deliberately small, exact interleavings: a differential workload
should find the same bugs without being told the steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runlane_conformance import (
    StorageCandidateMode,
    StorageIndexName,
    StorageQueryDirection,
    StorageStreamName,
    StorageTableName,
)
from runlane_conformance.contract.encodings import iso_date_codec, storage_tuple_codec
from runlane_conformance.contract.errors import (
    StorageCommitUnknownError,
    StorageError,
    StorageUnavailableError,
)
from runlane_conformance.contract.json_boundary import thaw_json
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.streams import AppendRecordsCommand
from runlane_conformance.contract.table_definitions import RunStatus, run_record_key, schedule_occurrence_id
from runlane_conformance.contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    StorageQueryRange,
    StorageRangeBound,
)
from runlane_conformance.core.runs import event_value, new_run_value, outbox_message_value, step_value
from runlane_conformance.core.wait_tokens import WaitTokenSpec, create_wait_token
from runlane_conformance.faults.plan import InjectedFault
from runlane_conformance.harness import load_harness

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Clock:
    """An injected clock a scenario moves by hand."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@contextmanager
def store_of(name: str) -> Iterator[Any]:
    harness = load_harness(f"tests.mutants.blind_batch:{name}", {})
    try:
        store = harness.open_store()
        yield store
        store.close()
    finally:
        harness.close()


def _iso(moment: datetime) -> str:
    return iso_date_codec.encode(moment)


def _tick(driver: Any) -> None:
    """One attempt that samples the clock (any core flow does; the store sees time pass)."""
    driver.transaction(lambda tx: tx.now())


# --- scenarios: each returns True when the rule held ---------------------------------------------


def marker_survives_eight_days(name: str) -> bool:
    clock = Clock()
    with store_of(name) as store:
        driver = store.connect(clock=clock)
        marker = build_storage_record(
            StorageTableName.RUN_COMPLETION_WAIT_PRESENCE,
            {"environment": "env", "sourceRunId": "source", "createdAt": _iso(T0)},
        )
        driver.transaction(lambda tx: (tx.now(), tx.create(marker)))
        clock.at = T0 + timedelta(days=8)
        _tick(driver)
        return driver.transaction(lambda tx: tx.get([marker.key]))[0] is not None


def tombstone_survives_past_prune_after(name: str) -> bool:
    clock = Clock()
    with store_of(name) as store:
        driver = store.connect(clock=clock)
        counts = {"events": "1", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"}
        tombstone = build_storage_record(
            StorageTableName.TOMBSTONES,
            {
                "environment": "env",
                "runId": "run",
                "tombstonedAt": _iso(T0),
                "pruneAfter": _iso(T0 + timedelta(hours=1)),
                "counts": counts,
            },
        )
        driver.transaction(lambda tx: (tx.now(), tx.create(tombstone)))
        clock.at = T0 + timedelta(days=3)  # cleanup is due, but a child is still counted
        _tick(driver)
        return driver.transaction(lambda tx: tx.get([tombstone.key]))[0] is not None


def version_differs_after_identical_recreate(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        spec = WaitTokenSpec("env", "token", "run", "idem")
        driver.transaction(lambda tx: create_wait_token(tx, spec))
        [before] = driver.transaction(lambda tx: tx.get([spec.owner_key]))

        def recreate(tx: Any) -> None:
            [owner] = tx.get([spec.owner_key])
            tx.delete(owner)

        driver.transaction(recreate)
        driver.transaction(lambda tx: tx.create(before.as_new()))

        def stale_replace(tx: Any) -> str:
            [now] = tx.get([spec.owner_key])
            try:
                tx.replace(before, before.as_new())  # before was read ahead of the delete
            except Exception as error:  # the contract answers StorageKeyChangeError
                return type(error).__name__
            return f"accepted (version {before.version} read before the delete, {now.version} now)"

        outcome = driver.transaction(stale_replace)
        return outcome == "StorageKeyChangeError"


def event_survives_a_year(name: str) -> bool:
    clock = Clock()
    with store_of(name) as store:
        driver = store.connect(clock=clock)
        event = build_storage_record(StorageTableName.EVENTS, event_value("env", "run", 1, T0))
        driver.transaction(lambda tx: (tx.now(), tx.create(event)))
        clock.at = T0 + timedelta(days=400)
        _tick(driver)
        return driver.transaction(lambda tx: tx.get([event.key]))[0] is not None


def _lease(name: str, expires: datetime, environment: str = "env") -> NewStorageRecord:
    return build_storage_record(
        StorageTableName.LEASES,
        {"environment": environment, "name": name, "holder": "h", "expiresAt": _iso(expires)},
    )


def _leases_scan(limit: int = 10, **kwargs: Any) -> QueryRecordsCommand:
    return QueryRecordsCommand(StorageIndexName.LEASES_BY_EXPIRY, "env", limit, **kwargs)


def leases_past_2038_in_order(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        early = _lease("early", datetime(2037, 6, 1, tzinfo=UTC))
        late = _lease("late", datetime(2039, 6, 1, tzinfo=UTC))
        driver.transaction(lambda tx: (tx.create(late), tx.create(early)))
        page = driver.query(_leases_scan())
        return [ref.key for ref in page.items] == [early.key, late.key]


def query_sees_another_instances_commit(name: str) -> bool:
    with store_of(name) as store:
        reader, writer = store.connect(clock=Clock()), store.connect(clock=Clock())
        assert reader.query(_leases_scan()).items == ()
        lease = _lease("new", T0)
        writer.transaction(lambda tx: tx.create(lease))
        return [ref.key for ref in reader.query(_leases_scan()).items] == [lease.key]


def _marker(source: str = "source") -> NewStorageRecord:
    return build_storage_record(
        StorageTableName.RUN_COMPLETION_WAIT_PRESENCE,
        {"environment": "env", "sourceRunId": source, "createdAt": _iso(T0)},
    )


def marker_seen_by_every_instance(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        marker = _marker()
        assert first.transaction(lambda tx: tx.get([marker.key])) == [None]
        second.transaction(lambda tx: tx.create(marker))
        return first.transaction(lambda tx: tx.get([marker.key]))[0] is not None


def _absent_read_conflicts(name: str, record: NewStorageRecord) -> bool:
    """An attempt reads ``record``'s key as absent; another instance creates it before the commit."""
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        seen: list[bool] = []

        def decide(tx: Any) -> None:
            [found] = tx.get([record.key])
            seen.append(found is not None)
            if len(seen) == 1:
                second.transaction(lambda other: other.create(record))
            tx.create(_lease(f"decision-{len(seen)}", T0))

        first.transaction(decide)
        return seen[-1]  # the committed attempt must have seen the record


def absent_queue_capacity_is_a_dependency(name: str) -> bool:
    return _absent_read_conflicts(
        name,
        build_storage_record(
            StorageTableName.QUEUE_CAPACITY,
            {"environment": "env", "queue": "q", "limit": "1", "active": "0", "updatedAt": _iso(T0)},
        ),
    )


def absent_marker_is_a_dependency(name: str) -> bool:
    return _absent_read_conflicts(name, _marker("other-source"))


def joined_components_keep_tuple_order(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        events = [
            build_storage_record(StorageTableName.EVENTS, event_value("env", run, 1, T0))
            for run in ("a", "a-b")
        ]
        driver.transaction(lambda tx: [tx.create(event) for event in events])
        page = driver.query(QueryRecordsCommand(StorageIndexName.EVENTS_BY_RUN, "env", 10))
        return [ref.key for ref in page.items] == [event.key for event in events]


def _leases(driver: Any, *moments: datetime, prefix: str = "l") -> list[NewStorageRecord]:
    records = [_lease(f"{prefix}{number}", moment) for number, moment in enumerate(moments)]
    driver.transaction(lambda tx: [tx.create(record) for record in records])
    return records


def phantom_on_page_two_conflicts(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        _leases(first, T0)
        seen: list[int] = []

        def count_then_decide(tx: Any) -> None:
            page = tx.query_candidates(_leases_scan(limit=1))
            rest = tx.query_candidates(_leases_scan(limit=1).with_cursor(page.cursor))
            seen.append(len(page.items) + len(rest.items))
            if len(seen) == 1:  # a phantom lands on the second page's range
                second.transaction(lambda other: other.create(_lease("phantom", T0 + timedelta(hours=1))))
            tx.create(_lease(f"decision-{len(seen)}", T0 - timedelta(days=1), environment="other"))

        first.transaction(count_then_decide)
        return seen[-1] == 2


def exclusive_page_two_is_held(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        _leases(first, T0, T0 + timedelta(hours=1))
        exclusive = StorageCandidateMode.EXCLUSIVE
        overlap: list[set[object]] = []

        def hold_two(tx: Any) -> None:
            page = tx.query_candidates(_leases_scan(limit=1), mode=exclusive)
            rest = tx.query_candidates(_leases_scan(limit=1).with_cursor(page.cursor), mode=exclusive)
            mine = {ref.key for ref in (*page.items, *rest.items)}
            theirs = second.transaction(
                lambda other: {
                    ref.key for ref in other.query_candidates(_leases_scan(limit=2), mode=exclusive).items
                }
            )
            overlap.append(mine & theirs)

        first.transaction(hold_two)
        return not overlap[0]


def exclusive_hold_outlasts_thirty_seconds(name: str) -> bool:
    with store_of(name) as store:
        holder_clock, other_clock = Clock(), Clock()
        first, second = store.connect(clock=holder_clock), store.connect(clock=other_clock)
        _leases(first, T0)
        exclusive = StorageCandidateMode.EXCLUSIVE
        got: list[int] = []

        def hold(tx: Any) -> None:
            tx.query_candidates(_leases_scan(limit=1), mode=exclusive)
            tx.now()
            other_clock.at = T0 + timedelta(minutes=1)  # the attempt stays open while time passes
            second.transaction(lambda other: other.now())
            got.append(
                len(
                    second.transaction(
                        lambda other: other.query_candidates(_leases_scan(limit=1), mode=exclusive)
                    ).items
                )
            )

        first.transaction(hold)
        return got == [0]


def exclusive_holds_all_of_a_large_page(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        _leases(first, *(T0 + timedelta(seconds=n) for n in range(70)))
        exclusive = StorageCandidateMode.EXCLUSIVE
        got: list[int] = []

        def hold_all(tx: Any) -> None:
            assert len(tx.query_candidates(_leases_scan(limit=70), mode=exclusive).items) == 70
            got.append(
                len(
                    second.transaction(
                        lambda other: other.query_candidates(_leases_scan(limit=70), mode=exclusive)
                    ).items
                )
            )

        first.transaction(hold_all)
        return got == [0]


def descending_ties_by_key_descending(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        runs = [
            build_storage_record(StorageTableName.RUNS, new_run_value("env", run, T0)) for run in ("a", "b")
        ]
        driver.transaction(lambda tx: [tx.create(run) for run in runs])
        page = driver.query(
            QueryRecordsCommand(
                StorageIndexName.RUNS_BY_STATUS, "env", 10, direction=StorageQueryDirection.DESCENDING
            )
        )
        return [ref.key for ref in page.items] == [runs[1].key, runs[0].key]


def parent_index_drops_a_tombstoned_run(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        child = new_run_value("env", "child", T0, status=RunStatus.SUCCEEDED, parent_run_id="parent")
        driver.transaction(lambda tx: tx.create(build_storage_record(StorageTableName.RUNS, child)))

        def tombstone(tx: Any) -> None:
            [run] = tx.get([run_record_key("env", "child")])
            value = thaw_json(run.document.value)
            assert isinstance(value, dict)
            value["tombstonedAt"] = _iso(T0)
            tx.replace(run, build_storage_record(StorageTableName.RUNS, value))

        driver.transaction(tombstone)
        page = driver.query(QueryRecordsCommand(StorageIndexName.RUNS_BY_PARENT, "env", 10))
        return page.items == ()


def idle_attempt_still_validates_its_reads(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        [lease] = _leases(first, T0)
        clock = [0.0]
        attempts: list[int] = []

        def slow_update(tx: Any) -> None:
            [current] = tx.get([lease.key])
            attempts.append(1)
            if len(attempts) == 1:
                second.transaction(
                    lambda other: other.replace(
                        other.get([lease.key])[0], _lease("l0", T0 + timedelta(hours=2))
                    )
                )
                clock[0] += 3.0  # the attempt stays open three seconds
            tx.replace(current, _lease("l0", T0 + timedelta(hours=1)))

        import tests.mutants.blind_batch as batch

        real = batch.time.monotonic
        batch.time.monotonic = lambda: real() + clock[0]  # type: ignore[assignment]
        try:
            first.transaction(slow_update)
        finally:
            batch.time.monotonic = real  # type: ignore[assignment]
        return len(attempts) == 2  # the lost race must replay


def observation(data: int) -> dict[str, Any]:
    return {"environment": "env", "source": {"kind": "test", "id": "s"}, "data": {"n": data}}


def replayed_append_commits_once(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        [lease] = _leases(first, T0)
        calls: list[int] = []

        def append_after_read(tx: Any) -> None:
            tx.get([lease.key])
            calls.append(1)
            if len(calls) == 1:  # lose the race once, so the callback replays
                second.transaction(
                    lambda other: other.replace(
                        other.get([lease.key])[0], _lease("l0", T0 + timedelta(hours=2))
                    )
                )
            tx.append(AppendRecordsCommand(StorageStreamName.OBSERVATIONS, "env", (observation(1),)))

        first.transaction(append_after_read)
        page = first.query(QueryRecordsCommand(StorageIndexName.OBSERVATIONS_BY_POSITION, "env", 10))
        return len(calls) == 2 and len(page.items) == 1


def operator_history_hidden_on_page_two(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        run = new_run_value("env", "run", T0, status=RunStatus.SUCCEEDED)
        run["counts"]["events"] = "2"
        events = [
            build_storage_record(StorageTableName.EVENTS, event_value("env", "run", n, T0)) for n in (1, 2)
        ]
        driver.transaction(
            lambda tx: [
                tx.create(build_storage_record(StorageTableName.RUNS, run)),
                *[tx.create(e) for e in events],
            ]
        )
        first = driver.list_run_events("env", "run", limit=1)

        def tombstone(tx: Any) -> None:
            [current] = tx.get([run_record_key("env", "run")])
            value = thaw_json(current.document.value)
            assert isinstance(value, dict)
            value["tombstonedAt"] = _iso(T0)
            tx.replace(current, build_storage_record(StorageTableName.RUNS, value))

        driver.transaction(tombstone)
        second = driver.list_run_events("env", "run", limit=1, cursor=first.cursor)
        return second.items == ()


def _run_with_input(payload: object) -> NewStorageRecord:
    value = new_run_value("env", "shaped", T0)
    value["input"] = payload
    return build_storage_record(StorageTableName.RUNS, value)


def _round_trip(name: str, payload: object) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        record = _run_with_input(payload)
        try:
            driver.transaction(lambda tx: tx.create(record))
        except Exception:  # the contract says such a document commits
            return False
        [stored] = driver.transaction(lambda tx: tx.get([record.key]))
        return stored is not None and stored.document == record.document


def empty_object_kept(name: str) -> bool:
    return _round_trip(name, {"options": {}, "list": []})


def float_digits_kept(name: str) -> bool:
    return _round_trip(name, {"ratio": 0.1 + 0.2})


def deep_document_kept(name: str) -> bool:
    payload: dict[str, Any] = {}
    node = payload
    for _ in range(120):
        node["n"] = {}
        node = node["n"]
    return _round_trip(name, payload)


def nul_kept(name: str) -> bool:
    return _round_trip(name, {"text": "a\x00b"})


def astral_kept(name: str) -> bool:
    return _round_trip(name, {"text": "\U0001f600"})


class CompetingHook:
    """An in-process fault hook: round trip ``at`` breaks (``cut`` before the store sees it, or
    ``lose`` after), and ``between`` runs while the connection is down (another instance's work)."""

    def __init__(self) -> None:
        self.calls = 0
        self.plan: tuple[int, str, Callable[[], object]] | None = None

    def round_trip(self, action: Callable[[], Any]) -> Any:
        self.calls += 1
        plan = self.plan
        if plan is None or self.calls != plan[0]:
            return action()
        self.plan = None
        _at, kind, between = plan
        if kind == "lose":
            action()
        between()
        raise InjectedFault(f"{kind} at round trip {self.calls}")


def failed_commit_reports_failure(name: str) -> bool:
    with store_of(name) as store:
        hook = CompetingHook()
        faulty, other = store.connect_with_faults(hook, clock=Clock()), store.connect(clock=Clock())
        first, second = _lease("first", T0), _lease("second", T0)
        hook.plan = (1, "cut", lambda: other.transaction(lambda tx: tx.create(first)))
        try:
            faulty.transaction(lambda tx: (tx.create(first), tx.create(second)))
        except (StorageUnavailableError, StorageCommitUnknownError):
            return True
        return other.transaction(lambda tx: tx.get([second.key]))[0] is not None


def lost_reply_never_replays(name: str) -> bool:
    with store_of(name) as store:
        hook = CompetingHook()
        faulty, other = store.connect_with_faults(hook, clock=Clock()), store.connect(clock=Clock())
        first, second = _lease("first", T0), _lease("second", T0)

        def move_on(tx: Any) -> None:
            [current] = tx.get([first.key])
            tx.replace(current, _lease("first", T0 + timedelta(hours=1)))

        hook.plan = (1, "lose", lambda: other.transaction(move_on))
        runs: list[int] = []

        def write(tx: Any) -> None:
            runs.append(1)
            tx.create(first)
            tx.create(second)

        with suppress(StorageError):
            faulty.transaction(write)
        return len(runs) == 1


def broken_read_keeps_earlier_reads_protected(name: str) -> bool:
    with store_of(name) as store:
        hook = CompetingHook()
        faulty, other = store.connect_with_faults(hook, clock=Clock()), store.connect(clock=Clock())
        [counted, _spare] = _leases(other, T0, T0)
        hook.plan = (2, "cut", lambda: None)

        def bump(tx: Any) -> None:
            [current] = tx.get([counted.key])
            other.transaction(
                lambda o: o.replace(o.get([counted.key])[0], _lease("l0", T0 + timedelta(hours=2)))
            )
            tx.get([_spare.key])  # this read hits the broken connection
            tx.replace(current, _lease("l0", T0 + timedelta(hours=1)))

        with suppress(StorageError):
            faulty.transaction(bump)
        [final] = other.transaction(lambda tx: tx.get([counted.key]))
        return final.document.value["expiresAt"] == _iso(T0 + timedelta(hours=2))


def continued_scan_keeps_its_upper_bound(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        records = _leases(driver, T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2))
        upper = StorageRangeBound(storage_tuple_codec.encode((_iso(T0 + timedelta(hours=1)),)), True)
        command = _leases_scan(limit=1, range=StorageQueryRange(None, upper))
        seen, cursor = [], None
        for _ in range(5):
            page = driver.query(command.with_cursor(cursor))
            seen.extend(ref.key for ref in page.items)
            cursor = page.cursor
            if cursor is None:
                break
        return seen == [records[0].key, records[1].key]


def _pages(driver: Any, command: QueryRecordsCommand, most: int = 10) -> list[object]:
    seen: list[object] = []
    cursor = None
    for _ in range(most):
        page = driver.query(command.with_cursor(cursor))
        seen.extend(ref.key for ref in page.items)
        cursor = page.cursor
        if cursor is None:
            break
    return seen


def descending_pages_through_ties(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        records = _leases(driver, T0, T0, T0)
        command = _leases_scan(limit=1, direction=StorageQueryDirection.DESCENDING)
        return _pages(driver, command) == [r.key for r in reversed(records)]


def descending_keeps_exclusive_upper_bound(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        early, _late = _leases(driver, T0, T0 + timedelta(hours=1))
        upper = StorageRangeBound(storage_tuple_codec.encode((_iso(T0 + timedelta(hours=1)),)), False)
        command = _leases_scan(
            range=StorageQueryRange(None, upper), direction=StorageQueryDirection.DESCENDING
        )
        return [ref.key for ref in driver.query(command).items] == [early.key]


def _tombstone(run: str, prune_after: datetime) -> NewStorageRecord:
    counts = {"events": "0", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"}
    return build_storage_record(
        StorageTableName.TOMBSTONES,
        {
            "environment": "env",
            "runId": run,
            "tombstonedAt": _iso(T0),
            "pruneAfter": _iso(prune_after),
            "counts": counts,
        },
    )


def only_due_tombstones_listed(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        due, later = _tombstone("due", T0), _tombstone("later", T0 + timedelta(days=30))
        driver.transaction(lambda tx: (tx.create(due), tx.create(later)))
        upper = StorageRangeBound(storage_tuple_codec.encode((_iso(T0 + timedelta(days=1)),)), True)
        command = QueryRecordsCommand(
            StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER, "env", 10, StorageQueryRange(None, upper)
        )
        return [ref.key for ref in driver.query(command).items] == [due.key]


def blind_step_creates_have_one_winner(name: str) -> bool:
    with store_of(name) as store:
        first, second = store.connect(clock=Clock()), store.connect(clock=Clock())
        mine = build_storage_record(StorageTableName.STEPS, step_value("env", "run", "s", 1, T0))
        theirs = build_storage_record(
            StorageTableName.STEPS, step_value("env", "run", "s", 1, T0 + timedelta(seconds=1))
        )

        def race(tx: Any) -> None:
            tx.create(mine)
            second.transaction(lambda other: other.create(theirs))

        with suppress(StorageError):
            first.transaction(race)
        [stored] = second.transaction(lambda tx: tx.get([mine.key]))
        return stored.document == theirs.document


def outbox_descending_is_reversed_ascending(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        messages = [
            build_storage_record(
                StorageTableName.OUTBOX_MESSAGES,
                outbox_message_value("env", "run", f"m{n}", T0 + timedelta(seconds=n)),
            )
            for n in range(3)
        ]
        driver.transaction(lambda tx: [tx.create(m) for m in messages])
        command = QueryRecordsCommand(StorageIndexName.OUTBOX_BY_RUN, "env", 2)
        ascending = _pages(driver, command)
        descending = _pages(driver, replace(command, direction=StorageQueryDirection.DESCENDING))
        return descending == ascending[::-1]


def _schedule(environment: str, at: datetime) -> NewStorageRecord:
    return build_storage_record(
        StorageTableName.SCHEDULES,
        {
            "environment": environment,
            "scheduleId": "nightly",
            "workflow": "w",
            "spec": {"kind": "interval", "everySeconds": 60},
            "enabled": True,
            "input": {},
            "nextOccurrenceAt": _iso(at),
            "nextOccurrenceId": schedule_occurrence_id(environment, "nightly", at),
            "lastOccurrenceAt": None,
            "lastOccurrenceId": None,
            "createdAt": _iso(T0),
            "updatedAt": _iso(T0),
        },
    )


def schedules_stay_in_their_environment(name: str) -> bool:
    with store_of(name) as store:
        driver = store.connect(clock=Clock())
        mine, theirs = _schedule("env", T0), _schedule("other", T0)
        driver.transaction(lambda tx: (tx.create(mine), tx.create(theirs)))
        page = driver.query(QueryRecordsCommand(StorageIndexName.SCHEDULES_BY_NEXT_OCCURRENCE, "env", 10))
        return [ref.key for ref in page.items] == [mine.key]


SCENARIOS: dict[str, Callable[[str], bool]] = {
    "index_schedules_by_next_occurrence_ignores_partition": schedules_stay_in_their_environment,
    "lost_reply_resolved_by_reading_the_key": failed_commit_reports_failure,
    "lost_reply_replayed_when_key_moved_on": lost_reply_never_replays,
    "read_fault_reconnects_with_fresh_snapshot": broken_read_keeps_earlier_reads_protected,
    "page_two_drops_far_bound": continued_scan_keeps_its_upper_bound,
    "page_two_descending_ties_flipped": descending_pages_through_ties,
    "descending_leases_upper_bound_inclusive": descending_keeps_exclusive_upper_bound,
    "index_tombstones_by_prune_after_ignores_range": only_due_tombstones_listed,
    "table_steps_blind_create_overwrites": blind_step_creates_have_one_winner,
    "descending_outbox_by_run_reverses_ascending_pages": outbox_descending_is_reversed_ascending,
    "page_two_range_not_a_dependency": phantom_on_page_two_conflicts,
    "page_two_exclusive_not_held": exclusive_page_two_is_held,
    "exclusive_hold_is_a_thirty_second_lease": exclusive_hold_outlasts_thirty_seconds,
    "exclusive_holds_evicted_after_64_rows": exclusive_holds_all_of_a_large_page,
    "descending_runs_by_status_ties_ascending": descending_ties_by_key_descending,
    "index_runs_by_parent_row_outlives_tombstone": parent_index_drops_a_tombstoned_run,
    "attempt_idle_two_seconds_loses_read_set": idle_attempt_still_validates_its_reads,
    "append_buffer_survives_replay": replayed_append_commits_once,
    "operator_events_page_two_ignores_tombstone": operator_history_hidden_on_page_two,
    "json_empty_object_becomes_array": empty_object_kept,
    "json_floats_fourteen_digits": float_digits_kept,
    "json_deep_nesting_refused": deep_document_kept,
    "json_nul_stripped": nul_kept,
    "json_astral_mangled": astral_kept,
    "ttl_events_retention_one_year": event_survives_a_year,
    "clock_leases_past_2038_sort_first": leases_past_2038_in_order,
    "instance_query_cache": query_sees_another_instances_commit,
    "instance_marker_negative_cache": marker_seen_by_every_instance,
    "absent_reads_untracked_queue_capacity": absent_queue_capacity_is_a_dependency,
    "absent_reads_untracked_completion_markers": absent_marker_is_a_dependency,
    "sort_order_of_joined_components": joined_components_keep_tuple_order,
    "ttl_completion_markers_seven_days": marker_survives_eight_days,
    "ttl_tombstones_a_day_after_prune_after": tombstone_survives_past_prune_after,
    "owners_content_hash_versions": version_differs_after_identical_recreate,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_rule_holds_on_the_bug_free_control(name: str) -> None:
    assert SCENARIOS[name]("control")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_blind_driver_breaks_its_rule(name: str) -> None:
    assert not SCENARIOS[name](name)
