"""The operator read model: consistent with raw records in every commit; tombstoned runs vanish at once."""

from __future__ import annotations

from typing import Any

import pytest

from runlane_conformance.contract.errors import StorageCursorError, StorageLimitError
from runlane_conformance.contract.protocols import OperatorReadDriver, StorageTransaction
from runlane_conformance.contract.records import build_storage_record
from runlane_conformance.contract.table_definitions import run_record_key
from runlane_conformance.contract.values import NewStorageRecord
from runlane_conformance.local import LocalStorageDriver

from .helpers import seed


def run_value(run_id: str, minute: int, **changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "environment": "env",
        "runId": run_id,
        "workflow": "wf",
        "status": "succeeded",
        "input": {},
        "output": {"ok": True},
        "error": None,
        "parentRunId": None,
        "waitingForRunId": None,
        "createdAt": f"2024-01-01T00:{minute:02d}:00.000000Z",
        "updatedAt": f"2024-01-01T00:{minute:02d}:30.000000Z",
        "completedAt": f"2024-01-01T00:{minute:02d}:30.000000Z",
        "tombstonedAt": None,
        "counts": {"events": "0", "outboxMessages": "0", "steps": "0", "waitTokenLinks": "0"},
    }
    value.update(changes)
    return value


def run(run_id: str, minute: int, **changes: Any) -> NewStorageRecord:
    return build_storage_record("runs", run_value(run_id, minute, **changes))


def event(run_id: str, sequence: int) -> NewStorageRecord:
    return build_storage_record(
        "events",
        {
            "environment": "env",
            "runId": run_id,
            "sequence": str(sequence),
            "type": "step",
            "occurredAt": "2024-01-01T00:00:00.000000Z",
            "data": {"n": sequence},
        },
    )


def run_ids(page: Any) -> list[str]:
    return [record.document.value["runId"] for record in page.items]


def sequences(page: Any) -> list[str]:
    return [record.document.value["sequence"] for record in page.items]


@pytest.fixture
def runs(driver: LocalStorageDriver) -> LocalStorageDriver:
    seed(driver, run("r1", 1), run("r2", 2), run("r3", 3), event("r2", 1), event("r2", 2), event("r2", 3))
    return driver


def test_the_driver_offers_the_operator_read_model(driver: LocalStorageDriver) -> None:
    assert isinstance(driver, OperatorReadDriver)


def test_get_run_returns_the_exact_committed_run(runs: LocalStorageDriver) -> None:
    found = runs.get_run("env", "r2")
    assert found is not None and found.document == run("r2", 2).document
    assert runs.get_run("env", "missing") is None
    assert runs.get_run("other-env", "r2") is None


def test_list_runs_is_newest_first_with_cursors(runs: LocalStorageDriver) -> None:
    first = runs.list_runs("env", limit=2)
    assert run_ids(first) == ["r3", "r2"] and first.cursor is not None
    rest = runs.list_runs("env", limit=2, cursor=first.cursor)
    assert run_ids(rest) == ["r1"] and rest.cursor is None


def test_list_run_events_is_the_history_in_sequence_order(runs: LocalStorageDriver) -> None:
    first = runs.list_run_events("env", "r2", limit=2)
    assert sequences(first) == ["1", "2"]
    assert sequences(runs.list_run_events("env", "r2", limit=2, cursor=first.cursor)) == ["3"]
    assert sequences(runs.list_run_events("env", "r1", limit=10)) == []


def test_a_cursor_is_bound_to_its_run_and_list(runs: LocalStorageDriver) -> None:
    cursor = runs.list_run_events("env", "r2", limit=1).cursor
    with pytest.raises(StorageCursorError):
        runs.list_run_events("env", "r1", limit=1, cursor=cursor)
    with pytest.raises(StorageCursorError):
        runs.list_runs("env", limit=1, cursor=cursor)


def test_operator_lists_honour_the_query_limit(runs: LocalStorageDriver) -> None:
    with pytest.raises(StorageLimitError):
        runs.list_runs("env", limit=101)


def test_a_run_and_its_events_appear_in_the_same_commit(
    runs: LocalStorageDriver, other: LocalStorageDriver
) -> None:
    observed: list[tuple[bool, list[str]]] = []

    def work(tx: StorageTransaction) -> None:
        tx.create(run("r4", 4))
        tx.create(event("r4", 1))
        observed.append(
            (other.get_run("env", "r4") is not None, sequences(other.list_run_events("env", "r4", limit=5)))
        )

    runs.transaction(work)
    assert observed == [(False, [])]  # nothing is visible before the commit
    assert run_ids(other.list_runs("env", limit=1)) == ["r4"]
    assert sequences(other.list_run_events("env", "r4", limit=5)) == ["1"]


def test_a_tombstoned_run_and_its_history_disappear_in_the_tombstoning_commit(
    runs: LocalStorageDriver,
) -> None:
    def tombstone(tx: StorageTransaction) -> None:
        [current] = tx.get([run_record_key("env", "r2")])
        assert current is not None
        tx.replace(current, run("r2", 2, tombstonedAt="2024-02-01T00:00:00.000000Z"))

    runs.transaction(tombstone)
    assert runs.get_run("env", "r2") is None
    assert run_ids(runs.list_runs("env", limit=10)) == ["r3", "r1"]
    assert sequences(runs.list_run_events("env", "r2", limit=10)) == []
    # the raw child records are still there for cleanup to find
    raw = runs.transaction(lambda tx: tx.get([event("r2", 1).key]))
    assert raw[0] is not None


def test_operator_records_cannot_change_stored_state(runs: LocalStorageDriver) -> None:
    found = runs.get_run("env", "r1")
    assert found is not None
    with pytest.raises(TypeError):
        found.document.value["status"] = "failed"  # type: ignore[index]
    as_json = found.document.to_json()
    as_json["value"]["status"] = "failed"  # type: ignore[index]
    again = runs.get_run("env", "r1")
    assert again is not None and again.document.value["status"] == "succeeded"
