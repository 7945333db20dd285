"""The run-completion wait presence marker: a durable hint that lets terminal transitions skip a scan.

When a run starts waiting for a *source* run to finish, core first makes sure
a marker row exists for that source id (unless the same transaction already
saw the source finished, in which case there is nothing to wait for). Later,
when the source reaches a terminal status, core point-reads the marker:

* no marker: no run ever waited on this source, so the ``RunsWaitingForCompletion``
  scan is skipped entirely (the common case: most runs are never waited on);
* a marker: core must scan the index, which stays the only authority on who
  is waiting. The marker is not a count and never goes away, so it can only
  cause a needless scan, never a missed waiter.

Both halves use nothing but point reads, conditional creates and an index
query, so every driver supports them without a dedicated method. The marker
must be stored like any other record: a driver that caches it in memory, or
deletes it when pruning runs, breaks the "absent means nobody waited" proof.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from ..contract.catalog import StorageIndexName, StorageTableName
from ..contract.encodings import iso_date_codec
from ..contract.protocols import StorageTransaction
from ..contract.records import build_storage_record
from ..contract.table_definitions import TERMINAL_RUN_STATUSES, RunStatus, run_record_key
from ..contract.values import (
    NewStorageRecord,
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageQueryRange,
    StorageRecordKey,
    StoredRecord,
)

__all__ = [
    "CompletionWaitPlan",
    "RunCompletionWaitPresence",
    "find_completion_waiters",
    "plan_completion_wait",
    "register_completion_wait",
]


@dataclass(frozen=True)
class RunCompletionWaitPresence:
    """The marker for one source run id in one environment."""

    environment: str
    source_run_id: str

    @property
    def key(self) -> StorageRecordKey:
        return StorageRecordKey(
            StorageTableName.RUN_COMPLETION_WAIT_PRESENCE, (self.environment, self.source_run_id)
        )

    @property
    def source_key(self) -> StorageRecordKey:
        return run_record_key(self.environment, self.source_run_id)

    def record(self, created_at: datetime) -> NewStorageRecord:
        """The marker row to create conditionally; its content never changes afterwards."""
        return build_storage_record(
            StorageTableName.RUN_COMPLETION_WAIT_PRESENCE,
            {
                "environment": self.environment,
                "sourceRunId": self.source_run_id,
                "createdAt": iso_date_codec.encode(created_at),
            },
        )


class CompletionWaitPlan(StrEnum):
    """What registering a completion wait must do, decided from one fenced read."""

    SOURCE_TERMINAL = "source_terminal"  # the source already finished: do not persist a waiting run
    CREATE_MARKER = "create_marker"  # first wait on this source: create the marker in the same commit
    MARKER_PRESENT = "marker_present"  # the marker exists: just persist the waiting run


def plan_completion_wait(source: StoredRecord | None, marker: StoredRecord | None) -> CompletionWaitPlan:
    """Decide from the source run and marker read in the same attempt.

    A source that does not exist yet is not terminal: waits on future ids are
    allowed and leave a marker behind.
    """
    if source is not None and RunStatus(str(source.document.value["status"])) in TERMINAL_RUN_STATUSES:
        return CompletionWaitPlan.SOURCE_TERMINAL
    return CompletionWaitPlan.MARKER_PRESENT if marker is not None else CompletionWaitPlan.CREATE_MARKER


def register_completion_wait(
    tx: StorageTransaction,
    presence: RunCompletionWaitPresence,
    *,
    extra_keys: tuple[StorageRecordKey, ...] = (),
) -> tuple[CompletionWaitPlan, list[StoredRecord | None]]:
    """Read the source run and marker (plus the caller's ``extra_keys``), then create the marker if needed.

    Returns the plan and the records read for ``extra_keys``. After this the
    attempt is sealed when a marker was created, so the caller should read
    everything it needs through ``extra_keys``.
    """
    source, marker, *extra = tx.get([presence.source_key, presence.key, *extra_keys])
    plan = plan_completion_wait(source, marker)
    if plan is CompletionWaitPlan.CREATE_MARKER:
        tx.create(presence.record(tx.now()))
    return plan, extra


def find_completion_waiters(
    tx: StorageTransaction, presence: RunCompletionWaitPresence, *, limit: int, cursor: str | None = None
) -> QueryRecordsResult | None:
    """Candidates waiting on the source, or ``None`` when the absent marker proves there are none.

    ``None`` means the scan was skipped because no wait was ever registered;
    an empty page from the index is *not* that proof (an eventually
    consistent index may lag), which is why the two answers differ.
    """
    (marker,) = tx.get([presence.key])
    if marker is None:
        return None
    command = QueryRecordsCommand(
        StorageIndexName.RUNS_WAITING_FOR_COMPLETION,
        presence.environment,
        limit,
        StorageQueryRange.prefix((presence.source_run_id,)),
        cursor=cursor,
    )
    return tx.query_candidates(command)
