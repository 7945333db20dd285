"""The wait-token slice alone: one owner per key, counted links, one resolution, pruned with the owner."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runlane_conformance import StorageTableName, build_storage_record
from runlane_conformance.contract.table_definitions import (
    owner_record_key,
    run_record_key,
    wait_token_record_key,
)
from runlane_conformance.core.runs import ChildKind, CoreInvariantError, child_counts, create_run
from runlane_conformance.core.wait_tokens import (
    LinkOutcome,
    ResolveOutcome,
    TokenPruneOutcome,
    WaitTokenSpec,
    complete_wait_token,
    create_wait_token,
    due_wait_tokens,
    link_run,
    prune_wait_token,
    time_out_wait_token,
)
from runlane_conformance.local import LocalStorageDriver
from runlane_conformance.local.store import LocalStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)
ENV = "prod"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def make_token_store(timeout: timedelta | None = None) -> tuple[LocalStorageDriver, Clock, WaitTokenSpec]:
    clock = Clock()
    store = LocalStorageDriver(LocalStore(), clock=clock)
    spec = WaitTokenSpec(ENV, "tok", "creator", "key", None if timeout is None else T0 + timeout)
    store.transaction(lambda tx: create_run(tx, ENV, "creator"))
    store.transaction(lambda tx: create_wait_token(tx, spec))
    return store, clock, spec


def value(store: LocalStorageDriver, key: object) -> dict[str, object] | None:
    [record] = store.transaction(lambda tx: tx.get([key]))  # type: ignore[list-item]
    return None if record is None else dict(record.document.to_json()["value"])  # type: ignore[arg-type]


def test_a_token_is_created_with_an_owner_that_names_it_back() -> None:
    store, _clock, spec = make_token_store()
    token, owner = value(store, spec.key), value(store, spec.owner_key)
    assert token is not None and owner is not None
    assert token["status"] == "pending" and token["linkCount"] == "0"
    assert owner["targetId"] == "tok" and owner["scope"] == "wait_token"


def test_a_second_create_with_the_same_key_returns_the_first_token() -> None:
    store, _clock, _spec = make_token_store()
    again = WaitTokenSpec(ENV, "other-tok", "creator", "key")
    assert store.transaction(lambda tx: create_wait_token(tx, again)) == "tok"
    assert value(store, again.key) is None


def test_a_token_without_its_owner_is_reported_not_recreated() -> None:
    store, _clock, spec = make_token_store()
    store.transaction(lambda tx: tx.delete(tx.get([spec.owner_key])[0]))  # type: ignore[arg-type]
    with pytest.raises(CoreInvariantError) as caught:
        store.transaction(lambda tx: create_wait_token(tx, spec))
    assert caught.value.rule == "reciprocal-owner"


def test_linking_counts_on_both_sides_once() -> None:
    store, _clock, spec = make_token_store()
    store.transaction(lambda tx: create_run(tx, ENV, "waiter"))
    assert store.transaction(lambda tx: link_run(tx, ENV, "tok", "waiter")) is LinkOutcome.LINKED
    assert store.transaction(lambda tx: link_run(tx, ENV, "tok", "waiter")) is LinkOutcome.ALREADY_LINKED
    token = value(store, spec.key)
    assert token is not None and token["linkCount"] == "1"
    [run] = store.transaction(lambda tx: tx.get([run_record_key(ENV, "waiter")]))
    assert run is not None and child_counts(run)[ChildKind.WAIT_TOKEN_LINKS] == 1


def test_linking_a_missing_token_or_run_is_refused() -> None:
    store, _clock, _spec = make_token_store()
    with pytest.raises(CoreInvariantError, match="missing wait token"):
        store.transaction(lambda tx: link_run(tx, ENV, "nope", "creator"))
    with pytest.raises(CoreInvariantError, match="tombstoned run"):
        store.transaction(lambda tx: link_run(tx, ENV, "tok", "nobody"))


def test_the_first_resolution_wins_and_later_ones_lose() -> None:
    store, _clock, spec = make_token_store(timedelta(minutes=5))
    assert (
        store.transaction(lambda tx: complete_wait_token(tx, ENV, "tok", {"ok": 1}))
        is ResolveOutcome.RESOLVED
    )
    assert store.transaction(lambda tx: complete_wait_token(tx, ENV, "tok", {"ok": 2})) is (
        ResolveOutcome.ALREADY_RESOLVED
    )
    assert (
        store.transaction(lambda tx: time_out_wait_token(tx, ENV, "tok")) is ResolveOutcome.ALREADY_RESOLVED
    )
    token = value(store, spec.key)
    assert token is not None and token["resolution"] == {"outcome": "completed", "value": {"ok": 1}}
    assert store.transaction(lambda tx: complete_wait_token(tx, ENV, "ghost", 1)) is ResolveOutcome.MISSING


def test_a_timeout_applies_at_its_time_and_not_a_microsecond_before() -> None:
    store, clock, spec = make_token_store(timedelta(minutes=5))
    clock.now = T0 + timedelta(minutes=5) - timedelta(microseconds=1)
    assert store.transaction(lambda tx: time_out_wait_token(tx, ENV, "tok")) is ResolveOutcome.NOT_DUE
    early = store.transaction(lambda tx: due_wait_tokens(tx, ENV, as_of=clock.now, limit=5))
    assert early.items == ()
    clock.now = T0 + timedelta(minutes=5)
    due = store.transaction(lambda tx: due_wait_tokens(tx, ENV, as_of=clock.now, limit=5))
    assert [item.key for item in due.items] == [spec.key]
    assert store.transaction(lambda tx: time_out_wait_token(tx, ENV, "tok")) is ResolveOutcome.RESOLVED
    token = value(store, spec.key)
    assert token is not None and token["resolution"] == {"outcome": "timed_out"}


def test_a_token_without_a_timeout_never_times_out() -> None:
    store, clock, _spec = make_token_store()
    clock.now = T0 + timedelta(days=3650)
    assert store.transaction(lambda tx: time_out_wait_token(tx, ENV, "tok")) is ResolveOutcome.NOT_DUE


def test_pruning_keeps_pending_and_linked_tokens_and_deletes_the_rest_with_their_owner() -> None:
    store, _clock, spec = make_token_store()
    assert store.transaction(lambda tx: prune_wait_token(tx, ENV, "tok")) is TokenPruneOutcome.KEPT_PENDING
    store.transaction(lambda tx: link_run(tx, ENV, "tok", "creator"))
    store.transaction(lambda tx: complete_wait_token(tx, ENV, "tok", None))
    assert store.transaction(lambda tx: prune_wait_token(tx, ENV, "tok")) is TokenPruneOutcome.KEPT_LINKED

    def unlink(tx: object) -> None:
        [token] = tx.get([spec.key])  # type: ignore[attr-defined]
        next_value = dict(token.document.to_json()["value"], linkCount="0")
        tx.replace(token, build_storage_record(StorageTableName.WAIT_TOKENS, next_value))  # type: ignore[attr-defined]

    store.transaction(unlink)
    assert store.transaction(lambda tx: prune_wait_token(tx, ENV, "tok")) is TokenPruneOutcome.PRUNED
    assert value(store, spec.key) is None and value(store, spec.owner_key) is None
    assert store.transaction(lambda tx: prune_wait_token(tx, ENV, "tok")) is TokenPruneOutcome.GONE


def test_a_missing_owner_is_an_invariant_failure_and_the_token_stays() -> None:
    store, _clock, spec = make_token_store()
    store.transaction(lambda tx: complete_wait_token(tx, ENV, "tok", None))
    store.transaction(lambda tx: tx.delete(tx.get([spec.owner_key])[0]))  # type: ignore[arg-type]
    with pytest.raises(CoreInvariantError) as caught:
        store.transaction(lambda tx: prune_wait_token(tx, ENV, "tok"))
    assert caught.value.rule == "reciprocal-owner"
    assert value(store, spec.key) is not None


def test_an_owner_naming_another_token_is_an_invariant_failure_and_both_stay() -> None:
    store, _clock, spec = make_token_store()
    store.transaction(lambda tx: complete_wait_token(tx, ENV, "tok", None))

    def point_owner_elsewhere(tx: object) -> None:
        [owner] = tx.get([spec.owner_key])  # type: ignore[attr-defined]
        moved = dict(owner.document.to_json()["value"], targetId="elsewhere")
        moved["target"] = {"table": "wait_tokens", "id": [ENV, "elsewhere"]}
        tx.replace(owner, build_storage_record(StorageTableName.OWNERS, moved))  # type: ignore[attr-defined]

    store.transaction(point_owner_elsewhere)
    with pytest.raises(CoreInvariantError):
        store.transaction(lambda tx: prune_wait_token(tx, ENV, "tok"))
    assert value(store, spec.key) is not None
    assert value(store, owner_record_key(ENV, "wait_token", "key")) is not None
    assert value(store, wait_token_record_key(ENV, "tok")) is not None
