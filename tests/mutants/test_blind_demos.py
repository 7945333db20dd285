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
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runlane_conformance import StorageIndexName, StorageTableName
from runlane_conformance.contract.encodings import iso_date_codec
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.values import NewStorageRecord, QueryRecordsCommand
from runlane_conformance.core.runs import event_value
from runlane_conformance.core.wait_tokens import WaitTokenSpec, create_wait_token
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


SCENARIOS: dict[str, Callable[[str], bool]] = {
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
