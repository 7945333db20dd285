"""Runs and their counted children: the bookkeeping pruning and wait tokens rely on.

A visible run carries exact counts of its events, steps, outbox messages and
wait-token links (``counts`` in the run document). Core keeps them exact by
changing a count only in the commit that creates the child it counts: the
child is a conditional create and the run a fenced replacement, so two
writers racing to add children to one run cannot both base their count on
the same version. Pruning later trusts these counts, never the size of an
index page, because an eventually consistent index may lag.

Everything here uses only the public transaction API and the contract's
table codecs, so any driver can be driven through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..contract.catalog import StorageIndexName, StorageTableName
from ..contract.encodings import iso_date_codec
from ..contract.errors import StorageCorruptionError
from ..contract.json_boundary import FrozenJsonObject, thaw_json
from ..contract.protocols import StorageTransaction
from ..contract.records import build_storage_record
from ..contract.table_definitions import (
    TERMINAL_RUN_STATUSES,
    RunStatus,
    StepStatus,
    run_record_key,
    step_token,
)
from ..contract.values import NewStorageRecord, StorageRecordKey, StoredRecord

__all__ = [
    "ChildKind",
    "CoreInvariantError",
    "RunChildren",
    "add_run_children",
    "child_counts",
    "create_run",
    "event_value",
    "finish_run",
    "new_run_value",
    "outbox_message_value",
    "replace_counts",
    "step_value",
]


class CoreInvariantError(StorageCorruptionError):
    """Durable state breaks an invariant core relies on; nothing was written to "fix" it.

    ``rule`` names the invariant (``counter``, ``child-owner``, ``step-token``,
    ``link-token``, ``tombstone``, ``reciprocal-owner`` ...). Core stops and
    reports instead of deleting one side of a broken pair, because a guess
    would turn a visible inconsistency into silent data loss.
    """

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class ChildKind(StrEnum):
    """The four kinds of record a run owns and counts; the value is the field in ``counts``."""

    EVENTS = "events"
    STEPS = "steps"
    OUTBOX_MESSAGES = "outboxMessages"
    WAIT_TOKEN_LINKS = "waitTokenLinks"

    @property
    def table(self) -> StorageTableName:
        return _TABLES[self]

    @property
    def index_name(self) -> StorageIndexName:
        """The index listing a run's children of this kind; the run id leads its sort."""
        return _INDEXES[self]


_TABLES = {
    ChildKind.EVENTS: StorageTableName.EVENTS,
    ChildKind.STEPS: StorageTableName.STEPS,
    ChildKind.OUTBOX_MESSAGES: StorageTableName.OUTBOX_MESSAGES,
    ChildKind.WAIT_TOKEN_LINKS: StorageTableName.WAIT_TOKEN_LINKS,
}
_INDEXES = {
    ChildKind.EVENTS: StorageIndexName.EVENTS_BY_RUN,
    ChildKind.STEPS: StorageIndexName.STEPS_BY_RUN,
    ChildKind.OUTBOX_MESSAGES: StorageIndexName.OUTBOX_BY_RUN,
    ChildKind.WAIT_TOKEN_LINKS: StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN,
}


def child_counts(record: StoredRecord | NewStorageRecord) -> dict[ChildKind, int]:
    """The ``counts`` of a run or tombstone document, as integers (the codec guaranteed their form)."""
    counts = record.document.value["counts"]
    assert isinstance(counts, Mapping)
    return {kind: int(str(counts[kind.value])) for kind in ChildKind}


def replace_counts(value: Mapping[str, Any], counts: Mapping[ChildKind, int]) -> dict[str, Any]:
    """A copy of a run or tombstone value with new ``counts``; a negative count is an invariant failure."""
    for kind, count in counts.items():
        if count < 0:
            raise CoreInvariantError(f"the {kind.value} counter would drop to {count}", rule="counter")
    source = thaw_json(value) if isinstance(value, FrozenJsonObject) else dict(value)
    assert isinstance(source, dict)
    updated: dict[str, Any] = source
    updated["counts"] = {kind.value: str(counts[kind]) for kind in ChildKind}
    return updated


def _iso(moment: datetime) -> str:
    return iso_date_codec.encode(moment)


def new_run_value(
    environment: str,
    run_id: str,
    created_at: datetime,
    *,
    status: RunStatus = RunStatus.RUNNING,
    workflow: str = "workflow",
    parent_run_id: str | None = None,
) -> dict[str, Any]:
    """A fresh run document with zero child counts (terminal statuses get ``completedAt``)."""
    at = _iso(created_at)
    terminal = status in TERMINAL_RUN_STATUSES
    return {
        "environment": environment,
        "runId": run_id,
        "workflow": workflow,
        "status": status.value,
        "input": {},
        "output": {"done": True} if status is RunStatus.SUCCEEDED else None,
        "error": {"message": "failed"} if status is RunStatus.FAILED else None,
        "parentRunId": parent_run_id,
        "waitingForRunId": None,
        "createdAt": at,
        "updatedAt": at,
        "completedAt": at if terminal else None,
        "tombstonedAt": None,
        "counts": {kind.value: "0" for kind in ChildKind},
    }


def event_value(environment: str, run_id: str, sequence: int, at: datetime) -> dict[str, Any]:
    """Event number ``sequence`` (from 1) of a run."""
    return {
        "environment": environment,
        "runId": run_id,
        "sequence": str(sequence),
        "type": "progress",
        "occurredAt": _iso(at),
        "data": {"sequence": sequence},
    }


def step_value(environment: str, run_id: str, step_name: str, sequence: int, at: datetime) -> dict[str, Any]:
    """A finished memoised step, stored under its deterministic token."""
    return {
        "environment": environment,
        "runId": run_id,
        "stepName": step_name,
        "sequence": str(sequence),
        "token": step_token(environment, run_id, step_name, sequence),
        "status": StepStatus.SUCCEEDED.value,
        "attempts": "1",
        "output": {"step": step_name, "sequence": sequence},
        "error": None,
        "createdAt": _iso(at),
        "updatedAt": _iso(at),
        "completedAt": _iso(at),
    }


def outbox_message_value(environment: str, run_id: str, message_id: str, at: datetime) -> dict[str, Any]:
    """A delivered outbox message (delivery does not matter to pruning; the run still counts it)."""
    return {
        "environment": environment,
        "runId": run_id,
        "messageId": message_id,
        "topic": "notifications",
        "payload": {"message": message_id},
        "attempts": "1",
        "createdAt": _iso(at),
        "availableAt": _iso(at),
        "deliveredAt": _iso(at),
    }


@dataclass(frozen=True)
class RunChildren:
    """Children to add to one run in one commit: event count, step names (sequence 1 each), message ids."""

    events: int = 0
    steps: tuple[str, ...] = ()
    outbox_messages: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return self.events + len(self.steps) + len(self.outbox_messages)


def add_run_children(
    tx: StorageTransaction, environment: str, run_id: str, children: RunChildren
) -> list[StorageRecordKey]:
    """Create ``children`` for a visible run and raise its counts in the same commit; returns their keys.

    Event sequences continue from the run's event count; step keys are the
    derived step tokens. Refuses (``CoreInvariantError``, rule ``tombstone``)
    a run that is missing or tombstoned: a pruned run gets no new children.
    """
    [run] = tx.get([run_record_key(environment, run_id)])
    if run is None or run.document.value["tombstonedAt"] is not None:
        raise CoreInvariantError(f"run {environment}/{run_id} is missing or tombstoned", rule="tombstone")
    counts = child_counts(run)
    at = tx.now()
    created: list[NewStorageRecord] = []
    for offset in range(1, children.events + 1):
        sequence = counts[ChildKind.EVENTS] + offset
        created.append(
            build_storage_record(StorageTableName.EVENTS, event_value(environment, run_id, sequence, at))
        )
    for name in children.steps:
        created.append(
            build_storage_record(StorageTableName.STEPS, step_value(environment, run_id, name, 1, at))
        )
    for message in children.outbox_messages:
        created.append(
            build_storage_record(
                StorageTableName.OUTBOX_MESSAGES, outbox_message_value(environment, run_id, message, at)
            )
        )
    for record in created:
        tx.create(record)
    counts[ChildKind.EVENTS] += children.events
    counts[ChildKind.STEPS] += len(children.steps)
    counts[ChildKind.OUTBOX_MESSAGES] += len(children.outbox_messages)
    updated = replace_counts(run.document.value, counts)
    updated["updatedAt"] = _iso(at)
    tx.replace(run, build_storage_record(StorageTableName.RUNS, updated))
    return [record.key for record in created]


def create_run(
    tx: StorageTransaction, environment: str, run_id: str, *, parent_run_id: str | None = None
) -> None:
    """Create a running run with zero child counts (a conditional create: a second one conflicts)."""
    value = new_run_value(environment, run_id, tx.now(), parent_run_id=parent_run_id)
    tx.create(build_storage_record(StorageTableName.RUNS, value))


def finish_run(
    tx: StorageTransaction, environment: str, run_id: str, status: RunStatus = RunStatus.SUCCEEDED
) -> None:
    """Move a visible, unfinished run to the terminal ``status``; its counts are kept as they are."""
    if status not in TERMINAL_RUN_STATUSES:
        raise ValueError(f"{status} is not a terminal status")
    [run] = tx.get([run_record_key(environment, run_id)])
    if run is None or run.document.value["completedAt"] is not None:
        raise CoreInvariantError(
            f"run {environment}/{run_id} is missing or already finished", rule="run-status"
        )
    value = thaw_json(run.document.value)
    assert isinstance(value, dict)
    at = _iso(tx.now())
    value.update(
        status=status.value,
        updatedAt=at,
        completedAt=at,
        output={"done": True} if status is RunStatus.SUCCEEDED else None,
        error={"message": "failed"} if status is RunStatus.FAILED else None,
        waitingForRunId=None,
    )
    tx.replace(run, build_storage_record(StorageTableName.RUNS, value))
